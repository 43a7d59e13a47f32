-- A hostile table owner, class 3: mallory owns a table whose column's domain CHECK calls her
-- function, which makes her a superuser if it ever runs as one (and notes every role it runs
-- as). The value index's triggers run as the extension's owner on her DML, its builds and
-- searches read her table: none of them evaluates her code with rights she does not have.
CREATE ROLE mallory;
GRANT CREATE ON SCHEMA public TO mallory;
CREATE TABLE owner_seen (who name, superuser boolean);
GRANT INSERT ON owner_seen TO PUBLIC;
SET ROLE mallory;
CREATE FUNCTION mallory_check(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.owner_seen SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
    -- Leaves a setting behind in whatever session runs it.
    PERFORM set_config('mallory.trap', 'sprung', false);
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
    END IF;
    RETURN true;
END $$;
CREATE DOMAIN mallory_name AS text CHECK (mallory_check(VALUE));
CREATE TABLE mallory_items (name mallory_name, kind text);
INSERT INTO mallory_items SELECT 'Item ' || g, 'kind ' || (g % 3) FROM generate_series(1, 1800) g;
-- A second table whose row-level security policy calls her function, forced on the owner too.
CREATE TABLE mallory_vault (label text);
INSERT INTO mallory_vault VALUES ('Blue box'), ('Red box');
ALTER TABLE mallory_vault ENABLE ROW LEVEL SECURITY;
ALTER TABLE mallory_vault FORCE ROW LEVEL SECURITY;
CREATE POLICY mallory_sees ON mallory_vault USING (mallory_check(label));
-- A third whose enum type has a cast to text she wrote: a trigger that cast values to text
-- would run it as the extension's owner.
CREATE TYPE mallory_mood AS ENUM ('calm', 'angry', 'sad');
CREATE FUNCTION mallory_mood_text(mallory_mood) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mallory_check('cast');
    RETURN 'mood';
END $$;
CREATE CAST (mallory_mood AS text) WITH FUNCTION mallory_mood_text(mallory_mood);
CREATE TABLE mallory_moods (mood mallory_mood);
INSERT INTO mallory_moods VALUES ('calm'), ('angry');
GRANT SELECT ON mallory_items, mallory_vault, mallory_moods TO PUBLIC;
RESET ROLE;
TRUNCATE owner_seen;
SELECT set_config('mallory.trap', '', false) AS trap;

-- The DBA indexes her tables (the build reads them as their owner, restricted, like ANALYZE).
SELECT relation, column_name, status, "values" FROM nl2sql.create_value_index('mallory_items', 'name');
SELECT relation, column_name, status, "values" FROM nl2sql.create_value_index('mallory_vault', include_rls => true);
SELECT relation, column_name, status, "values" FROM nl2sql.create_value_index('mallory_moods');
-- What her code set while a build read her table as her is undone.
SELECT current_setting('mallory.trap') AS trap_after_builds;

-- Her DML fires the triggers, which run as the extension's owner.
SET ROLE mallory;
INSERT INTO mallory_items VALUES ('Item 1201', 'kind 0');
UPDATE mallory_items SET name = 'Item 1b' WHERE name = 'Item 1';
DELETE FROM mallory_items WHERE name = 'Item 2';
COPY mallory_items FROM STDIN;
Item 1300	kind 1
\.
-- A bulk delete marks the column dirty: searches then re-check values against the table.
DELETE FROM mallory_items WHERE kind = 'kind 1' OR kind = 'kind 2';
INSERT INTO mallory_moods VALUES ('sad');
UPDATE mallory_moods SET mood = 'angry' WHERE mood = 'calm';
DELETE FROM mallory_moods WHERE mood = 'sad';
RESET ROLE;
SELECT set_config('mallory.trap', '', false) AS trap;
-- Values her DML took away wait for a re-check; searches re-check them as the caller.
SELECT relation, column_name, pending_removals FROM nl2sql.value_indexes WHERE relation::text = 'mallory_moods';
SELECT value FROM nl2sql.search_values('calm sad angry', 5) ORDER BY 1;
SELECT relation, column_name, status FROM nl2sql.value_indexes WHERE relation::text LIKE 'mallory%' ORDER BY 1, 2;

-- Searches and questions (re-checks run as the caller, or nl2sql.superuser_role for a
-- superuser, with every function judged like generated SQL's).
SELECT value FROM nl2sql.search_values('Item 3', 1);
SELECT * FROM nl2sql_run('[mallory-item] what kind is item 3?');
-- Another role's search re-checks the vault's values through its policy, which would run
-- mallory's function as that role: refused, so the values stay hidden.
CREATE ROLE sec_reader;
GRANT SELECT ON mallory_vault TO sec_reader;
SET ROLE sec_reader;
SELECT value FROM nl2sql.search_values('blue box', 2);
RESET ROLE;
DROP OWNED BY sec_reader;
DROP ROLE sec_reader;
-- A refresh rebuilds from her table, again as its owner, and applies the pending removals.
SELECT relation, column_name, status FROM nl2sql.refresh_value_indexes('mallory_items');
SELECT relation, column_name, status FROM nl2sql.refresh_value_indexes('mallory_moods');
SELECT relation, column_name, pending_removals FROM nl2sql.value_indexes WHERE relation::text = 'mallory_moods';
SELECT current_setting('mallory.trap') AS trap_after_refresh;

-- The index's trigger function runs as the extension's owner: she may not attach it to a
-- trigger of her own, where nl2sql_new would name a temporary view of hers ...
SET ROLE mallory;
CREATE TEMP VIEW nl2sql_new AS SELECT 'Item 1'::text AS name WHERE mallory_check('temp view');
CREATE TRIGGER mallory_reuse AFTER INSERT ON mallory_items FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._values_changed();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- ... and a trigger not made by nl2sql (only a superuser could make one) finds it refusing.
CREATE TRIGGER rogue AFTER INSERT ON mallory_items FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._values_changed();
SET ROLE mallory;
INSERT INTO mallory_items VALUES ('Item 1400', 'kind 0');
DROP VIEW nl2sql_new;
RESET ROLE;
DROP TRIGGER rogue ON mallory_items;

-- She may also index her own table when granted the functions.
GRANT EXECUTE ON FUNCTION nl2sql.create_value_index(regclass, name, boolean), nl2sql._create_value_index(oid, text, boolean) TO mallory;
SET ROLE mallory;
SELECT relation, column_name, status FROM nl2sql.create_value_index('mallory_items', 'name');
TRUNCATE mallory_items;
RESET ROLE;

-- She is no superuser, and her function only ever ran as herself.
SELECT rolsuper AS mallory_is_superuser FROM pg_roles WHERE rolname = 'mallory';
SELECT who, superuser, count(*) > 0 AS ran FROM owner_seen GROUP BY 1, 2 ORDER BY 1;

SELECT nl2sql.drop_value_index('mallory_items');
SELECT nl2sql.drop_value_index('mallory_vault');
SELECT nl2sql.drop_value_index('mallory_moods');
DROP OWNED BY mallory CASCADE;
REVOKE CREATE ON SCHEMA public FROM mallory;
DROP ROLE mallory;
DROP TABLE owner_seen;
