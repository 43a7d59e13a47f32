-- The value index's SQL surface: typed wrappers around the underscored Rust functions, the
-- schema embeddings of the tables that exist now, and who may call what.

CREATE FUNCTION nl2sql.create_value_index(rel regclass, col name DEFAULT NULL, include_rls boolean DEFAULT false)
RETURNS TABLE (relation regclass, column_name name, status text, "values" bigint, phrases bigint, skipped bigint, seconds double precision)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT relation::regclass, column_name::name, status, "values", phrases, skipped, seconds
      FROM nl2sql._create_value_index(rel::oid, col::text, include_rls) $$;
COMMENT ON FUNCTION nl2sql.create_value_index(regclass, name, boolean) IS
    'index the distinct values of the text columns of a table (or of one column), for nl2sql.search_values';

CREATE FUNCTION nl2sql.create_value_indexes(schemas name[] DEFAULT ARRAY['public']::name[], include_rls boolean DEFAULT false)
RETURNS TABLE (relation regclass, column_name name, status text, "values" bigint, phrases bigint, skipped bigint, seconds double precision)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT relation::regclass, column_name::name, status, "values", phrases, skipped, seconds
      FROM nl2sql._create_value_indexes(schemas::text[], include_rls) $$;
COMMENT ON FUNCTION nl2sql.create_value_indexes(name[], boolean) IS
    'index the text columns of every table in the given schemas (tables with row-level security are skipped)';

CREATE FUNCTION nl2sql.drop_value_index(rel regclass, col name DEFAULT NULL)
RETURNS SETOF name
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT c::name FROM nl2sql._drop_value_index(rel::oid, col::text) c $$;

CREATE FUNCTION nl2sql.refresh_value_indexes(rel regclass DEFAULT NULL)
RETURNS TABLE (relation regclass, column_name name, status text, "values" bigint, phrases bigint, skipped bigint, seconds double precision)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT relation::regclass, column_name::name, status, "values", phrases, skipped, seconds
      FROM nl2sql._refresh_value_indexes(rel::oid) $$;
COMMENT ON FUNCTION nl2sql.refresh_value_indexes(regclass) IS
    'rebuild stale and dirty value indexes (all of one table when given) and embed queued values';

CREATE FUNCTION nl2sql.search_values(query text, k integer DEFAULT 10)
RETURNS TABLE (relation regclass, column_name name, value text, score real)
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT relation::regclass, column_name::name, value, score FROM nl2sql._search_values(query, k) $$;
COMMENT ON FUNCTION nl2sql.search_values(text, integer) IS
    'stored values similar to the words of the query, from the columns the caller may read';

CREATE FUNCTION nl2sql.search_columns(query text, k integer DEFAULT 10)
RETURNS TABLE (relation regclass, column_name name, score real)
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT relation::regclass, column_name::name, score FROM nl2sql._search_columns(query, k) $$;
COMMENT ON FUNCTION nl2sql.search_columns(text, integer) IS
    'columns whose names and comments are similar to the words of the query, among those the caller may read';

-- One row per indexed column the caller may SELECT (a security barrier: a function in a
-- caller's WHERE sees no other row).
CREATE VIEW nl2sql.value_indexes WITH (security_barrier) AS
SELECT i.relid AS relation,
       a.attname AS column_name,
       -- restored: pg_restore brought the definition back without entries; the next
       -- nl2sql.refresh_value_indexes() builds it
       CASE WHEN e.entries IS NULL AND i.status IN ('ready', 'dirty') THEN 'restored'
            WHEN i.status IN ('ready', 'dirty') AND i.embedder <> nl2sql.current_embedder() THEN 'stale'
            WHEN i.status IN ('ready', 'dirty') AND f.stale THEN 'stale'
            WHEN i.status = 'ready' AND f.dirty THEN 'dirty'
            ELSE i.status END AS status,
       i.embedder,
       -- at the last build; the triggers add and remove values since
       i.value_count AS "values",
       i.phrase_count AS phrases,
       i.skipped_values,
       i.include_rls,
       i.built_at,
       i.refreshed_at,
       round(i.build_ms::numeric / 1000, 2) AS build_seconds,
       (SELECT greatest(c.reltuples, 0)::bigint FROM pg_catalog.pg_class c WHERE c.oid = e.entries) AS entries_estimate,
       pg_catalog.pg_total_relation_size(e.entries) AS size_bytes,
       (SELECT count(*) FROM nl2sql.value_queue q WHERE q.column_id = i.id) AS queued,
       -- values DML took away, re-checked by searches until nl2sql.refresh_value_indexes()
       (SELECT count(*) FROM nl2sql.value_removals r WHERE r.column_id = i.id) AS pending_removals,
       i.generation
FROM nl2sql.value_index i
CROSS JOIN LATERAL (SELECT nl2sql._entries(i.id, i.generation) AS entries) e
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
CROSS JOIN LATERAL (SELECT coalesce(bool_or(x.flag = 'dirty'), false) AS dirty, coalesce(bool_or(x.flag = 'stale'), false) AS stale
                    FROM nl2sql.value_flags x WHERE x.column_id = i.id) f
WHERE nl2sql._may_read_column((SELECT nl2sql._me()), i.relid, i.attnum);
GRANT SELECT ON nl2sql.value_indexes TO PUBLIC;

-- Building and dropping indexes is for the DBA: superusers, or roles granted EXECUTE (who must
-- also own the tables they index).
REVOKE ALL ON FUNCTION nl2sql.create_value_index(regclass, name, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql.create_value_indexes(name[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql.drop_value_index(regclass, name) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql.refresh_value_indexes(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._create_value_index(oid, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._create_value_indexes(text[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._drop_value_index(oid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._refresh_value_indexes(oid) FROM PUBLIC;

-- Schema embeddings of the tables that exist now; the DDL event triggers keep them current.
SELECT nl2sql._refresh_column_embeddings();
