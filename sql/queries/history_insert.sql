-- Sent by src/pg/history.rs; its parameters ($1, $2, ...) are bound there.
INSERT INTO nl2sql.history (asked_by, role_name, asked_at, question, hint, follows, mode, sql, confidence,
    candidates, vote, prompt_tokens, completion_tokens, latency_ms, sqlstate, error, shown)
VALUES ($1, COALESCE((SELECT rolname FROM pg_catalog.pg_roles WHERE oid OPERATOR(pg_catalog.=) $1), $1::pg_catalog.text::pg_catalog.name),
        pg_catalog.to_timestamp($2), $3, $4, $5, $6, $7, $8, $9, $10::pg_catalog.text::pg_catalog.jsonb, $11, $12, $13, $14, $15,
        $16::pg_catalog.oid[]::pg_catalog.regclass[])
RETURNING id
