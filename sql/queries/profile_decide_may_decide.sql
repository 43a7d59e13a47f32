-- Sent by src/pg/relationships/decide.rs; its parameters ($1, $2, ...) are bound there.
SELECT pg_catalog.pg_has_role($2, c.relowner, 'USAGE') OR r.rolsuper
       OR pg_catalog.pg_has_role($2, 'nl2sql_curator', 'USAGE')
FROM pg_catalog.pg_class c, pg_catalog.pg_roles r
WHERE c.oid OPERATOR(pg_catalog.=) $1 AND r.oid OPERATOR(pg_catalog.=) $2
