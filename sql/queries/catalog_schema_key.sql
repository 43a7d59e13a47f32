-- Sent by src/pg/catalog.rs; its parameters ($1, $2, ...) are bound there.
SELECT pg_catalog.format('%s|%s|%s|%s|%s',
(SELECT pg_catalog.md5(pg_catalog.string_agg(v::pg_catalog.text, ',' ORDER BY v)) FROM nl2sql.ddl_log),
(SELECT pg_catalog.string_agg(oid::pg_catalog.text, ',' ORDER BY oid) FROM pg_catalog.pg_roles
 WHERE pg_catalog.pg_has_role(current_user, oid, 'USAGE')),
pg_catalog.current_schemas(true)::pg_catalog.text, $1,
-- the session's own temporary objects' changes (nl2sql._temp_ddl_changed)
pg_catalog.current_setting('nl2sql_ddl_log.session', true))
