-- Secrets, class 4: the API key never lives where another role can read it, and only
-- superusers point nl2sql at an endpoint (whoever sets the URL receives the key). A key comes
-- from a file only the server's OS user can read (nl2sql.llm_api_key_file, exercised in
-- tests/test_security.py) or from the server's environment (as in these tests), never from a
-- setting: every place a setting can be made is readable by another role.
CREATE ROLE keyrole LOGIN;
-- Once nl2sql is loaded (as the README says to do first), a key is refused from catalogs every
-- role can read ...
LOAD 'nl2sql';
ALTER ROLE keyrole SET nl2sql.llm_api_key = 'sk-in-catalog';
\echo :LAST_ERROR_SQLSTATE
ALTER DATABASE concert_singer SET nl2sql.llm_api_key = 'sk-in-catalog';
CREATE FUNCTION keyed() RETURNS int LANGUAGE sql SET nl2sql.embedding_api_key = 'sk-in-catalog' AS 'SELECT 1';
-- ... from postgresql.conf and ALTER SYSTEM, which members of pg_read_all_settings can read ...
ALTER SYSTEM SET nl2sql.llm_api_key = 'sk-in-file';
-- ... and from SET, whose text pg_stat_activity and pg_stat_statements keep.
SET nl2sql.llm_api_key = 'sk-session-only';
SELECT count(*) AS keys_in_catalogs FROM pg_db_role_setting s, unnest(s.setconfig) c WHERE c LIKE 'nl2sql.%key%';
SHOW nl2sql.llm_api_key;

-- A model that echoes what it was sent gets the key scrubbed from every answer.
SELECT * FROM nl2sql_run('[echo-key] what were you sent?');

-- Only superusers set an endpoint URL, even when granted SET on the parameter.
GRANT SET ON PARAMETER nl2sql.llm_url, nl2sql.embedding_url TO keyrole;
SET ROLE keyrole;
SET nl2sql.llm_url = 'http://attacker.example/v1';
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.embedding_url = 'http://attacker.example/v1';
ALTER ROLE keyrole SET nl2sql.llm_url = 'http://attacker.example/v1';
RESET ROLE;

-- A key file must be an absolute path to a file only the server's OS user can read; errors
-- never quote its content.
SET nl2sql.llm_api_key_file = 'relative/key';
SELECT nl2sql('[echo-key] what were you sent?');
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.llm_api_key_file = '/nonexistent/nl2sql.key';
SELECT nl2sql('[echo-key] what were you sent?');
RESET nl2sql.llm_api_key_file;

-- Before nl2sql is loaded in a session, PostgreSQL stores any nl2sql.* value unchecked.
-- A key stored so is never used: the next session that loads nl2sql refuses it and says where
-- it lies.
\c -
ALTER DATABASE concert_singer SET nl2sql.llm_api_key = 'sk-placeholder';
\c -
SELECT * FROM nl2sql_run('[echo-key] what were you sent?');
SHOW nl2sql.llm_api_key;
-- The same check under standard_conforming_strings = off: the one warning, no other.
\c -
SET standard_conforming_strings = off;
SELECT * FROM nl2sql_run('[echo-key] what were you sent?');
RESET standard_conforming_strings;
ALTER DATABASE concert_singer RESET nl2sql.llm_api_key;
-- A URL a role holding SET stored for itself so is refused when used.
\c -
SET ROLE keyrole;
ALTER ROLE keyrole SET nl2sql.llm_url = 'http://attacker.example/v1';
RESET ROLE;
GRANT SELECT ON singer TO keyrole;
\c - keyrole
SELECT nl2sql('[echo-key] what were you sent?');
\echo :LAST_ERROR_SQLSTATE
\c - postgres
ALTER ROLE keyrole RESET nl2sql.llm_url;
REVOKE SET ON PARAMETER nl2sql.llm_url, nl2sql.embedding_url FROM keyrole;
DROP OWNED BY keyrole;
DROP ROLE keyrole;
