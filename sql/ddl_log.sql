-- The catalog's version, which every session's cached schema is keyed by
-- (sql/queries/catalog_schema_key.sql): the rows of nl2sql.ddl_log that the reader's snapshot
-- sees. Each DDL command, profiling run and decision on a relationship adds a row with a value
-- never used before (nl2sql._ddl_changed, a value of nl2sql.ddl_version), so what a reader sees
-- changes when that transaction commits, and not before: a session that reads the catalog while
-- a DDL transaction is still open keys what it saw by the rows without that one, and a DDL
-- that rolls back leaves the rows as they were. A row is WAL-logged like any other, so each
-- commit reaches a standby's sessions as it replays there. Older rows are pruned by the next
-- bump. PUBLIC may read the rows, not lock them: no role can hold a bump back.
CREATE TABLE nl2sql.ddl_log (v bigint PRIMARY KEY);
-- A vacuum that cut the emptied pages off would take an ACCESS EXCLUSIVE lock, which on a
-- standby cancels the sessions reading the version (they hold it for a whole nl2sql() call).
ALTER TABLE nl2sql.ddl_log SET (vacuum_truncate = off);
GRANT SELECT ON nl2sql.ddl_log TO PUBLIC;

-- One bump of the catalog's version (above), by the extension owner. Under read committed (read
-- uncommitted is the same in PostgreSQL) a new row, and older rows are deleted, skipping those
-- another transaction holds (a bump never waits). Under repeatable read and serializable, the
-- transaction's own row takes the new value: its address is remembered for the transaction in
-- a setting outside nl2sql's reserved prefix (hidden from SHOW ALL), with the transaction's id,
-- so a value any session could set (or one a role's or database's settings give) is used only
-- in the transaction that wrote it, and a transaction of many commands leaves one row, found
-- without reading other transactions' rows (a serializable transaction's read of those could
-- fail its commit). Repeatable read prunes older rows no transaction has touched once, at its
-- first bump (one another transaction deleted after this snapshot began would fail this one
-- with 40001: its xmax is set, so it is skipped, and the microseconds' race left is caught).
-- Serializable prunes the same way only once every 1,000 versions (counted by the sequences,
-- which take no lock a serializable transaction could conflict on): reading and deleting other
-- transactions' rows could fail a serializable commit with 40001, so it is done only as often
-- as keeps the log every reader's key reads whole short, whatever serializable DDL alone (or a
-- role looping GRANTs on a temporary table) adds; in between, its rows go with the next
-- read-committed or repeatable-read bump, or with the next read-committed nl2sql() call that
-- finds more than 1,000 (sql/queries/catalog_trim_ddl_log.sql: a role that rolls back each
-- transaction of hers that pruned cannot roll back a reader's). No subtransaction but that
-- one: a transaction of many DDL commands (a migration, a restore) takes none per command.
-- The version at which a serializable bump last pruned (not transactional: one rolled back
-- still counts, and the next comes 1,000 versions later).
CREATE SEQUENCE nl2sql.ddl_log_pruned;

CREATE FUNCTION nl2sql._ddl_changed()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mine bigint;
    me text;
    remembered text;
    own tid;
BEGIN
    mine := nextval('nl2sql.ddl_version');
    IF current_setting('transaction_isolation') IN ('read committed', 'read uncommitted') THEN
        INSERT INTO nl2sql.ddl_log (v) VALUES (mine);
        DELETE FROM nl2sql.ddl_log WHERE v IN (SELECT v FROM nl2sql.ddl_log WHERE v < mine FOR UPDATE SKIP LOCKED);
        RETURN;
    END IF;
    me := pg_current_xact_id()::text;
    -- '(block,offset)/transaction'
    remembered := current_setting('nl2sql_ddl_log.own_row', true);
    IF remembered ~ '^[(][0-9]{1,9},[0-9]{1,3}[)]/[0-9]{1,20}$' AND split_part(remembered, '/', 2) = me THEN
        UPDATE nl2sql.ddl_log SET v = mine WHERE ctid = split_part(remembered, '/', 1)::tid RETURNING ctid INTO own;
    END IF;
    IF own IS NOT NULL THEN
        PERFORM set_config('nl2sql_ddl_log.own_row', own::text || '/' || me, true);
        RETURN;
    END IF;
    INSERT INTO nl2sql.ddl_log (v) VALUES (mine) RETURNING ctid INTO own;
    PERFORM set_config('nl2sql_ddl_log.own_row', own::text || '/' || me, true);
    IF current_setting('transaction_isolation') = 'serializable' THEN
        IF mine - coalesce(pg_sequence_last_value('nl2sql.ddl_log_pruned'), 0) <= 1000 THEN
            RETURN;
        END IF;
        PERFORM setval('nl2sql.ddl_log_pruned', mine);
    END IF;
    BEGIN
        DELETE FROM nl2sql.ddl_log WHERE v IN (
            SELECT v FROM nl2sql.ddl_log WHERE v < mine AND xmax = '0'::xid FOR UPDATE SKIP LOCKED);
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- deleted by another since this snapshot began: the next bump prunes
    END;
END
$$;
REVOKE ALL ON FUNCTION nl2sql._ddl_changed() FROM PUBLIC;

-- A command that changed only the session's own temporary objects: only this session sees
-- them (a temporary table hides a permanent one of its name, which is then written with its
-- schema), so only its key changes, through a session setting read by the key query (rolled
-- back with the transaction, as a row would be). No row: a loop of temporary tables under
-- serializable, which prunes nothing, leaves none for every reader's key to read.
CREATE FUNCTION nl2sql._temp_ddl_changed()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('nl2sql_ddl_log.session', nextval('nl2sql.ddl_version')::text, false);
END
$$;
REVOKE ALL ON FUNCTION nl2sql._temp_ddl_changed() FROM PUBLIC;
