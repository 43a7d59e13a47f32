-- Sent by src/pg/values/refresh.rs; its parameters ($1, $2, ...) are bound there.
SELECT r.column_id, i.generation, i.relid::oid, a.attname::text, pg_catalog.array_agg(r.value), i.attnum
FROM nl2sql.value_removals r
JOIN nl2sql.value_index i ON i.id = r.column_id
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid::pg_catalog.oid AND a.attnum = i.attnum
WHERE $1::oid IS NULL OR i.relid::pg_catalog.oid = $1
GROUP BY 1, 2, 3, 4, 6
