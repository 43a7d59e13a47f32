-- nl2sql 0.1.0 -> 0.2.0. Security (issue 9): the value index's triggers no longer cast values
-- (a cast may be the type owner's function; a cast to a domain runs its CHECK), nor read the
-- indexed table, nor run as any trigger but nl2sql's own; values DML took away wait in
-- nl2sql.value_removals. Live traffic (issue 10): each column's entries live in a table per
-- generation (nl2sql.value_entries_<id>_<generation>), built beside the one serving and switched
-- to; DML leaves marks in nl2sql.value_flags instead of waiting for a build. The 0.1.0 partitions
-- become generation 0. The definitions below are those of sql/values.sql and sql/values_api.sql;
-- tests/test_upgrade.py checks that an upgraded database matches a fresh one.
\echo Use "ALTER EXTENSION nl2sql UPDATE TO '0.2.0'" to load this file. \quit

-- longest value indexed (nl2sql.index_max_value_length at the build; the triggers use this,
-- never the setting of the session that writes the table)
ALTER TABLE nl2sql.value_index ADD COLUMN max_length int NOT NULL DEFAULT 200;
-- the generation serving searches: its entries are in nl2sql.value_entries_<id>_<generation>,
-- a table like nl2sql.value_entries
ALTER TABLE nl2sql.value_index ADD COLUMN generation int NOT NULL DEFAULT 0;
-- pg_dump keeps which columns are indexed: the table by name (an OID does not survive a
-- restore) and the column's name (a restore numbers columns again without the dropped ones)
-- (the view reads relid: it stands aside, with 0.1.0's columns, while the type changes, so the
-- views and grants that depend on it are kept; its definition is replaced below)
CREATE OR REPLACE VIEW nl2sql.value_indexes AS
SELECT NULL::regclass AS relation, NULL::name AS column_name, NULL::text AS status, NULL::text AS embedder,
       NULL::bigint AS "values", NULL::bigint AS phrases, NULL::bigint AS skipped_values, NULL::boolean AS include_rls,
       NULL::timestamptz AS built_at, NULL::timestamptz AS refreshed_at, NULL::numeric AS build_seconds,
       NULL::bigint AS entries_estimate, NULL::bigint AS size_bytes, NULL::bigint AS queued
WHERE false;
ALTER TABLE nl2sql.value_index ALTER COLUMN relid TYPE regclass;
ALTER TABLE nl2sql.value_index ADD COLUMN attname name;
UPDATE nl2sql.value_index i SET attname = a.attname
FROM pg_catalog.pg_attribute a WHERE a.attrelid = i.relid AND a.attnum = i.attnum AND NOT a.attisdropped;
DELETE FROM nl2sql.value_index WHERE attname IS NULL;
ALTER TABLE nl2sql.value_index ALTER COLUMN attname SET NOT NULL;
-- Not the rows of a temporary table or of one dropped meanwhile: a restore could not resolve
-- their names (and a dangling OID would name whatever table gets it in the new cluster).
SELECT pg_catalog.pg_extension_config_dump('nl2sql.value_index',
    'WHERE EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) relid AND c.relpersistence OPERATOR(pg_catalog.<>) ''t'')');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.value_index_id_seq', '');

-- The table holding a generation of a column's entries; NULL when there is none (a restored
-- index, which the next nl2sql.refresh_value_indexes() builds).
CREATE FUNCTION nl2sql._entries(column_id int, generation int)
RETURNS regclass
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.to_regclass(pg_catalog.format('nl2sql.%I', 'value_entries_' || column_id || '_' || generation)) $$;

CREATE FUNCTION nl2sql."builtin_embedder"() RETURNS TEXT
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'builtin_embedder_wrapper';

-- Each column's partition becomes its generation 0, a table of its own and a member of the
-- extension; the partitioned parent gives way to the template every generation is made like.
DO $$
DECLARE
    i record;
BEGIN
    FOR i IN SELECT id FROM nl2sql.value_index ORDER BY id LOOP
        IF to_regclass(format('nl2sql.%I', 'value_entries_' || i.id)) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE nl2sql.value_entries DETACH PARTITION nl2sql.%I', 'value_entries_' || i.id);
            EXECUTE format('ALTER TABLE nl2sql.%I RENAME TO %I', 'value_entries_' || i.id, 'value_entries_' || i.id || '_0');
            EXECUTE format('ALTER TABLE nl2sql.%I DROP COLUMN column_id', 'value_entries_' || i.id || '_0');
            EXECUTE format('ALTER EXTENSION nl2sql ADD TABLE nl2sql.%I', 'value_entries_' || i.id || '_0');
            -- The byte-ordered keys and reversed keys 0.2.0 builds read a typo's neighbours through.
            EXECUTE format('CREATE INDEX ON nl2sql.%I (key COLLATE "C")', 'value_entries_' || i.id || '_0');
            EXECUTE format('CREATE INDEX ON nl2sql.%I ((pg_catalog.reverse(key)) COLLATE "C")', 'value_entries_' || i.id || '_0');
        ELSE
            UPDATE nl2sql.value_index SET status = 'stale' WHERE id = i.id;
        END IF;
    END LOOP;
