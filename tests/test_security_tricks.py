"""Tricks of a hostile model and of a hostile table owner against the tree check and the
planner's calls, from an independent review: function-call notation on a row, dotted and
Unicode-escaped names against the allow-list, domain checks and casts reached without a node of
their own, join estimators, a stored search_path shadowing built-ins, and SQL functions the
planner would inline. Each test asserts the safe outcome: the question is refused with a
specific SQLSTATE, and her code never ran (no NOTICE from it, no advisory lock held)."""
import json
import threading
import time

import psycopg
import pytest
from psycopg import errors

from helpers import hostile_owner, scratch_role

# Written so that a shadowed `=` (a search_path that puts public first) cannot change the count.
LOCKS = ("SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype OPERATOR(pg_catalog.=) 'advisory' "
         "AND pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()")
LOCKED = "function pg_catalog.pg_try_advisory_lock is not allowed in generated SQL"

# Her operators: <~> looks harmless (int4ne) but its negator ~=~ is pg_try_advisory_lock, which
# neqsel calls on the column's most common values while the planner estimates `x <~> c`.
NEGATOR_PAIR = [
    "CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.pg_try_advisory_lock)",
    """CREATE OPERATOR public.<~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
       NEGATOR = OPERATOR(public.~=~), RESTRICT = neqsel)""",
]

# The same payload behind public.<>: whoever's search_path puts public before pg_catalog gets her
# operator for every `int <> int`.
SHADOWED_NE = [
    "CREATE OPERATOR public.~==~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.pg_try_advisory_lock)",
    """CREATE OPERATOR public.<> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
       NEGATOR = OPERATOR(public.~==~), RESTRICT = neqsel)""",
]


def ages(table, rows=100):
    """A table of ages 0 to 4 everyone may read, with statistics (its most common values)."""
    return [
        f"CREATE TABLE {table} (age int)",
        f"INSERT INTO {table} SELECT g % 5 FROM generate_series(1, {rows}) g",
        f"ANALYZE {table}",
        f"GRANT SELECT ON {table} TO PUBLIC",
    ]


def ran_her(notices, what):
    return [n for n in notices if f"{what} ran" in n]


def refused(conn, question, message):
    with pytest.raises(errors.InsufficientPrivilege) as e:
        conn.execute("SELECT nl2sql(%s)", (question,))
    assert e.value.diag.message_primary == message, question
    return e.value


def test_function_call_notation_on_a_row_calls_no_function_of_hers(connect, mock):
    # `name(s)` on a row is a projection of column name... unless a function name(singer)
    # exists: function-call notation prefers the function (attribute notation `s.name` prefers
    # the column). She creates one; the model writes the function-call form.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hnmallory",
        """CREATE FUNCTION public.name(singer) RETURNS text STABLE LANGUAGE plpgsql
           AS $$ BEGIN RAISE NOTICE 'name(singer) ran as %', current_user; RETURN 'x'; END $$""",
    )
    with owner as ran:
        refused(conn, "[hr-call-notation] the first singer's name", "function public.name is not trusted in generated SQL")
        assert not ran_her(ran, "name(singer)"), ran
        # Attribute notation reads the column: answered, and her function never ran.
        rows = conn.execute("SELECT * FROM nl2sql_run('[hr-attr-column] the first singer''s name')").fetchall()
        assert len(rows) == 1 and "x" != rows[0][0]["n"]
        assert not ran_her(ran, "name(singer)"), ran


def test_a_quoted_name_with_a_dot_is_not_the_allow_listed_function(connect, mock):
    # A superuser allow-lists pytest_hq.total (schema pytest_hq, function total). She creates,
    # in public, a function whose NAME is "pytest_hq.total"; the model calls it quoted and
    # through a Unicode escape of the dot. Judged by its catalog row (schema public), it is not
    # the allow-listed one.
    conn = connect()
    conn.execute("DROP SCHEMA IF EXISTS pytest_hq CASCADE")
    conn.execute("CREATE SCHEMA pytest_hq")
    conn.execute("CREATE FUNCTION pytest_hq.total() RETURNS int STABLE LANGUAGE sql AS 'SELECT 7'")
    conn.execute("GRANT USAGE ON SCHEMA pytest_hq TO PUBLIC")
    try:
        owner = hostile_owner(
            conn, "pytest_hqmallory",
            """CREATE FUNCTION public."pytest_hq.total"() RETURNS int STABLE LANGUAGE plpgsql
               AS $$ BEGIN RAISE NOTICE 'dotted total ran as %', current_user; RETURN 1; END $$""",
        )
        with owner as ran:
            conn.execute("SET nl2sql.allowed_functions = 'pytest_hq.total'")
            for question in ("[hr-dotted-quoted] the total", "[hr-dotted-escaped] the total"):
                refused(conn, question, "function public.pytest_hq.total is not trusted in generated SQL")
            assert not ran_her(ran, "dotted total"), ran
            # The allow-listed one runs.
            assert conn.execute("SELECT * FROM nl2sql_run('[hr-dotted-real] the total')").fetchone()[0] == {"t": 7}
            conn.execute("RESET nl2sql.allowed_functions")
    finally:
        conn.execute("DROP SCHEMA pytest_hq CASCADE")


