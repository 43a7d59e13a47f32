-- The value index: the distinct values of text columns, found again from misspelled,
-- differently cased and partial mentions, kept fresh by triggers, and shown only to roles
-- that may read the column. These tables live in their own schema.
CREATE SCHEMA travel;
CREATE TABLE travel.airports (code text PRIMARY KEY, city text, name text, country text);
INSERT INTO travel.airports VALUES
  ('ABZ', 'ABERDEEN', 'Aberdeen Airport', 'United Kingdom'),
  ('EDI', 'EDINBURGH', 'Edinburgh Airport', 'United Kingdom'),
  ('GLA', 'GLASGOW', 'Glasgow International Airport', 'United Kingdom'),
  ('CDG', 'PARIS', 'Charles de Gaulle Airport', 'France'),
  ('ZRH', 'ZÜRICH', 'Zürich Airport', 'Switzerland');

-- A DBA indexes the text columns of a table (or just one column).
SELECT relation, column_name, status, "values", phrases FROM nl2sql.create_value_index('travel.airports');
SELECT relation, column_name, status, embedder, "values", phrases, queued FROM nl2sql.value_indexes ORDER BY 2;

-- Misspelled, differently cased, partial, accents: search splits the query into phrases and
-- keeps values scoring at least nl2sql.value_threshold (0.65).
SELECT relation, column_name, value, round(score::numeric, 3) AS score FROM nl2sql.search_values('Abredeen');
SELECT relation, column_name, value, round(score::numeric, 3) AS score FROM nl2sql.search_values('aberdeen', 3);
SELECT relation, column_name, value, round(score::numeric, 3) AS score FROM nl2sql.search_values('flights from Zurich to Charles de Gaulle', 4);
-- Columns by their names.
SELECT * FROM nl2sql.search_columns('in which country is the airport', 3);

-- Fresh after INSERT, UPDATE, DELETE and COPY (statement-level triggers on the table).
INSERT INTO travel.airports VALUES ('INV', 'INVERNESS', 'Inverness Airport', 'United Kingdom');
SELECT value, round(score::numeric, 3) AS score FROM nl2sql.search_values('inverness') WHERE column_name = 'city';
UPDATE travel.airports SET city = 'INVERNESS-SHIRE' WHERE code = 'INV';
SELECT value, round(score::numeric, 3) AS score FROM nl2sql.search_values('inverness') WHERE column_name = 'city';
DELETE FROM travel.airports WHERE code = 'INV';
SELECT count(*) AS inverness_left FROM nl2sql.search_values('inverness');
COPY travel.airports FROM stdin;
BHD	BELFAST	George Best Belfast City Airport	United Kingdom
\.
SELECT value, round(score::numeric, 3) AS score FROM nl2sql.search_values('belfast') ORDER BY column_name;

-- The index follows renamed columns, and goes with dropped ones.
ALTER TABLE travel.airports RENAME COLUMN city TO town;
SELECT relation, column_name, status FROM nl2sql.value_indexes ORDER BY 2;
ALTER TABLE travel.airports DROP COLUMN country;
SELECT relation, column_name, status FROM nl2sql.value_indexes ORDER BY 2;

-- nl2sql() shows the model the values it finds in the question ("similar values"); words
-- naming tables and columns ("airports") are not looked up as values.
SELECT * FROM nl2sql_run('[values] How many airports are in Abredeen?');
SELECT v->>'column' AS "column", v->>'value' AS value FROM jsonb_array_elements(nl2sql.last_trace()->'values') v;

-- Privileges: a role sees only values of columns it may SELECT; the index tables and the
-- functions that build indexes are not for it.
CREATE ROLE dora;
GRANT USAGE ON SCHEMA travel TO dora;
GRANT SELECT (code, town) ON travel.airports TO dora;
SET ROLE dora;
SELECT * FROM nl2sql.search_values('aberdeen airport');
SELECT relation, column_name FROM nl2sql.value_indexes ORDER BY 2;
SELECT count(*) FROM nl2sql.value_entries;
SELECT * FROM nl2sql.create_value_index('travel.airports');
RESET ROLE;

-- Row-level security: not indexed unless the DBA opts in, because an index of values
-- ignores row policies. With the opt-in, every value returned is re-checked against the
-- table as the caller, so policies still hide rows.
CREATE TABLE travel.tickets (id int PRIMARY KEY, holder text, passenger text);
INSERT INTO travel.tickets VALUES (1, 'dora', 'Dora Marquez'), (2, 'boots', 'Boots Monkey');
ALTER TABLE travel.tickets ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_tickets ON travel.tickets USING (holder = current_user);
GRANT SELECT ON travel.tickets TO dora;
SELECT relation, column_name FROM nl2sql.create_value_indexes(ARRAY['travel']) ORDER BY 2;
SELECT * FROM nl2sql.create_value_index('travel.tickets');
SELECT relation, column_name, "values" FROM nl2sql.create_value_index('travel.tickets', 'passenger', include_rls => true);
SET ROLE dora;
SELECT value FROM nl2sql.search_values('Dora Marquez');
SELECT value FROM nl2sql.search_values('Boots Monkey');
RESET ROLE;

