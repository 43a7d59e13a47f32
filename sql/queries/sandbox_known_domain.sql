-- Sent by src/pg/sandbox/domains.rs.
-- A domain with a CHECK that every database has and a superuser owns (initdb creates it):
-- loading its constraints runs nothing another role wrote.
SELECT t.oid FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.typnamespace
JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) t.typowner
WHERE n.nspname OPERATOR(pg_catalog.=) 'information_schema'
  AND t.typname OPERATOR(pg_catalog.=) 'cardinal_number'
  AND t.typtype OPERATOR(pg_catalog.=) 'd' AND r.rolsuper
