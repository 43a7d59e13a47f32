-- Hostile model output and a hostile object owner, class 2: functions reached other than by a
-- plain call — attribute notation, views, domain constraints, casts, operators, aggregates,
-- set-returning functions, row-level security policies, SQL given as text. PostgreSQL's
-- analysed and rewritten tree is checked function by function (by OID): what another role
-- wrote runs only when a superuser allow-lists it; what a function does is never believed
-- from what it declares. Every function of mallory's announces itself with a NOTICE: none
-- may appear below.
SET nl2sql.mode = zero_shot;
SET nl2sql.max_corrections = 0;
CREATE ROLE mallory;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE FUNCTION mallory_ran(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'mallory''s % ran as %', what, current_user;
    RETURN true;
END $$;
CREATE FUNCTION mallory_note(singer) RETURNS text STABLE LANGUAGE sql AS $$ SELECT 'n' WHERE mallory_ran('attribute') $$;
CREATE FUNCTION mallory_view_fn() RETURNS int IMMUTABLE LANGUAGE sql AS $$ SELECT 1 WHERE mallory_ran('view') $$;
CREATE VIEW mallory_view AS SELECT mallory_view_fn() AS n;
GRANT SELECT ON mallory_view TO PUBLIC;
CREATE DOMAIN mallory_text AS text CHECK (mallory_ran('domain check'));
CREATE TYPE mallory_pair AS (a int, b int);
CREATE FUNCTION mallory_pair_text(mallory_pair) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT 'p' WHERE mallory_ran('cast') $$;
CREATE CAST (mallory_pair AS text) WITH FUNCTION mallory_pair_text(mallory_pair);
CREATE FUNCTION mallory_eq(int, int) RETURNS boolean IMMUTABLE LANGUAGE sql AS $$ SELECT $1 = $2 AND mallory_ran('operator') $$;
CREATE OPERATOR &&& (LEFTARG = int, RIGHTARG = int, FUNCTION = mallory_eq);
CREATE FUNCTION mallory_step(int, int) RETURNS int IMMUTABLE LANGUAGE sql AS $$ SELECT coalesce($1, 0) + $2 WHERE mallory_ran('aggregate') $$;
CREATE AGGREGATE mallory_sum(int) (SFUNC = mallory_step, STYPE = int);
CREATE FUNCTION mallory_rows() RETURNS SETOF int STABLE LANGUAGE sql AS $$ SELECT 1 WHERE mallory_ran('set-returning function') $$;
CREATE TABLE mallory_secrets (secret text);
INSERT INTO mallory_secrets VALUES ('s1');
ALTER TABLE mallory_secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY mallory_peek ON mallory_secrets USING (mallory_ran('row-level security policy'));
GRANT SELECT ON mallory_secrets TO PUBLIC;
-- Functions PostgreSQL calls without the executor: a domain CHECK folded when the type cache
-- loads it, a cast to json inside json_agg(), a range type's subtype_diff while planning.
CREATE FUNCTION mallory_folded() RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN RETURN mallory_ran('folded domain check'); END $$;
CREATE DOMAIN mallory_folded_text AS text CHECK (VALUE <> '' OR mallory_folded());
CREATE TYPE mallory_mood AS ENUM ('calm', 'angry');
CREATE FUNCTION mallory_mood_json(mallory_mood) RETURNS json IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM mallory_ran('json cast'); RETURN '"calm"'; END $$;
CREATE CAST (mallory_mood AS json) WITH FUNCTION mallory_mood_json(mallory_mood);
CREATE TABLE mallory_moods (mood mallory_mood);
INSERT INTO mallory_moods VALUES ('calm'), ('angry');
CREATE FUNCTION mallory_diff(text, text) RETURNS float8 IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_ran('subtype_diff'); RETURN 1; END $$;
CREATE TYPE mallory_span AS RANGE (subtype = text, subtype_diff = mallory_diff);
CREATE TABLE mallory_spans (s mallory_span);
INSERT INTO mallory_spans SELECT mallory_span(chr(97 + g % 20), chr(98 + g % 20)) FROM generate_series(1, 300) g;
-- The same range behind a domain, compared with a value cast through text.
CREATE DOMAIN mallory_span_d AS mallory_span;
CREATE TABLE mallory_dspans (s mallory_span_d);
INSERT INTO mallory_dspans SELECT s FROM mallory_spans;
GRANT SELECT ON mallory_moods, mallory_spans, mallory_dspans TO PUBLIC;
SET client_min_messages = warning;
ANALYZE mallory_spans;
ANALYZE mallory_dspans;
-- Her own query: her functions run as herself (and warm the type cache).
SELECT count(*) > 0 AS some FROM mallory_spans WHERE s && mallory_span('b', 'c');
RESET client_min_messages;
-- A function that takes an advisory lock, declared STABLE to look harmless.
CREATE FUNCTION mallory_wrapper() RETURNS int STABLE LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock(4302);
    PERFORM mallory_ran('wrapper');
    RETURN 1;
END $$;
RESET ROLE;

SELECT nl2sql('[attr-notation] a note about the first singer');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[view] the number in mallory''s view');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[domain-literal] x as mallory text');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[domain-column] singer names as mallory text');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[cast] a pair as text');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[operator] singers aged exactly 40');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[aggregate] total age');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[srf] mallory''s rows');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[rls] how many secrets?');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[domain-folded] x as folded text');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[json-cast] the moods as json');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[range-diff] spans overlapping b to c');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[range-domain] domain spans overlapping b to c');
\echo :LAST_ERROR_SQLSTATE
-- Built-in functions that run SQL given as text, or dump whole tables.
SELECT nl2sql('[query-to-xml] as xml');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[ts-stat] word statistics');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[ts-rewrite] rewrite a query');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[table-to-xml] the singers as xml');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[current-setting] the key');
\echo :LAST_ERROR_SQLSTATE
-- Built-in functions that are not volatile, and random(), run as usual.
SELECT * FROM nl2sql_run('[upper-lower] names in capitals');
SELECT * FROM nl2sql_run('[random] count with random');