def test_a_domain_check_calling_a_builtin_is_judged_without_a_domain_node(connect, mock):
    # Her domain's CHECK calls the built-in pg_try_advisory_lock directly (no function of hers:
    # the fmgr hooks never see built-ins). It is reached through a type's input function, with
    # no CoerceToDomain for the tree check: a record literal (during parse analysis),
    # json_populate_record and a column definition list. The object-access hook judges the
    # CHECK's functions as the executor initialises them.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hbmallory",
        "CREATE DOMAIN pytest_hbint AS int CHECK (VALUE IS NULL OR pg_try_advisory_lock(4310))",
        "CREATE TYPE pytest_hbrec AS (a pytest_hbint)",
    )
    with owner:
        for question in ("[hr-bdomain-record] one as a record", "[hr-bdomain-populate] one populated",
                         "[hr-bdomain-to-record] one through a column list"):
            refused(conn, question, LOCKED)
            assert conn.execute(LOCKS).fetchone()[0] == 0, question


def test_casts_to_her_function_implicit_or_inlined_are_judged(connect, mock):
    # Her casts: an IMPLICIT one from her enum to text (PostgreSQL inserts it in `mood = label`
    # and in `upper(mood)`), and an explicit one that only the body of pg_catalog's
    # quote_literal(anyelement) reaches: a SQL function the planner inlines, whose body
    # `$1::pg_catalog.text` is parsed at plan time, so the tree check never sees the cast; the
    # execution hooks (and, for a constant, the folding at plan time) do.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hcmallory",
        "CREATE TYPE pytest_hmood AS ENUM ('calm', 'angry')",
        """CREATE FUNCTION pytest_hmood_text(pytest_hmood) RETURNS text IMMUTABLE LANGUAGE plpgsql
           AS $$ BEGIN RAISE NOTICE 'hmood_text ran as %', current_user; RETURN 'calm'; END $$""",
        "CREATE CAST (pytest_hmood AS text) WITH FUNCTION pytest_hmood_text(pytest_hmood) AS IMPLICIT",
        "CREATE TABLE pytest_hmoods (mood pytest_hmood, label text)",
        "INSERT INTO pytest_hmoods VALUES ('calm', 'calm'), ('angry', 'x')",
        "CREATE TYPE pytest_hmood2 AS ENUM ('calm', 'angry')",
        """CREATE FUNCTION pytest_hmood2_text(pytest_hmood2) RETURNS text IMMUTABLE LANGUAGE plpgsql
           AS $$ BEGIN RAISE NOTICE 'hmood2_text ran as %', current_user; RETURN 'calm'; END $$""",
        "CREATE CAST (pytest_hmood2 AS text) WITH FUNCTION pytest_hmood2_text(pytest_hmood2)",
        "CREATE TABLE pytest_hmoods2 (mood pytest_hmood2)",
        "INSERT INTO pytest_hmoods2 VALUES ('calm'), ('angry')",
        "GRANT SELECT ON pytest_hmoods, pytest_hmoods2 TO PUBLIC",
    )
    with owner as ran:
        try:
            conn.execute("SET nl2sql.sample_rows = 0")
            for question in ("[hr-implicit-cast] moods equal to their label", "[hr-implicit-call] moods in capitals"):
                refused(conn, question, "function public.pytest_hmood_text is not trusted in generated SQL")
            for question in ("[hr-inlined-cast] moods quoted", "[hr-inlined-const] calm quoted"):
                refused(conn, question, "function public.pytest_hmood2_text is not trusted in generated SQL")
            assert not ran_her(ran, "hmood_text") and not ran_her(ran, "hmood2_text"), ran
        finally:
            conn.execute("RESET nl2sql.sample_rows")
            # Casts have no owner: DROP OWNED leaves them (and so refuses to drop their functions).
            conn.execute("DROP CAST IF EXISTS (pytest_hmood AS text)")
            conn.execute("DROP CAST IF EXISTS (pytest_hmood2 AS text)")


def test_her_function_in_a_partition_key_runs_as_no_one_else(connect, mock):
    # Her partitioned table's key is her IMMUTABLE function: PostgreSQL calls it to route a row
    # she inserts; a query calls it where it writes the key's expression (here the one case
    # that reaches it: reading the table, pruning it on a column, building its value index never
    # call it; kept as the class's negative cases). Run as anyone but her, it takes an advisory
    # lock (session-wide, kept through a rollback) and says so.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hpmallory",
        """CREATE FUNCTION pytest_hpkey(t text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN
             IF current_user <> 'pytest_hpmallory' THEN
               PERFORM pg_try_advisory_lock(4311);
               RAISE NOTICE 'hpkey ran as %', current_user;
             END IF;
             RETURN t; END $$""",
        "CREATE TABLE pytest_hpart (id int, city text) PARTITION BY LIST (pytest_hpkey(city))",
        "CREATE TABLE pytest_hpart_a PARTITION OF pytest_hpart FOR VALUES IN ('Paris')",
        "CREATE TABLE pytest_hpart_b PARTITION OF pytest_hpart DEFAULT",
        "INSERT INTO pytest_hpart VALUES (1, 'Paris'), (2, 'Rome')",
        "GRANT SELECT ON pytest_hpart, pytest_hpart_a, pytest_hpart_b TO PUBLIC",
    )
    with owner as ran:
        for question in ("[hr-partition-key] rows in Paris", "[hr-partition-key-where] rows keyed Paris"):
            try:
                conn.execute("SELECT nl2sql(%s)", (question,))
            except errors.InsufficientPrivilege as e:
                assert "pytest_hpkey" in e.diag.message_primary, (question, e.diag.message_primary)
            assert conn.execute(LOCKS).fetchone()[0] == 0 and not ran_her(ran, "hpkey"), (question, ran)
        conn.execute("SELECT status FROM nl2sql.create_value_index('pytest_hpart')").fetchall()
        conn.execute("SELECT * FROM nl2sql.refresh_value_indexes('pytest_hpart')").fetchall()
        assert conn.execute(LOCKS).fetchone()[0] == 0 and not ran_her(ran, "hpkey"), ran
        conn.execute("SELECT nl2sql.drop_value_index('pytest_hpart')")


