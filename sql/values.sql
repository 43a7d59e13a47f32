-- The value index: distinct values of string columns (and their phrases, for split retrieval)
-- with a 256-bit signature (built-in embedder) or an endpoint's vector, searched through one
-- HNSW index per column. Also the schema embeddings: one per column, for column retrieval.
-- These tables belong to the extension owner; no other role can read them. nl2sql's
-- functions read them for a caller and return only what the caller may SELECT.
--
-- Each column's entries live in a table of their own, one per generation:
-- nl2sql.value_entries_<id>_<generation>. A rebuild loads a new generation beside the one
-- serving searches and switches value_index.generation to it; the old one is dropped later,
-- once no transaction that could still use it is left (value_generations). Locks are taken in
-- this order everywhere: value_index rows (builds, refreshes and drops only; triggers skip a
-- locked row), then the indexed table (builds and drops; DML holds it first and waits on no
-- value_index row), then a generation's table (readers with a lock timeout), then the rows of
-- value_removals, value_queue and value_flags (appended to, never waited on by DML).

-- The catalog's version: sql/ddl_log.sql (the sequence is here since 0.1.0).
CREATE SEQUENCE nl2sql.ddl_version;
GRANT SELECT ON SEQUENCE nl2sql.ddl_version TO PUBLIC;

-- Which columns are indexed is the DBA's configuration, like a CREATE INDEX. What pg_dump keeps
-- of it is nl2sql.value_index_saved (values_saved.sql): the table by name as text, so that a
-- dump without some table still restores the other indexes; these rows are rebuilt from it as
-- it loads. (A dump taken by 0.2.0 holds these rows themselves, relid a regclass and the column
-- by name; it still restores whole.) The entries are not dumped: a restored index has no
-- generation table until nl2sql.refresh_value_indexes() builds it, and searches name it
-- meanwhile.
CREATE TABLE nl2sql.value_index (
    id serial PRIMARY KEY,
    relid regclass NOT NULL,
    attnum int2 NOT NULL,
    embedder text NOT NULL,
    -- bits of the signatures in the HNSW index
    dims int NOT NULL,
    -- building: the first generation is being loaded; ready; stale: built by another embedder,
    -- or the column changed: rebuild it (DML marks columns dirty or stale in value_flags)
    status text NOT NULL DEFAULT 'building' CHECK (status IN ('building', 'ready', 'dirty', 'stale')),
    include_rls boolean NOT NULL DEFAULT false,
    value_count bigint NOT NULL DEFAULT 0,
    phrase_count bigint NOT NULL DEFAULT 0,
    skipped_values bigint NOT NULL DEFAULT 0,
    built_at timestamptz,
    refreshed_at timestamptz,
    build_ms double precision,
    UNIQUE (relid, attnum),
    -- longest value indexed (nl2sql.index_max_value_length at the build; the triggers use this,
    -- never the setting of the session that writes the table)
    max_length int NOT NULL DEFAULT 200,
    -- the generation serving searches: its entries are in nl2sql.value_entries_<id>_<generation>,
    -- a table like nl2sql.value_entries
    generation int NOT NULL DEFAULT 0,
    -- the column's name (kept current by the DDL trigger): how a restore finds the column again
    attname name NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.value_index_id_seq', '');

-- The table holding a generation of a column's entries; NULL when there is none (a restored
-- index, which the next nl2sql.refresh_value_indexes() builds).
CREATE FUNCTION nl2sql._entries(column_id int, generation int)
RETURNS regclass
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.to_regclass(pg_catalog.format('nl2sql.%I', 'value_entries_' || column_id || '_' || generation)) $$;

-- The shape of every generation's table (CREATE TABLE ... (LIKE nl2sql.value_entries)); it
-- holds no rows itself.
CREATE TABLE nl2sql.value_entries (
    value text NOT NULL,
    -- the value itself, or one of its phrases
    term text NOT NULL,
    -- nl2sql.fold(term): exact matches up to case and accents, through a btree index
    key text NOT NULL,
    sig bit varying NOT NULL,
    -- the endpoint's vector, for exact reranking (NULL with the built-in embedder)
    embedding vector
);