-- The allow-list opens a function to generated SQL, not what it calls: the object-access hook
-- judges every function the executor starts, so the advisory lock inside is still refused.
SET nl2sql.allowed_functions = 'mallory_wrapper';
SELECT nl2sql('[wrapper] the wrapper''s number');
\echo :LAST_ERROR_SQLSTATE
RESET nl2sql.allowed_functions;

-- nl2sql's own reads (the samples in the schema prompt) judge functions the same way: a view
-- that calls mallory's function is shown without samples, and the function did not run.
SELECT position('mallory_view' IN nl2sql.schema_prompt()) > 0 AS view_shown;

-- A caller whose search_path puts a schema mallory writes before pg_catalog: nl2sql's own
-- catalog queries name pg_catalog's operators, and run only system functions, so her
-- operator never runs.
SET ROLE mallory;
CREATE FUNCTION mallory_oideq(oid, oid) RETURNS boolean IMMUTABLE LANGUAGE sql AS $$ SELECT $1 OPERATOR(pg_catalog.=) $2 AND mallory_ran('oid equality') $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = mallory_oideq);
RESET ROLE;
SET search_path = public, pg_catalog;
SELECT nl2sql('[upper-lower] names in capitals');
\echo :LAST_ERROR_SQLSTATE
RESET search_path;
DROP OPERATOR public.= (oid, oid);

-- Nothing ran: no NOTICE above, no advisory lock.
SELECT count(*) AS advisory_locks FROM pg_locks WHERE locktype = 'advisory';

-- Bounded results: the bytes a generated query returns are capped while rows arrive.
SET nl2sql.max_result_bytes = '8kB';
SELECT count(*) AS rows FROM nl2sql_run('[many-rows] a million rows');
SELECT count(*) AS rows FROM nl2sql_run('[big-value] one big value');
RESET nl2sql.max_result_bytes;

DROP OWNED BY mallory CASCADE;
REVOKE CREATE ON SCHEMA public FROM mallory;
DROP ROLE mallory;
RESET nl2sql.mode;
RESET nl2sql.max_corrections;