END
$$;
DROP TABLE nl2sql.value_entries;

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

-- Whether a value is still in a table, checked as the caller (so row-level security applies),
-- inside nl2sql's sandbox. The column is printed with its type's output function and compared
-- with pg_catalog's operator: no cast, domain CHECK or operator another role wrote is evaluated.
CREATE OR REPLACE FUNCTION nl2sql._value_exists(rel regclass, col name, val text)
RETURNS boolean
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE pg_catalog.format(''%%s'', %I) OPERATOR(pg_catalog.=) $1)', rel, col)
        INTO found USING val;
    RETURN found;
END
$$;

DROP FUNCTION nl2sql._add_values_sql(int, name, text, int, int);

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
        SELECT i.id, i.generation, a.attname, i.embedder, i.max_length,
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
            RAISE WARNING 'nl2sql could not update the value index of %.%: %', TG_TABLE_NAME, c.attname, SQLERRM
                USING HINT = 'Rebuild it with SELECT nl2sql.refresh_value_indexes().';
            INSERT INTO nl2sql.value_flags (column_id, flag) VALUES (c.id, 'stale');
        END;
    END LOOP;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'nl2sql could not update the value indexes of %: %', TG_TABLE_NAME, SQLERRM;
    RETURN NULL;
END
$$;

-- The text a column is embedded from: "Y X (T): C (table: D)", table and column names, type and
-- comments, without words every description would share (they dilute a sentence model's match).
CREATE OR REPLACE FUNCTION nl2sql._column_description(rel oid, att int2)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- comments are cut (a sentence model reads 128 tokens; a huge one would be copied into
    -- every column's row); substr reads only the slice it keeps of a stored comment
    SELECT left(format('%s %s (%s)%s',
                       c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                       coalesce(': ' || substr(col_description(c.oid, a.attnum), 1, 1000), '')
                       || coalesce(' (table: ' || substr(obj_description(c.oid, 'pg_class'), 1, 1000) || ')', '')),
                2000)
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
    WHERE c.oid = rel AND a.attnum = att
$$;

-- Recomputes the schema embeddings of one relation (all user relations when NULL) with the
-- built-in embedder; with an endpoint or the in-database model the rows whose description
-- changed are marked for nl2sql.refresh_value_indexes() to embed.
CREATE OR REPLACE FUNCTION nl2sql._refresh_column_embeddings(rel oid DEFAULT NULL)
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

-- Instructions: curators' definitions and rules, shown beside the questions they concern.
-- Created before the sql_drop trigger below reads their table (the DROPs further down fire it).
CREATE TABLE nl2sql.instruction_store (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instruction text NOT NULL,
    -- the SQL fragment the instruction stands for, shown with it (never run)
    sql text,
    -- the relations it concerns: a role is shown it only while it may SELECT from all of them
    -- (regclass: pg_dump writes names, so a restore points at the same tables again)
    relations regclass[] NOT NULL DEFAULT '{}',
    enabled boolean NOT NULL DEFAULT true,
    added_by oid NOT NULL,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- the built-in embedder's vector of the instruction and its fragment
    embedding vector(256) NOT NULL,
    -- the in-database sentence model's (nl2sql.column_embedder = minilm; NULL until
    -- nl2sql.refresh_value_indexes() or the insert computes it)
    meaning vector(384)
);
-- A dropped relation's instructions, found by the sql_drop trigger (values.sql).
CREATE INDEX instruction_store_relations ON nl2sql.instruction_store USING gin (relations);
-- pg_dump keeps them: they are the curators' configuration, like a COMMENT.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.instruction_store', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.instruction_store_id_seq', '');

-- Every role sees the instructions about relations it may SELECT from now (GRANT and REVOKE
-- take effect at once; a dropped relation takes its instructions with it). One about no relation
-- concerns the whole database and is shown to every role. src/pg/instructions.rs (READABLE_BY)
-- holds the same condition for the curators' writes.
CREATE VIEW nl2sql.instructions WITH (security_barrier) AS
SELECT s.id, s.instruction, s.sql, s.relations, s.enabled, s.added_by::pg_catalog.regrole AS added_by, s.added_at,
       s.embedding, s.meaning
FROM nl2sql.instruction_store s
WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                  WHERE NOT coalesce(pg_catalog.has_table_privilege(r.oid, 'SELECT'), false));
GRANT SELECT ON nl2sql.instructions TO PUBLIC;
COMMENT ON VIEW nl2sql.instructions IS
    'curators'' instructions (definitions, business rules): those about relations the current role may read';

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
    BEGIN
        PERFORM nextval('nl2sql.ddl_version');
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
        RAISE WARNING 'nl2sql could not follow this DROP: %', SQLERRM;
    END;