def test_a_join_estimator_reaching_the_negator_is_judged(connect, mock):
    # Her operator's JOIN estimator is neqjoinsel: the planner estimates a join clause (and the
    # anti-join NOT EXISTS makes of it) through the negator, whose function eqjoinsel calls on
    # both sides' most common values. Outside nl2sql this takes five advisory locks.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hjmallory",
        "CREATE OPERATOR public.=#= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.pg_try_advisory_lock)",
        """CREATE OPERATOR public.<#~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
           NEGATOR = OPERATOR(public.=#=), RESTRICT = neqsel, JOIN = neqjoinsel)""",
        *ages("pytest_hjages"),
        *ages("pytest_hjbages"),
    )
    with owner:
        conn.execute("SET nl2sql.sample_rows = 0")
        for question in ("[hr-join-negator] pairs of different ages", "[hr-antijoin-negator] ages nobody differs from"):
            refused(conn, question, LOCKED)
            assert conn.execute(LOCKS).fetchone()[0] == 0, question
        conn.execute("RESET nl2sql.sample_rows")


def test_a_search_path_stored_for_the_database_shadows_nothing_that_runs(connect, mock):
    # pg_db_role_setting: the database's owner (simulated here by the superuser) stores
    # search_path = public, pg_catalog, so every new session, a superuser's included, resolves
    # `int <> int` to her public.<> (negator: pg_try_advisory_lock) and upper(text) to her
    # public.upper. A role cannot store nl2sql's SUSET settings for itself either.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hsmallory",
        *SHADOWED_NE,
        """CREATE FUNCTION public.upper(text) RETURNS text IMMUTABLE LANGUAGE plpgsql
           AS $$ BEGIN RAISE NOTICE 'her upper ran as %', current_user; RETURN $1; END $$""",
        *ages("pytest_hsages"),
    )
    with owner:
        conn.execute("SET ROLE pytest_hsmallory")
        try:
            for setting in ("nl2sql.allowed_functions = 'upper'", "nl2sql.superuser_role = 'pytest_hsmallory'"):
                with pytest.raises(errors.InsufficientPrivilege):
                    conn.execute(f"ALTER ROLE pytest_hsmallory SET {setting}")
        finally:
            conn.execute("RESET ROLE")
        conn.execute("ALTER DATABASE concert_singer SET search_path = public, pg_catalog")
        try:
            asker = connect()
            notices = []
            asker.add_notice_handler(lambda n: notices.append(n.message_primary))
            assert asker.execute("SHOW search_path").fetchone()[0] == "public, pg_catalog"
            for s in ("nl2sql.mode = zero_shot", "nl2sql.max_corrections = 0"):
                asker.execute(f"SET {s}")
            refused(asker, "[hr-path-negator] ages other than 4303", LOCKED)
            assert asker.execute(LOCKS).fetchone()[0] == 0
            refused(asker, "[hr-path-upper] the first name in capitals", "function public.upper is not trusted in generated SQL")
            assert not ran_her(notices, "her upper"), notices
            # nl2sql's own catalog reads and samples name pg_catalog's operators.
            assert "singer" in asker.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
            assert asker.execute(LOCKS).fetchone()[0] == 0
            assert not ran_her(notices, "her upper"), notices
        finally:
            conn.execute("ALTER DATABASE concert_singer RESET search_path")


