-- Which called functions may resolve to a volatile function: $1 schemas (NULL: the search path),
-- $2 names, both as folded by the parser. Returns the 1-based positions of those calls.
SELECT DISTINCT f.ord::int4
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) WITH ORDINALITY AS f(schema, name, ord)
JOIN pg_catalog.pg_proc p ON p.proname = f.name
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.provolatile = 'v'
  AND (n.nspname = f.schema OR (f.schema IS NULL AND n.nspname = ANY (pg_catalog.current_schemas(true))))
ORDER BY 1
