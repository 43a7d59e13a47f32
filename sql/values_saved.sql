-- What pg_dump keeps of the value index: one row per index of a table that is not temporary,
-- naming the table as text (schema and name, each as quote_ident writes it) and the column by
-- name. A regclass would make the COPY of the whole table fail when a dump leaves one table
-- out (pg_dump -T, an edited pg_restore list, a table dropped before the restore); as text, each
-- row is resolved as it loads: the indexes whose table and column are there come back, each
-- one that is not is reported in a WARNING and left out. The rows follow value_index (the
-- trigger below) and its tables' renames (an event trigger); only the extension owner reads
-- or writes them.
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
