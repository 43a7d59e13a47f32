-- Relationships nobody declared: keys and foreign keys profiling finds in the data
-- (nl2sql.profile_relationships()), and those a DBA confirms, rejects or adds by hand. The
-- prompts, join paths and alignment use them beside the declared ones. The stores belong to
-- the extension owner; every role reads them through views that show only relationships
-- between columns it may read. Relations are regclass and columns names, so pg_dump writes
-- names and a restore points at the same tables again.

CREATE TABLE nl2sql.relationship_store (
    id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    from_relation regclass NOT NULL,
    from_columns name[] NOT NULL,
    to_relation regclass NOT NULL,
    to_columns name[] NOT NULL,
    -- the columns' types when it was found or decided: a column dropped and added again under
    -- the same name with another type does not bring it back
    from_types regtype[] NOT NULL,
    to_types regtype[] NOT NULL,
    -- inferred: profiling found it (and replaces it on the next run); confirmed, rejected: a
    -- DBA's decision, which profiling never changes
    source text NOT NULL CHECK (source IN ('inferred', 'confirmed', 'rejected')),
    -- how sure profiling was (the names' agreement times the share of values found), 0 to 1
    score real,
    evidence text,
    profiled_at timestamptz,
    -- the role that decided, by name (a restore into another cluster may lack it)
    decided_by name,
    decided_at timestamptz,
    UNIQUE (from_relation, from_columns, to_relation, to_columns),
    CHECK (pg_catalog.cardinality(from_columns) BETWEEN 1 AND 4
           AND pg_catalog.cardinality(from_columns) OPERATOR(pg_catalog.=) pg_catalog.cardinality(to_columns))
);
CREATE INDEX relationship_store_to ON nl2sql.relationship_store (to_relation);

-- Keys profiling found in tables with no primary key declared.
CREATE TABLE nl2sql.key_store (
    relation regclass NOT NULL,
    columns name[] NOT NULL,
    types regtype[] NOT NULL,
    score real,
    evidence text,
    profiled_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (relation, columns)
);

-- What profiling read of each table, and the table's change counter then: a refresh profiles
-- again once a table changed.
CREATE TABLE nl2sql.profile_store (
    relation regclass PRIMARY KEY,
    rows_read bigint NOT NULL,
    complete boolean NOT NULL,
    changes bigint,
    profiled_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- pg_dump keeps the DBA's decisions and what profiling found.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.relationship_store', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.relationship_store_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.key_store', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.profile_store', '');

-- Whether the current role may read every one of `cols` of `rel` (sql/may_read.sql), each of the
-- type `types` gives at the same place (NULL: any type).
CREATE FUNCTION nl2sql._columns_readable(rel regclass, cols name[], types regtype[])
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT nl2sql._may_read((SELECT nl2sql._me()), rel::pg_catalog.oid)
       AND (SELECT pg_catalog.count(*) FROM ROWS FROM (pg_catalog.unnest(cols), pg_catalog.unnest(types)) AS u(n, t)
            JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) rel::pg_catalog.oid AND a.attname OPERATOR(pg_catalog.=) u.n
            WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
              AND (u.t IS NULL OR a.atttypid OPERATOR(pg_catalog.=) u.t::pg_catalog.oid)
              AND nl2sql._may_read_column((SELECT nl2sql._me()), a.attrelid, a.attnum))
           OPERATOR(pg_catalog.=) pg_catalog.cardinality(cols)
$$;

-- Whether row-level security hides rows of `rel` from the current role: what profiling
-- counted over all of them (its evidence and score) is not shown then, as pg_stats does not.
CREATE FUNCTION nl2sql._rows_hidden(rel regclass)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel::pg_catalog.oid)
                THEN pg_catalog.row_security_active(rel::pg_catalog.oid) ELSE true END
$$;

-- Every relationship between columns the current role may read: declared foreign keys (one
-- row per constraint) and what nl2sql.relationship_store holds.
CREATE VIEW nl2sql.relationships WITH (security_barrier) AS
SELECT k.conrelid::pg_catalog.regclass AS from_relation, k.from_columns,
       k.confrelid::pg_catalog.regclass AS to_relation, k.to_columns,
       'declared'::text AS source, NULL::real AS score,
       pg_catalog.format('constraint %I', k.conname) AS evidence,
       NULL::timestamptz AS profiled_at, NULL::name AS decided_by, NULL::timestamptz AS decided_at