END
$$;
-- Keeps the indexed columns' names current, for pg_dump.
CREATE OR REPLACE FUNCTION nl2sql._on_ddl_end()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cmd record;
BEGIN
    PERFORM nextval('nl2sql.ddl_version');
    FOR cmd IN
        SELECT DISTINCT objid FROM pg_event_trigger_ddl_commands()
        WHERE classid = 'pg_class'::regclass
          AND object_type IN ('table', 'table column', 'view', 'materialized view', 'foreign table')
          AND (schema_name IS NULL OR (schema_name NOT IN ('nl2sql', 'pg_catalog', 'information_schema')
                                       AND schema_name !~ '^pg_(toast|temp_)'))
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
    RAISE WARNING 'nl2sql could not follow this DDL command: %', SQLERRM;
END
$$;

-- After a restore: a table's columns are numbered again without the dropped ones (and a
-- child's inherited ones in its parent's order), so each index that has no entries yet is
-- pointed at its column by name. One whose column is gone, or whose column another index of
-- the table already names, is dropped with a WARNING (nothing could build it). The rest move in
-- two steps, first to numbers no column has (below the system columns'), then to their own,
-- so no two ever hold one number. Runs when rows are loaded (the trigger below fires on
-- pg_restore's COPY) and again at each nl2sql.refresh_value_indexes(); in between, and for
-- every index that has entries, the number is what counts.
CREATE FUNCTION nl2sql._renumber_restored()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone record;
BEGIN
    FOR gone IN
        DELETE FROM nl2sql.value_index i
        WHERE nl2sql._entries(i.id, i.generation) IS NULL
          AND (NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = i.relid AND a.attname = i.attname
                                                       AND a.attnum > 0 AND NOT a.attisdropped)
               OR EXISTS (SELECT FROM nl2sql.value_index o
                          WHERE o.relid = i.relid AND o.attname = i.attname AND o.id <> i.id
                            AND (o.id < i.id OR nl2sql._entries(o.id, o.generation) IS NOT NULL)))
        RETURNING i.relid, i.attname
    LOOP
        RAISE WARNING 'nl2sql dropped the restored value index of %.%: no other column has its name',
            gone.relid, quote_ident(gone.attname)
            USING DETAIL = 'The table has no such column, or another value index already names it.';
    END LOOP;
    UPDATE nl2sql.value_index i SET attnum = m.parked
    FROM (SELECT x.id, (-100 - row_number() OVER (PARTITION BY x.relid ORDER BY x.id))::int2 AS parked
          FROM nl2sql.value_index x
          JOIN pg_attribute a ON a.attrelid = x.relid AND a.attname = x.attname AND a.attnum > 0 AND NOT a.attisdropped
          WHERE a.attnum <> x.attnum AND nl2sql._entries(x.id, x.generation) IS NULL) m
    WHERE i.id = m.id;
    UPDATE nl2sql.value_index i SET attnum = a.attnum
    FROM pg_attribute a
    WHERE i.attnum <= -100 AND a.attrelid = i.relid AND a.attname = i.attname AND a.attnum > 0 AND NOT a.attisdropped
      AND NOT EXISTS (SELECT FROM nl2sql.value_index o WHERE o.relid = i.relid AND o.attnum = a.attnum);
    -- a number another index holds (its name not yet updated): this one cannot be built
    FOR gone IN DELETE FROM nl2sql.value_index i WHERE i.attnum <= -100 RETURNING i.relid, i.attname
    LOOP
        RAISE WARNING 'nl2sql dropped the restored value index of %.%: another value index holds its column',
            gone.relid, quote_ident(gone.attname);
    END LOOP;
END
$$;

CREATE FUNCTION nl2sql._value_index_loaded()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM nl2sql._renumber_restored();
    RETURN NULL;
END
$$;
CREATE TRIGGER value_index_loaded AFTER INSERT ON nl2sql.value_index
    FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._value_index_loaded();


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

REVOKE ALL ON FUNCTION nl2sql._values_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._drop_entries(int, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._renumber_restored() FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._value_index_loaded() FROM PUBLIC;

-- One row per indexed column the caller may SELECT.
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
WHERE pg_catalog.has_column_privilege(i.relid, i.attnum, 'SELECT');

-- The examples library (issue 12).
CREATE FUNCTION nl2sql."_example_key"(
	"question" TEXT, /* & str */
	"sql" TEXT /* & str */
) RETURNS TABLE (
	"masked" TEXT,  /* String */
	"embedding" TEXT  /* String */
)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_example_key_wrapper';

-- The examples library: question/SQL pairs shown to the model as few-shot, found by the
-- similarity of their masked questions (names and values replaced by placeholders).
-- Examples go into other roles' prompts, so only curators (members of nl2sql_curator, and
-- superusers) add, generate, enable and remove them, through nl2sql's functions; every role
-- reads, through nl2sql.examples, only the examples whose SQL reads what it may read.

-- The right to curate the library; GRANT nl2sql_curator TO a role.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_curator') THEN
        CREATE ROLE nl2sql_curator NOLOGIN;
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid
                  WHERE r.rolname OPERATOR(pg_catalog.=) 'nl2sql_curator')
          OR EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_curator' AND rolcanlogin) THEN
        -- roles belong to the cluster: one made for another database, or by someone else
        RAISE WARNING 'role nl2sql_curator already exists and can log in or has members: they write the examples every role''s prompts are shown'
            USING HINT = 'Check it with \du nl2sql_curator.';
    END IF;
