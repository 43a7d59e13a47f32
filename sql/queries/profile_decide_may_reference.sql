-- Sent by src/pg/relationships/decide.rs; its parameters ($1, $2, ...) are bound there.
SELECT r.rolsuper OR (pg_catalog.has_schema_privilege($3, c.relnamespace, 'USAGE')
       AND NOT EXISTS (SELECT FROM pg_catalog.unnest($2::pg_catalog.text[]) AS u(n)
                       WHERE NOT coalesce(pg_catalog.has_column_privilege($3, c.oid, u.n, 'REFERENCES, SELECT'), false)))
FROM pg_catalog.pg_class c, pg_catalog.pg_roles r
WHERE c.oid OPERATOR(pg_catalog.=) $1 AND r.oid OPERATOR(pg_catalog.=) $3