FROM (SELECT con.conrelid, con.confrelid, con.conname,
             ARRAY(SELECT a.attname FROM pg_catalog.unnest(con.conkey) WITH ORDINALITY u(n, o)
                   JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) con.conrelid AND a.attnum OPERATOR(pg_catalog.=) u.n
                   ORDER BY u.o) AS from_columns,
             ARRAY(SELECT a.attname FROM pg_catalog.unnest(con.confkey) WITH ORDINALITY u(n, o)
                   JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) con.confrelid AND a.attnum OPERATOR(pg_catalog.=) u.n
                   ORDER BY u.o) AS to_columns
      FROM pg_catalog.pg_constraint con
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.conrelid
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
      WHERE con.contype OPERATOR(pg_catalog.=) 'f'
        AND NOT n.nspname OPERATOR(pg_catalog.=) ANY ('{pg_catalog,information_schema,nl2sql}'::pg_catalog.name[])) k
WHERE nl2sql._columns_readable(k.conrelid::pg_catalog.regclass, k.from_columns, NULL)
  AND nl2sql._columns_readable(k.confrelid::pg_catalog.regclass, k.to_columns, NULL)
UNION ALL
SELECT s.from_relation, s.from_columns, s.to_relation, s.to_columns, s.source,
       CASE WHEN h.hidden THEN NULL ELSE s.score END, CASE WHEN h.hidden THEN NULL ELSE s.evidence END,
       s.profiled_at, s.decided_by, s.decided_at
FROM nl2sql.relationship_store s
CROSS JOIN LATERAL (SELECT nl2sql._rows_hidden(s.from_relation) OR nl2sql._rows_hidden(s.to_relation) AS hidden) h
WHERE nl2sql._columns_readable(s.from_relation, s.from_columns, s.from_types)
  AND nl2sql._columns_readable(s.to_relation, s.to_columns, s.to_types);
GRANT SELECT ON nl2sql.relationships TO PUBLIC;
COMMENT ON VIEW nl2sql.relationships IS
    'relationships between columns the current role may read: declared foreign keys, and those profiling inferred or a DBA confirmed or rejected';

-- Keys of the relations the current role may read: declared primary keys and unique
-- constraints, and what profiling found in tables with no primary key.
CREATE VIEW nl2sql.candidate_keys WITH (security_barrier) AS
SELECT k.conrelid::pg_catalog.regclass AS relation, k.columns,
       CASE k.contype WHEN 'p' THEN 'primary key' ELSE 'unique' END AS source,
       NULL::real AS score, pg_catalog.format('constraint %I', k.conname) AS evidence, NULL::timestamptz AS profiled_at
FROM (SELECT con.conrelid, con.contype, con.conname,
             ARRAY(SELECT a.attname FROM pg_catalog.unnest(con.conkey) WITH ORDINALITY u(n, o)
                   JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) con.conrelid AND a.attnum OPERATOR(pg_catalog.=) u.n
                   ORDER BY u.o) AS columns
      FROM pg_catalog.pg_constraint con
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.conrelid
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
      WHERE con.contype OPERATOR(pg_catalog.=) ANY ('{p,u}'::pg_catalog."char"[])
        AND NOT n.nspname OPERATOR(pg_catalog.=) ANY ('{pg_catalog,information_schema,nl2sql}'::pg_catalog.name[])
        AND n.nspname::pg_catalog.text OPERATOR(pg_catalog.!~) '^pg_(toast|temp_)'::pg_catalog.text) k
WHERE nl2sql._columns_readable(k.conrelid::pg_catalog.regclass, k.columns, NULL)
UNION ALL
SELECT s.relation, s.columns, 'inferred',
       CASE WHEN nl2sql._rows_hidden(s.relation) THEN NULL ELSE s.score END,
       CASE WHEN nl2sql._rows_hidden(s.relation) THEN NULL ELSE s.evidence END, s.profiled_at
FROM nl2sql.key_store s
WHERE nl2sql._columns_readable(s.relation, s.columns, s.types);
GRANT SELECT ON nl2sql.candidate_keys TO PUBLIC;
COMMENT ON VIEW nl2sql.candidate_keys IS
    'keys of relations the current role may read: declared ones, and those profiling found in tables with no primary key';