END
$$;

CREATE TABLE nl2sql.example_store (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    question text NOT NULL,
    -- the question with names and values as <name> and <value>, what retrieval compares
    question_masked text NOT NULL,
    sql text NOT NULL,
    -- the chain of thought written from the SQL by the model (NULL until written)
    thought text,
    hint text,
    source text NOT NULL CHECK (source IN ('builtin', 'user', 'synthetic', 'feedback')),
    -- whether the SQL ran in the sandbox when it was added (built-in examples use tables of their own)
    executed boolean NOT NULL,
    enabled boolean NOT NULL DEFAULT true,
    -- the relations the SQL needs SELECT on, from PostgreSQL's parse of it when it was added
    -- (regclass: pg_dump writes names, so a restore points at the same tables again)
    relations regclass[] NOT NULL DEFAULT '{}',
    -- the relations whose rows the model was shown when it wrote the chain of thought, a
    -- synthetic pair or an offered call's query: such text may quote rows, and is shown only
    -- while those rows are the same for every reader (no row-level security, not a view)
    sampled regclass[] NOT NULL DEFAULT '{}',
    added_by oid NOT NULL,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- the built-in embedder's vector of question_masked
    embedding vector(256) NOT NULL,
    -- the in-database sentence model's vector of question_masked (nl2sql.column_embedder =
    -- minilm; NULL until nl2sql.refresh_value_indexes() or the insert computes it)
    meaning vector(384)
);
CREATE INDEX example_store_embedding ON nl2sql.example_store USING hnsw (embedding vector_cosine_ops);
-- A dropped relation's examples, found by the sql_drop trigger (values.sql).
CREATE INDEX example_store_relations ON nl2sql.example_store USING gin (relations);
CREATE INDEX example_store_sampled ON nl2sql.example_store USING gin (sampled);
-- pg_dump keeps what users added, and where the ids are; the built-in examples come with the
-- extension.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example_store', 'WHERE source <> ''builtin''');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example_store_id_seq', '');

-- Every role sees the examples whose relations it may SELECT from now (GRANT and REVOKE take
-- effect at once; a dropped relation takes its examples with it). Text the model wrote from
-- rows of a table that has since got row-level security (or become a view) may quote rows
-- some readers may not see: the chain of thought is hidden then (nl2sql.write_example_thoughts()
-- writes it again, without those samples), and a synthetic pair or an offered call's query
-- (source feedback, written by the model from the asker's rows) altogether. src/pg/examples/
-- (VISIBLE_TO) holds the same condition for the curators' writes.
CREATE VIEW nl2sql.examples WITH (security_barrier) AS
SELECT s.id, s.question, s.question_masked, s.sql, CASE WHEN x.exposed THEN NULL ELSE s.thought END AS thought,
       s.hint, s.source, s.executed, s.enabled, s.relations, s.added_by::pg_catalog.regrole AS added_by,
       s.added_at, s.embedding, s.meaning
FROM nl2sql.example_store s
CROSS JOIN LATERAL (SELECT EXISTS (SELECT FROM pg_catalog.pg_class c
                                   WHERE c.oid OPERATOR(pg_catalog.=) ANY (s.sampled::pg_catalog.oid[])
                                     AND (c.relrowsecurity OR c.relkind OPERATOR(pg_catalog.<>) ALL ('{r,p,m}'::pg_catalog."char"[])))
                    AS exposed) x
WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                  WHERE NOT coalesce(pg_catalog.has_table_privilege(r.oid, 'SELECT'), false))
  AND NOT (x.exposed AND s.source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[]));
GRANT SELECT ON nl2sql.examples TO PUBLIC;
COMMENT ON VIEW nl2sql.examples IS
    'the examples library: the examples whose SQL reads only what the current role may read';

-- The starter library: PostgreSQL idioms over small schemas of nl2sql's own (a shop, a school,
-- a company, a library; pg_test/sql/examples.sql creates them and runs every query). Shown to
-- every role (they read none of its tables) until the database has examples of its own.
--   shop:    customers(id, name, city, joined_on), products(id, name, category, price),
--            orders(id, customer_id, placed_at, status, total), order_items(order_id, product_id, quantity, unit_price)
--   school:  students(id, name, birth_date, class_id), classes(id, title, teacher_id), teachers(id, name, hired_on),
--            courses(id, title, credits), enrolments(student_id, course_id, grade)
--   company: departments(id, name, budget), employees(id, name, manager_id, department_id, salary, hired_on, email)
--   library: authors(id, name, country), books(id, title, author_id, published_year, genre, pages),
--            members(id, name), loans(book_id, member_id, loaned_on, returned_on)
INSERT INTO nl2sql.example_store (question, question_masked, sql, hint, source, executed, added_by, embedding)
SELECT b.question, k.masked, b.sql, b.hint, 'builtin', false,
       (SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'nl2sql'),
       k.embedding::vector
FROM (VALUES
 ('How many customers are there?',
  'SELECT count(*) FROM customers', NULL),
 ('How many different cities do our customers live in?',
  'SELECT count(DISTINCT city) FROM customers', NULL),
 ('Which product has the highest price? Show every product that ties.',
  'SELECT name, price FROM products WHERE price = (SELECT max(price) FROM products)', NULL),
 ('What is the name of the cheapest product?',
  'SELECT name FROM products WHERE price IS NOT NULL ORDER BY price ASC LIMIT 1', NULL),
 ('List the three most expensive products, most expensive first.',
  'SELECT name, price FROM products WHERE price IS NOT NULL ORDER BY price DESC LIMIT 3', NULL),
 ('For each category, how many products are there and what is their average price?',
  'SELECT category, count(*), avg(price) FROM products GROUP BY category', NULL),
 ('Which categories have more than 10 products?',
  'SELECT category FROM products GROUP BY category HAVING count(*) > 10', NULL),
 ('Show the name of each customer and the number of orders they placed.',
  'SELECT c.name, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name', NULL),
 ('Which customers have never placed an order?',
  'SELECT c.name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)', NULL),
 ('Which customer spent the most in total?',
  'SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name ORDER BY sum(o.total) DESC LIMIT 1', NULL),
 ('How many orders were placed in 2023?',
  'SELECT count(*) FROM orders WHERE placed_at >= DATE ''2023-01-01'' AND placed_at < DATE ''2024-01-01''', NULL),
 ('How many orders were placed each month?',
  'SELECT date_trunc(''month'', placed_at) AS month, count(*) FROM orders GROUP BY 1 ORDER BY 1', NULL),
 ('What share of orders, in percent, were cancelled?',
  'SELECT round(100.0 * count(*) FILTER (WHERE status = ''cancelled'') / nullif(count(*), 0), 2) FROM orders', NULL),
 ('What is the total quantity sold of each product, for the products that sold any?',
  'SELECT p.name, sum(i.quantity) FROM products p JOIN order_items i ON i.product_id = p.id GROUP BY p.id, p.name', NULL),
 ('Find the products whose name contains "chair".',
  'SELECT name FROM products WHERE name ILIKE ''%chair%''', 'matching text regardless of case'),
 ('Which customers bought both a lamp and a desk?',
  'SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id WHERE p.category = ''lamp''
INTERSECT
SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id WHERE p.category = ''desk''', NULL),
 ('List the students of the class taught by teacher Ada Byron.',
  'SELECT s.name FROM students s JOIN classes c ON c.id = s.class_id JOIN teachers t ON t.id = c.teacher_id WHERE t.name = ''Ada Byron''', NULL),
 ('What are the titles of the courses that no student is enrolled in?',
  'SELECT title FROM courses EXCEPT SELECT c.title FROM courses c JOIN enrolments e ON e.course_id = c.id', NULL),
 ('What is the average grade in each course, best course first?',
  'SELECT c.title, avg(e.grade) AS average FROM courses c JOIN enrolments e ON e.course_id = c.id GROUP BY c.id, c.title ORDER BY average DESC', NULL),
 ('How many students were born after 2005?',
  'SELECT count(*) FROM students WHERE extract(year FROM birth_date) > 2005', NULL),
 ('Which students take more than three courses?',
  'SELECT s.name FROM students s JOIN enrolments e ON e.student_id = s.id GROUP BY s.id, s.name HAVING count(*) > 3', NULL),
 ('How old is the youngest student, in years?',
  'SELECT min(extract(year FROM age(birth_date))) FROM students', NULL),
 ('Who is the best student of each course (ties included)?',
  'SELECT c.title, s.name, e.grade FROM enrolments e JOIN courses c ON c.id = e.course_id JOIN students s ON s.id = e.student_id WHERE e.grade = (SELECT max(e2.grade) FROM enrolments e2 WHERE e2.course_id = e.course_id)', NULL),
 ('List each employee with the name of their manager.',
  'SELECT e.name, m.name AS manager FROM employees e LEFT JOIN employees m ON m.id = e.manager_id', NULL),
 ('Which employees earn more than their manager?',
  'SELECT e.name FROM employees e JOIN employees m ON m.id = e.manager_id WHERE e.salary > m.salary', NULL),
 ('Name the two best-paid employees of each department.',
  'SELECT department, name, salary FROM (SELECT d.name AS department, e.name, e.salary, rank() OVER (PARTITION BY d.id ORDER BY e.salary DESC) AS r FROM employees e JOIN departments d ON d.id = e.department_id WHERE e.salary IS NOT NULL) ranked WHERE r <= 2', NULL),
 ('Which departments spend more on salaries than the average department?',
  'SELECT d.name FROM departments d JOIN employees e ON e.department_id = d.id GROUP BY d.id, d.name HAVING sum(e.salary) > (SELECT avg(total) FROM (SELECT sum(salary) AS total FROM employees GROUP BY department_id) t)', NULL),
 ('Which employees were hired in the last 12 months?',
  'SELECT name FROM employees WHERE hired_on >= current_date - interval ''12 months''', NULL),
 ('How many employees have no e-mail address?',
  'SELECT count(*) FROM employees WHERE email IS NULL', NULL),
 ('List the employees whose salary is between 3000 and 5000, by name.',
  'SELECT name, salary FROM employees WHERE salary BETWEEN 3000 AND 5000 ORDER BY name', NULL),
 ('Which authors wrote books in more than one genre?',
  'SELECT a.name FROM authors a JOIN books b ON b.author_id = a.id GROUP BY a.id, a.name HAVING count(DISTINCT b.genre) > 1', NULL),
 ('What are the titles of the books that have never been loaned?',
  'SELECT b.title FROM books b WHERE b.id NOT IN (SELECT l.book_id FROM loans l WHERE l.book_id IS NOT NULL)', NULL),
 ('Which members still have a book on loan, and which book?',
  'SELECT m.name, b.title FROM loans l JOIN members m ON m.id = l.member_id JOIN books b ON b.id = l.book_id WHERE l.returned_on IS NULL', NULL),
 ('How many days was each loan out, for the returned ones?',
  'SELECT book_id, member_id, returned_on - loaned_on AS days FROM loans WHERE returned_on IS NOT NULL', NULL),
 ('What is the average number of pages of the books of each country''s authors, for countries with at least 5 books?',
  'SELECT a.country, avg(b.pages) FROM authors a JOIN books b ON b.author_id = a.id GROUP BY a.country HAVING count(*) >= 5', NULL),
 ('Which genre has the most books?',
  'SELECT genre FROM books GROUP BY genre ORDER BY count(*) DESC LIMIT 1', NULL),
 ('Show the title and author of the oldest book.',
  'SELECT b.title, a.name FROM books b JOIN authors a ON a.id = b.author_id WHERE b.published_year IS NOT NULL ORDER BY b.published_year ASC LIMIT 1', NULL),
 ('List the books published in the 1990s with their authors.',
  'SELECT b.title, a.name FROM books b JOIN authors a ON a.id = b.author_id WHERE b.published_year BETWEEN 1990 AND 1999', NULL)
) AS b(question, sql, hint)
CROSS JOIN LATERAL nl2sql._example_key(b.question, b.sql) AS k;

