-- Sent by src/pg/values/search.rs; its parameters ($1, $2, ...) are bound there.
SELECT i.id, i.generation, i.relid::oid, a.attname::text,
       -- DML on a partition or child fires its own triggers, not the parent's
       EXISTS (SELECT 1 FROM nl2sql.value_flags f WHERE f.column_id = i.id AND f.flag = 'dirty')
       OR i.status = 'dirty' OR c.relrowsecurity OR c.relhassubclass OR c.relkind = 'p',
       a.atttypid
FROM nl2sql.value_index i
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid::pg_catalog.oid AND a.attnum = i.attnum
JOIN pg_catalog.pg_class c ON c.oid = i.relid::pg_catalog.oid
WHERE i.status IN ('ready', 'dirty') AND i.embedder = $2
  AND nl2sql._may_read_column($1, i.relid, i.attnum)
  AND (NOT c.relrowsecurity OR i.include_rls)
  -- a restored index has no entries until it is built (values_search_restored.sql names it)
  AND nl2sql._entries(i.id, i.generation) IS NOT NULL
ORDER BY i.id
