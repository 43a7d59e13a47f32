-- Whatever the model answers runs only as one read-only query, inside a sandbox: a read-only,
-- always rolled back subtransaction, with a statement timeout and the caller's privileges.
-- The scripted answers below are hostile on purpose; each is refused or stopped.
CREATE SEQUENCE ticket_seq;
CREATE TABLE counter (n int);
INSERT INTO counter VALUES (0);
CREATE FUNCTION bump_counter() RETURNS int LANGUAGE sql
    AS $$ UPDATE counter SET n = n + 1 RETURNING n $$;

-- Not a query, or a query that writes or locks: refused before anything runs.
SELECT nl2sql('[drop] remove the singers table');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[cte-delete] delete all singers and count them');
SELECT nl2sql('[select-into] copy the singers');
SELECT nl2sql('[for-update] lock the singers');
SELECT nl2sql('[two-statements] count singers');
\echo :LAST_ERROR_SQLSTATE

-- Functions with side effects are refused even inside a SELECT.
SELECT nl2sql('[terminate] stop the other sessions');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[set-config] change my search path');
SELECT nl2sql('[nextval] give me the next ticket number');
SELECT nl2sql('[sleep] wait a minute');

-- Neither are built-ins that read other sessions (their locks, progress, replication
-- connections, prepared transactions, running transactions) or the session's own prepared
-- statements and cursors, whose text may hold values: nothing the question is about, and the
-- agent and the correction round would show the rows to the model.
SELECT nl2sql('[sessions-locks] which locks are held');
SELECT nl2sql('[sessions-progress] which vacuums are running');
SELECT nl2sql('[sessions-replication] who replicates from here');
SELECT nl2sql('[sessions-wal-receiver] where do I replicate from');
SELECT nl2sql('[sessions-subscriptions] which subscriptions run');
SELECT nl2sql('[sessions-slots] which replication slots are active');
SELECT nl2sql('[sessions-prepared-xacts] which transactions are prepared');
SELECT nl2sql('[sessions-blocking] who blocks me');
SELECT nl2sql('[sessions-snapshot] which transactions are running');
PREPARE own_statement AS SELECT 'a value of mine' AS v;
SELECT nl2sql('[own-statements] what have I prepared');
DEALLOCATE own_statement;
BEGIN;
DECLARE own_cursor CURSOR FOR SELECT 'another value of mine' AS v;
SELECT nl2sql('[own-cursors] which cursors are open');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- A user-defined volatile function is refused unless a superuser allows it ...
SELECT nl2sql('[bump] bump the counter');
-- ... and even then it cannot write: the engine enforces the read-only transaction.
SET nl2sql.allowed_functions = 'bump_counter';
SELECT nl2sql('[bump] bump the counter');
RESET nl2sql.allowed_functions;

-- A query that runs too long is cancelled at nl2sql.statement_timeout (once, and once more
-- after the correction round, since this model insists).
SET nl2sql.statement_timeout = '200ms';
SELECT nl2sql('[heavy] count to a billion');
\echo :LAST_ERROR_SQLSTATE
RESET nl2sql.statement_timeout;
-- The timeout's cancel never leaks into the next statement.
SELECT 'runs' AS next_statement FROM pg_sleep(0.3);

-- Nothing changed, and the session's settings are intact.
SELECT count(*) AS singers FROM singer;
SELECT n AS counter FROM counter;
SELECT last_value, is_called FROM ticket_seq;
SHOW search_path;

-- An nl2sql error is an ordinary error: a savepoint keeps the transaction going.
BEGIN;
SAVEPOINT before_question;
SELECT nl2sql('[drop] remove the singers table');
ROLLBACK TO before_question;
SELECT count(*) AS singers FROM singer;
COMMIT;

DROP FUNCTION bump_counter();
DROP TABLE counter;
DROP SEQUENCE ticket_seq;
