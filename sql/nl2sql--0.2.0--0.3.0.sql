-- nl2sql 0.2.0 -> 0.3.0. One meaning of "may read" (sql/may_read.sql): the views and queries
-- that show a role something about a relation ask it, so the schema's USAGE counts everywhere.
-- PL/pgSQL warnings show names on one line (sql/render.sql). pg_dump keeps the value index
-- with its tables named as text (sql/values_saved.sql). The catalog's version is a row per
-- change that readers see once it commits, on a standby too (sql/ddl_log.sql; the event
-- triggers and sql/relationships.sql add them). The definitions below are those of the install
-- files named; tests/test_upgrade.py checks that an updated database matches a fresh one.
\echo Use "ALTER EXTENSION nl2sql UPDATE TO '0.3.0'" to load this file. \quit

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

CREATE FUNCTION nl2sql._one_line(t text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(pg_catalog.string_agg(
               CASE WHEN s.c OPERATOR(pg_catalog.~) E'[\\x01-\\x08\\x0a-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069]'
                    THEN pg_catalog.format(E'\\u{%s}', pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(s.c))), 4, '0'))
                    ELSE s.c END, '' ORDER BY s.o), '')
    FROM pg_catalog.regexp_split_to_table(t, '') WITH ORDINALITY AS s(c, o)
$$;

-- The helpers nl2sql's reads of user relations call run only inside its sandbox; the public
-- nl2sql.column_stats() reads there too (0.2.0's read the relation as the caller's own SELECT).
CREATE FUNCTION nl2sql."_inspecting"() RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_inspecting_wrapper';
CREATE FUNCTION nl2sql."_column_stats"(
	"rel" oid, /* pg_sys :: Oid */
	"sample_rows" INT /* i32 */
) RETURNS TEXT /* Option < String > */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_column_stats_wrapper';
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

CREATE TABLE nl2sql.ddl_log (v bigint PRIMARY KEY);
-- A vacuum that cut the emptied pages off would take an ACCESS EXCLUSIVE lock, which on a
-- standby cancels the sessions reading the version (they hold it for a whole nl2sql() call).
ALTER TABLE nl2sql.ddl_log SET (vacuum_truncate = off);
GRANT SELECT ON nl2sql.ddl_log TO PUBLIC;

