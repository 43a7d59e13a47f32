-- nl2sql turns a question into one read-only query for the database you are connected to.
-- These sessions use concert_singer from the spider-pg slice and a scripted model
-- (tests/mock_llm.py) configured as nl2sql.llm_url.
SELECT extname, extversion, extnamespace::regnamespace AS schema, obj_description(oid, 'pg_extension') AS description FROM pg_extension WHERE extname = 'nl2sql';

-- The settings exist once the library is loaded: by the first nl2sql call, by LOAD, or by
-- shared_preload_libraries. The API key is not listed (only superusers may read it, with SHOW).
LOAD 'nl2sql';
SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'nl2sql.%' ORDER BY name;

-- What the model is shown: every table and column you may SELECT, with types, keys,
-- comments and sampled values (Open-SQL's format).
SELECT nl2sql.schema_prompt();

-- Ask a question; get the SQL back.
SELECT nl2sql('How many singers do we have?');

-- Or the rows of that query, one jsonb object a row.
SELECT * FROM nl2sql_run('How many singers do we have?');

-- psql can run the generated query itself. This model wrapped the SQL in prose; only the query is kept.
SELECT nl2sql('List the singers from France') \gexec

-- The second argument is a hint for the model (BIRD's "evidence").
SELECT nl2sql('What is the average capacity of the stadiums?');
SELECT nl2sql('What is the average capacity of the stadiums?', 'round to whole numbers');

-- When a query fails, the model is shown the error and gets one more try (nl2sql.max_corrections).
-- Here every candidate wrote the same failing query: it runs once, and one correction fixes it.
SELECT nl2sql('Which singers are older than 40?');
SELECT c->>'round' AS round, c->>'duplicate_of' AS dup_of, c->>'corrects' AS fixes, c->>'sql' AS sql, c->>'error' AS error
FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c;
SELECT c->>'stage' AS stage, (c->>'attempts')::int AS attempts
FROM jsonb_array_elements(nl2sql.last_trace()->'llm_calls') AS c;

SELECT * FROM nl2sql_run('Show every concert with its stadium');

-- Candidates run inside your transaction, in subtransactions that are always rolled back;
-- a failed candidate does not abort your transaction.
BEGIN;
SELECT nl2sql('Which singers are older than 40?');
SELECT count(*) FROM singer;
COMMIT;

-- nl2sql.max_rows caps the rows fetched.
SET nl2sql.max_rows = 2;
SELECT * FROM nl2sql_run('Show every concert with its stadium');
RESET nl2sql.max_rows;

-- Bad input: NULL in, NULL out; empty and oversized questions are errors.
SELECT nl2sql(NULL) IS NULL AS null_question_gives_null;
SELECT count(*) FROM nl2sql_run(NULL);
SELECT nl2sql('   ');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql(repeat('why? ', 209716));
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('How many singers do we have?', repeat('x', 10000));
\echo :LAST_ERROR_SQLSTATE

-- The evaluation's judge: the same rows; in the reference's column order, and in any.
SELECT r->'match' AS same_order, r->'match_any_column_order' AS any_order, r->'ordered' AS ordered
FROM nl2sql.compare_results('SELECT name, age FROM singer', 'SELECT age, name FROM singer') r;
SELECT r->'match' AS same_order, r->'match_any_column_order' AS any_order
FROM nl2sql.compare_results('SELECT name, age FROM singer ORDER BY age, name', 'SELECT name, age FROM singer ORDER BY age, name') r;
SELECT r->'match' AS same_order, r->'match_any_column_order' AS any_order
FROM nl2sql.compare_results('SELECT name, age FROM singer', 'SELECT name, singer_id FROM singer') r;
