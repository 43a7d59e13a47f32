-- Sent by src/pg/catalog.rs (trim_ddl_log) as the extension owner, by a read-committed reader
-- whose key read a new version: when nl2sql.ddl_log holds more than 1,000 rows, every row but
-- the newest is deleted, skipping those another transaction holds (a reader never waits). The
-- rows a serializable bump leaves (sql/ddl_log.sql prunes them once every 1,000 versions, and a
-- role that rolls back each transaction that pruned keeps them) are thus bounded by the readers
-- too, whom no other role can roll back.
DELETE FROM nl2sql.ddl_log
WHERE v IN (SELECT l.v FROM nl2sql.ddl_log l
            WHERE l.v OPERATOR(pg_catalog.<) (SELECT pg_catalog.max(n.v) FROM nl2sql.ddl_log n)
            FOR UPDATE SKIP LOCKED)
  AND (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM nl2sql.ddl_log LIMIT 1001) r) OPERATOR(pg_catalog.>) 1000