-- One bump of the catalog's version (above), by the extension owner. Under read committed (read
-- uncommitted is the same in PostgreSQL) a new row, and older rows are deleted, skipping those
-- another transaction holds (a bump never waits). Under repeatable read and serializable, the
-- transaction's own row takes the new value: its address is remembered for the transaction in
-- a setting outside nl2sql's reserved prefix (hidden from SHOW ALL), with the transaction's id,
-- so a value any session could set (or one a role's or database's settings give) is used only
-- in the transaction that wrote it, and a transaction of many commands leaves one row, found
-- without reading other transactions' rows (a serializable transaction's read of those could
-- fail its commit). Repeatable read prunes older rows no transaction has touched once, at its
-- first bump (one another transaction deleted after this snapshot began would fail this one
-- with 40001: its xmax is set, so it is skipped, and the microseconds' race left is caught).
-- Serializable prunes the same way only once every 1,000 versions (counted by the sequences,
-- which take no lock a serializable transaction could conflict on): reading and deleting other
-- transactions' rows could fail a serializable commit with 40001, so it is done only as often
-- as keeps the log every reader's key reads whole short, whatever serializable DDL alone (or a
-- role looping GRANTs on a temporary table) adds; in between, its rows go with the next
-- read-committed or repeatable-read bump, or with the next read-committed nl2sql() call that
-- finds more than 1,000 (sql/queries/catalog_trim_ddl_log.sql: a role that rolls back each
-- transaction of hers that pruned cannot roll back a reader's). No subtransaction but that
-- one: a transaction of many DDL commands (a migration, a restore) takes none per command.
-- The version at which a serializable bump last pruned (not transactional: one rolled back
-- still counts, and the next comes 1,000 versions later).
CREATE SEQUENCE nl2sql.ddl_log_pruned;

CREATE FUNCTION nl2sql._ddl_changed()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mine bigint;
    me text;
    remembered text;
    own tid;
BEGIN
    mine := nextval('nl2sql.ddl_version');
    IF current_setting('transaction_isolation') IN ('read committed', 'read uncommitted') THEN
        INSERT INTO nl2sql.ddl_log (v) VALUES (mine);
        DELETE FROM nl2sql.ddl_log WHERE v IN (SELECT v FROM nl2sql.ddl_log WHERE v < mine FOR UPDATE SKIP LOCKED);
        RETURN;
    END IF;
    me := pg_current_xact_id()::text;
    -- '(block,offset)/transaction'
    remembered := current_setting('nl2sql_ddl_log.own_row', true);
    IF remembered ~ '^[(][0-9]{1,9},[0-9]{1,3}[)]/[0-9]{1,20}$' AND split_part(remembered, '/', 2) = me THEN
        UPDATE nl2sql.ddl_log SET v = mine WHERE ctid = split_part(remembered, '/', 1)::tid RETURNING ctid INTO own;
    END IF;
    IF own IS NOT NULL THEN
        PERFORM set_config('nl2sql_ddl_log.own_row', own::text || '/' || me, true);
        RETURN;
    END IF;
    INSERT INTO nl2sql.ddl_log (v) VALUES (mine) RETURNING ctid INTO own;
    PERFORM set_config('nl2sql_ddl_log.own_row', own::text || '/' || me, true);
    IF current_setting('transaction_isolation') = 'serializable' THEN
        IF mine - coalesce(pg_sequence_last_value('nl2sql.ddl_log_pruned'), 0) <= 1000 THEN
            RETURN;
        END IF;
        PERFORM setval('nl2sql.ddl_log_pruned', mine);
    END IF;
    BEGIN
        DELETE FROM nl2sql.ddl_log WHERE v IN (
            SELECT v FROM nl2sql.ddl_log WHERE v < mine AND xmax = '0'::xid FOR UPDATE SKIP LOCKED);
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- deleted by another since this snapshot began: the next bump prunes
    END;
END
$$;
REVOKE ALL ON FUNCTION nl2sql._ddl_changed() FROM PUBLIC;

-- A command that changed only the session's own temporary objects: only this session sees
-- them (a temporary table hides a permanent one of its name, which is then written with its
-- schema), so only its key changes, through a session setting read by the key query (rolled
-- back with the transaction, as a row would be). No row: a loop of temporary tables under
-- serializable, which prunes nothing, leaves none for every reader's key to read.
CREATE FUNCTION nl2sql._temp_ddl_changed()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('nl2sql_ddl_log.session', nextval('nl2sql.ddl_version')::text, false);
END
$$;
REVOKE ALL ON FUNCTION nl2sql._temp_ddl_changed() FROM PUBLIC;

-- sql/relationships.sql
CREATE OR REPLACE FUNCTION nl2sql._columns_readable(rel regclass, cols name[], types regtype[])
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

-- sql/relationships.sql: a change bumps the catalog's version (sql/ddl_log.sql)
CREATE OR REPLACE FUNCTION nl2sql._profile_save(tables oid[], rows_read bigint[], complete boolean[], changes bigint[], links json, keys json)
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

CREATE OR REPLACE FUNCTION nl2sql._relationship_decide(from_rel regclass, from_cols name[], to_rel regclass, to_cols name[], decision text, who name)
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

-- sql/examples.sql
CREATE OR REPLACE VIEW nl2sql.examples WITH (security_barrier) AS
SELECT s.id, s.question, s.question_masked, s.sql, CASE WHEN x.exposed THEN NULL ELSE s.thought END AS thought,
       s.hint, s.source, s.executed, s.enabled, s.relations, s.added_by::pg_catalog.regrole AS added_by,
       s.added_at, s.embedding, s.meaning
FROM nl2sql.example_store s
CROSS JOIN LATERAL (SELECT EXISTS (SELECT FROM pg_catalog.pg_class c
                                   WHERE c.oid OPERATOR(pg_catalog.=) ANY (s.sampled::pg_catalog.oid[])
                                     AND (c.relrowsecurity OR c.relkind OPERATOR(pg_catalog.<>) ALL ('{r,p,m}'::pg_catalog."char"[])))
                    AS exposed) x
WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                  WHERE NOT nl2sql._may_read_all((SELECT nl2sql._me()), r.oid))
  AND NOT (x.exposed AND s.source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[]));

-- sql/instructions.sql
CREATE OR REPLACE VIEW nl2sql.instructions WITH (security_barrier) AS
SELECT s.id, s.instruction, s.sql, s.relations, s.enabled, s.added_by::pg_catalog.regrole AS added_by, s.added_at,
       s.embedding, s.meaning