def test_a_schema_named_after_the_superuser_role_shadows_nothing(connect, mock):
    # A superuser's question runs as nl2sql.superuser_role, under which the search_path's
    # "$user" would name that role's schema. A role that may create schemas (not tables in
    # public) creates one named after it, and one named after the superuser asking, each
    # holding a `singer` of her own that everyone may read.
    conn = connect()
    me = conn.execute("SELECT quote_ident(session_user)").fetchone()[0]
    with scratch_role(conn, "pytest_hsreader", "GRANT pg_read_all_data TO pytest_hsreader"), \
            scratch_role(conn, "pytest_hsmallet", "GRANT CREATE ON DATABASE concert_singer TO pytest_hsmallet"):
        conn.execute("SET ROLE pytest_hsmallet")
        try:
            for schema in ("pytest_hsreader", me):
                conn.execute(f"CREATE SCHEMA {schema}")
                conn.execute(f"CREATE TABLE {schema}.singer (singer_id int, name text)")
                conn.execute(f"INSERT INTO {schema}.singer VALUES (1, 'hers')")
                conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO PUBLIC")
                conn.execute(f"GRANT SELECT ON {schema}.singer TO PUBLIC")
        finally:
            conn.execute("RESET ROLE")
        for s in ("nl2sql.mode = zero_shot", "nl2sql.max_corrections = 0", "nl2sql.superuser_role = pytest_hsreader"):
            conn.execute(f"SET {s}")
        assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'
        real = conn.execute("SELECT count(*) FROM public.singer").fetchone()[0]
        assert real != 1
        # The query reads public.singer, as the same text run in this session does.
        rows = conn.execute("SELECT * FROM nl2sql_run('[hs-user-schema] how many singers are there')").fetchall()
        assert rows == [({"n": real},)]
        # The schema shown is the path's: hers are off it, so qualified.
        prompt = conn.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        assert "pytest_hsreader.singer" in prompt and f"{me}.singer" in prompt, prompt
        # Nothing of the switch outlives the call.
        assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'
        assert conn.execute("SELECT current_user = session_user").fetchone()[0]


def test_a_system_sql_function_inlined_by_the_planner_is_judged(connect, mock):
    # A SQL function that counts as a system one (owned by a superuser and part of an
    # extension: here added to pg_trgm, as a third-party extension's own SQL functions are) is
    # allowed in generated SQL. Were it not routed through the fmgr hook, the planner would
    # inline it (inline_function / inline_set_returning_function), parsing its text body with
    # the session's search_path after the planner hook judged the query: with public first on
    # that path (a database setting, as in the test above), `$1 <> 4303` in the body is her
    # public.<>, and neqsel would run her negator pg_try_advisory_lock on the column's most
    # common values, judged by nobody. Verified failing (one lock held, the question answered)
    # before such functions were routed through fmgr.
    conn = connect()
    if not conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()[0]:
        pytest.skip("needs an extension to add the function to (pg_trgm)")
    owner = hostile_owner(conn, "pytest_himallory", *SHADOWED_NE, *ages("pytest_hiages"))
    with owner:
        try:
            conn.execute("CREATE FUNCTION public.pytest_hi_far(int) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT $1 <> 4303'")
            conn.execute("""CREATE FUNCTION public.pytest_hi_rows() RETURNS SETOF pytest_hiages STABLE LANGUAGE sql
                            AS 'SELECT * FROM public.pytest_hiages WHERE age <> 4303'""")
            for f in ("public.pytest_hi_far(int)", "public.pytest_hi_rows()"):
                conn.execute(f"ALTER EXTENSION pg_trgm ADD FUNCTION {f}")
            conn.execute("SET search_path = public, pg_catalog")
            conn.execute("SET nl2sql.sample_rows = 0")
            outcomes = {}
            for question in ("[hr-inlined-system] ages far from 4303", "[hr-inlined-system-srf] rows far from 4303"):
                try:
                    conn.execute("SELECT nl2sql(%s)", (question,))
                    outcomes[question] = "answered"
                except psycopg.Error as e:
                    outcomes[question] = (e.sqlstate, e.diag.message_primary)
                outcomes[question] = (outcomes[question], conn.execute(LOCKS).fetchone()[0])
                conn.execute("SELECT pg_catalog.pg_advisory_unlock_all()")
            for question, (outcome, locks) in outcomes.items():
                assert locks == 0, "her negator ran in the planner (%s): %s" % (question, outcomes)
                assert outcome == ("42501", LOCKED), outcomes
        finally:
            conn.execute("RESET search_path")
            conn.execute("RESET nl2sql.sample_rows")
            conn.execute("SELECT pg_catalog.pg_advisory_unlock_all()")
            for f in ("public.pytest_hi_far(int)", "public.pytest_hi_rows()"):
                conn.execute(f"""DO $$ BEGIN ALTER EXTENSION pg_trgm DROP FUNCTION {f};
                                 EXCEPTION WHEN OTHERS THEN NULL; END $$""")
                conn.execute(f"DROP FUNCTION IF EXISTS {f}")


def test_an_allow_listed_sql_function_is_not_inlined_past_the_planner_hook(connect, mock):
    # The same bodies in functions of hers a superuser allow-lists: not system functions, so
    # the fmgr hook is needed for them, the planner does not inline them, and their bodies are
    # planned (and judged) as queries of their own.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_hlmallory",
        *NEGATOR_PAIR,
        *ages("pytest_hlages"),
        "CREATE FUNCTION public.pytest_hl_far(int) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT $1 <~> 4303'",
        """CREATE FUNCTION public.pytest_hl_rows() RETURNS SETOF pytest_hlages STABLE LANGUAGE sql
           AS 'SELECT * FROM public.pytest_hlages WHERE age <~> 4303'""",
    )
    with owner:
        conn.execute("SET nl2sql.sample_rows = 0")
        conn.execute("SET nl2sql.allowed_functions = 'public.pytest_hl_far, public.pytest_hl_rows'")
        for question in ("[hr-allowed-inline] ages far from 4303", "[hr-allowed-inline-srf] rows far from 4303"):
            refused(conn, question, LOCKED)
            assert conn.execute(LOCKS).fetchone()[0] == 0, question
        conn.execute("RESET nl2sql.allowed_functions")
        conn.execute("RESET nl2sql.sample_rows")


