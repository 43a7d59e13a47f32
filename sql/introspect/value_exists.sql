-- Whether a value is still in a table, checked as the caller (so row-level security applies),
-- inside nl2sql's sandbox. The column is printed with its type's output function and compared
-- with pg_catalog's operator: no cast, domain CHECK or operator another role wrote is evaluated.
-- It runs only inside the sandbox (sandbox::inspect, src/pg/values/search.rs): called directly, a
-- view owner's functions would run with the caller's rights.
CREATE OR REPLACE FUNCTION nl2sql._value_exists(rel regclass, col name, val text)
RETURNS boolean
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found boolean;
BEGIN
    IF NOT nl2sql._inspecting() THEN
        RAISE EXCEPTION 'nl2sql._value_exists() runs only inside nl2sql''s sandbox'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE pg_catalog.format(''%%s'', %I) OPERATOR(pg_catalog.=) $1)', rel, col)
        INTO found USING val;
    RETURN found;
END
$$;