-- What profiling reads of one table, as its owner (src/pg/relationships): among at most `max_rows`
-- rows (a block sample of `percent` of a larger table, the same sample every time), each
-- column's NULLs, distinct values, and the first `keep` of those values no longer than 64
-- characters (a key is short), printed by the type's output function (never cast: a cast may
-- be a function another role wrote). Only columns of built-in types of tables without
-- row-level security are asked for, and the caller reads under a scope where none of the
-- owner's functions may run (an index expression the planner folds fails the read instead).
-- JSON: {"rows": n, "columns": [[nulls, distinct, values], ...]}.
CREATE FUNCTION nl2sql._profile_table(rel regclass, cols name[], max_rows int, percent float8, keep int)
RETURNS json
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result json;
BEGIN
    -- One row a column in VALUES, not one argument a column: a function takes at most 100.
    EXECUTE format(
        'WITH s AS MATERIALIZED (SELECT %s FROM %s %s LIMIT %s)
         SELECT json_build_object(''rows'', (SELECT count(*) FROM s),
                                  ''columns'', (SELECT json_agg(v.x ORDER BY v.i) FROM (VALUES %s) AS v(i, x)))',
        (SELECT string_agg(format('%I', c), ', ') FROM unnest(cols) c),
        rel,
        CASE WHEN percent < 100 THEN format('TABLESAMPLE SYSTEM (%s) REPEATABLE (0)', percent) ELSE '' END,
        max_rows,
        (SELECT string_agg(format(
             '(%3$s, (SELECT json_build_array(count(*) - count(%1$I), count(DISTINCT %1$I),
                      (SELECT array_agg(d.v) FROM (SELECT DISTINCT format(''%%s'', %1$I) AS v FROM s
                                                   WHERE %1$I IS NOT NULL AND length(format(''%%s'', %1$I)) <= 64
                                                   ORDER BY 1 LIMIT %2$s) d)) FROM s))',
             c, keep, n), ', ')
         FROM unnest(cols) WITH ORDINALITY AS u(c, n)))
    INTO result;
    RETURN result;
END
$$;

-- For each pair of columns (a[i], b[i]) of one table, the distinct pairs without NULLs among
-- the same rows as nl2sql._profile_table reads (of those columns only).
CREATE FUNCTION nl2sql._profile_pairs(rel regclass, a name[], b name[], max_rows int, percent float8)
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result bigint[];
BEGIN
    EXECUTE format(
        'WITH s AS MATERIALIZED (SELECT %s FROM %s %s LIMIT %s) SELECT ARRAY[%s]::bigint[]',
        (SELECT string_agg(DISTINCT format('%I', c), ', ') FROM unnest(a || b) c),
        rel,
        CASE WHEN percent < 100 THEN format('TABLESAMPLE SYSTEM (%s) REPEATABLE (0)', percent) ELSE '' END,
        max_rows,
        (SELECT string_agg(format('(SELECT count(*) FROM (SELECT DISTINCT %1$I, %2$I FROM s WHERE %1$I IS NOT NULL AND %2$I IS NOT NULL) d)', x, y), ', ')
         FROM unnest(a, b) AS p(x, y)))
    INTO result;
    RETURN result;
END
$$;

-- How many of `vals` some row of rel.col holds, compared as the column's own built-in type
-- (`type_name`: int2, int4, int8, numeric, text, varchar, bpchar or uuid), so that an index on
-- the column serves, and the values are a quoted constant, not a parameter: without an index,
-- PostgreSQL then hashes them and reads the table once.
CREATE FUNCTION nl2sql._profile_probe(rel regclass, col name, vals text[], type_name name)
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found bigint;
BEGIN
    IF type_name NOT IN ('int2', 'int4', 'int8', 'numeric', 'text', 'varchar', 'bpchar', 'uuid') THEN
        RAISE EXCEPTION 'nl2sql._profile_probe: unexpected type %', type_name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('SELECT count(DISTINCT %1$I) FROM %2$s WHERE %1$I = ANY (%3$L::pg_catalog.%4$I[])', col, rel, vals::text, type_name)
        INTO found;
    RETURN found;
END
$$;

