-- The tables nl2sql.profile_relationships() reads: ordinary, partitioned and materialized, in
-- the schemas named ($1; all user schemas when NULL), none an extension's; whether the caller
-- ($2) may profile one (its owner, a member of the owning role, or a superuser), its row
-- estimate and change counter, whether a primary key is declared, whether it has row-level
-- security, its owner, and its columns of the built-in types keys are made of, with their
-- declared keys and references.
SELECT c.oid, n.nspname::pg_catalog.text, c.relname::pg_catalog.text, c.reltuples::pg_catalog.float8,
       pg_catalog.pg_has_role($2, c.relowner, 'USAGE') OR r.rolsuper AS may_profile,
       pg_catalog.pg_stat_get_tuples_inserted(c.oid) OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_tuples_updated(c.oid)
         OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_tuples_deleted(c.oid) AS changes,
       EXISTS (SELECT FROM pg_catalog.pg_constraint p WHERE p.conrelid OPERATOR(pg_catalog.=) c.oid
               AND p.contype OPERATOR(pg_catalog.=) 'p') AS declared_key,
       pg_catalog.json_agg(pg_catalog.json_build_object(
           'name', a.attname, 'type_name', t.typname, 'type_oid', t.oid::pg_catalog.int8,
           'declared_unique', EXISTS (SELECT FROM pg_catalog.pg_constraint u WHERE u.conrelid OPERATOR(pg_catalog.=) c.oid
                                      AND u.contype OPERATOR(pg_catalog.=) ANY ('{p,u}'::pg_catalog."char"[])
                                      AND u.conkey OPERATOR(pg_catalog.=) ARRAY[a.attnum]) AND a.attnotnull,
           'declared_reference', EXISTS (SELECT FROM pg_catalog.pg_constraint f WHERE f.conrelid OPERATOR(pg_catalog.=) c.oid
                                         AND f.contype OPERATOR(pg_catalog.=) 'f' AND a.attnum OPERATOR(pg_catalog.=) ANY (f.conkey)))
         ORDER BY a.attnum)::pg_catalog.text AS columns,
       c.relrowsecurity, c.relowner
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) $2
JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT a.attisdropped
JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,m}'::pg_catalog."char"[])
  AND NOT c.relispartition
  AND NOT n.nspname OPERATOR(pg_catalog.=) ANY ('{pg_catalog,information_schema,nl2sql}'::pg_catalog.name[])
  AND n.nspname::pg_catalog.text OPERATOR(pg_catalog.!~) '^pg_(toast|temp_)'::pg_catalog.text
  AND ($1::pg_catalog.name[] IS NULL OR n.nspname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[]))
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                    AND d.objid OPERATOR(pg_catalog.=) c.oid AND d.deptype OPERATOR(pg_catalog.=) 'e')
  -- built-in types only: their equality and output functions are PostgreSQL's own
  AND t.typnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
  AND t.typname OPERATOR(pg_catalog.=) ANY ('{int2,int4,int8,numeric,text,varchar,bpchar,uuid,date,timestamp,timestamptz}'::pg_catalog.name[])
GROUP BY c.oid, n.nspname, c.relname, c.reltuples, r.rolsuper, c.relowner, c.relrowsecurity
ORDER BY n.nspname, c.relname
