-- Sent by src/pg/values/search.rs as the caller, whose search_path decides what is visible: the
-- enum types off that path whose owner the caller does not trust (sql/may_read.sql). Their
-- labels are her words: the schema prompt shows none (sql/introspect/schema.sql), and the value
-- search leaves out the columns of those types and of domains over them, whoever indexed them.
SELECT coalesce(pg_catalog.array_agg(t.oid), '{}'::pg_catalog.oid[])
FROM pg_catalog.pg_type t
WHERE t.typtype OPERATOR(pg_catalog.=) 'e' AND NOT pg_catalog.pg_type_is_visible(t.oid)
  AND NOT nl2sql._trusts((SELECT nl2sql._me()), t.typowner)
