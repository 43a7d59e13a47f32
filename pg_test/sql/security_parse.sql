-- Hostile model output, class 1: texts that sqlparser and PostgreSQL read differently
-- (Unicode escapes, dollar quotes with non-ASCII tags, backslashes under
-- standard_conforming_strings = off, nested comments). The decision is made on PostgreSQL's own
-- parse tree, and that tree is what runs: each is refused or harmless, and nothing changed.
-- The early check on sqlparser's reading reads a Unicode-escaped name (U&"...") as PostgreSQL
-- does, so such a function is refused by that check already; the tree decides all the same.
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE TABLE sec_canary (note text);
SELECT pg_backend_pid() AS my_pid \gset

SELECT nl2sql('[u-escape-lock] lock something');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[u-escape-uescape] lock something else');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[u-escape-terminate] end every session');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[u-escape-read-file] show the host name');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[dollar-tag] a note and a lock');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[dollar-hide] strings around a lock');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[e-string] escaped quotes around a lock');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[quoted-name] lock by its quoted name');
\echo :LAST_ERROR_SQLSTATE
-- An unquoted name with a non-ASCII letter (U+212A KELVIN SIGN for the last k): PostgreSQL
-- lowercases only ASCII letters, so it names no function; refused before it reaches PostgreSQL.
SELECT nl2sql('[kelvin-lock] lock by a look-alike name');
\echo :LAST_ERROR_SQLSTATE
-- A table owner's function named as a built-in in capitals, called through a Unicode escape.
CREATE FUNCTION public."PG_SLEEP"(int) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT nl2sql('[u-escape-owner-upper] sleep a second');
\echo :LAST_ERROR_SQLSTATE
DROP FUNCTION public."PG_SLEEP"(int);
-- A schema spelled through a Unicode escape, the function in capitals (folded unquoted).
SELECT nl2sql('[u-escape-schema] show the host name');
\echo :LAST_ERROR_SQLSTATE
-- A nested comment: PostgreSQL reads the call as part of the comment, so the query is harmless.
SELECT * FROM nl2sql_run('[nested-comment] one');
SELECT nl2sql('[lo-import] import a server file');
\echo :LAST_ERROR_SQLSTATE
-- dblink would commit through another connection, outside the read-only subtransaction.
SELECT nl2sql('[dblink-exec] write through another connection');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[dblink-query] count through another connection');
\echo :LAST_ERROR_SQLSTATE

-- Writes the read-only transaction would stop, and side effects it would not: a sequence, a file.
CREATE SEQUENCE sec_seq;
SELECT nl2sql('[u-escape-nextval] the next number');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[lo-export] write a server file');
\echo :LAST_ERROR_SQLSTATE
\! test -e /tmp/nl2sql-security-canary && echo "file written" || echo "no file written"

-- Backslashes mean something else when standard_conforming_strings is off; the session's
-- setting is the one PostgreSQL parses with. With it on, the text is one harmless string ...
SELECT * FROM nl2sql_run('[backslash-quote] quotes and a lock');
-- ... with it off, PostgreSQL reads a call (sqlparser still reads one string): refused.
SET standard_conforming_strings = off;
SET escape_string_warning = off;
SELECT nl2sql('[backslash-quote] quotes and a lock');
\echo :LAST_ERROR_SQLSTATE
-- The same for a function of an extension that reaches outside the query (the tree's rule).
SELECT nl2sql('[backslash-dblink] quotes and another connection');
\echo :LAST_ERROR_SQLSTATE
RESET standard_conforming_strings;
RESET escape_string_warning;

-- The text nl2sql() returns is the text checked: \gexec runs nothing when it is refused.
SELECT nl2sql('[u-escape-lock] lock it, then run it') \gexec
\echo :LAST_ERROR_SQLSTATE

-- Nothing changed: no advisory lock outlives a call, this session lives, nothing was written.
SELECT count(*) AS advisory_locks FROM pg_locks WHERE locktype = 'advisory';
SELECT pg_backend_pid() = :my_pid AS same_session;
SELECT count(*) AS canary_rows FROM sec_canary;
SELECT last_value, is_called FROM sec_seq;

-- Foreign tables, read directly or as partitions, mean queries on another server and
-- connections that stay open: refused unless a superuser allows them.
CREATE EXTENSION file_fdw;
CREATE SERVER sec_files FOREIGN DATA WRAPPER file_fdw;
CREATE FOREIGN TABLE sec_remote (id int) SERVER sec_files OPTIONS (filename '/dev/null', format 'csv');
CREATE TABLE sec_parted (id int) PARTITION BY LIST (id);
CREATE TABLE sec_parted_local PARTITION OF sec_parted FOR VALUES IN (1);
CREATE FOREIGN TABLE sec_parted_remote PARTITION OF sec_parted FOR VALUES IN (2) SERVER sec_files OPTIONS (filename '/dev/null', format 'csv');
SET nl2sql.mode = zero_shot;
SELECT nl2sql('[foreign] count the remote rows');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[foreign-partition] count the partitioned rows');
SET nl2sql.allow_foreign_tables = on;
SELECT * FROM nl2sql_run('[foreign-partition] count the partitioned rows');
RESET nl2sql.allow_foreign_tables;
RESET nl2sql.mode;
DROP TABLE sec_parted;
DROP EXTENSION file_fdw CASCADE;

-- Least privilege: a superuser's question runs as nl2sql.superuser_role (pg_read_all_data),
-- never as a superuser; the model's SQL sees who it runs as.
SELECT * FROM nl2sql_run('[who-am-i] who runs this?');
SET nl2sql.superuser_role = 'postgres';
SELECT nl2sql('[who-am-i] who runs this?');
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.superuser_role = 'no_such_role';
SELECT nl2sql('[who-am-i] who runs this?');
\echo :LAST_ERROR_SQLSTATE
RESET nl2sql.superuser_role;
-- Any other role runs generated SQL with its own rights.
CREATE ROLE sec_reader;
GRANT SELECT ON singer TO sec_reader;
SET ROLE sec_reader;
SELECT * FROM nl2sql_run('[who-am-i] who runs this?');
RESET ROLE;
DROP OWNED BY sec_reader;
DROP ROLE sec_reader;
DROP TABLE sec_canary;
DROP SEQUENCE sec_seq;
DROP EXTENSION dblink;
