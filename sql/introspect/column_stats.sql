-- Cheap statistics of the columns of one relation the caller may SELECT, from its first `sample_rows` rows:
-- distinct count, up to six distinct values (cut to 100 characters), min and max of numbers and dates.
-- STABLE, so everything it runs is read-only; SECURITY INVOKER, so privileges and row-level security apply.
-- Only columns the caller may SELECT are read (column-level grants work); dates come out in ISO style.
-- It runs only inside nl2sql's sandbox (sandbox::inspect), where every function a view or a policy
-- starts is judged like generated SQL's: nl2sql.column_stats() (sql/inspect_api.sql) and the schema
-- prompt call it there. Called directly, a view owner's functions would run with the caller's rights.
CREATE FUNCTION nl2sql._sample_columns(rel regclass, sample_rows integer)
RETURNS jsonb
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO, YMD'
SET intervalstyle = 'postgres'
AS $$
DECLARE
    col record;
    parts text[] := '{}';
    chunk text := '';
    cols text[] := '{}';
    n int := 0;
    q text;
    result jsonb;
BEGIN
    IF NOT nl2sql._inspecting() THEN
        RAISE EXCEPTION 'nl2sql._sample_columns() runs only inside nl2sql''s sandbox'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Call nl2sql.column_stats(), which reads the relation there.';
    END IF;
    IF sample_rows < 1 THEN
        RAISE EXCEPTION 'sample_rows must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR col IN
        SELECT a.attname, t.typcategory
        FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
        WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
          AND t.typcategory IN ('S', 'N', 'D', 'B')
          -- the column part of "may read" (sql/may_read.sql): the relation is one the schema
          -- prompt showed, and this runs in the sandbox, whose policy admits built-in functions
          AND has_column_privilege(rel, a.attnum, 'SELECT')
        ORDER BY a.attnum
    LOOP
        -- jsonb_build_object takes at most 100 arguments: build it in chunks of 40 columns.
        IF n > 0 AND n % 40 = 0 THEN
            parts := parts || format('jsonb_build_object(%s)', chunk);
            chunk := '';
        END IF;
        chunk := chunk || CASE WHEN chunk = '' THEN '' ELSE ', ' END || format(
            '%L, jsonb_build_object(''distinct'', count(DISTINCT %I), '
            '''values'', to_jsonb((array_agg(DISTINCT left(%I::text, 100)) FILTER (WHERE %I IS NOT NULL))[1:6]), '
            '''min'', %s, ''max'', %s)',
            col.attname, col.attname, col.attname, col.attname,
            CASE WHEN col.typcategory IN ('N', 'D') THEN format('min(%I)::text', col.attname) ELSE 'NULL::text' END,
            CASE WHEN col.typcategory IN ('N', 'D') THEN format('max(%I)::text', col.attname) ELSE 'NULL::text' END);
        cols := cols || format('%I', col.attname);
        n := n + 1;
    END LOOP;
    IF n = 0 THEN
        RETURN jsonb_build_object('rows', 0, 'complete', true, 'columns', '{}'::jsonb);
    END IF;
    parts := parts || format('jsonb_build_object(%s)', chunk);
    q := format('SELECT jsonb_build_object(''rows'', count(*), ''complete'', count(*) < %s, ''columns'', %s) '
                'FROM (SELECT %s FROM %s LIMIT %s) s',
                sample_rows, array_to_string(parts, ' || '), array_to_string(cols, ', '), rel, sample_rows);
    EXECUTE q INTO result;
    RETURN result;
END
$$;
