-- Sent by src/pg/values/search.rs as the caller, whose search_path decides what is visible: the
-- enum types off that path whose owner the caller does not trust (sql/may_read.sql), and every
-- domain over one of them, at any depth. Their labels are her words: the schema prompt shows
-- none (sql/introspect/schema.sql), and the value search leaves out the columns of these
-- types, whoever indexed them.
WITH RECURSIVE trusted AS (
    SELECT ro.oid AS role FROM pg_catalog.pg_roles ro WHERE nl2sql._trusts((SELECT nl2sql._me()), ro.oid)
), hers AS (
    SELECT t.oid FROM pg_catalog.pg_type t
    WHERE t.typtype OPERATOR(pg_catalog.=) 'e' AND NOT pg_catalog.pg_type_is_visible(t.oid)
      AND NOT EXISTS (SELECT FROM trusted tr WHERE tr.role OPERATOR(pg_catalog.=) t.typowner)
    UNION
    SELECT d.oid FROM pg_catalog.pg_type d JOIN hers h ON d.typbasetype OPERATOR(pg_catalog.=) h.oid
    WHERE d.typtype OPERATOR(pg_catalog.=) 'd'
)
SELECT coalesce(pg_catalog.array_agg(h.oid), '{}'::pg_catalog.oid[]) FROM hers h
