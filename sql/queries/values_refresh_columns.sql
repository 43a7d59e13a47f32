-- Sent by src/pg/values/refresh.rs; its parameters ($1, $2, ...) are bound there.
-- What a refresh builds again: every index of $1, or with no $1 those marked stale, being
-- built, built by another embedder, flagged by DML, or restored without entries.
SELECT i.relid::oid, a.attname::text, i.include_rls
FROM nl2sql.value_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid::pg_catalog.oid AND a.attnum = i.attnum
WHERE ($1::oid IS NULL AND (i.status IN ('stale', 'building') OR i.embedder <> nl2sql.current_embedder()
                            OR EXISTS (SELECT 1 FROM nl2sql.value_flags f WHERE f.column_id = i.id)
                            OR nl2sql._entries(i.id, i.generation) IS NULL))
   OR i.relid::pg_catalog.oid = $1
ORDER BY i.id
