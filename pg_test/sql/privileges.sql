-- nl2sql runs with the caller's privileges: the model is shown, and the query reads, only
-- what the calling role may SELECT.
CREATE TABLE staff_pay (name text, salary numeric);
INSERT INTO staff_pay VALUES ('Ann', 5000), ('Bob', 7000);
CREATE ROLE alice;
GRANT SELECT ON singer TO alice;
GRANT SELECT (concert_name, year) ON concert TO alice;

SET ROLE alice;
-- No staff_pay, no stadium, no singer_in_concert; concert shows the two granted columns.
SELECT nl2sql.schema_prompt();
SELECT nl2sql('How many singers do we have?');
-- A query on a table alice may not read fails as it would for her own query.
SELECT nl2sql('[salary] What is the average salary?');
\echo :LAST_ERROR_SQLSTATE

-- Only superusers set the endpoint and the key, so no role can send the key elsewhere.
SET nl2sql.llm_url = 'http://attacker.example/v1';
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.llm_api_key = 'sk-mine';
SET nl2sql.allowed_functions = 'anything';
-- Nor read the key.
SHOW nl2sql.llm_api_key;
SELECT current_setting('nl2sql.llm_api_key');
SELECT count(*) AS key_rows FROM pg_settings WHERE name = 'nl2sql.llm_api_key';
-- Per-session limits stay in the user's hands.
SET nl2sql.statement_timeout = '1s';
SHOW nl2sql.statement_timeout;
RESET ROLE;

-- A superuser may set the endpoint per role or per database, e.g.
--   ALTER ROLE alice SET nl2sql.llm_url = 'http://10.0.0.5:8080/v1';
ALTER ROLE alice SET nl2sql.llm_model = 'team-model';
SELECT unnest(setconfig) AS alice_settings FROM pg_db_role_setting
WHERE setrole = 'alice'::regrole;

DROP OWNED BY alice;
DROP ROLE alice;
DROP TABLE staff_pay;
