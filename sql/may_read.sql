-- What "a role may read" means, once. Every view and every prompt section that shows a role
-- something about a relation asks one of these three (the schema prompt and what it feeds: join
-- paths, abstention, the agent's tools; the values; the relationships and keys; the examples and
-- instructions). A role may read a relation when
--   * it is a relation rows are read from (table, partitioned table, view, materialized view,
--     foreign table),
--   * it is not another session's temporary table,
--   * the role has USAGE on its schema (without it, SELECT on the table fails), and
--   * the role may SELECT it, or at least one of its columns (column privileges).
-- A column: the relation, and SELECT on that column. All of a relation: the relation, and SELECT
-- on every column it has: what text that may name any of its columns (a curator's example or
-- instruction) asks. Nothing here reads table data; roles are OIDs (nl2sql._me() below gives the
-- current one's: callers write (SELECT nl2sql._me()), evaluated once a query). Every name in the
-- bodies is schema-qualified, so they need no SET search_path (which would make each call save
-- and restore settings: these run for every relation a view or a prompt considers).

CREATE FUNCTION nl2sql._may_read(role oid, rel oid)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL RESTRICTED
AS $$
    SELECT coalesce((
        SELECT c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f}'::pg_catalog."char"[])
               AND (c.relpersistence OPERATOR(pg_catalog.<>) 't' OR c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())
               AND coalesce(pg_catalog.has_schema_privilege(role, c.relnamespace, 'USAGE'), false)
               AND coalesce(pg_catalog.has_any_column_privilege(role, c.oid, 'SELECT'), false)
        FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel), false)
$$;

CREATE FUNCTION nl2sql._may_read_column(role oid, rel oid, col int2)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL RESTRICTED
AS $$
    SELECT nl2sql._may_read(role, rel)
           AND col OPERATOR(pg_catalog.>) 0::pg_catalog.int2
           AND coalesce(pg_catalog.has_column_privilege(role, rel, col, 'SELECT'), false)
$$;

CREATE FUNCTION nl2sql._may_read_all(role oid, rel oid)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL RESTRICTED
AS $$
    SELECT nl2sql._may_read(role, rel)
           AND (coalesce(pg_catalog.has_table_privilege(role, rel, 'SELECT'), false)
                OR NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                               WHERE a.attrelid OPERATOR(pg_catalog.=) rel AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2
                                 AND NOT a.attisdropped
                                 AND NOT coalesce(pg_catalog.has_column_privilege(role, rel, a.attnum, 'SELECT'), false)))
$$;

-- The current role's OID (CURRENT_USER: inside a SECURITY DEFINER function, its owner).
CREATE FUNCTION nl2sql._me()
RETURNS oid
LANGUAGE sql STABLE PARALLEL RESTRICTED
AS $$
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER
$$;

-- Whether `role` takes objects `owner` owns for the database's own words: the role itself, the
-- database's owner, or a superuser (not a role `role` is a member of: before PostgreSQL 15 any
-- role may grant herself to another, and a CREATEROLE role is a member of those it created; nor
-- the owner of an object on the search path, where before PostgreSQL 15 anyone could create
-- one). What an owner it does not trust put off the caller's search path (a table, an enum type,
-- a domain) is her text: the schema prompt shows such a table by name and columns only, and no
-- enum label or type name of hers (sql/introspect/schema.sql, the value search).
CREATE FUNCTION nl2sql._trusts(role oid, owner oid)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL RESTRICTED
AS $$
    SELECT coalesce(owner OPERATOR(pg_catalog.=) role
                    OR owner OPERATOR(pg_catalog.=) (SELECT d.datdba FROM pg_catalog.pg_database d
                                                     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                    OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) owner), false)
$$;
