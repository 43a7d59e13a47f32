-- What the interactive agent's tools answer, for users too. (No SET search_path: tables are
-- named as the caller's search_path writes them; the body is schema-qualified.)

CREATE FUNCTION nl2sql.join_path("from" regclass, "to" regclass)
RETURNS TABLE (step int, join_condition text)
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
AS $$ SELECT s.step, s.join_condition FROM nl2sql._join_path($1::pg_catalog.oid, $2::pg_catalog.oid) s $$;
COMMENT ON FUNCTION nl2sql.join_path(regclass, regclass) IS
    'the shortest chain of foreign keys joining two tables you may read, one join condition a row';
