-- Sent by src/pg/values/build.rs; its parameters ($1, $2, ...) are bound there.
SELECT a.attnum, a.attname::text
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum > 0 AND NOT a.attisdropped
  AND t.typcategory OPERATOR(pg_catalog.=) ANY ('{S,E}'::"char"[])
  AND ($2::text IS NULL OR a.attname OPERATOR(pg_catalog.=) $2)
ORDER BY a.attnum