-- An endpoint embedder that is down: a clear error, and nothing half-built left behind.
SET nl2sql.embedding_url = 'http://127.0.0.1:9/v1';
SELECT * FROM nl2sql.create_value_index('travel.tickets', 'holder', include_rls => true);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS holder_indexes FROM nl2sql.value_index i JOIN pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
WHERE a.attname = 'holder';
-- Changing the embedder makes the existing indexes stale: vectors of two embedders never mix.
SELECT relation, column_name, status FROM nl2sql.value_indexes ORDER BY 2;
SELECT count(*) AS found FROM nl2sql.search_values('aberdeen');
-- An endpoint embedder that works (the scripted mock's /v1/embeddings).
SET nl2sql.embedding_url = 'http://127.0.0.1:57411/v1';
SELECT relation, column_name, status, "values" FROM nl2sql.create_value_index('travel.airports', 'town');
SELECT relation, column_name, status, embedder FROM nl2sql.value_indexes ORDER BY 2;
SELECT * FROM nl2sql.search_values('Abredeen', 3);
-- New values wait in a queue (DML never calls out); searches find them by their text until
-- a refresh embeds them (searches never write: they work on a standby).
INSERT INTO travel.airports VALUES ('LHR', 'LONDON', 'Heathrow Airport');
SELECT column_name, queued FROM nl2sql.value_indexes WHERE column_name = 'town';
SELECT value, round(score::numeric, 3) AS score FROM nl2sql.search_values('londn');
SELECT count(*) AS rebuilt FROM nl2sql.refresh_value_indexes();
SELECT column_name, queued FROM nl2sql.value_indexes WHERE column_name = 'town';
SELECT value FROM nl2sql.search_values('london');
RESET nl2sql.embedding_url;
SELECT relation, column_name, status, "values" FROM nl2sql.refresh_value_indexes() ORDER BY 2;

-- DML never fails because of nl2sql: break an index on purpose (its entries refuse the new
-- value), the INSERT still succeeds, with a WARNING, and the index is marked stale until it is
-- rebuilt. (An index with no entries table at all is one pg_restore brought back: see
-- tests/test_dump_restore.py.)
SELECT format('ALTER TABLE nl2sql.value_entries_%s_%s ADD CONSTRAINT broken CHECK (value <> ''Manchester Airport'')', i.id, i.generation) FROM nl2sql.value_index i
JOIN pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum WHERE a.attname = 'name' \gexec
INSERT INTO travel.airports VALUES ('MAN', 'MANCHESTER', 'Manchester Airport');
SELECT column_name, status FROM nl2sql.value_indexes WHERE column_name = 'name';
SELECT column_name, status, "values" FROM nl2sql.refresh_value_indexes('travel.airports') ORDER BY 1;

-- One typo among values that share every word with many others: 40 first names x 40 last names.
-- With the HNSW search held to its single nearest entry (nl2sql.search_ef = 1), the value is
-- still found: through the keys next to the mistyped one in byte order, forwards and reversed,
-- and the corrections their words suggest (a swap, a dropped letter, words run together).
CREATE TABLE travel.crew (name text);
INSERT INTO travel.crew
SELECT initcap(translate(substr(md5('f' || f), 1, 7), '0123456789', 'aeiouybrst')) || ' ' ||
       initcap(translate(substr(md5('l' || l), 1, 8), '0123456789', 'aeiouybrst'))
FROM generate_series(1, 40) f, generate_series(1, 40) l;
SELECT "values" FROM nl2sql.create_value_index('travel.crew', 'name');
SET nl2sql.search_ef = 1;
SELECT n.name AS stored, t.typo, (SELECT s.value FROM nl2sql.search_values(t.typo, 1) s) AS found
FROM (SELECT name FROM travel.crew ORDER BY md5(name) LIMIT 3) n,
     LATERAL (VALUES (substr(n.name, 1, 1) || substr(n.name, 3, 1) || substr(n.name, 2, 1) || substr(n.name, 4)),
                     (substr(n.name, 1, 12) || substr(n.name, 14)),
                     (replace(n.name, ' ', ''))) t(typo)
ORDER BY 1, 2;
RESET nl2sql.search_ef;

SELECT nl2sql.drop_value_index('travel.airports', 'code');
DROP SCHEMA travel CASCADE;
SELECT count(*) AS indexes_left FROM nl2sql.value_index;
DROP OWNED BY dora;
DROP ROLE dora;
