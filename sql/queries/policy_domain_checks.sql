-- Sent by src/pg/policy.rs; its parameters ($1, $2, ...) are bound there.
-- The CHECK constraints of a domain and of the domains it is based on, as stored: before the
-- type cache folds their immutable calls into constants.
WITH RECURSIVE d(oid) AS (
    SELECT $1::pg_catalog.oid
    UNION
    SELECT t.typbasetype FROM d JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) d.oid
    WHERE t.typtype OPERATOR(pg_catalog.=) 'd')
SELECT c.conbin::pg_catalog.text FROM d JOIN pg_catalog.pg_constraint c ON c.contypid OPERATOR(pg_catalog.=) d.oid
WHERE c.contype OPERATOR(pg_catalog.=) 'c' AND c.conbin IS NOT NULL
