-- Relationships nobody declared: a small shop without a single key or foreign key, profiled
-- as a DBA would; what the prompt, the join paths and the views show; the DBA's decisions.
CREATE SCHEMA shop;
CREATE TABLE shop.customers (id int NOT NULL, name text, city text);
CREATE TABLE shop.orders (order_no int NOT NULL, customer_id int, placed date, total numeric(8,2));
CREATE TABLE shop.order_lines (order_no int NOT NULL, product_code text NOT NULL, qty int);
CREATE TABLE shop.products (product_code text NOT NULL, label text, price numeric(8,2));
INSERT INTO shop.customers VALUES (1, 'Ada', 'Oslo'), (2, 'Bo', 'Oslo'), (3, 'Cy', 'Rome'), (4, 'Di', 'Rome');
INSERT INTO shop.orders VALUES (10, 1, '2024-01-02', 5), (11, 1, '2024-01-03', 7), (12, 3, '2024-02-01', 9), (13, NULL, '2024-02-02', 1);
INSERT INTO shop.products VALUES ('P1', 'pen', 1.5), ('P2', 'ink', 3), ('P3', 'pad', 2);
INSERT INTO shop.order_lines VALUES (10, 'P1', 2), (10, 'P2', 1), (11, 'P1', 1), (12, 'P3', 4), (13, 'P2', 1);

-- Nothing declared, nothing known yet.
SELECT * FROM nl2sql.relationships WHERE from_relation::text LIKE 'shop.%';

-- Profiling reads each table (as its owner, at most nl2sql.profile_rows rows) and keeps what
-- it finds: keys unique and never NULL, and columns whose names and values point at a key.
SET client_min_messages = warning;
SELECT from_relation, from_columns, to_relation, to_columns, source, score FROM nl2sql.profile_relationships(ARRAY['shop']);
RESET client_min_messages;
SELECT from_relation, from_columns, to_relation, to_columns, source, evidence FROM nl2sql.relationships
WHERE from_relation::text LIKE 'shop.%' ORDER BY 1, 2;
SELECT relation, columns, source, evidence FROM nl2sql.candidate_keys WHERE relation::text LIKE 'shop.%' ORDER BY 1;

-- The model is shown them as keys and join lines, marked as inferred.
SELECT line FROM regexp_split_to_table(nl2sql.schema_prompt(), E'\n') AS line
WHERE line ~ '(shop\.|PRIMARY_KEY|inferred|FOREIGN KEYS)' AND line !~ '^# (singer|stadium|concert|singer_in_concert)\.';
SELECT * FROM nl2sql.join_path('shop.order_lines', 'shop.customers');
-- Switched off, only confirmed ones are used.
SET nl2sql.use_inferred_relationships = off;
SELECT * FROM nl2sql.join_path('shop.order_lines', 'shop.customers');
RESET nl2sql.use_inferred_relationships;

-- A DBA rejects one: profiling never brings it back; forgetting the decision does.
SELECT nl2sql.reject_relationship('shop.orders', 'customer_id', 'shop.customers', 'id');
SET client_min_messages = warning;
SELECT from_relation, from_columns, to_relation, to_columns, source FROM nl2sql.profile_relationships(ARRAY['shop']);
RESET client_min_messages;
SELECT * FROM nl2sql.join_path('shop.orders', 'shop.customers');
SELECT nl2sql.forget_relationship('shop.orders', 'customer_id', 'shop.customers', 'id');
SET client_min_messages = warning;
SELECT count(*) AS found_again FROM nl2sql.profile_relationships(ARRAY['shop'])
WHERE from_relation = 'shop.orders'::regclass AND source = 'inferred';
RESET client_min_messages;

