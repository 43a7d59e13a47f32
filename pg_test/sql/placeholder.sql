-- A role that sets nl2sql.llm_url before the library is loaded in its session only creates a
-- placeholder. When the library loads, PostgreSQL discards that value: the setting is SUSET.
CREATE ROLE mallory;
GRANT SELECT ON singer TO mallory;
SET ROLE mallory;
SET nl2sql.llm_url = 'http://127.0.0.1:9/v1';
-- The library loads here; the configured endpoint answers, not port 9.
SELECT nl2sql('How many singers do we have?');
RESET ROLE;
DROP OWNED BY mallory;
DROP ROLE mallory;