FROM nl2sql.instruction_store s
WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                  WHERE NOT nl2sql._may_read_all((SELECT nl2sql._me()), r.oid));

-- sql/values.sql: the name of a type of an owner the table's owner does not trust is not a
-- column's description (sql/may_read.sql)
DROP FUNCTION nl2sql._column_description(oid, int2);
CREATE FUNCTION nl2sql._column_description(rel oid, att int2)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- comments are cut (a sentence model reads 128 tokens; a huge one would be copied into
    -- every column's row); substr reads only the slice it keeps of a stored comment
    SELECT left(format('%s %s (%s)%s',
                       c.relname, a.attname,
                       CASE WHEN nl2sql._trusts(c.relowner, t.typowner) THEN format_type(a.atttypid, a.atttypmod)
                            WHEN t.typtype = 'd' AND nl2sql._trusts(c.relowner, b.typowner) THEN format_type(t.typbasetype, t.typtypmod)
                            ELSE 'USER-DEFINED' END,
                       coalesce(': ' || substr(col_description(c.oid, a.attnum), 1, 1000), '')
                       || coalesce(' (table: ' || substr(obj_description(c.oid, 'pg_class'), 1, 1000) || ')', '')),
                2000)
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
    JOIN pg_type t ON t.oid = a.atttypid
    LEFT JOIN pg_type b ON b.oid = t.typbasetype
    WHERE c.oid = rel AND a.attnum = att
$$;

-- Descriptions stored under 0.2.0 that named such a type are written again; a vector embedded
-- from one is embedded again by the next nl2sql.refresh_value_indexes() (the built-in embedder
-- reads names only).
UPDATE nl2sql.column_embeddings e
SET description = n.description,
    embedding = NULL,
    embedder = CASE WHEN e.embedding IS NULL THEN e.embedder ELSE 'pending' END
FROM (SELECT relid, attnum, nl2sql._column_description(relid, attnum) AS description
      FROM nl2sql.column_embeddings) n
WHERE n.relid = e.relid AND n.attnum = e.attnum
  AND n.description IS NOT NULL AND n.description IS DISTINCT FROM e.description;

-- sql/values.sql: PL/pgSQL warnings name tables and columns on one line (sql/render.sql)
CREATE OR REPLACE FUNCTION nl2sql._values_changed()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    n bigint;
BEGIN
    -- Only as one of the triggers nl2sql made, with its transition tables: a trigger someone
    -- else made on their own table (EXECUTE is revoked from PUBLIC, so only a superuser could)
    -- would let nl2sql_old and nl2sql_new name their temporary relations instead.
    IF TG_LEVEL <> 'STATEMENT' OR TG_WHEN <> 'AFTER' OR NOT EXISTS (
        SELECT 1 FROM pg_trigger t
        WHERE t.tgrelid = TG_RELID AND t.tgname = TG_NAME
          AND t.tgfoid = 'nl2sql._values_changed()'::regprocedure
          AND t.tgname IN ('nl2sql_values_insert', 'nl2sql_values_update', 'nl2sql_values_delete', 'nl2sql_values_truncate')
          AND (TG_OP NOT IN ('INSERT', 'UPDATE') OR t.tgnewtable = 'nl2sql_new')
          AND (TG_OP NOT IN ('DELETE', 'UPDATE') OR t.tgoldtable = 'nl2sql_old')) THEN
        RAISE WARNING 'nl2sql._values_changed() runs only as the triggers nl2sql.create_value_index() makes';
        RETURN NULL;
    END IF;
    -- The generation serving now: read without locking the row (DML never writes or locks
    -- value_index rows), which a build may hold; what this statement adds to a generation a
    -- build is replacing is copied to the new one before the switch, or, committed later,
    -- before the old one is dropped.
    FOR c IN
        -- The column named as committed (the system cache), as the transition tables name it:
        -- the statement's snapshot may show a name from before a rename, another column's now.
        SELECT i.id, i.generation,
               (pg_catalog.pg_identify_object_as_address('pg_catalog.pg_class'::pg_catalog.regclass,
                    i.relid::pg_catalog.oid, i.attnum)).object_names[3]::pg_catalog.name AS attname,
               i.embedder, i.max_length,
               greatest(2, least(50, i.value_count / 10))::int AS cap
        FROM nl2sql.value_index i
        JOIN pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
        WHERE i.relid = TG_RELID AND i.status IN ('ready', 'dirty')
          -- a restored index has no entries yet: its build reads the whole table
          AND nl2sql._entries(i.id, i.generation) IS NOT NULL
    LOOP
        BEGIN
            IF TG_OP IN ('DELETE', 'UPDATE') THEN
                EXECUTE format('SELECT count(DISTINCT pg_catalog.format(''%%s'', %I)) FROM nl2sql_old', c.attname) INTO n;
                -- Many values at once, or a long queue: re-check every result instead.
                IF n > 1000 OR (n > 0 AND (SELECT count(*) FROM (SELECT 1 FROM nl2sql.value_removals r
                                                                WHERE r.column_id = c.id LIMIT 10001) z) > 10000) THEN
                    INSERT INTO nl2sql.value_flags (column_id, flag) VALUES (c.id, 'dirty');
                ELSIF n > 0 THEN
                    EXECUTE format(
                        'INSERT INTO nl2sql.value_removals (column_id, value)
                         SELECT DISTINCT %1$s, v FROM (SELECT pg_catalog.format(''%%s'', %2$I) AS v FROM nl2sql_old
                                                       WHERE %2$I IS NOT NULL) x
                         WHERE length(v) BETWEEN 1 AND %3$s
                         ON CONFLICT DO NOTHING',
                        c.id, c.attname, c.max_length);
                END IF;
            END IF;
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                EXECUTE nl2sql._add_values_sql(c.id, c.generation, c.attname, c.embedder, c.max_length, c.cap);
            END IF;
            IF TG_OP = 'TRUNCATE' THEN
                -- DELETE, not TRUNCATE: no lock that would wait for readers of the generation.
                EXECUTE format('DELETE FROM nl2sql.%I', 'value_entries_' || c.id || '_' || c.generation);
                DELETE FROM nl2sql.value_queue WHERE column_id = c.id;
                DELETE FROM nl2sql.value_removals WHERE column_id = c.id;
                -- Under a snapshot older than a rebuild's switch, the generation emptied above
                -- is a retired one: searches re-check the column until the next refresh.
                INSERT INTO nl2sql.value_flags (column_id, flag) VALUES (c.id, 'dirty');
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'nl2sql could not update the value index of %.%: %', nl2sql._one_line(quote_ident(TG_TABLE_NAME)),
                nl2sql._one_line(quote_ident(c.attname)), nl2sql._one_line(SQLERRM)
                USING HINT = 'Rebuild it with SELECT nl2sql.refresh_value_indexes().';
            INSERT INTO nl2sql.value_flags (column_id, flag) VALUES (c.id, 'stale');
        END;
    END LOOP;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'nl2sql could not update the value indexes of %: %', nl2sql._one_line(quote_ident(TG_TABLE_NAME)), nl2sql._one_line(SQLERRM);
    RETURN NULL;
END
$$;

-- The trigger that points restored indexes at their columns reads only the rows loaded.
DROP TRIGGER value_index_loaded ON nl2sql.value_index;
DROP FUNCTION nl2sql._renumber_restored();
CREATE FUNCTION nl2sql._renumber_restored(ids int[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone record;
BEGIN
    FOR gone IN
        DELETE FROM nl2sql.value_index i
        WHERE (ids IS NULL OR i.id = ANY (ids)) AND nl2sql._entries(i.id, i.generation) IS NULL
          AND (NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = i.relid AND a.attname = i.attname
                                                       AND a.attnum > 0 AND NOT a.attisdropped)
               OR EXISTS (SELECT FROM nl2sql.value_index o
                          WHERE o.relid = i.relid AND o.attname = i.attname AND o.id <> i.id
                            AND (o.id < i.id OR nl2sql._entries(o.id, o.generation) IS NOT NULL)))
        RETURNING i.relid, i.attname
    LOOP
        RAISE WARNING 'nl2sql dropped the restored value index of %.%: no other column has its name',
            nl2sql._one_line(gone.relid::text), nl2sql._one_line(quote_ident(gone.attname))
            USING DETAIL = 'The table has no such column, or another value index already names it.';
    END LOOP;
    UPDATE nl2sql.value_index i SET attnum = m.parked
    FROM (SELECT x.id, (-100 - row_number() OVER (PARTITION BY x.relid ORDER BY x.id))::int2 AS parked
          FROM nl2sql.value_index x
          JOIN pg_attribute a ON a.attrelid = x.relid AND a.attname = x.attname AND a.attnum > 0 AND NOT a.attisdropped
          WHERE (ids IS NULL OR x.id = ANY (ids)) AND a.attnum <> x.attnum
            AND nl2sql._entries(x.id, x.generation) IS NULL) m
    WHERE i.id = m.id;
    UPDATE nl2sql.value_index i SET attnum = a.attnum
    FROM pg_attribute a
    WHERE i.attnum <= -100 AND a.attrelid = i.relid AND a.attname = i.attname AND a.attnum > 0 AND NOT a.attisdropped
      AND NOT EXISTS (SELECT FROM nl2sql.value_index o WHERE o.relid = i.relid AND o.attnum = a.attnum);
    -- a number another index holds (its name not yet updated): this one cannot be built
    FOR gone IN DELETE FROM nl2sql.value_index i WHERE i.attnum <= -100 RETURNING i.relid, i.attname
    LOOP
        RAISE WARNING 'nl2sql dropped the restored value index of %.%: another value index holds its column',
            nl2sql._one_line(gone.relid::text), nl2sql._one_line(quote_ident(gone.attname));
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION nl2sql._value_index_loaded()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM nl2sql._renumber_restored(ARRAY(SELECT l.id FROM loaded l));
    RETURN NULL;
END
$$;
CREATE TRIGGER value_index_loaded AFTER INSERT ON nl2sql.value_index
    REFERENCING NEW TABLE AS loaded FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._value_index_loaded();
REVOKE ALL ON FUNCTION nl2sql._renumber_restored(int[]) FROM PUBLIC;

-- pg_dump keeps nl2sql.value_index_saved instead of nl2sql.value_index (a table left out of a
-- dump no longer fails the COPY of every index). Leaving the extension and joining it again
-- takes value_index off the list of tables pg_dump keeps.
ALTER EXTENSION nl2sql DROP TABLE nl2sql.value_index;
ALTER EXTENSION nl2sql ADD TABLE nl2sql.value_index;
CREATE TABLE nl2sql.value_index_saved (
    id int PRIMARY KEY,
    relation text NOT NULL,
    attname name NOT NULL,
    embedder text NOT NULL,
    dims int NOT NULL,
    include_rls boolean NOT NULL,
    max_length int NOT NULL
);

-- The name a dump writes for a relation: always schema-qualified, whatever the search_path.
CREATE FUNCTION nl2sql._saved_name(rel oid)
RETURNS text
LANGUAGE sql
STABLE
PARALLEL SAFE
RETURN (SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
        FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
        WHERE c.oid OPERATOR(pg_catalog.=) rel AND c.relpersistence OPERATOR(pg_catalog.<>) 't');

-- Only rows that name their index's table and column as they are when the dump is taken: a
-- name left behind (a rename the trigger below could not follow, a DROP whose clean-up failed)
-- could name another table by the time of a restore.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.value_index_saved',
    'WHERE EXISTS (SELECT FROM nl2sql.value_index i WHERE i.id OPERATOR(pg_catalog.=) value_index_saved.id AND i.attname OPERATOR(pg_catalog.=) value_index_saved.attname AND nl2sql._saved_name(i.relid) OPERATOR(pg_catalog.=) value_index_saved.relation)');

-- Keeps value_index_saved in step with value_index, row by row. An index of a temporary table is
-- not kept (no restore could find the table).
CREATE FUNCTION nl2sql._value_index_saved_sync()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    name text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM nl2sql.value_index_saved WHERE id = OLD.id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.id <> NEW.id THEN
        DELETE FROM nl2sql.value_index_saved WHERE id = OLD.id;
    END IF;
    name := nl2sql._saved_name(NEW.relid);
    IF name IS NULL THEN
        DELETE FROM nl2sql.value_index_saved WHERE id = NEW.id;
        RETURN NULL;
    END IF;
    -- an unchanged row is left alone (not even locked: a build publishing its counts does not
    -- wait on a DDL command renaming another table)
    IF EXISTS (SELECT FROM nl2sql.value_index_saved s
               WHERE s.id = NEW.id AND s.relation = name AND s.attname = NEW.attname AND s.embedder = NEW.embedder
                 AND s.dims = NEW.dims AND s.include_rls = NEW.include_rls AND s.max_length = NEW.max_length) THEN
        RETURN NULL;
    END IF;
    INSERT INTO nl2sql.value_index_saved AS s (id, relation, attname, embedder, dims, include_rls, max_length)
    VALUES (NEW.id, name, NEW.attname, NEW.embedder, NEW.dims, NEW.include_rls, NEW.max_length)
    ON CONFLICT (id) DO UPDATE
    SET relation = EXCLUDED.relation, attname = EXCLUDED.attname, embedder = EXCLUDED.embedder,
        dims = EXCLUDED.dims, include_rls = EXCLUDED.include_rls, max_length = EXCLUDED.max_length;
    RETURN NULL;
END
$$;
CREATE TRIGGER value_index_saved_sync
    AFTER INSERT OR DELETE OR UPDATE OF id, relid, attname, embedder, dims, include_rls, max_length
    ON nl2sql.value_index
    FOR EACH ROW EXECUTE FUNCTION nl2sql._value_index_saved_sync();

-- After DDL: the names of renamed tables and schemas. An event trigger of its own, which fires
-- after nl2sql_ddl_end (event triggers fire in the order of their names) has renamed columns;
-- like it, never makes the DDL fail.
CREATE FUNCTION nl2sql._value_index_saved_names()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- only commands that can rename a table or move it to another schema
    IF NOT EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c
                   WHERE c.command_tag IN ('ALTER TABLE', 'ALTER SCHEMA', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE',
                                           -- PostgreSQL renames a table by ALTER INDEX too
                                           'ALTER INDEX')) THEN
        RETURN;
    END IF;
    UPDATE nl2sql.value_index_saved s SET relation = n.name
    FROM (SELECT i.id, nl2sql._saved_name(i.relid) AS name FROM nl2sql.value_index i) n
    WHERE s.id = n.id AND n.name IS NOT NULL AND s.relation <> n.name;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'nl2sql could not follow the names of this DDL command: %', nl2sql._one_line(SQLERRM);
