-- Sent by src/pg/values/build.rs; its parameters ($1, $2, ...) are bound there.
UPDATE nl2sql.value_index
SET status = 'ready', generation = $2, embedder = $3, dims = $4, value_count = $5, phrase_count = $6,
    skipped_values = $7, include_rls = $8, max_length = $9, built_at = now(), refreshed_at = now(), build_ms = $10, attname = $11
WHERE id = $1
