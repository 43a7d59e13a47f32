-- Sent by src/pg/relationships/mod.rs; its parameters ($1, $2, ...) are bound there.
SELECT from_relation::pg_catalog.oid, from_columns::pg_catalog.text[], to_relation::pg_catalog.oid, to_columns::pg_catalog.text[],
       source, score, evidence
FROM nl2sql.relationships
WHERE source OPERATOR(pg_catalog.<>) 'declared'
  AND (from_relation::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1) OR to_relation::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1))
ORDER BY from_relation::pg_catalog.text, from_columns, to_relation::pg_catalog.text
