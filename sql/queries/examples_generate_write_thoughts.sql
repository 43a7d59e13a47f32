-- Sent by src/pg/examples/generate.rs; its parameters ($1, $2, ...) are bound there.
UPDATE nl2sql.example_store SET thought = $2,
       sampled = CASE WHEN source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[])
                      THEN sampled ELSE $3::pg_catalog.oid[]::pg_catalog.regclass[] END
WHERE id = $1