-- And confirms or adds one profiling cannot find (no name ties city to anything).
CREATE TABLE shop.cities (city text NOT NULL, country text);
INSERT INTO shop.cities VALUES ('Oslo', 'Norway'), ('Rome', 'Italy');
SELECT nl2sql.confirm_relationship('shop.customers', 'city', 'shop.cities', 'city');
SELECT from_relation, from_columns, to_relation, to_columns, source, decided_by FROM nl2sql.relationships
WHERE to_relation = 'shop.cities'::regclass;
SELECT * FROM nl2sql.join_path('shop.orders', 'shop.cities');

-- Decisions are checked.
SELECT nl2sql.confirm_relationship('shop.customers', 'name', 'shop.orders', 'total');
SELECT nl2sql.confirm_relationship('shop.customers', 'nope', 'shop.cities', 'city');
SELECT nl2sql.confirm_relationship('shop.customers', ARRAY['city', 'name']::name[], 'shop.cities', ARRAY['city']::name[]);
SELECT nl2sql.reject_relationship('singer_in_concert', 'singer_id', 'singer', 'singer_id');

SELECT nl2sql._decide_relationship('shop.customers'::regclass, '{city}', 'shop.cities'::regclass, '{city}', 'maybe');
CREATE TEMP TABLE scratch (city text);
SELECT nl2sql.confirm_relationship('scratch', 'city', 'shop.cities', 'city');

-- Roles see only relationships between columns they may read, and decide only on their own
-- tables (and point them only at columns they may reference); profiling skips tables a role
-- does not own.
CREATE ROLE rel_reader;
GRANT USAGE, CREATE ON SCHEMA shop TO rel_reader;
GRANT SELECT ON shop.orders TO rel_reader;
GRANT SELECT (order_no, qty) ON shop.order_lines TO rel_reader;
SET ROLE rel_reader;
SELECT from_relation, from_columns, to_relation, to_columns, source FROM nl2sql.relationships WHERE from_relation::text LIKE 'shop.%';
SELECT relation, columns FROM nl2sql.candidate_keys WHERE relation::text LIKE 'shop.%';
SELECT nl2sql.reject_relationship('shop.order_lines', 'order_no', 'shop.orders', 'order_no');
SELECT * FROM nl2sql.profile_relationships(ARRAY['shop']);
SELECT count(*) FROM nl2sql.relationship_store;
CREATE TABLE shop.reader_notes (order_no int, customer_id int);
SELECT nl2sql.confirm_relationship('shop.reader_notes', 'customer_id', 'shop.customers', 'id');
SELECT nl2sql.confirm_relationship('shop.reader_notes', 'order_no', 'shop.orders', 'order_no');
RESET ROLE;
-- The owner of the referenced table may reject or forget what points at it.
SELECT nl2sql.confirm_relationship('shop.orders', 'order_no', 'shop.reader_notes', 'order_no');
SET ROLE rel_reader;
SELECT nl2sql.forget_relationship('shop.orders', 'order_no', 'shop.reader_notes', 'order_no');
RESET ROLE;
SELECT from_relation, from_columns, to_relation, to_columns, source, decided_by FROM nl2sql.relationships
WHERE 'shop.reader_notes'::regclass IN (from_relation, to_relation);

