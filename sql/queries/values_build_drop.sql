-- Sent by src/pg/values/build.rs; its parameters ($1, $2, ...) are bound there.
WITH d AS (DELETE FROM nl2sql.value_index i USING pg_catalog.pg_attribute a
           WHERE i.relid::pg_catalog.oid = $1 AND a.attrelid = i.relid::pg_catalog.oid AND a.attnum = i.attnum
             AND ($2::text IS NULL OR a.attname = $2)
           RETURNING i.id, i.generation, a.attname::text AS name),
     r AS (INSERT INTO nl2sql.value_generations (column_id, generation, retired_xid)
           SELECT id, generation, pg_catalog.pg_current_xact_id()::text::int8 FROM d
           ON CONFLICT DO NOTHING)
SELECT name FROM d ORDER BY name
