-- Sent by src/pg/catalog.rs; its parameters ($1, $2, ...) are bound there.
SELECT pg_catalog.format('%s|%s|%s|%s|%s|%s|%s|%s',
(SELECT pg_catalog.md5(pg_catalog.string_agg(v::pg_catalog.text, ',' ORDER BY v)) FROM nl2sql.ddl_log),
(SELECT pg_catalog.string_agg(oid::pg_catalog.text, ',' ORDER BY oid) FROM pg_catalog.pg_roles
 WHERE pg_catalog.pg_has_role(current_user, oid, 'USAGE')),
pg_catalog.current_schemas(true)::pg_catalog.text, $1,
-- the session's own temporary objects' changes (nl2sql._temp_ddl_changed), and its temporary
-- relations themselves, of every kind (a temporary sequence or index hides a table of its name
-- as a temporary table does), their names and their columns' names and types, which a RESET ALL
-- does not take back (read only in a session that has a temporary schema: pg_class has no
-- index that leads with the schema)
pg_catalog.current_setting('nl2sql_ddl_log.session', true),
(SELECT pg_catalog.md5(pg_catalog.string_agg(pg_catalog.format('%s %I (%s)', c.oid, c.relname,
        (SELECT pg_catalog.string_agg(pg_catalog.format('%I %s', a.attname, a.atttypid), ',' ORDER BY a.attnum)
         FROM pg_catalog.pg_attribute a
         WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped)),
        ',' ORDER BY c.oid))
 FROM pg_catalog.pg_class c
 WHERE pg_catalog.pg_my_temp_schema() OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
   AND c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()),
-- whose tables the caller trusts (sql/introspect/schema.sql), which change without DDL: the
-- database's owner (ALTER DATABASE ... OWNER TO) and the superusers (ALTER ROLE ... SUPERUSER)
(SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()),
(SELECT pg_catalog.string_agg(oid::pg_catalog.text, ',' ORDER BY oid) FROM pg_catalog.pg_roles WHERE rolsuper))