def test_an_operator_changed_while_the_model_answers_is_judged_as_it_now_is(connect, mock):
    # The caller's transaction already holds her table (so analysing the answer takes no new
    # lock). While the model takes its time, she drops the harmless negator of <~> and creates
    # it again on pg_try_advisory_lock (which links it back). The planner hook takes in the
    # change before it judges: the new negator is refused like any other, not run.
    conn, other = connect(), connect()
    owner = hostile_owner(
        conn, "pytest_hwmallory",
        "CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4eq)",
        """CREATE OPERATOR public.<~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
           NEGATOR = OPERATOR(public.~=~), RESTRICT = neqsel)""",
        *ages("pytest_hwages"),
        "CREATE INDEX pytest_hwages_age ON pytest_hwages (age)",
    )
    with owner:
        conn.execute("SET nl2sql.sample_rows = 0")
        other.execute("SET ROLE pytest_hwmallory")
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM pytest_hwages")
        outcome = {}

        def ask():
            try:
                conn.execute("SELECT nl2sql('[hr-wait-negator] ages other than 4303')")
                outcome["result"] = "answered"
            except Exception as e:  # noqa: BLE001 - inspected below
                outcome["result"] = e

        t = threading.Thread(target=ask)
        t.start()
        try:
            deadline = time.time() + 30
            while not any("[hr-wait-negator]" in str(r["body"]) for r in mock.requests()):
                assert time.time() < deadline and t.is_alive(), "the model was never asked: %s" % outcome
                time.sleep(0.05)
            other.execute("DROP OPERATOR public.~=~ (int4, int4)")
            other.execute("""CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4,
                             FUNCTION = pg_catalog.pg_try_advisory_lock, NEGATOR = OPERATOR(public.<~>))""")
        finally:
            t.join(60)
            conn.execute("ROLLBACK")
            other.execute("RESET ROLE")
        e = outcome["result"]
        assert isinstance(e, errors.InsufficientPrivilege), e
        assert e.diag.message_primary == LOCKED
        assert conn.execute(LOCKS).fetchone()[0] == 0
        conn.execute("RESET nl2sql.sample_rows")


def test_a_shell_owned_by_a_superuser_is_left_to_postgresql_and_she_cannot_complete_it(connect, mock):
    # The reviewed change refuses only shells a role other than a superuser owns: only its
    # owner can give a shell a function. A superuser's operator names a negator that does not
    # exist yet (a shell the superuser owns): nl2sql does not refuse it as a shell (PostgreSQL's
    # estimator fails on it by itself), and she can neither complete nor drop it.
    conn = connect()
    owner = hostile_owner(conn, "pytest_hxmallory", *ages("pytest_hxages"))
    with owner:
        conn.execute("""CREATE OPERATOR public.<%~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
                        NEGATOR = OPERATOR(public.~%~), RESTRICT = neqsel)""")
        try:
            conn.execute("SET nl2sql.sample_rows = 0")
            with pytest.raises(psycopg.Error) as e:
                conn.execute("SELECT nl2sql('[hr-superuser-shell] ages other than 4303')")
            assert "has no function yet" not in (e.value.diag.message_primary or ""), e.value
            conn.execute("SET ROLE pytest_hxmallory")
            try:
                with pytest.raises(errors.InsufficientPrivilege):
                    conn.execute("""CREATE OPERATOR public.~%~ (LEFTARG = int4, RIGHTARG = int4,
                                    FUNCTION = pg_catalog.pg_try_advisory_lock, NEGATOR = OPERATOR(public.<%~>))""")
                with pytest.raises(errors.InsufficientPrivilege):
                    conn.execute("DROP OPERATOR public.~%~ (int4, int4)")
            finally:
                conn.execute("RESET ROLE")
            assert conn.execute(LOCKS).fetchone()[0] == 0
        finally:
            conn.execute("RESET nl2sql.sample_rows")
            conn.execute("DROP OPERATOR IF EXISTS public.<%~> (int4, int4)")
            conn.execute("DROP OPERATOR IF EXISTS public.~%~ (int4, int4)")


