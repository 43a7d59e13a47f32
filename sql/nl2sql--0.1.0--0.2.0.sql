-- nl2sql 0.1.0 -> 0.2.0 (security, issue 9): the value index's triggers no longer cast values
-- (a cast may be the type owner's function; a cast to a domain runs its CHECK), nor read the
-- indexed table, nor run as any trigger but nl2sql's own; values DML took away wait in
-- nl2sql.value_removals. The definitions below are those of sql/values.sql and
-- sql/values_api.sql; tests/test_upgrade.py checks that an upgraded database matches a fresh one.
\echo Use "ALTER EXTENSION nl2sql UPDATE TO '0.2.0'" to load this file. \quit

-- longest value indexed (nl2sql.index_max_value_length at the build; the triggers use this,
-- never the setting of the session that writes the table)
ALTER TABLE nl2sql.value_index ADD COLUMN max_length int NOT NULL DEFAULT 200;

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

-- The statement that adds a statement's new values of one indexed column: built-in embedder:
-- the value and its phrases with their signatures; endpoint embedder: queued, since DML never
-- calls out. A phrase is added only while at most `cap` values hold it (counting this
-- statement's and the stored ones), as the build does. Values held again are no longer pending
-- removal. It reads the transition table nl2sql_new, so the trigger itself must run it. Values
-- are printed with pg_catalog.format('%s', …), i.e. their type's output function, never cast:
-- a cast to text may be a function the column type's owner wrote.
CREATE OR REPLACE FUNCTION nl2sql._add_values_sql(column_id int, col name, embedder text, max_len int, cap int)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN embedder = 'builtin-v1' THEN format(
        'WITH s AS (SELECT DISTINCT x.v FROM (SELECT pg_catalog.format(''%%s'', %2$I) AS v FROM nl2sql_new
                                                   WHERE %2$I IS NOT NULL) x
                    WHERE length(x.v) BETWEEN 1 AND %3$s),
              kept AS (DELETE FROM nl2sql.value_removals r USING s WHERE r.column_id = %1$s AND r.value = s.v),
              fresh AS (SELECT s.v FROM s WHERE NOT EXISTS (
                    SELECT 1 FROM nl2sql.value_entries e WHERE e.column_id = %1$s AND e.key = nl2sql.fold(s.v) AND e.value = s.v)),
              ph AS (SELECT fresh.v, p FROM fresh, unnest(nl2sql.phrases(fresh.v)) p),
              ok AS (SELECT ph.p FROM ph GROUP BY ph.p
                     HAVING count(*) + (SELECT count(*) FROM (SELECT 1 FROM nl2sql.value_entries e
                                        WHERE e.column_id = %1$s AND e.key = ph.p LIMIT %4$s + 1) z) <= %4$s)
         INSERT INTO nl2sql.value_entries (column_id, value, term, key, sig)
         SELECT %1$s, v, v, nl2sql.fold(v), nl2sql.signature(v)::bit(256) FROM fresh
         UNION ALL
         SELECT %1$s, ph.v, ph.p, ph.p, nl2sql.signature(ph.p)::bit(256) FROM ph JOIN ok USING (p)',
        column_id, col, max_len, cap)
    ELSE format(
        'WITH s AS (SELECT DISTINCT pg_catalog.format(''%%s'', %2$I) AS v FROM nl2sql_new WHERE %2$I IS NOT NULL),
              kept AS (DELETE FROM nl2sql.value_removals r USING s WHERE r.column_id = %1$s AND r.value = s.v)
         INSERT INTO nl2sql.value_queue (column_id, value)
         SELECT %1$s, s.v FROM s
         WHERE length(s.v) BETWEEN 1 AND %3$s
           AND NOT EXISTS (SELECT 1 FROM nl2sql.value_entries e
                           WHERE e.column_id = %1$s AND e.key = nl2sql.fold(s.v) AND e.value = s.v)
         ON CONFLICT DO NOTHING',
        column_id, col, max_len)
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
    FOR c IN
        SELECT i.id, a.attname, i.embedder, i.max_length,
               greatest(2, least(50, i.value_count / 10))::int AS cap
        FROM nl2sql.value_index i
        JOIN pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
        WHERE i.relid = TG_RELID AND i.status IN ('ready', 'dirty')
    LOOP
        BEGIN
            IF TG_OP IN ('DELETE', 'UPDATE') THEN
                EXECUTE format('SELECT count(DISTINCT pg_catalog.format(''%%s'', %I)) FROM nl2sql_old', c.attname) INTO n;
                -- Many values at once, or a long queue: re-check every result instead.
                IF n > 1000 OR (n > 0 AND (SELECT count(*) FROM (SELECT 1 FROM nl2sql.value_removals r
                                                                WHERE r.column_id = c.id LIMIT 10001) z) > 10000) THEN
                    UPDATE nl2sql.value_index SET status = 'dirty' WHERE id = c.id AND status = 'ready';
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
                EXECUTE nl2sql._add_values_sql(c.id, c.attname, c.embedder, c.max_length, c.cap);
            END IF;
            IF TG_OP = 'TRUNCATE' THEN
                EXECUTE format('TRUNCATE nl2sql.value_entries_%s', c.id);
                DELETE FROM nl2sql.value_queue WHERE column_id = c.id;
                DELETE FROM nl2sql.value_removals WHERE column_id = c.id;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'nl2sql could not update the value index of %.%: %', TG_TABLE_NAME, c.attname, SQLERRM
                USING HINT = 'Rebuild it with SELECT nl2sql.refresh_value_indexes().';
            UPDATE nl2sql.value_index SET status = 'stale' WHERE id = c.id;
        END;
    END LOOP;
    UPDATE nl2sql.value_index SET refreshed_at = now()
    WHERE relid = TG_RELID AND status IN ('ready', 'dirty')
      AND (refreshed_at IS NULL OR refreshed_at < now() - interval '1 second');
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'nl2sql could not update the value indexes of %: %', TG_TABLE_NAME, SQLERRM;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION nl2sql._values_changed() FROM PUBLIC;

-- One row per indexed column the caller may SELECT.
CREATE OR REPLACE VIEW nl2sql.value_indexes AS
SELECT i.relid::regclass AS relation,
       a.attname AS column_name,
       CASE WHEN i.status IN ('ready', 'dirty') AND i.embedder <> nl2sql.current_embedder() THEN 'stale'
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
       (SELECT greatest(c.reltuples, 0)::bigint FROM pg_catalog.pg_class c
        WHERE c.oid = pg_catalog.to_regclass('nl2sql.value_entries_' || i.id)) AS entries_estimate,
       pg_catalog.pg_total_relation_size(pg_catalog.to_regclass('nl2sql.value_entries_' || i.id)) AS size_bytes,
       (SELECT count(*) FROM nl2sql.value_queue q WHERE q.column_id = i.id) AS queued,
       -- values DML took away, re-checked by searches until nl2sql.refresh_value_indexes()
       (SELECT count(*) FROM nl2sql.value_removals r WHERE r.column_id = i.id) AS pending_removals
FROM nl2sql.value_index i
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
WHERE pg_catalog.has_column_privilege(i.relid, i.attnum, 'SELECT');