-- Keeps what one profiling run found (src/pg/relationships, as the extension owner): for the tables
-- it read, the inferred relationships among them and their keys are replaced; confirmed and
-- rejected relationships keep their source (their evidence and score are brought up to date).
-- Rows of relations that no longer exist go (a temporary table leaves no drop to follow).
-- `links` and `keys`: JSON arrays of {from, from_column, from_type, to, to_column, to_type,
-- score, evidence} and {relation, columns, types, score, evidence}; types by OID.
CREATE FUNCTION nl2sql._profile_save(tables oid[], rows_read bigint[], complete boolean[], changes bigint[], links json, keys json)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM nl2sql.relationship_store s
    WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.from_relation::oid)
       OR NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.to_relation::oid);
    DELETE FROM nl2sql.key_store s WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.relation::oid);
    DELETE FROM nl2sql.profile_store s WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.relation::oid);
    DELETE FROM nl2sql.relationship_store
    WHERE source = 'inferred' AND from_relation::oid = ANY (tables) AND to_relation::oid = ANY (tables);
    INSERT INTO nl2sql.relationship_store AS s (from_relation, from_columns, to_relation, to_columns, from_types, to_types,
                                                source, score, evidence, profiled_at)
    SELECT (l->>'from')::oid::regclass, ARRAY[(l->>'from_column')::name], (l->>'to')::oid::regclass, ARRAY[(l->>'to_column')::name],
           ARRAY[(l->>'from_type')::oid::regtype], ARRAY[(l->>'to_type')::oid::regtype],
           'inferred', (l->>'score')::real, l->>'evidence', now()
    FROM json_array_elements(links) l
    ON CONFLICT (from_relation, from_columns, to_relation, to_columns) DO UPDATE
        SET score = excluded.score, evidence = excluded.evidence, profiled_at = excluded.profiled_at,
            from_types = excluded.from_types, to_types = excluded.to_types;
    DELETE FROM nl2sql.key_store WHERE relation::oid = ANY (tables);
    INSERT INTO nl2sql.key_store (relation, columns, types, score, evidence)
    SELECT (k->>'relation')::oid::regclass, ARRAY(SELECT json_array_elements_text(k->'columns'))::name[],
           ARRAY(SELECT t::oid::regtype FROM json_array_elements_text(k->'types') t), (k->>'score')::real, k->>'evidence'
    FROM json_array_elements(keys) k
    ON CONFLICT (relation, columns) DO NOTHING;
    INSERT INTO nl2sql.profile_store AS p (relation, rows_read, complete, changes, profiled_at)
    SELECT t::regclass, r, c, ch, now() FROM unnest(tables, rows_read, complete, changes) AS u(t, r, c, ch)
    ON CONFLICT (relation) DO UPDATE
        SET rows_read = excluded.rows_read, complete = excluded.complete, changes = excluded.changes, profiled_at = excluded.profiled_at;
    -- cached schemas of every session are keyed by this
    PERFORM nl2sql._ddl_changed();
END
$$;

-- A DBA's decision on one relationship (src/pg/relationships, as the extension owner, once the
-- caller's right to make it is checked): confirm (adds it when profiling did not find it),
-- reject (kept rejected across profiling runs), or forget (the decision goes; profiling may
-- infer it again). `who`: the deciding role's name.
CREATE FUNCTION nl2sql._relationship_decide(from_rel regclass, from_cols name[], to_rel regclass, to_cols name[], decision text, who name)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    types regtype[];
    ref_types regtype[];
BEGIN
    IF decision NOT IN ('confirmed', 'rejected', 'forget') THEN
        RAISE EXCEPTION 'nl2sql._relationship_decide: unexpected decision %', decision USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decision = 'forget' THEN
        DELETE FROM nl2sql.relationship_store
        WHERE from_relation = from_rel AND from_columns = from_cols AND to_relation = to_rel AND to_columns = to_cols;
    ELSE
        types := ARRAY(SELECT a.atttypid::regtype FROM unnest(from_cols) WITH ORDINALITY u(n, o)
                       JOIN pg_attribute a ON a.attrelid = from_rel AND a.attname = u.n ORDER BY u.o);
        ref_types := ARRAY(SELECT a.atttypid::regtype FROM unnest(to_cols) WITH ORDINALITY u(n, o)
                           JOIN pg_attribute a ON a.attrelid = to_rel AND a.attname = u.n ORDER BY u.o);
        INSERT INTO nl2sql.relationship_store AS s (from_relation, from_columns, to_relation, to_columns, from_types, to_types,
                                                    source, evidence, decided_by, decided_at)
        VALUES (from_rel, from_cols, to_rel, to_cols, types, ref_types, decision, 'added by hand', who, now())
        ON CONFLICT (from_relation, from_columns, to_relation, to_columns) DO UPDATE
            SET source = excluded.source, decided_by = excluded.decided_by, decided_at = excluded.decided_at,
                from_types = excluded.from_types, to_types = excluded.to_types;
    END IF;
    PERFORM nl2sql._ddl_changed();
END
$$;

REVOKE ALL ON FUNCTION nl2sql._profile_save(oid[], bigint[], boolean[], bigint[], json, json) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._relationship_decide(regclass, name[], regclass, name[], text, name) FROM PUBLIC;