-- A table with row-level security is not read (its owner's policies would run): its
-- relationships are confirmed by hand. A table larger than nl2sql.profile_rows is sampled,
-- and its key says so.
CREATE TABLE shop.secrets (id int NOT NULL, customer_id int);
ALTER TABLE shop.secrets ENABLE ROW LEVEL SECURITY;
CREATE TABLE shop.events (event_id int NOT NULL, kind text);
INSERT INTO shop.events SELECT g, 'k' FROM generate_series(1, 150) g;
ANALYZE shop.events;
SET nl2sql.profile_rows = 100;
SET client_min_messages = warning;
SELECT count(*) FROM nl2sql.profile_relationships(ARRAY['shop']);
RESET client_min_messages;
RESET nl2sql.profile_rows;
SELECT relation, columns, score, evidence FROM nl2sql.candidate_keys WHERE relation IN ('shop.events'::regclass, 'shop.secrets'::regclass);

-- Hostile owners. rel_reader plants a look-alike "customers" of her own holding every
-- customer id: relationships are inferred only between tables of one owner, so sales.invoices
-- points at shop.customers alone. Profiling runs none of her code: her function in an index
-- expression (which the planner folds) fails the read of her table instead of running. A
-- table wider than a function's 100 arguments is read too.
CREATE SCHEMA sales;
CREATE TABLE sales.invoices (invoice_id int NOT NULL, customer_id int);
INSERT INTO sales.invoices VALUES (1, 1), (2, 2), (3, 2);
CREATE SCHEMA mallory AUTHORIZATION rel_reader;
SET ROLE rel_reader;
CREATE TABLE mallory.customers (id int NOT NULL, name text);
INSERT INTO mallory.customers SELECT g, 'fake' FROM generate_series(1, 100) g;
CREATE FUNCTION mallory.boom(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('test.boom', true) = 'on' THEN
        RAISE WARNING 'mallory''s code ran as %', current_user;
    END IF;
    RETURN $1;
END $$;
CREATE TABLE mallory.trap (trap_id int NOT NULL);
INSERT INTO mallory.trap VALUES (1), (2);
CREATE INDEX ON mallory.trap ((trap_id + mallory.boom(0)));
RESET ROLE;
SELECT format('CREATE TABLE shop.wide (wide_id int NOT NULL, %s)', string_agg(format('c%s int', g), ', '))
FROM generate_series(1, 120) g \gexec
INSERT INTO shop.wide (wide_id) VALUES (1), (2);
-- a new session: the index expression is folded again, not taken from this one's cache
\c
SET test.boom = on;
SET client_min_messages = warning;
SELECT count(*) > 0 AS profiled FROM nl2sql.profile_relationships(ARRAY['shop', 'sales', 'mallory']);
RESET client_min_messages;
RESET test.boom;
SELECT from_relation, from_columns, to_relation, to_columns FROM nl2sql.relationships
WHERE from_relation = 'sales.invoices'::regclass;
SELECT relation FROM nl2sql.profile_store WHERE relation::text LIKE 'mallory.%' ORDER BY 1;
SELECT relation, columns FROM nl2sql.candidate_keys WHERE relation = 'shop.wide'::regclass;
-- Decisions on what is not a table are refused (42809); a decision on a column renamed since
-- can still be forgotten.
CREATE SEQUENCE shop.numbers;
SELECT nl2sql.reject_relationship('shop.numbers', 'last_value', 'shop.orders', 'order_no');
CREATE TABLE shop.notes2 (cust int);
SELECT nl2sql.confirm_relationship('shop.notes2', 'cust', 'shop.customers', 'id');
ALTER TABLE shop.notes2 RENAME COLUMN cust TO customer;
SELECT nl2sql.forget_relationship('shop.notes2', 'cust', 'shop.customers', 'id');
SELECT count(*) AS kept FROM nl2sql.relationship_store WHERE from_relation = 'shop.notes2'::regclass;

-- Dropped columns and tables take their relationships and keys with them.
ALTER TABLE shop.customers DROP COLUMN city;
SELECT count(*) AS to_cities FROM nl2sql.relationships WHERE to_relation = 'shop.cities'::regclass;
DROP TABLE shop.products;
SELECT from_relation, from_columns, to_relation, to_columns FROM nl2sql.relationships WHERE from_relation::text LIKE 'shop.%' ORDER BY 1, 2;

DROP SCHEMA shop CASCADE;
DROP SCHEMA sales CASCADE;
DROP SCHEMA mallory CASCADE;

DROP ROLE rel_reader;
SELECT (SELECT count(*) FROM nl2sql.relationship_store) + (SELECT count(*) FROM nl2sql.key_store)
       + (SELECT count(*) FROM nl2sql.profile_store) AS left_behind;