def test_her_operator_on_her_search_path_writes_no_statement_the_owner_runs(connect):
    """A role granted the value index's functions, to index her own tables, calls the Rust
    function itself (the wrapper's pinned search_path is then not hers) with her schema before
    pg_catalog: no name nl2sql splices into a statement it runs as the extension's owner (LOCK
    TABLE, CREATE TRIGGER) is computed by her operators. Her `||(text, text)` returns a table name
    followed by a statement of her choice."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    role = "pytest_splicer"
    payload = ("pytest_splicer.towns IN ACCESS SHARE MODE; CREATE TABLE public.spliced_as_owner (); "
               "ALTER ROLE pytest_splicer SUPERUSER; LOCK TABLE pytest_splicer.towns")
    admin.execute("DROP TABLE IF EXISTS public.spliced_as_owner")
    with scratch_role(admin, role, f"CREATE SCHEMA {role} AUTHORIZATION {role}",
                      f"GRANT EXECUTE ON FUNCTION nl2sql._create_value_index(oid, text, boolean) TO {role}"):
        her = connect()
        her.execute(f"SET ROLE {role}")
        her.execute(f"CREATE TABLE {role}.towns (town text)")
        her.execute(f"INSERT INTO {role}.towns VALUES ('Aberdeen'), ('Dundee')")
        her.execute(f"CREATE FUNCTION {role}.cat(text, text) RETURNS text LANGUAGE sql AS $$ SELECT '{payload}'::text $$")
        her.execute(f"CREATE OPERATOR {role}.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = {role}.cat)")
        her.execute(f"SET search_path = {role}, pg_catalog")
        built = her.execute(f"SELECT column_name, status FROM nl2sql._create_value_index('{role}.towns'::regclass::oid, NULL, false)").fetchall()
        assert built == [("town", "ready")]
        her.execute("RESET search_path")
        her.execute("RESET ROLE")
        assert admin.execute(f"SELECT rolsuper FROM pg_roles WHERE rolname = '{role}'").fetchone() == (False,)
        assert admin.execute("SELECT to_regclass('public.spliced_as_owner')").fetchone() == (None,)
        assert admin.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'pytest_splicer.towns'::regclass "
                             "AND tgfoid = 'nl2sql._values_changed'::regproc").fetchone()[0] > 0
        admin.execute(f"DROP TABLE {role}.towns")
    admin.execute("DROP TABLE IF EXISTS public.spliced_as_owner")


def test_column_stats_runs_no_function_of_a_view_owner_with_the_callers_rights(connect):
    """nl2sql.column_stats() reads a relation as the schema prompt does, in the sandbox: a
    superuser calling it on her view, whose function would take rights from whoever runs it, is
    refused before her function runs. The helpers nl2sql's reads call refuse to run anywhere but
    inside those reads. A plain table's statistics, and a view's of built-in functions, come back."""
    admin = connect()
    with hostile_owner(
        admin,
        "pytest_viewer",
        "CREATE TABLE cs_towns (id int PRIMARY KEY, town text)",
        "INSERT INTO cs_towns VALUES (1, 'Forfar'), (2, 'Arbroath')",
        """CREATE FUNCTION cs_rights(t text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
            BEGIN
                RAISE NOTICE 'cs_rights ran as %', current_user;
                IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                    EXECUTE 'ALTER ROLE pytest_viewer CREATEROLE';
                END IF;
                RETURN t;
            END $$""",
        "CREATE VIEW cs_hers AS SELECT id, cs_rights(town) AS town FROM cs_towns",
        "CREATE VIEW cs_plain AS SELECT id, upper(town) AS town FROM cs_towns",
    ) as heard:
        with pytest.raises(errors.InsufficientPrivilege) as e:
            admin.execute("SELECT nl2sql.column_stats('cs_hers')")
        assert e.value.diag.message_primary == "function public.cs_rights is not trusted"
        for call, helper in [("nl2sql._sample_columns('cs_hers', 10)", "_sample_columns"),
                             ("nl2sql._value_exists('cs_hers', 'town', 'Forfar')", "_value_exists")]:
            with pytest.raises(errors.InsufficientPrivilege) as e:
                admin.execute(f"SELECT {call}")
            assert e.value.diag.message_primary == f"nl2sql.{helper}() runs only inside nl2sql's sandbox"
        # Nor through a view of the helper: the view's query runs outside the sandbox too.
        admin.execute("CREATE TEMP VIEW cs_through AS SELECT nl2sql._sample_columns('cs_hers', 10) AS s")
        with pytest.raises(errors.InsufficientPrivilege):
            admin.execute("SELECT * FROM cs_through")
        assert not any("cs_rights" in m for m in heard), heard
        assert admin.execute("SELECT rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = 'pytest_viewer'").fetchone()[0] is False
        assert not admin.execute("SELECT nl2sql._inspecting()").fetchone()[0]
        # What the statistics say, for a table and for a view of built-in functions.
        stats = admin.execute("SELECT nl2sql.column_stats('cs_towns')").fetchone()[0]
        assert stats["rows"] == 2 and stats["complete"] is True
        assert sorted(stats["columns"]["town"]["values"]) == ["Arbroath", "Forfar"]
        assert stats["columns"]["id"]["min"] == "1" and stats["columns"]["id"]["max"] == "2"
        plain = admin.execute("SELECT nl2sql.column_stats('cs_plain', 1)").fetchone()[0]
        assert plain["rows"] == 1 and plain["complete"] is False
        with pytest.raises(errors.InvalidParameterValue):
            admin.execute("SELECT nl2sql.column_stats('cs_towns', 0)")
        admin.execute("DROP VIEW cs_through")


def test_a_foreign_table_her_policy_reads_is_refused_while_nl2sql_reads_her_table(connect):
    """nl2sql.allow_foreign_tables off: a foreign table is not read however the planner reaches
    it. Her row-level security policy's subquery reads one (which the relations her table's
    query names do not show): nl2sql.column_stats() of her table is refused before the foreign
    data wrapper runs, and the schema prompt shows her table without samples. On, it is read."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("CREATE EXTENSION IF NOT EXISTS file_fdw")
    admin.execute("CREATE SERVER pytest_files FOREIGN DATA WRAPPER file_fdw")
    try:
        admin.execute("CREATE FOREIGN TABLE pytest_remote (x int) SERVER pytest_files OPTIONS (filename '/dev/null', format 'csv')")
        admin.execute("GRANT SELECT ON pytest_remote TO PUBLIC")
        with hostile_owner(
            admin,
            "pytest_fencer",
            "CREATE TABLE fz_towns (id int, town text)",
            "INSERT INTO fz_towns VALUES (1, 'Forfar'), (2, 'Arbroath')",
            "CREATE POLICY fenced ON fz_towns USING (NOT EXISTS (SELECT 1 FROM pytest_remote))",
            "ALTER TABLE fz_towns ENABLE ROW LEVEL SECURITY",
            "GRANT SELECT ON fz_towns TO PUBLIC",
        ):
            with pytest.raises(errors.InsufficientPrivilege) as e:
                admin.execute("SELECT nl2sql.column_stats('fz_towns')")
            assert e.value.diag.message_primary == "nl2sql's read of a relation reaches the foreign table public.pytest_remote"
            assert "row-level security policy" in e.value.diag.message_detail
            # A view over it: told before anything is read.
            admin.execute("CREATE VIEW fz_view AS SELECT x FROM pytest_remote")
            with pytest.raises(errors.FeatureNotSupported) as e:
                admin.execute("SELECT nl2sql.column_stats('fz_view')")
            assert e.value.diag.message_primary == "relation public.fz_view reads a foreign table"
            admin.execute("DROP VIEW fz_view")
            admin.execute("SELECT nl2sql.reset_cache()")
            prompt = admin.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
            assert "fz_towns" in prompt and "Forfar" not in prompt
            # An allow-listed PL/pgSQL function reading the foreign table, its plan cached by a
            # direct call first: the model's query calling it is refused all the same.
            admin.execute("""CREATE FUNCTION fz_count() RETURNS bigint LANGUAGE plpgsql STABLE AS
                             $$DECLARE n bigint; BEGIN SELECT count(*) INTO n FROM pytest_remote; RETURN n; END$$""")
            admin.execute("SET nl2sql.allowed_functions = 'public.fz_count'")
            assert admin.execute("SELECT fz_count()").fetchone()[0] == 0
            ran = admin.execute("SELECT nl2sql.compare_results('SELECT 1', 'SELECT fz_count()')").fetchone()[0]
            assert "rows" not in ran["predicted"], ran
            assert "foreign table public.pytest_remote" in json.dumps(ran), ran
            admin.execute("RESET nl2sql.allowed_functions")
            admin.execute("DROP FUNCTION fz_count()")
            admin.execute("SET nl2sql.allow_foreign_tables = on")
            stats = admin.execute("SELECT nl2sql.column_stats('fz_towns')").fetchone()[0]
            assert sorted(stats["columns"]["town"]["values"]) == ["Arbroath", "Forfar"]
            admin.execute("RESET nl2sql.allow_foreign_tables")
    finally:
        admin.execute("DROP SERVER pytest_files CASCADE")



