-- The SQL surface of relationships: typed wrappers around the underscored Rust functions.

CREATE FUNCTION nl2sql.profile_relationships(schemas name[] DEFAULT NULL)
RETURNS TABLE (from_relation regclass, from_columns name[], to_relation regclass, to_columns name[], source text, score real, evidence text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT from_relation::regclass, from_columns::name[], to_relation::regclass, to_columns::name[], source, score, evidence
      FROM nl2sql._profile_relationships(schemas::text[]) $$;
COMMENT ON FUNCTION nl2sql.profile_relationships(name[]) IS
    'find keys and foreign keys nobody declared in the data of the tables you own (of the given schemas), and keep them for the prompts';

CREATE FUNCTION nl2sql.confirm_relationship(from_relation regclass, from_columns name[], to_relation regclass, to_columns name[])
RETURNS void
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nl2sql._decide_relationship(from_relation::oid, from_columns::text[], to_relation::oid, to_columns::text[], 'confirm') $$;
COMMENT ON FUNCTION nl2sql.confirm_relationship(regclass, name[], regclass, name[]) IS
    'use a relationship as if it were declared (adds it when profiling did not find it)';

CREATE FUNCTION nl2sql.confirm_relationship(from_relation regclass, from_column name, to_relation regclass, to_column name)
RETURNS void
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nl2sql._decide_relationship(from_relation::oid, ARRAY[from_column::text], to_relation::oid, ARRAY[to_column::text], 'confirm') $$;

CREATE FUNCTION nl2sql.reject_relationship(from_relation regclass, from_columns name[], to_relation regclass, to_columns name[])
RETURNS void
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nl2sql._decide_relationship(from_relation::oid, from_columns::text[], to_relation::oid, to_columns::text[], 'reject') $$;
COMMENT ON FUNCTION nl2sql.reject_relationship(regclass, name[], regclass, name[]) IS
    'never use a relationship, whatever profiling finds';

CREATE FUNCTION nl2sql.reject_relationship(from_relation regclass, from_column name, to_relation regclass, to_column name)
RETURNS void
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nl2sql._decide_relationship(from_relation::oid, ARRAY[from_column::text], to_relation::oid, ARRAY[to_column::text], 'reject') $$;

CREATE FUNCTION nl2sql.forget_relationship(from_relation regclass, from_columns name[], to_relation regclass, to_columns name[])
RETURNS void
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nl2sql._decide_relationship(from_relation::oid, from_columns::text[], to_relation::oid, to_columns::text[], 'forget') $$;
COMMENT ON FUNCTION nl2sql.forget_relationship(regclass, name[], regclass, name[]) IS
    'drop a confirmed, rejected or inferred relationship (profiling may infer it again)';

CREATE FUNCTION nl2sql.forget_relationship(from_relation regclass, from_column name, to_relation regclass, to_column name)
RETURNS void
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nl2sql._decide_relationship(from_relation::oid, ARRAY[from_column::text], to_relation::oid, ARRAY[to_column::text], 'forget') $$;
