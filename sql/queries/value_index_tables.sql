-- The tables nl2sql.create_value_indexes() indexes: ordinary, partitioned and materialized, in
-- the schemas named ($1), none an extension's, in name order. Operators are pg_catalog's
-- whatever the caller's search_path.
SELECT c.oid
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,m}'::pg_catalog."char"[])
  AND NOT c.relispartition
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                    AND d.objid OPERATOR(pg_catalog.=) c.oid AND d.deptype OPERATOR(pg_catalog.=) 'e')
ORDER BY n.nspname, c.relname