END
$$;
CREATE EVENT TRIGGER nl2sql_saved_names ON ddl_command_end EXECUTE FUNCTION nl2sql._value_index_saved_names();

-- A restore: each saved row (of those in `ids`) whose index is not in value_index names a table
-- and a column of this database, or it is reported and left out. The table must be one an index
-- can be made on: a table, partitioned table, materialized view or foreign table, not temporary,
-- outside nl2sql's and the system's schemas.
CREATE FUNCTION nl2sql._value_index_saved_resolve(ids int[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    rel regclass;
    att int2;
    why text;
BEGIN
    FOR r IN SELECT s.* FROM nl2sql.value_index_saved s
             WHERE s.id = ANY (ids) AND NOT EXISTS (SELECT FROM nl2sql.value_index i WHERE i.id = s.id) ORDER BY s.id
    LOOP
        why := NULL;
        att := NULL;
        rel := to_regclass(r.relation);
        IF rel IS NULL OR NOT EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                      WHERE c.oid = rel AND c.relkind IN ('r', 'p', 'm', 'f') AND c.relpersistence <> 't'
                                        AND n.nspname NOT IN ('nl2sql', 'pg_catalog', 'information_schema')) THEN
            why := 'The dump names a table this database does not have.';
        ELSE
            SELECT a.attnum INTO att FROM pg_attribute a
            WHERE a.attrelid = rel AND a.attname = r.attname AND a.attnum > 0 AND NOT a.attisdropped;
            IF att IS NULL THEN
                why := 'The table has no column of that name.';
            ELSIF EXISTS (SELECT FROM nl2sql.value_index i WHERE i.relid = rel AND i.attnum = att) THEN
                why := 'Another value index already holds the column.';
            END IF;
        END IF;
        IF why IS NOT NULL THEN
            DELETE FROM nl2sql.value_index_saved WHERE id = r.id;
            RAISE WARNING 'nl2sql left out the restored value index of %.%',
                nl2sql._one_line(r.relation), nl2sql._one_line(quote_ident(r.attname))
                USING DETAIL = why,
                      HINT = 'Create it again with nl2sql.create_value_index() once the table is there.';
            CONTINUE;
        END IF;
        INSERT INTO nl2sql.value_index (id, relid, attnum, attname, embedder, dims, include_rls, max_length, status)
        VALUES (r.id, rel, att, r.attname, r.embedder, r.dims, r.include_rls, r.max_length, 'ready');
    END LOOP;
END
$$;

-- The rows pg_restore loads, and no others (the transition table).
CREATE FUNCTION nl2sql._value_index_saved_loaded()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM nl2sql._value_index_saved_resolve(ARRAY(SELECT l.id FROM loaded l));
    RETURN NULL;
END
$$;
CREATE TRIGGER value_index_saved_loaded AFTER INSERT ON nl2sql.value_index_saved
    REFERENCING NEW TABLE AS loaded FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._value_index_saved_loaded();

-- At each nl2sql.refresh_value_indexes(): the two tables agree again after a load that ran
-- without triggers (pg_restore --disable-triggers, session_replication_role = replica): an
-- index with no saved row gets one, a saved row with no index is resolved as a restore would,
-- and a saved row naming what its index no longer is takes the index's names.
CREATE FUNCTION nl2sql._value_index_saved_reconcile()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM nl2sql._value_index_saved_resolve(ARRAY(
        SELECT s.id FROM nl2sql.value_index_saved s WHERE NOT EXISTS (SELECT FROM nl2sql.value_index i WHERE i.id = s.id)));
    INSERT INTO nl2sql.value_index_saved AS s (id, relation, attname, embedder, dims, include_rls, max_length)
    SELECT i.id, nl2sql._saved_name(i.relid), i.attname, i.embedder, i.dims, i.include_rls, i.max_length
    FROM nl2sql.value_index i
    WHERE nl2sql._saved_name(i.relid) IS NOT NULL
    ON CONFLICT (id) DO UPDATE
    SET relation = EXCLUDED.relation, attname = EXCLUDED.attname, embedder = EXCLUDED.embedder,
        dims = EXCLUDED.dims, include_rls = EXCLUDED.include_rls, max_length = EXCLUDED.max_length
    WHERE (s.relation, s.attname, s.embedder, s.dims, s.include_rls, s.max_length)
          IS DISTINCT FROM (EXCLUDED.relation, EXCLUDED.attname, EXCLUDED.embedder, EXCLUDED.dims,
                            EXCLUDED.include_rls, EXCLUDED.max_length);
END
$$;

REVOKE ALL ON FUNCTION nl2sql._saved_name(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_saved_sync() FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_saved_names() FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_saved_resolve(int[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_saved_loaded() FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_saved_reconcile() FROM PUBLIC;
-- every index of a table that is not temporary gets its saved row
SELECT nl2sql._value_index_saved_reconcile();

CREATE OR REPLACE FUNCTION nl2sql._on_ddl_end()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cmd record;
BEGIN
    -- The catalog's version, outside the block below: a command it cannot follow still changes
    -- it. Temporary objects too (a temporary table hides a permanent one of its name, which is
    -- then written with its schema), for this session alone when they are all the command
    -- changed. Not a DROP, which reports nothing here and changes it in _on_sql_drop if it
    -- dropped anything (DROP OWNED revokes too).
    IF EXISTS (SELECT FROM pg_event_trigger_ddl_commands())
       AND NOT EXISTS (SELECT FROM pg_event_trigger_ddl_commands() WHERE schema_name IS DISTINCT FROM 'pg_temp') THEN
        PERFORM nl2sql._temp_ddl_changed();
    ELSIF EXISTS (SELECT FROM pg_event_trigger_ddl_commands()) OR tg_tag NOT LIKE 'DROP %' OR tg_tag = 'DROP OWNED' THEN
        PERFORM nl2sql._ddl_changed();
    END IF;
    BEGIN
        FOR cmd IN
            SELECT DISTINCT objid FROM pg_event_trigger_ddl_commands()
            WHERE classid = 'pg_class'::regclass
              AND object_type IN ('table', 'table column', 'view', 'materialized view', 'foreign table')
              AND (schema_name IS NULL OR (schema_name NOT IN ('nl2sql', 'pg_catalog', 'information_schema')
                                           AND schema_name !~ '^pg_(toast|temp)'))
        LOOP
            PERFORM nl2sql._refresh_column_embeddings(cmd.objid);
            -- a column that is no longer text, or a table that turned on row-level security
            UPDATE nl2sql.value_index i SET status = 'stale'
            FROM pg_attribute a, pg_type t, pg_class c
            WHERE i.relid = cmd.objid AND a.attrelid = i.relid AND a.attnum = i.attnum AND t.oid = a.atttypid
              AND c.oid = i.relid AND i.status <> 'stale'
              AND (t.typcategory NOT IN ('S', 'E') OR (c.relrowsecurity AND NOT i.include_rls));
        END LOOP;
        -- a renamed column (in a parent, its children's too): the name a dump writes is the one a
        -- restore looks for
        UPDATE nl2sql.value_index i SET attname = a.attname
        FROM pg_attribute a
        WHERE a.attrelid = i.relid AND a.attnum = i.attnum AND i.attname <> a.attname AND NOT a.attisdropped;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'nl2sql could not follow this DDL command: %', nl2sql._one_line(SQLERRM);
    END;
END
$$;

CREATE OR REPLACE FUNCTION nl2sql._on_sql_drop()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    obj record;
    dropped record;
    retired record;
BEGIN
    -- The examples and instructions of a dropped relation go with it (its OID may name another
    -- one later).
    -- Outside the block below, which swallows errors: a DROP whose examples cannot be deleted
    -- (a lock not granted in time, say) fails instead of leaving them behind.
    DELETE FROM nl2sql.example_store s
    USING pg_event_trigger_dropped_objects() o
    WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0
      AND (s.relations @> ARRAY[o.objid::regclass] OR s.sampled @> ARRAY[o.objid::regclass]);
    DELETE FROM nl2sql.instruction_store s
    USING pg_event_trigger_dropped_objects() o
    WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND s.relations @> ARRAY[o.objid::regclass];
    IF EXISTS (SELECT FROM pg_event_trigger_dropped_objects() WHERE NOT is_temporary) THEN
        PERFORM nl2sql._ddl_changed();
    ELSE
        PERFORM nl2sql._temp_ddl_changed();
    END IF;
    BEGIN
        FOR obj IN
            SELECT * FROM pg_event_trigger_dropped_objects()
            WHERE classid = 'pg_class'::regclass AND object_type IN ('table', 'table column', 'view', 'materialized view', 'foreign table')
              AND coalesce(schema_name, '') <> 'nl2sql'
        LOOP
            FOR dropped IN
                DELETE FROM nl2sql.value_index
                WHERE relid = obj.objid AND (obj.object_type <> 'table column' OR attnum = obj.objsubid)
                RETURNING id, generation
            LOOP
                PERFORM nl2sql._drop_entries(dropped.id, dropped.generation);
                FOR retired IN DELETE FROM nl2sql.value_generations g WHERE g.column_id = dropped.id RETURNING g.column_id, g.generation
                LOOP
                    PERFORM nl2sql._drop_entries(retired.column_id, retired.generation);
                END LOOP;
            END LOOP;
            DELETE FROM nl2sql.column_embeddings
            WHERE relid = obj.objid AND (obj.object_type <> 'table column' OR attnum = obj.objsubid);
            -- relationships and keys of the relation, or of the column (relationships.sql); a row
            -- another session holds (a decision not yet committed) is skipped, never waited for
            -- while this DROP holds its lock: the views hide it and the next profiling sweeps it
            DELETE FROM nl2sql.relationship_store WHERE ctid IN (
                SELECT ctid FROM nl2sql.relationship_store
                WHERE (from_relation::oid = obj.objid AND (obj.object_type <> 'table column' OR obj.address_names[3] = ANY (from_columns)))
                   OR (to_relation::oid = obj.objid AND (obj.object_type <> 'table column' OR obj.address_names[3] = ANY (to_columns)))
                FOR UPDATE SKIP LOCKED);
            DELETE FROM nl2sql.key_store WHERE ctid IN (
                SELECT ctid FROM nl2sql.key_store
                WHERE relation::oid = obj.objid AND (obj.object_type <> 'table column' OR obj.address_names[3] = ANY (columns))
                FOR UPDATE SKIP LOCKED);
            DELETE FROM nl2sql.profile_store WHERE ctid IN (
                SELECT ctid FROM nl2sql.profile_store WHERE relation::oid = obj.objid AND obj.object_type <> 'table column'
                FOR UPDATE SKIP LOCKED);
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'nl2sql could not follow this DROP: %', nl2sql._one_line(SQLERRM);
    END;
END
$$;

-- sql/values_api.sql
-- One row per indexed column the caller may SELECT (a security barrier: a function in a
-- caller's WHERE sees no other row).
CREATE OR REPLACE VIEW nl2sql.value_indexes WITH (security_barrier) AS
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
