-- Sent by src/pg/values/search.rs; its parameters ($1, $2, ...) are bound there.
-- The indexes pg_restore brought back without entries that searches would otherwise use for
-- the caller ($1): columns it may read, of tables without row-level security unless the index
-- includes it.
SELECT pg_catalog.format('%s.%I', i.relid::pg_catalog.text, a.attname)
FROM nl2sql.value_index i
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid::pg_catalog.oid AND a.attnum = i.attnum
JOIN pg_catalog.pg_class c ON c.oid = i.relid::pg_catalog.oid
WHERE i.status IN ('ready', 'dirty') AND nl2sql._entries(i.id, i.generation) IS NULL
  AND nl2sql._may_read_column($1, i.relid, i.attnum)
  AND (NOT c.relrowsecurity OR i.include_rls)
ORDER BY 1
