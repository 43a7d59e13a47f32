-- Sent by src/pg/values/search.rs; its parameters ($1, $2, ...) are bound there.
-- The indexes pg_restore brought back without entries, on columns the caller ($1) may read,
-- by name (a restore numbers columns again), as the NOTICE names them.
SELECT pg_catalog.format('%s.%I', i.relid::pg_catalog.text, i.attname)
FROM nl2sql.value_index i
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid AND a.attname = i.attname AND NOT a.attisdropped
WHERE nl2sql._entries(i.id, i.generation) IS NULL
  AND pg_catalog.has_column_privilege($1, i.relid, a.attnum, 'SELECT')
ORDER BY 1
