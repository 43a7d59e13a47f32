-- Sent by src/pg/values/build.rs; its parameters ($1, $2, ...) are bound there.
SELECT a.attnum, a.attname::pg_catalog.text
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
  AND t.typcategory OPERATOR(pg_catalog.=) ANY ('{S,E}'::pg_catalog."char"[])
  AND ($2::pg_catalog.text IS NULL OR a.attname OPERATOR(pg_catalog.=) $2)
ORDER BY a.attnum
