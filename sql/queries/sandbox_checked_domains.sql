-- Sent by src/pg/sandbox/domains.rs; its parameter ($1, the most rows wanted) is bound there.
-- The domains a CHECK constraint applies to: those that have one, and every domain based on
-- one of those, at any depth (the type cache keeps a domain's constraints with its base
-- domains' ones, under the domain's own entry).
WITH RECURSIVE checked(oid) AS (
    SELECT c.contypid FROM pg_catalog.pg_constraint c
    WHERE c.contypid OPERATOR(pg_catalog.<>) 0 AND c.contype OPERATOR(pg_catalog.=) 'c'
    UNION
    SELECT t.oid FROM pg_catalog.pg_type t JOIN checked ON t.typbasetype OPERATOR(pg_catalog.=) checked.oid
    WHERE t.typtype OPERATOR(pg_catalog.=) 'd')
SELECT oid FROM checked LIMIT $1