-- Generations a build replaced (or a drop retired), dropped once every snapshot sees them
-- retired (the transaction that retired them is older than any snapshot's xmin), after the
-- values DML added to them late are copied to the generation serving.
CREATE TABLE nl2sql.value_generations (
    column_id int NOT NULL,
    generation int NOT NULL,
    -- the transaction that retired it (pg_current_xact_id())
    retired_xid bigint NOT NULL,
    retired_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (column_id, generation)
);

-- Marks DML leaves on a column without waiting for a rebuild that holds its value_index row:
-- dirty (many values removed at once: searches re-check every result) and stale (a trigger
-- failed: rebuild it). A rebuild clears the marks its snapshot covers.
CREATE TABLE nl2sql.value_flags (
    id bigserial PRIMARY KEY,
    column_id int NOT NULL REFERENCES nl2sql.value_index (id) ON DELETE CASCADE,
    flag text NOT NULL CHECK (flag IN ('dirty', 'stale')),
    flagged_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX value_flags_column ON nl2sql.value_flags (column_id);

-- Values a DELETE or UPDATE took from a row: they leave the index once no row holds them, which
-- only a read of the table as its owner can tell (nl2sql.refresh_value_indexes). Until then a
-- search re-checks them against the table as the caller. The triggers never read the table.
CREATE TABLE nl2sql.value_removals (
    column_id int NOT NULL REFERENCES nl2sql.value_index (id) ON DELETE CASCADE,
    value text NOT NULL,
    PRIMARY KEY (column_id, value)
);

-- New values of columns indexed with an endpoint embedder wait here: DML never calls out.
CREATE TABLE nl2sql.value_queue (
    column_id int NOT NULL REFERENCES nl2sql.value_index (id) ON DELETE CASCADE,
    value text NOT NULL,
    PRIMARY KEY (column_id, value)
);

CREATE TABLE nl2sql.column_embeddings (
    relid oid NOT NULL,
    attnum int2 NOT NULL,
    description text NOT NULL,
    embedder text NOT NULL,
    -- the signature of "table column" (names are what a question's words match), for every
    -- embedder: column search finds columns by their names and, with vectors, by meaning
    sig bit(256),
    embedding vector,
    PRIMARY KEY (relid, attnum)
);


-- The statement that adds a statement's new values of one indexed column: built-in embedder:
-- the value and its phrases with their signatures; endpoint embedder: queued, since DML never
-- calls out. A phrase is added only while at most `cap` values hold it (counting this
-- statement's and the stored ones), as the build does. Values held again are no longer pending
-- removal. It reads the transition table nl2sql_new, so the trigger itself must run it. Values
-- are printed with pg_catalog.format('%s', …), i.e. their type's output function, never cast:
-- a cast to text may be a function the column type's owner wrote.
CREATE FUNCTION nl2sql._add_values_sql(column_id int, generation int, col name, embedder text, max_len int, cap int)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN CASE WHEN embedder = nl2sql.builtin_embedder() THEN format(
        'WITH s AS (SELECT DISTINCT x.v FROM (SELECT pg_catalog.format(''%%s'', %2$I) AS v FROM nl2sql_new
                                                   WHERE %2$I IS NOT NULL) x
                    WHERE length(x.v) BETWEEN 1 AND %3$s),
              kept AS (DELETE FROM nl2sql.value_removals r USING s WHERE r.column_id = %1$s AND r.value = s.v),
              fresh AS (SELECT s.v FROM s WHERE NOT EXISTS (
                    SELECT 1 FROM nl2sql.%5$I e WHERE e.key = nl2sql.fold(s.v) AND e.value = s.v)),
              ph AS (SELECT fresh.v, p FROM fresh, unnest(nl2sql.phrases(fresh.v)) p),
              ok AS (SELECT ph.p FROM ph GROUP BY ph.p
                     HAVING count(*) + (SELECT count(*) FROM (SELECT 1 FROM nl2sql.%5$I e
                                        WHERE e.key = ph.p LIMIT %4$s + 1) z) <= %4$s)
         INSERT INTO nl2sql.%5$I (value, term, key, sig)
         SELECT v, v, nl2sql.fold(v), nl2sql.signature(v)::bit(256) FROM fresh
         UNION ALL
         SELECT ph.v, ph.p, ph.p, nl2sql.signature(ph.p)::bit(256) FROM ph JOIN ok USING (p)',
        column_id, col, max_len, cap, 'value_entries_' || column_id || '_' || generation)
    ELSE format(
        'WITH s AS (SELECT DISTINCT pg_catalog.format(''%%s'', %2$I) AS v FROM nl2sql_new WHERE %2$I IS NOT NULL),
              kept AS (DELETE FROM nl2sql.value_removals r USING s WHERE r.column_id = %1$s AND r.value = s.v)
         INSERT INTO nl2sql.value_queue (column_id, value)
         SELECT %1$s, s.v FROM s
         WHERE length(s.v) BETWEEN 1 AND %3$s
           AND NOT EXISTS (SELECT 1 FROM nl2sql.%4$I e WHERE e.key = nl2sql.fold(s.v) AND e.value = s.v)
         ON CONFLICT DO NOTHING',
        column_id, col, max_len, 'value_entries_' || column_id || '_' || generation)
    END;
END
$$;

-- The statement-level triggers on indexed tables: new values are added; values a DELETE or
-- UPDATE took away wait in nl2sql.value_removals (after a bulk change of many distinct values
-- the column is marked dirty instead); searches re-check both against the table as the
-- caller. Whatever goes wrong, the user's statement goes on: the error becomes a WARNING and
-- the column is marked stale (a cancel still cancels).
-- SECURITY DEFINER, because DML by any role that may write the table must update the index's
-- tables, which only the extension owner can write. It evaluates nothing another role wrote:
-- it reads only the statement's transition tables, never the table itself (whose index
-- expressions and policies are the table owner's); values are printed with their type's output
-- function (pg_catalog.format('%s', …)), never cast (a cast to text may be the type owner's
-- function) and compared with pg_catalog's text operators; the search_path is pinned
-- (and functions and operators are never looked up in pg_temp).
CREATE FUNCTION nl2sql._values_changed()
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

-- nl2sql._column_description(): sql/column_description.sql

-- Recomputes the schema embeddings of one relation (all user relations when NULL) with the
-- built-in embedder; with an endpoint or the in-database model the rows whose description
-- changed are marked for nl2sql.refresh_value_indexes() to embed.
CREATE FUNCTION nl2sql._refresh_column_embeddings(rel oid DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
    builtin boolean;
BEGIN
    -- The library is loaded first: until it is, a setting of its is a placeholder any role may
    -- have set; loading it drops what a role had no right to set.
    PERFORM nl2sql.builtin_embedder();
    -- the built-in embedder stores signatures; an endpoint or the in-database model (column
    -- embedder minilm) stores vectors, computed by nl2sql.refresh_value_indexes()
    builtin := coalesce(current_setting('nl2sql.embedding_url', true), '') = ''
               AND coalesce(current_setting('nl2sql.column_embedder', true), 'values') = 'values';
    DELETE FROM nl2sql.column_embeddings e
    WHERE (rel IS NULL OR e.relid = rel)
      AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = e.relid AND a.attnum = e.attnum
                      AND NOT a.attisdropped);
    INSERT INTO nl2sql.column_embeddings AS e (relid, attnum, description, embedder, sig)
    SELECT c.oid, a.attnum, d.description,
           CASE WHEN builtin THEN nl2sql.builtin_embedder() ELSE 'pending' END,
           nl2sql.signature(c.relname || ' ' || a.attname)::bit(256)
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    CROSS JOIN LATERAL (SELECT nl2sql._column_description(c.oid, a.attnum) AS description) d
    WHERE (rel IS NULL OR c.oid = rel)
      AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
      AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'nl2sql') AND n.nspname !~ '^pg_(toast|temp_)'
      AND NOT EXISTS (SELECT 1 FROM pg_depend dep WHERE dep.classid = 'pg_class'::regclass
                      AND dep.objid = c.oid AND dep.deptype = 'e')
    ON CONFLICT (relid, attnum) DO UPDATE
        SET description = excluded.description, embedder = excluded.embedder, sig = excluded.sig,
            embedding = NULL
        -- a vector stays while its description does (a refresh embeds only what changed)
        WHERE e.description IS DISTINCT FROM excluded.description OR e.sig IS NULL
           OR (builtin AND e.embedder IS DISTINCT FROM excluded.embedder);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- DDL: keep the value index and the schema embeddings in step with renamed, altered and
-- dropped tables and columns. Never makes the DDL fail.
CREATE FUNCTION nl2sql._on_ddl_end()
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
    -- changed and are tables or their parts. Not a temporary type or domain, which a permanent
    -- table's column may use (its labels are shown to every session), nor a GRANT, whose
    -- objects are not reported. Not a DROP, which reports nothing here and changes it in
    -- _on_sql_drop if it dropped anything (DROP OWNED revokes too).
    IF EXISTS (SELECT FROM pg_event_trigger_ddl_commands())
       AND NOT EXISTS (SELECT FROM pg_event_trigger_ddl_commands()
                       WHERE schema_name IS DISTINCT FROM 'pg_temp'
                          OR object_type NOT IN ('table', 'table column', 'index', 'sequence', 'view',
                                                 'table constraint')) THEN
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

-- After a restore: a table's columns are numbered again without the dropped ones (and a
-- child's inherited ones in its parent's order), so each index that has no entries yet is
-- pointed at its column by name. One whose column is gone, or whose column another index of
-- the table already names, is dropped with a WARNING (nothing could build it). The rest move in
-- two steps, first to numbers no column has (below the system columns'), then to their own,
-- so no two ever hold one number. Runs for the rows just loaded (the trigger below fires on
-- pg_restore's COPY of a 0.2.0 dump, and on the rows values_saved.sql rebuilds) and for every
-- row at each nl2sql.refresh_value_indexes() (ids NULL); in between, and for every index that
-- has entries, the number is what counts.
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

CREATE FUNCTION nl2sql._value_index_loaded()
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

-- Drops a generation's table (a member of the extension, so it leaves the extension first).
CREATE FUNCTION nl2sql._drop_entries(column_id int, generation int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regclass := to_regclass(format('nl2sql.%I', 'value_entries_' || column_id || '_' || generation));
BEGIN
    IF t IS NOT NULL THEN
        EXECUTE format('ALTER EXTENSION nl2sql DROP TABLE %s', t);
        EXECUTE format('DROP TABLE %s', t);
    END IF;
END
$$;

CREATE FUNCTION nl2sql._on_sql_drop()
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

CREATE INDEX ON nl2sql.column_embeddings USING hnsw (sig bit_hamming_ops);

CREATE EVENT TRIGGER nl2sql_ddl_end ON ddl_command_end EXECUTE FUNCTION nl2sql._on_ddl_end();
CREATE EVENT TRIGGER nl2sql_sql_drop ON sql_drop EXECUTE FUNCTION nl2sql._on_sql_drop();

REVOKE ALL ON FUNCTION nl2sql._refresh_column_embeddings(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._values_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._drop_entries(int, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._renumber_restored(int[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_loaded() FROM PUBLIC;