CREATE FUNCTION nl2sql."add_example"(
	"question" TEXT, /* & str */
	"sql" TEXT, /* & str */
	"hint" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'add_example_wrapper';

CREATE FUNCTION nl2sql."remove_example"(
	"id" bigint /* i64 */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'remove_example_wrapper';

CREATE FUNCTION nl2sql."enable_example"(
	"id" bigint, /* i64 */
	"enabled" bool DEFAULT true /* bool */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'enable_example_wrapper';

CREATE FUNCTION nl2sql."generate_examples"(
	"per_table" INT DEFAULT 5 /* i32 */
) RETURNS TABLE (
	"scope" TEXT,  /* String */
	"written" INT,  /* i32 */
	"executed" INT,  /* i32 */
	"kept" INT,  /* i32 */
	"prompt_tokens" bigint,  /* i64 */
	"completion_tokens" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'generate_examples_wrapper';

CREATE FUNCTION nl2sql."write_example_thoughts"(
	"max" INT DEFAULT 100 /* i32 */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'write_example_thoughts_wrapper';

-- Operations (issue 13): history, feedback, follow-ups.
-- The history: one row per call of nl2sql(), nl2sql_run() and nl2sql_explain(). Every role
-- reads its own rows (row-level security); members of nl2sql_admin and superusers read all.
-- Rows are written only by nl2sql's functions, as the extension owner, with parameters only.

-- The right to read every role's history and to purge it; GRANT nl2sql_admin TO a role.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_admin') THEN
        CREATE ROLE nl2sql_admin NOLOGIN;
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid
                  WHERE r.rolname OPERATOR(pg_catalog.=) 'nl2sql_admin')
          OR EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_admin' AND rolcanlogin) THEN
        RAISE WARNING 'role nl2sql_admin already exists and can log in or has members: they read every role''s nl2sql history'
            USING HINT = 'Check it with \du nl2sql_admin.';
    END IF;
END
$$;

CREATE TABLE nl2sql.history (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- the role that asked (the current user of the call), and its name then: a row is its role's
    -- while both match (a restore, which gives roles new OIDs, or a rename leaves rows to the
    -- administrators; a new role never inherits a dropped one's rows)
    asked_by oid NOT NULL,
    role_name name NOT NULL,
    database name NOT NULL DEFAULT pg_catalog.current_database(),
    asked_at timestamptz NOT NULL,
    question text NOT NULL,
    hint text,
    -- the call this question followed up (nl2sql(..., follows => id))
    follows bigint,
    mode text NOT NULL,
    -- the chosen query (NULL when the call failed)
    sql text,
    confidence float8,
    -- candidates sampled, and the vote's groups: [{"votes": 3, "rows": 1, "cost": 12.5}, ...]
    candidates integer NOT NULL DEFAULT 0,
    vote jsonb,
    prompt_tokens integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    latency_ms float8 NOT NULL,
    -- the error the call raised, when it failed
    sqlstate text,
    error text,
    -- nl2sql.feedback(): whether the answer was right, the corrected query, the example made of it
    feedback boolean,
    corrected_sql text,
    feedback_at timestamptz,
    example_id bigint,
    -- the relations whose rows (samples, stored values, query results) the call's prompts
    -- showed the model: its query may quote them, so nl2sql.feedback() offers it as an
    -- example only while those rows are the same for every reader
    shown regclass[] NOT NULL DEFAULT '{}'
);
CREATE INDEX history_asked_at ON nl2sql.history (asked_at);
CREATE INDEX history_asked_by ON nl2sql.history (asked_by, id);
ALTER TABLE nl2sql.history ENABLE ROW LEVEL SECURITY;
CREATE POLICY history_own_rows ON nl2sql.history FOR SELECT
    USING ((asked_by OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
            AND role_name OPERATOR(pg_catalog.=) CURRENT_USER)
           OR (pg_catalog.to_regrole('nl2sql_admin') IS NOT NULL
               AND pg_catalog.pg_has_role(CURRENT_USER, 'nl2sql_admin', 'MEMBER')));
GRANT SELECT ON nl2sql.history TO PUBLIC;
COMMENT ON TABLE nl2sql.history IS
    'one row per nl2sql call: each role sees its own, nl2sql_admin all; purged by nl2sql.purge_history()';
-- pg_dump keeps the history and where its ids are.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.history', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.history_id_seq', '');

CREATE FUNCTION nl2sql."feedback"(
	"history_id" bigint, /* i64 */
	"correct" bool, /* bool */
	"corrected_sql" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bigint /* Option < i64 > */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'feedback_wrapper';

CREATE FUNCTION nl2sql."purge_history"(
	"older_than" interval DEFAULT NULL /* Option < pgrx :: datum :: Interval > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'purge_history_wrapper';

DROP FUNCTION @extschema@.nl2sql(text, text);
CREATE FUNCTION "nl2sql"(
	"question" TEXT, /* Option < & str > */
	"hint" TEXT DEFAULT NULL, /* Option < & str > */
	"follows" bigint DEFAULT NULL, /* Option < i64 > */
	"previous_question" TEXT DEFAULT NULL, /* Option < & str > */
	"previous_sql" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* Option < String > */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_wrapper';

DROP FUNCTION @extschema@.nl2sql_run(text, text);
CREATE FUNCTION "nl2sql_run"(
	"question" TEXT, /* Option < & str > */
	"hint" TEXT DEFAULT NULL, /* Option < & str > */
	"follows" bigint DEFAULT NULL, /* Option < i64 > */
	"previous_question" TEXT DEFAULT NULL, /* Option < & str > */
	"previous_sql" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS SETOF jsonb /* pgrx :: JsonB */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_run_wrapper';

DROP FUNCTION @extschema@.nl2sql_explain(text, text);
CREATE FUNCTION "nl2sql_explain"(
	"question" TEXT, /* Option < & str > */
	"hint" TEXT DEFAULT NULL, /* Option < & str > */
	"follows" bigint DEFAULT NULL, /* Option < i64 > */
	"previous_question" TEXT DEFAULT NULL, /* Option < & str > */
	"previous_sql" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS jsonb /* Option < pgrx :: JsonB > */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_explain_wrapper';

-- Wide schemas (issue 14).
CREATE FUNCTION nl2sql."_join_path"(
	"from" oid, /* pg_sys :: Oid */
	"to" oid /* pg_sys :: Oid */
) RETURNS TABLE (
	"step" INT,  /* i32 */
	"join_condition" TEXT  /* String */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_join_path_wrapper';

-- What the interactive agent's tools answer, for users too. (No SET search_path: tables are
-- named as the caller's search_path writes them; the body is schema-qualified.)

CREATE FUNCTION nl2sql.join_path("from" regclass, "to" regclass)
RETURNS TABLE (step int, join_condition text)
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
AS $$ SELECT s.step, s.join_condition FROM nl2sql._join_path($1::pg_catalog.oid, $2::pg_catalog.oid) s $$;
COMMENT ON FUNCTION nl2sql.join_path(regclass, regclass) IS
    'the shortest chain of foreign keys joining two tables you may read, one join condition a row';

-- Column descriptions in 0.2.0's shorter form, and a signature for every column.
SELECT nl2sql._refresh_column_embeddings();

-- Relationships nobody declared: profiling, its stores and the DBA's decisions (sql/relationships.sql,
-- the two functions in Rust, sql/relationships_api.sql).

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

-- Whether the current role may read every one of `cols` of `rel` (and the schema it is in),
-- each of the type `types` gives at the same place (NULL: any type).
CREATE FUNCTION nl2sql._columns_readable(rel regclass, cols name[], types regtype[])
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.has_schema_privilege(c.relnamespace, 'USAGE'), false)
           AND (SELECT pg_catalog.count(*) FROM ROWS FROM (pg_catalog.unnest(cols), pg_catalog.unnest(types)) AS u(n, t)
                JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attname OPERATOR(pg_catalog.=) u.n
                WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
                  AND (u.t IS NULL OR a.atttypid OPERATOR(pg_catalog.=) u.t::pg_catalog.oid)
                  AND coalesce(pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT'), false))
               OPERATOR(pg_catalog.=) pg_catalog.cardinality(cols)
    FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel::pg_catalog.oid
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

-- What profiling reads of one table, as its owner (src/pg/profile): among at most `max_rows`
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

-- Keeps what one profiling run found (src/pg/profile, as the extension owner): for the tables
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
    PERFORM nextval('nl2sql.ddl_version');
END
$$;

-- A DBA's decision on one relationship (src/pg/profile, as the extension owner, once the
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
    PERFORM nextval('nl2sql.ddl_version');
END
$$;

REVOKE ALL ON FUNCTION nl2sql._profile_save(oid[], bigint[], boolean[], bigint[], json, json) FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._relationship_decide(regclass, name[], regclass, name[], text, name) FROM PUBLIC;

CREATE FUNCTION nl2sql."_profile_relationships"(
	"schemas" TEXT[] /* :: std :: option :: Option < Vec < String > > */
) RETURNS TABLE (
	"from_relation" oid,  /* pg_sys :: Oid */
	"from_columns" TEXT[],  /* Vec < String > */
	"to_relation" oid,  /* pg_sys :: Oid */
	"to_columns" TEXT[],  /* Vec < String > */
	"source" TEXT,  /* String */
	"score" real,  /* Option < f32 > */
	"evidence" TEXT  /* Option < String > */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_profile_relationships_wrapper';

CREATE FUNCTION nl2sql."_decide_relationship"(
	"from" oid, /* pg_sys :: Oid */
	"from_columns" TEXT[], /* Vec < String > */
	"to" oid, /* pg_sys :: Oid */
	"to_columns" TEXT[], /* Vec < String > */
	"decision" TEXT /* & str */
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_decide_relationship_wrapper';
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


CREATE FUNCTION nl2sql."_add_instruction"(
	"instruction" TEXT, /* core :: option :: Option < & str > */
	"tables" oid[], /* core :: option :: Option < Vec < core :: option :: Option < pg_sys :: Oid > > > */
	"sql" TEXT /* core :: option :: Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_add_instruction_wrapper';

CREATE FUNCTION nl2sql."remove_instruction"(
	"id" bigint /* i64 */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'remove_instruction_wrapper';

CREATE FUNCTION nl2sql."enable_instruction"(
	"id" bigint, /* i64 */
	"enabled" bool DEFAULT true /* bool */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'enable_instruction_wrapper';
CREATE FUNCTION nl2sql.add_instruction(instruction text, tables regclass[] DEFAULT NULL, sql text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT nl2sql._add_instruction($1, $2::pg_catalog.oid[], $3) $$;
COMMENT ON FUNCTION nl2sql.add_instruction(text, regclass[], text) IS
    'store a definition or rule for the questions about the given tables (by default the tables its text names); its id';
