-- Sent by src/pg/relationships/decide.rs; its parameters ($1, $2, ...) are bound there.
SELECT pg_catalog.format_type(a.atttypid, a.atttypmod), coalesce(b.typcategory, t.typcategory)::pg_catalog.text
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
LEFT JOIN pg_catalog.pg_type b ON b.oid OPERATOR(pg_catalog.=) t.typbasetype
WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) $2
  AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
