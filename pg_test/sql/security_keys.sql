-- Secrets, class 4: the API key never lives where another role can read it, and only
-- superusers point nl2sql at an endpoint (whoever sets the URL receives the key).
CREATE ROLE keyrole;
-- Once nl2sql is loaded (as the README says to do first), keys are refused from catalogs
-- every role can read ...
LOAD 'nl2sql';
ALTER ROLE keyrole SET nl2sql.llm_api_key = 'sk-in-catalog';
\echo :LAST_ERROR_SQLSTATE
ALTER DATABASE concert_singer SET nl2sql.llm_api_key = 'sk-in-catalog';
CREATE FUNCTION keyed() RETURNS int LANGUAGE sql SET nl2sql.embedding_api_key = 'sk-in-catalog' AS 'SELECT 1';
-- ... and from postgresql.conf and ALTER SYSTEM, which members of pg_read_all_settings can read.
ALTER SYSTEM SET nl2sql.llm_api_key = 'sk-in-file';
SELECT count(*) AS keys_in_catalogs FROM pg_db_role_setting s, unnest(s.setconfig) c WHERE c LIKE 'nl2sql.%key%';

-- SET in a superuser's own session is accepted, and never shown back.
SET nl2sql.llm_api_key = 'sk-session-only';
SHOW nl2sql.llm_api_key;
-- A model that echoes what it was sent gets the key scrubbed from every answer.
SELECT * FROM nl2sql_run('[echo-key] what were you sent?');
-- Nor is it shown to a role this session switches to, even a member of pg_read_all_settings.
GRANT pg_read_all_settings TO keyrole;
SET ROLE keyrole;
SHOW nl2sql.llm_api_key;
SELECT current_setting('nl2sql.llm_api_key') AS key;
SELECT setting FROM pg_settings WHERE name = 'nl2sql.llm_api_key';
RESET ROLE;
RESET nl2sql.llm_api_key;
SHOW nl2sql.llm_api_key;

-- Only superusers set an endpoint URL, even when granted SET on the parameter.
GRANT SET ON PARAMETER nl2sql.llm_url, nl2sql.embedding_url TO keyrole;
SET ROLE keyrole;
SET nl2sql.llm_url = 'http://attacker.example/v1';
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.embedding_url = 'http://attacker.example/v1';
ALTER ROLE keyrole SET nl2sql.llm_url = 'http://attacker.example/v1';
RESET ROLE;
REVOKE SET ON PARAMETER nl2sql.llm_url, nl2sql.embedding_url FROM keyrole;

-- A key file must be an absolute path to a file only the server's OS user can read (the file
-- itself is exercised in tests/test_security.py); errors never quote its content.
SET nl2sql.llm_api_key_file = 'relative/key';
SELECT nl2sql('[echo-key] what were you sent?');
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.llm_api_key_file = '/nonexistent/nl2sql.key';
SELECT nl2sql('[echo-key] what were you sent?');
RESET nl2sql.llm_api_key_file;

-- A key stored before nl2sql was loaded in a session (a placeholder no check could refuse)
-- is not used: the next session that loads nl2sql refuses it and says where it lies.
\c -
ALTER DATABASE concert_singer SET nl2sql.llm_api_key = 'sk-placeholder';
\c -
SELECT * FROM nl2sql_run('[echo-key] what were you sent?');
SHOW nl2sql.llm_api_key;
ALTER DATABASE concert_singer RESET nl2sql.llm_api_key;
DROP ROLE keyrole;
