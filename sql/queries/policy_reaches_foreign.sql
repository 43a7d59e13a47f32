-- Sent by src/pg/policy.rs; its parameters ($1, $2, ...) are bound there.
WITH RECURSIVE t(oid) AS (
    SELECT $1::pg_catalog.oid
    UNION
    SELECT n.oid FROM t, LATERAL (
        SELECT i.inhrelid AS oid FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) t.oid
        UNION ALL
        SELECT d.refobjid FROM pg_catalog.pg_rewrite w
        JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
             AND d.objid OPERATOR(pg_catalog.=) w.oid
             AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
             AND d.refobjid OPERATOR(pg_catalog.<>) t.oid
        WHERE w.ev_class OPERATOR(pg_catalog.=) t.oid) n)
SELECT EXISTS (SELECT 1 FROM t JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.oid
               WHERE c.relkind OPERATOR(pg_catalog.=) 'f')
