-- What the interactive agent's tools answer, for users too. (No SET search_path: tables are
-- named as the caller's search_path writes them; the body is schema-qualified.)

CREATE OR REPLACE FUNCTION nl2sql.join_path("from" regclass, "to" regclass)
RETURNS TABLE (step int, join_condition text)
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
AS $$ SELECT s.step, s.join_condition FROM nl2sql._join_path($1::pg_catalog.oid, $2::pg_catalog.oid) s $$;
COMMENT ON FUNCTION nl2sql.join_path(regclass, regclass) IS
    'the shortest chain of foreign keys joining two tables you may read, one join condition a row';

-- Replaces 0.2.0's PL/pgSQL function of this name, which read the relation as the caller's own
-- SELECT would: a view's functions ran with the caller's rights.
CREATE OR REPLACE FUNCTION nl2sql.column_stats(rel regclass, sample_rows integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
AS $$ SELECT nl2sql._column_stats($1::pg_catalog.oid, $2)::pg_catalog.jsonb $$;
COMMENT ON FUNCTION nl2sql.column_stats(regclass, integer) IS
    'the sampled statistics of the columns of one relation you may read, read in nl2sql''s sandbox as the schema prompt reads them';
