-- Sent by src/pg/values/search.rs as the caller, whose search_path decides what is visible: of
-- the types $1 (those of the indexed columns the caller may read), the ones whose labels are a
-- stranger's words: an enum type off that path whose owner the caller does not trust
-- (sql/may_read.sql), or a domain over one at any depth. Each type's chain of domains is walked
-- down by the type's OID (an index lookup a step, at most 64 steps; a longer chain counts as
-- hers), so the cost is that of the indexed columns' own types, whatever else the catalog holds.
-- The schema prompt shows none of these labels (sql/introspect/schema.sql), and the value search
-- leaves out the columns of these types, whoever indexed them.
WITH RECURSIVE trusted AS (
    SELECT ro.oid AS role FROM pg_catalog.pg_roles ro WHERE nl2sql._trusts((SELECT nl2sql._me()), ro.oid)
), chain AS (
    SELECT t.oid AS start, t.oid, t.typtype, t.typbasetype, t.typowner, 0 AS depth
    FROM pg_catalog.pg_type t WHERE t.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
    UNION ALL
    SELECT c.start, b.oid, b.typtype, b.typbasetype, b.typowner, c.depth OPERATOR(pg_catalog.+) 1
    FROM chain c JOIN pg_catalog.pg_type b ON b.oid OPERATOR(pg_catalog.=) c.typbasetype
    WHERE c.typtype OPERATOR(pg_catalog.=) 'd' AND c.depth OPERATOR(pg_catalog.<) 64
)
SELECT coalesce(pg_catalog.array_agg(DISTINCT c.start), '{}'::pg_catalog.oid[])
FROM chain c
WHERE (c.typtype OPERATOR(pg_catalog.=) 'e' AND NOT pg_catalog.pg_type_is_visible(c.oid)
       AND NOT EXISTS (SELECT FROM trusted tr WHERE tr.role OPERATOR(pg_catalog.=) c.typowner))
   OR (c.typtype OPERATOR(pg_catalog.=) 'd' AND c.depth OPERATOR(pg_catalog.=) 64)