def test_her_policy_reaches_nothing_of_the_dbas_session_while_her_table_is_indexed(connect):
    """A value index built with include_rls runs her policy as her, in the DBA's backend: a
    built-in function that reaches the DBA's session or transaction (its advisory locks, its
    query's text, its last sequence value, its random sequence) or a statement that reaches its
    transaction (NOTIFY, SET CONSTRAINTS, DECLARE) is refused there, before it runs, also where
    the DBA's own call set her function up earlier in the transaction, and the read fails as hers
    (the schema-wide build skips her table); the DBA's advisory lock is still held, none of hers
    is, and the DBA's last trace is neither shown to her code nor forgotten. A policy without
    such calls (her own table written, her own sequence drawn) is read."""
    admin = connect()
    calls = {
        "unlock": "PERFORM pg_catalog.pg_advisory_unlock_all(); PERFORM pg_catalog.pg_advisory_lock(4242);",
        "query": "INSERT INTO pytest_sx.loot VALUES (pg_catalog.current_query());",
        "lastval": "INSERT INTO pytest_sx.loot VALUES (pg_catalog.lastval()::text);",
        "seed": "PERFORM pg_catalog.setseed(0.5);",
        "notify": "NOTIFY sx_channel, 'from the dba';",
        "constraints": "SET CONSTRAINTS ALL DEFERRED;",
        "trace": "INSERT INTO pytest_sx.loot VALUES (coalesce(nl2sql.last_trace()::text, 'none'));",
        "plain": "INSERT INTO pytest_sx.loot VALUES (pg_catalog.nextval('pytest_sx.seq')::text);",
        "random": "PERFORM pg_catalog.random();",
        "cursors": "INSERT INTO pytest_sx.loot SELECT statement FROM pg_catalog.pg_cursors;",
        "prepared": "INSERT INTO pytest_sx.loot SELECT statement FROM pg_catalog.pg_prepared_statements;",
        "currval": "INSERT INTO pytest_sx.loot VALUES (pg_catalog.currval('public.pytest_dba_seq')::text);",
        "declare": "EXECUTE 'DECLARE sx_cursor CURSOR FOR SELECT 1';",
        # Set up once by the DBA's own call earlier in the transaction (a simple expression
        # PL/pgSQL keeps while its plan holds; her function's search_path as the read's).
        "cached": "ok := CASE WHEN current_user = 'pytest_reacher' THEN pg_catalog.pg_try_advisory_lock(4242) ELSE false END;",
    }
    body = " ".join(f"IF pg_catalog.current_setting('pytest.call', true) = '{k}' THEN {v} END IF;" for k, v in calls.items())
    with hostile_owner(
        admin,
        "pytest_reacher",
        "CREATE TABLE pytest_sx.loot (said text)",
        "CREATE SEQUENCE pytest_sx.seq",
        f"CREATE FUNCTION pytest_sx.reach() RETURNS bool LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp "
        f"AS $$ DECLARE ok bool; BEGIN {body} RETURN true; END $$",
        "CREATE TABLE pytest_sx.towns (town text)",
        "INSERT INTO pytest_sx.towns VALUES ('Brechin'), ('Kirriemuir')",
        "CREATE POLICY reach ON pytest_sx.towns USING (pytest_sx.reach())",
        "ALTER TABLE pytest_sx.towns ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE pytest_sx.towns FORCE ROW LEVEL SECURITY",
        schema="pytest_sx",
    ):
        dba = connect()
        heard = []
        dba.add_notice_handler(lambda n: heard.append(n.message_primary))
        build = "SELECT status FROM nl2sql.create_value_index('pytest_sx.towns', include_rls => true)"
        try:
            dba.execute("SELECT pg_advisory_lock(1)")
            dba.execute("CREATE TEMP SEQUENCE dba_seq")
            dba.execute("SELECT nextval('dba_seq')")
            # A sequence she may read, which the DBA drew from: its currval is the DBA's.
            dba.execute("CREATE SEQUENCE public.pytest_dba_seq")
            dba.execute("GRANT SELECT ON SEQUENCE public.pytest_dba_seq TO PUBLIC")
            dba.execute("SELECT nextval('public.pytest_dba_seq')")
            dba.execute("PREPARE dba_secret AS SELECT 'dba-prepared-text'")
            # A trace of the DBA's, from an explain whose endpoint does not answer (kept for the
            # same custom settings: pytest.call set first).
            dba.execute("SET pytest.call = 'trace'")
            dba.execute("SET nl2sql.llm_url = 'http://127.0.0.1:9/v1'")
            try:
                dba.execute("SELECT nl2sql_explain('how many singers are there')")
            except psycopg.Error:
                pass
            assert dba.execute("SELECT nl2sql.last_trace()").fetchone()[0] is not None
            assert dba.execute(build).fetchall() == [("ready",)]
            assert dba.execute("SELECT nl2sql.last_trace()").fetchone()[0] is not None
            refused = {
                "unlock": "pg_advisory_unlock_all()",
                "query": "current_query()",
                "lastval": "lastval()",
                "seed": "setseed()",
                "notify": "NOTIFY",
                "constraints": "SET CONSTRAINTS",
                "random": "random()",
                "cursors": "pg_cursor()",
                "prepared": "pg_prepared_statement()",
                "currval": "currval()",
                "declare": "DECLARE",
            }
            for call, name in refused.items():
                dba.execute(f"SET pytest.call = '{call}'")
                with pytest.raises(errors.InsufficientPrivilege) as e:
                    dba.execute(build)
                assert e.value.diag.message_primary == "reading table pytest_sx.towns as its owner failed", call
                assert e.value.diag.message_detail.startswith(
                    f"The read raised: {name} may not run while nl2sql reads a table as its owner"), (call, e.value.diag.message_detail)
                heard.clear()
                dba.execute("SELECT * FROM nl2sql.create_value_indexes(ARRAY['pytest_sx'], include_rls => true)").fetchall()
                assert "nl2sql could not read table pytest_sx.towns as its owner; its values are not indexed" in heard, (call, heard)
            # Her function set up by the DBA's own call earlier in the transaction: judged again
            # in the read.
            dba.execute("SET pytest.call = 'cached'")
            with dba.transaction():
                dba.execute("SELECT pytest_sx.reach()")
                with pytest.raises(errors.InsufficientPrivilege) as e:
                    dba.execute(build)
                assert "pg_try_advisory_lock() may not run" in e.value.diag.message_detail, e.value.diag.message_detail
                raise psycopg.Rollback()
            locks = dba.execute("SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").fetchall()
            assert locks == [(1,)], locks
            # Negative: her own table and sequence are hers to use; the read succeeds.
            dba.execute("SET pytest.call = 'plain'")
            assert dba.execute(build).fetchall() == [("ready",)]
            loot = [r[0] for r in admin.execute("SELECT said FROM pytest_sx.loot").fetchall()]
            assert "none" in loot and "1" in loot and not [s for s in loot if "advisory" in s or "create_value" in s], loot
            assert not [s for s in loot if "dba-prepared" in s or "CURSOR" in s.upper()], loot
        finally:
            dba.close()
            admin.execute("DROP SEQUENCE IF EXISTS public.pytest_dba_seq")
