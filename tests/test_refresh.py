"""A refresh of every value index when one table makes trouble: its owner revoked her own
SELECT, forces a policy that raises query_canceled or sleeps. That table is skipped with a
WARNING and the others are refreshed; the caller's own cancel and statement_timeout still end
the refresh, rolled back whole."""
import contextlib
import threading
import time

import pytest
from psycopg import errors

from helpers import her_function, police, scratch_role

def test_a_table_that_cannot_be_read_does_not_undo_the_refresh_of_others(connect):
    """refresh_value_indexes() over every column: one table whose owner revoked their own SELECT
    is skipped with a WARNING, the others are rebuilt."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS closed_towns, open_towns")
    admin.execute("DROP ROLE IF EXISTS mallory")
    admin.execute("CREATE ROLE mallory")
    admin.execute("CREATE TABLE closed_towns (name text)")
    admin.execute("CREATE TABLE open_towns (name text)")
    admin.execute("INSERT INTO closed_towns VALUES ('Aberdeen')")
    admin.execute("INSERT INTO open_towns VALUES ('Inverness')")
    admin.execute("ALTER TABLE closed_towns OWNER TO mallory")
    try:
        admin.execute("SELECT * FROM nl2sql.create_value_index('closed_towns')")
        admin.execute("SELECT * FROM nl2sql.create_value_index('open_towns')")
        admin.execute("SET ROLE mallory")
        admin.execute("REVOKE SELECT ON closed_towns FROM mallory")
        admin.execute("RESET ROLE")
        mark_stale(admin, "closed_towns", "open_towns")
        warnings = []
        admin.add_notice_handler(lambda d: warnings.append(d.message_primary))
        rebuilt = admin.execute("SELECT relation::text FROM nl2sql.refresh_value_indexes()").fetchall()
        assert ("open_towns",) in rebuilt and ("closed_towns",) not in rebuilt
        assert any("closed_towns" in w and "previous generation" in w for w in warnings), warnings
        # The one skipped keeps serving, the other was rebuilt.
        assert admin.execute("SELECT value FROM nl2sql.search_values('aberdeen', 1)").fetchone()[0] == "Aberdeen"
        assert admin.execute("SELECT count(*) FROM nl2sql.value_flags f JOIN nl2sql.value_index i ON i.id = f.column_id "
                             "WHERE i.relid = 'open_towns'::regclass").fetchone()[0] == 0
    finally:
        admin.execute("DROP TABLE IF EXISTS closed_towns, open_towns")
        admin.execute("DROP ROLE IF EXISTS mallory")




def her_policed_towns(admin, role, function, body, policed, plain):
    """Two tables of towns holding 'Aberdeen': `policed` owned by `role`, who forces on herself a
    policy calling her PL/pgSQL `function` (`body`, then RETURN true), and `plain`."""
    her_function(admin, role, function, body)
    for t in (policed, plain):
        admin.execute(f"CREATE TABLE {t} (town text)")
        admin.execute(f"INSERT INTO {t} VALUES ('Aberdeen')")
    police(admin, role, function, policed)


# A policy body that sleeps for a minute while the session's pytest.nap is on.
NAP = """IF current_setting('pytest.nap', true) = 'on' THEN
           PERFORM pg_sleep(60);
         END IF;"""


def noting_session(connect, *settings):
    """A new session that keeps the primary message of each notice it gets (its WARNINGs), with
    `settings` run in it; the session and the list."""
    session = connect()
    notices = []
    session.add_notice_handler(lambda n: notices.append(n.message_primary))
    for setting in settings:
        session.execute(setting)
    return session, notices


def cancelled_after(admin, session, statement, seconds=1.0):
    """Runs `statement` in `session`, which `admin` cancels after `seconds`; asserts that it ends
    in query_canceled, and returns the seconds it ran."""
    pid = session.execute("SELECT pg_backend_pid()").fetchone()[0]
    canceller = threading.Timer(seconds, lambda: admin.execute("SELECT pg_cancel_backend(%s)", (pid,)))
    canceller.start()
    started = time.monotonic()
    try:
        with pytest.raises(errors.QueryCanceled):
            session.execute(statement)
    finally:
        canceller.join()
    return time.monotonic() - started


def mark_stale(admin, *tables):
    """Flags the value indexes of `tables` for a rebuild by the next refresh."""
    relids = ", ".join(f"'{t}'::regclass" for t in tables)
    admin.execute("INSERT INTO nl2sql.value_flags (column_id, flag) SELECT id, 'stale' FROM nl2sql.value_index "
                  f"WHERE relid IN ({relids})")


def index_policed_and_plain(admin, policed, plain, generations):
    """Indexes `policed` (its policies applied) and `plain`; their generations by table name."""
    admin.execute(f"SELECT * FROM nl2sql.create_value_index('{policed}', include_rls => true)")
    admin.execute(f"SELECT * FROM nl2sql.create_value_index('{plain}')")
    return dict(admin.execute(generations).fetchall())


def generations_of(*tables):
    """The query of the value index generations of `tables`, by table name."""
    names = ", ".join(f"'{t}'" for t in tables)
    return ("SELECT relid::text, generation FROM nl2sql.value_index "
            f"WHERE relid::text IN ({names}) ORDER BY 1")


def test_a_tables_own_query_canceled_fails_that_table_not_the_refresh(connect):
    """Code a table's owner wrote runs while nl2sql reads her table (here a policy she forces on
    herself) and may raise query_canceled with RAISE: an error of her table, not the caller's
    cancel. A refresh of every index goes on with the other tables and says which one it could
    not rebuild; that one keeps its generation until a later refresh. A real cancel still ends
    the refresh."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS gated_towns, plain_towns")
    role = "pytest_gater"
    with scratch_role(admin, role):
        her_policed_towns(admin, role, "pytest_gate", """
                         IF current_setting('pytest.gate', true) = 'on' THEN
                           RAISE EXCEPTION 'her gate' USING ERRCODE = 'query_canceled';
                         ELSIF current_setting('pytest.gate', true) = 'slow' THEN
                           PERFORM pg_sleep(30);
                         END IF;""", "gated_towns", "plain_towns")
        generations = generations_of("gated_towns", "plain_towns")
        try:
            before = index_policed_and_plain(admin, "gated_towns", "plain_towns", generations)
            # A TRUNCATE marks both indexes for a rebuild by the next refresh.
            for t in ("gated_towns", "plain_towns"):
                admin.execute(f"TRUNCATE {t}")
                admin.execute(f"INSERT INTO {t} VALUES ('Montrose')")
            refresher, warnings = noting_session(connect, "SET pytest.gate = on")
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            after = dict(refresher.execute(generations).fetchall())
            assert after["plain_towns"] > before["plain_towns"], (before, after)
            assert after["gated_towns"] == before["gated_towns"], (before, after)
            assert [w for w in warnings if "gated_towns" in w and "could not rebuild" in w], warnings
            # Her gate open, the next refresh rebuilds her table too.
            refresher.execute("RESET pytest.gate")
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            rebuilt = dict(refresher.execute(generations).fetchall())
            assert rebuilt["gated_towns"] > before["gated_towns"]
            # A real cancel while her table is read still ends the refresh, rolled back whole.
            for t in ("gated_towns", "plain_towns"):
                admin.execute(f"TRUNCATE {t}")
                admin.execute(f"INSERT INTO {t} VALUES ('Dundee')")
            refresher.execute("SET pytest.gate = slow")
            assert cancelled_after(admin, refresher, "SELECT * FROM nl2sql.refresh_value_indexes()") < 20
            refresher.execute("RESET pytest.gate")
            assert dict(refresher.execute(generations).fetchall()) == rebuilt
        finally:
            admin.execute("DROP TABLE IF EXISTS gated_towns, plain_towns")


def test_a_tables_sleeping_code_is_skipped_within_the_refresh_table_timeout(connect):
    """A table's owner can make every read of her table slow (a policy she forces on herself
    that sleeps). With nl2sql.refresh_table_timeout set, a refresh of every index gives up on
    her table after that time, says so, and refreshes the others: the re-check of values DML
    removed from her table waits for a later refresh, and so does her table's rebuild. The
    caller's statement_timeout still ends the refresh."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS sleepy_towns, awake_towns")
    role = "pytest_sleeper"
    with scratch_role(admin, role):
        her_policed_towns(admin, role, "pytest_nap", NAP, "sleepy_towns", "awake_towns")
        generations = generations_of("sleepy_towns", "awake_towns")
        removals = ("SELECT count(*) FROM nl2sql.value_removals r JOIN nl2sql.value_index i "
                    "ON i.id = r.column_id WHERE i.relid = 'sleepy_towns'::regclass")
        try:
            before = index_policed_and_plain(admin, "sleepy_towns", "awake_towns", generations)
            # Her table loses a value (a removal to re-check); the other is marked for a rebuild.
            admin.execute("INSERT INTO sleepy_towns VALUES ('Dundee')")
            admin.execute("DELETE FROM sleepy_towns WHERE town = 'Aberdeen'")
            assert admin.execute(removals).fetchone()[0] == 1
            admin.execute("TRUNCATE awake_towns")
            admin.execute("INSERT INTO awake_towns VALUES ('Montrose')")
            refresher, warnings = noting_session(connect, "SET nl2sql.refresh_table_timeout = '3s'", "SET pytest.nap = on")
            started = time.monotonic()
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert time.monotonic() - started < 30
            after = dict(refresher.execute(generations).fetchall())
            assert after["awake_towns"] > before["awake_towns"], (before, after)
            assert refresher.execute(removals).fetchone()[0] == 1
            assert [w for w in warnings if "sleepy_towns" in w and "could not re-check" in w
                    and "nl2sql.refresh_table_timeout (3000 ms)" in w], warnings
            # Her table marked for a rebuild too: the rebuild gives up the same way.
            admin.execute("TRUNCATE sleepy_towns, awake_towns")
            admin.execute("INSERT INTO sleepy_towns VALUES ('Perth')")
            admin.execute("INSERT INTO awake_towns VALUES ('Perth')")
            warnings.clear()
            started = time.monotonic()
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert time.monotonic() - started < 30
            again = dict(refresher.execute(generations).fetchall())
            assert again["awake_towns"] > after["awake_towns"], (after, again)
            assert again["sleepy_towns"] == before["sleepy_towns"], (before, again)
            assert [w for w in warnings if "sleepy_towns" in w and "could not rebuild" in w
                    and "nl2sql.refresh_table_timeout" in w], warnings
            # statement_timeout, shorter than the table's bound, still ends the refresh, rolled
            # back whole: it is the caller's, not her table's.
            admin.execute("TRUNCATE awake_towns")
            admin.execute("INSERT INTO awake_towns VALUES ('Forfar')")
            refresher.execute("SET nl2sql.refresh_table_timeout = '60s'")
            refresher.execute("SET statement_timeout = '1s'")
            started = time.monotonic()
            with pytest.raises(errors.QueryCanceled):
                refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert time.monotonic() - started < 20
            refresher.execute("RESET statement_timeout")
            assert dict(refresher.execute(generations).fetchall()) == again
            # Awake again, the next refresh rebuilds her table; nothing is left to re-check.
            refresher.execute("RESET pytest.nap")
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert dict(refresher.execute(generations).fetchall())["sleepy_towns"] > before["sleepy_towns"]
            found = ("SELECT value FROM nl2sql.search_values('perth', 5) "
                     "WHERE relation::text = 'sleepy_towns'")
            assert refresher.execute(found).fetchall() == [("Perth",)]
        finally:
            admin.execute("DROP TABLE IF EXISTS sleepy_towns, awake_towns")


def test_the_callers_cancel_after_a_tables_timeout_still_ends_the_refresh(connect):
    """Two tables whose owner's policy sleeps, nl2sql.refresh_table_timeout at 2 s: the first
    table read is given up at 2 s (nl2sql's own cancel, withdrawn once that table's part ends),
    and a pg_cancel_backend while the second is read is the caller's: the refresh ends with
    query_canceled, rolled back whole, not taken as the second table's timeout."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS nap_a_towns, nap_b_towns")
    role = "pytest_napper"
    with scratch_role(admin, role):
        her_policed_towns(admin, role, "pytest_nap_both", NAP, "nap_a_towns", "nap_b_towns")
        police(admin, role, "pytest_nap_both", "nap_b_towns")
        generations = generations_of("nap_a_towns", "nap_b_towns")
        try:
            for t in ("nap_a_towns", "nap_b_towns"):
                admin.execute(f"SELECT * FROM nl2sql.create_value_index('{t}', include_rls => true)")
            before = dict(admin.execute(generations).fetchall())
            admin.execute("TRUNCATE nap_a_towns, nap_b_towns")
            admin.execute("INSERT INTO nap_a_towns VALUES ('Perth')")
            admin.execute("INSERT INTO nap_b_towns VALUES ('Perth')")
            refresher, warnings = noting_session(connect, "SET nl2sql.refresh_table_timeout = '2s'", "SET pytest.nap = on")
            cancelled_after(admin, refresher, "SELECT * FROM nl2sql.refresh_value_indexes()", 3.0)
            # The first table was given up on its own timeout before the cancel came; the
            # second was not (the cancel is not taken as its timeout).
            skipped = [w for w in warnings if "could not rebuild" in w and "refresh_table_timeout" in w]
            assert len(skipped) == 1, warnings
            refresher.execute("RESET pytest.nap")
            assert dict(refresher.execute(generations).fetchall()) == before
            # Nothing of ours is left pending: the session's next statement runs.
            assert refresher.execute("SELECT 1").fetchone() == (1,)
        finally:
            admin.execute("DROP TABLE IF EXISTS nap_a_towns, nap_b_towns")


# A policy body that, while pytest.nap is on, sleeps and catches the cancel that ends the sleep:
# her code swallowing every cancel nl2sql or statement_timeout sends.
CATCHING_NAP = """IF current_setting('pytest.nap', true) = 'on' THEN
                    BEGIN
                      PERFORM pg_sleep(30);
                    EXCEPTION WHEN query_canceled THEN NULL;
                    END;
                  END IF;"""


def test_a_table_whose_code_catches_every_cancel_is_still_given_up(connect):
    """A per-row policy that catches query_canceled: once nl2sql.refresh_table_timeout is up,
    every row's sleep ends at the next resend and her read goes on to the end, as if nothing
    happened. Her table's part still counts as timed out: its rebuild is rolled back, the
    WARNING says so, and the table keeps its generation."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS stubborn_towns, easy_towns")
    role = "pytest_stubborn"
    with scratch_role(admin, role):
        her_policed_towns(admin, role, "pytest_catching_nap", CATCHING_NAP, "stubborn_towns", "easy_towns")
        admin.execute("INSERT INTO stubborn_towns SELECT 'Town ' || g FROM generate_series(1, 40) g")
        generations = generations_of("stubborn_towns", "easy_towns")
        try:
            before = index_policed_and_plain(admin, "stubborn_towns", "easy_towns", generations)
            mark_stale(admin, "stubborn_towns", "easy_towns")
            refresher, warnings = noting_session(connect, "SET nl2sql.refresh_table_timeout = '1s'", "SET pytest.nap = on")
            started = time.monotonic()
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            # 1 s, then at most a resend (100 ms) per row she catches.
            assert time.monotonic() - started < 20
            after = dict(refresher.execute(generations).fetchall())
            assert after["easy_towns"] > before["easy_towns"], (before, after)
            assert after["stubborn_towns"] == before["stubborn_towns"], (before, after)
            skipped = [w for w in warnings if "stubborn_towns" in w and "could not rebuild" in w
                       and "nl2sql.refresh_table_timeout (1000 ms)" in w]
            assert len(skipped) == 1, warnings
            # Her rebuild is still owed to a later refresh.
            owed = ("SELECT count(*) FROM nl2sql.value_flags f JOIN nl2sql.value_index i "
                    "ON i.id = f.column_id WHERE i.relid = 'stubborn_towns'::regclass")
            assert refresher.execute(owed).fetchone()[0] > 0
            # Nothing of ours is left pending: the session's next statement runs.
            assert refresher.execute("SELECT 1").fetchone() == (1,)
        finally:
            admin.execute("DROP TABLE IF EXISTS stubborn_towns, easy_towns")


# The calls that read her table: a refresh of every table (with and without a table bound), a
# refresh of hers named, and an explicit build of it.
HER_TABLE_READS = [
    ("refresh_value_indexes()", "60s"),
    ("refresh_value_indexes()", "0"),
    ("refresh_value_indexes('catching_towns')", "0"),
    ("create_value_index('catching_towns', include_rls => true)", "0"),
]


@contextlib.contextmanager
def catching_towns(connect, table_timeout, statement_timeout):
    """A session about to read catching_towns, whose owner's per-row policy catches every cancel
    while pytest.nap is on (three rows), next to other_towns, both indexed and flagged stale;
    the session has `table_timeout` and `statement_timeout` set. Yields the session, the
    generations' query and the generations now; the tables and the role are dropped after."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS catching_towns, other_towns")
    role = "pytest_catcher"
    with scratch_role(admin, role):
        try:
            her_policed_towns(admin, role, "pytest_catch_once", CATCHING_NAP, "catching_towns", "other_towns")
            admin.execute("INSERT INTO catching_towns VALUES ('Perth'), ('Dundee')")
            generations = generations_of("catching_towns", "other_towns")
            before = index_policed_and_plain(admin, "catching_towns", "other_towns", generations)
            mark_stale(admin, "catching_towns", "other_towns")
            refresher = connect()
            refresher.execute(f"SET nl2sql.refresh_table_timeout = '{table_timeout}'")
            refresher.execute(f"SET statement_timeout = '{statement_timeout}'")
            refresher.execute("SET pytest.nap = on")
            yield refresher, generations, before
        finally:
            admin.execute("DROP TABLE IF EXISTS catching_towns, other_towns")


@pytest.mark.parametrize("call,table_timeout", HER_TABLE_READS)
def test_statement_timeout_caught_by_a_tables_code_still_ends_the_refresh(connect, call, table_timeout):
    """statement_timeout cancels once; her per-row policy catches that cancel and her read goes
    on as if nothing happened. The call still ends with query_canceled soon after the
    statement's deadline, rolled back whole, rather than run on (to the table's own bound, or
    to the end of her read) and commit; with or without nl2sql.refresh_table_timeout, and when
    the caller names her table."""
    with catching_towns(connect, table_timeout, "1s") as (refresher, generations, before):
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled):
            refresher.execute(f"SELECT * FROM nl2sql.{call}")
        # Three rows of 30 s naps: only a cancel sent again after the first ends them.
        assert time.monotonic() - started < 15
        refresher.execute("RESET statement_timeout")
        assert dict(refresher.execute(generations).fetchall()) == before
        assert refresher.execute("SELECT 1").fetchone() == (1,)


def cancel_when_napping(admin, pid):
    """Cancels backend `pid` once it sleeps in her code (so that her code is what catches it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        waiting = admin.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        if waiting and waiting[0] == "PgSleep":
            admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
            return
        time.sleep(0.05)
    raise AssertionError("her code never slept")


@pytest.mark.parametrize("call,table_timeout,statement_timeout", [
    ("refresh_value_indexes()", "0", "0"),
    ("refresh_value_indexes()", "60s", "0"),
    ("refresh_value_indexes()", "0", "1h"),
    ("refresh_value_indexes('catching_towns')", "0", "0"),
    ("create_value_index('catching_towns', include_rls => true)", "0", "0"),
])
def test_the_callers_cancel_caught_by_a_tables_code_still_ends_the_refresh(connect, call, table_timeout, statement_timeout):
    """The caller's pg_cancel_backend lands while her per-row policy naps and her code catches
    it: at the default settings (nothing of nl2sql's own watches the clock), and with a table
    bound or a statement_timeout far ahead. It is not lost: the call ends with query_canceled
    soon after, rolled back whole, instead of reading her table to the end (or to a deadline)
    and committing."""
    with catching_towns(connect, table_timeout, statement_timeout) as (refresher, generations, before):
        pid = refresher.execute("SELECT pg_backend_pid()").fetchone()[0]
        canceller = threading.Thread(target=cancel_when_napping, args=(connect(), pid))
        canceller.start()
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled):
            refresher.execute(f"SELECT * FROM nl2sql.{call}")
        canceller.join()
        # Three rows of 30 s naps: only a cancel sent again after the caller's ends them.
        assert time.monotonic() - started < 15
        refresher.execute("RESET statement_timeout")
        assert dict(refresher.execute(generations).fetchall()) == before
        # Nothing is left pending: the next statement runs, and a later cancel still works.
        assert refresher.execute("SELECT 1").fetchone() == (1,)
        cancelled_after(connect(), refresher, "SELECT pg_sleep(30)")


def test_a_tables_lock_timeout_is_not_taken_for_the_callers_cancel(connect):
    """Her policy waits for a lock under its own lock_timeout and catches lock_not_available.
    PostgreSQL's lock_timeout signals the backend itself, as a cancel would: that is not the
    caller's cancel, and the refresh goes on and rebuilds both tables."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS locking_towns, free_towns")
    role = "pytest_locker"
    body = """IF current_setting('pytest.nap', true) = 'on' THEN
                BEGIN
                  SET LOCAL lock_timeout = '100ms';
                  PERFORM pg_advisory_xact_lock(424242);
                EXCEPTION WHEN lock_not_available THEN NULL;
                END;
              END IF;"""
    with scratch_role(admin, role):
        her_policed_towns(admin, role, "pytest_lock_wait", body, "locking_towns", "free_towns")
        generations = generations_of("locking_towns", "free_towns")
        holder = connect()
        try:
            before = index_policed_and_plain(admin, "locking_towns", "free_towns", generations)
            mark_stale(admin, "locking_towns", "free_towns")
            holder.execute("SELECT pg_advisory_lock(424242)")
            refresher = connect()
            refresher.execute("SET pytest.nap = on")
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            after = dict(refresher.execute(generations).fetchall())
            assert after["free_towns"] > before["free_towns"], (before, after)
            assert after["locking_towns"] > before["locking_towns"], (before, after)
        finally:
            holder.execute("SELECT pg_advisory_unlock_all()")
            admin.execute("DROP TABLE IF EXISTS locking_towns, free_towns")


def test_a_cancel_a_tables_code_sends_its_own_backend_fails_that_table_not_the_refresh(connect):
    """Her policy calls a function that cancels the backend it runs in
    (pg_cancel_backend(pg_backend_pid()), here through a SECURITY DEFINER function a superuser
    gave her). That cancel comes from the read itself, not from the caller: her table is
    skipped with a WARNING and the refresh goes on with the other one; the session is left
    with no cancel pending."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS cancelling_towns, quiet_towns")
    admin.execute("DROP FUNCTION IF EXISTS pytest_cancel_self()")
    role = "pytest_canceller"
    admin.execute("CREATE FUNCTION pytest_cancel_self() RETURNS void LANGUAGE plpgsql SECURITY DEFINER "
                  "AS $$ BEGIN PERFORM pg_cancel_backend(pg_backend_pid()); PERFORM pg_sleep(5); END $$")
    body = """IF current_setting('pytest.nap', true) = 'on' THEN
                PERFORM public.pytest_cancel_self();
              END IF;"""
    with scratch_role(admin, role):
        admin.execute(f"GRANT EXECUTE ON FUNCTION pytest_cancel_self() TO {role}")
        her_policed_towns(admin, role, "pytest_cancels_self", body, "cancelling_towns", "quiet_towns")
        generations = generations_of("cancelling_towns", "quiet_towns")
        try:
            before = index_policed_and_plain(admin, "cancelling_towns", "quiet_towns", generations)
            mark_stale(admin, "cancelling_towns", "quiet_towns")
            refresher, warnings = noting_session(connect, "SET pytest.nap = on")
            started = time.monotonic()
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert time.monotonic() - started < 20
            after = dict(refresher.execute(generations).fetchall())
            assert after["quiet_towns"] > before["quiet_towns"], (before, after)
            assert after["cancelling_towns"] == before["cancelling_towns"], (before, after)
            assert [w for w in warnings if "cancelling_towns" in w and "could not rebuild" in w], warnings
            assert refresher.execute("SELECT pg_sleep(0.5), 1").fetchone()[1] == 1
        finally:
            admin.execute("DROP TABLE IF EXISTS cancelling_towns, quiet_towns")
            admin.execute("DROP FUNCTION IF EXISTS pytest_cancel_self()")


def test_a_tables_code_running_nl2sql_itself_is_still_given_up(connect):
    """Her policy runs nl2sql's own sandbox over and over (nl2sql.compare_results on a slow
    query, in a loop that catches nothing). Once nl2sql.refresh_table_timeout is up, the
    refresh's cancel lands in one of those inner runs: sent by this backend, but by nl2sql, not
    by her code, so the inner run passes it on rather than report it as her query's error, and
    her table is given up with a WARNING while the other table is rebuilt."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS looping_towns, steady_towns")
    role = "pytest_looper"
    body = """IF current_setting('pytest.nap', true) = 'on' THEN
                LOOP
                  PERFORM nl2sql.compare_results('SELECT count(*) FROM generate_series(1, 300000000) g', 'SELECT 1');
                END LOOP;
              END IF;"""
    with scratch_role(admin, role):
        her_policed_towns(admin, role, "pytest_loops_nl2sql", body, "looping_towns", "steady_towns")
        generations = generations_of("looping_towns", "steady_towns")
        try:
            before = index_policed_and_plain(admin, "looping_towns", "steady_towns", generations)
            mark_stale(admin, "looping_towns", "steady_towns")
            refresher, warnings = noting_session(
                connect, "SET nl2sql.refresh_table_timeout = '1s'", "SET nl2sql.statement_timeout = '1h'",
                # Without the fix the refresh would run on for ever: end it as a failure instead.
                "SET statement_timeout = '30s'", "SET pytest.nap = on")
            started = time.monotonic()
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert time.monotonic() - started < 20
            after = dict(refresher.execute(generations).fetchall())
            assert after["steady_towns"] > before["steady_towns"], (before, after)
            assert after["looping_towns"] == before["looping_towns"], (before, after)
            assert [w for w in warnings if "looping_towns" in w and "could not rebuild" in w
                    and "nl2sql.refresh_table_timeout (1000 ms)" in w], warnings
            assert refresher.execute("SELECT 1").fetchone() == (1,)
        finally:
            admin.execute("DROP TABLE IF EXISTS looping_towns, steady_towns")


def test_a_tables_parts_share_one_refresh_table_timeout(connect):
    """nl2sql.refresh_table_timeout bounds a table, not each of its parts: a table with four
    indexed columns behind a sleeping policy is given up once its time is spent, and its other
    columns are skipped without another wait."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS wide_towns")
    role = "pytest_wide"
    with scratch_role(admin, role):
        her_function(admin, role, "pytest_wide_nap", NAP)
        admin.execute("CREATE TABLE wide_towns (town text, region text, country text, river text)")
        admin.execute("INSERT INTO wide_towns VALUES ('Perth', 'Tayside', 'Scotland', 'Tay')")
        police(admin, role, "pytest_wide_nap", "wide_towns")
        generations = ("SELECT a.attname, i.generation FROM nl2sql.value_index i JOIN pg_attribute a "
                       "ON a.attrelid = i.relid AND a.attnum = i.attnum WHERE i.relid = 'wide_towns'::regclass ORDER BY 1")
        try:
            admin.execute("SELECT * FROM nl2sql.create_value_index('wide_towns', include_rls => true)")
            before = admin.execute(generations).fetchall()
            assert len(before) == 4, before
            mark_stale(admin, "wide_towns")
            refresher, warnings = noting_session(connect, "SET nl2sql.refresh_table_timeout = '2s'", "SET pytest.nap = on")
            started = time.monotonic()
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            # One table's time, not four (8 s).
            assert time.monotonic() - started < 6
            skipped = [w for w in warnings if "wide_towns" in w and "could not rebuild" in w
                       and "nl2sql.refresh_table_timeout (2000 ms)" in w]
            assert len(skipped) == 4, warnings
            assert refresher.execute(generations).fetchall() == before
        finally:
            admin.execute("DROP TABLE IF EXISTS wide_towns")


def test_a_table_is_charged_only_its_own_time(connect):
    """Each table's budget counts the time its own parts took, not the time other tables' parts
    took between them: with nl2sql.refresh_table_timeout at 4 s, a slow table rebuilt between
    another table's re-check and its rebuild does not use up that table's time."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS slow_towns, patient_towns")
    slow, patient = "pytest_slow", "pytest_patient"
    # Each policy sleeps for as long as its own setting says, once per row it is asked about.
    nap = lambda setting: f"PERFORM pg_sleep(coalesce(nullif(current_setting('{setting}', true), ''), '0')::float8);"
    with scratch_role(admin, slow), scratch_role(admin, patient):
        for role, table, setting in ((slow, "slow_towns", "pytest.slow_nap"), (patient, "patient_towns", "pytest.patient_nap")):
            function = f"{table}_nap"
            her_function(admin, role, function, nap(setting))
            admin.execute(f"CREATE TABLE {table} (town text)")
            admin.execute(f"INSERT INTO {table} VALUES ('Perth')")
            police(admin, role, function, table)
        generations = generations_of("slow_towns", "patient_towns")
        try:
            # The slow table's index comes first: rebuilds run in the indexes' order.
            admin.execute("SELECT * FROM nl2sql.create_value_index('slow_towns', include_rls => true)")
            admin.execute("SELECT * FROM nl2sql.create_value_index('patient_towns', include_rls => true)")
            before = dict(admin.execute(generations).fetchall())
            # The patient table loses a value (a re-check, before every rebuild) and both are
            # marked for a rebuild.
            admin.execute("INSERT INTO patient_towns VALUES ('Dundee')")
            admin.execute("DELETE FROM patient_towns WHERE town = 'Perth'")
            mark_stale(admin, "slow_towns", "patient_towns")
            refresher, warnings = noting_session(connect, "SET nl2sql.refresh_table_timeout = '4s'")
            # A rebuild of one row asks the policy twice, a re-check once: the slow table's
            # rebuild takes 2.4 s of its 4, the patient table's re-check 0.6 s and its rebuild
            # 1.2 s (over 4.2 s from its first part to its last's end, the slow one between).
            refresher.execute("SET pytest.slow_nap = '1.2'")
            refresher.execute("SET pytest.patient_nap = '0.6'")
            refresher.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            after = dict(refresher.execute(generations).fetchall())
            assert not [w for w in warnings if "refresh_table_timeout" in w], warnings
            assert after["patient_towns"] > before["patient_towns"], (before, after)
            assert after["slow_towns"] > before["slow_towns"], (before, after)
        finally:
            admin.execute("DROP TABLE IF EXISTS slow_towns, patient_towns")


def test_a_table_that_raises_fails_that_table_not_the_schemas_indexes(connect):
    """create_value_indexes() over a schema reads each table as its owner; a policy she forces
    on herself raising an error (include_rls) skips her table with a WARNING that quotes nothing
    of hers, and the schema's other tables are indexed. A real cancel still ends the call, and
    nothing of it is kept."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    role = "pytest_batcher"
    count = ("SELECT count(*) FROM nl2sql.value_index WHERE relid::regclass::text "
             "IN ('pytest_batch.gated_towns', 'pytest_batch.plain_towns')")
    with scratch_role(admin, role):
        admin.execute("DROP SCHEMA IF EXISTS pytest_batch CASCADE")
        admin.execute("CREATE SCHEMA pytest_batch")
        admin.execute(f"GRANT USAGE ON SCHEMA pytest_batch TO {role}")
        try:
            her_policed_towns(admin, role, "pytest_batch_gate", """
                             IF current_setting('pytest.gate', true) = 'on' THEN
                               RAISE EXCEPTION E'her \\x1b[2J gate\\nHINT:  forged';
                             ELSIF current_setting('pytest.gate', true) = 'slow' THEN
                               PERFORM pg_sleep(30);
                             END IF;""", "pytest_batch.gated_towns", "pytest_batch.plain_towns")
            builder, warnings = noting_session(connect, "SET pytest.gate = on")
            built = builder.execute("SELECT relation::text FROM nl2sql.create_value_indexes(ARRAY['pytest_batch'], include_rls => true)").fetchall()
            assert {r[0] for r in built} == {"pytest_batch.plain_towns"}, built
            assert [w for w in warnings if "pytest_batch.gated_towns" in w and "could not read table" in w], warnings
            assert not [w for w in warnings if "\x1b" in w or "forged" in w or "her" in w.split()], warnings
            assert builder.execute(count).fetchone()[0] == 1
            # A real cancel while her table is read ends the call; nothing of it is kept.
            admin.execute("SELECT nl2sql.drop_value_index('pytest_batch.plain_towns')")
            builder.execute("SET pytest.gate = slow")
            assert cancelled_after(admin, builder, "SELECT * FROM nl2sql.create_value_indexes(ARRAY['pytest_batch'], include_rls => true)") < 20
            assert builder.execute(count).fetchone()[0] == 0
            # Her gate open, nl2sql's own errors end the call as they would for one table: in a
            # read-only transaction nothing can be stored.
            builder.execute("RESET pytest.gate")
            builder.execute("BEGIN READ ONLY")
            with pytest.raises(errors.ReadOnlySqlTransaction):
                builder.execute("SELECT * FROM nl2sql.create_value_indexes(ARRAY['pytest_batch'], include_rls => true)")
            builder.execute("ROLLBACK")
            # Both are indexed.
            builder.execute("SELECT * FROM nl2sql.create_value_indexes(ARRAY['pytest_batch'], include_rls => true)").fetchall()
            assert builder.execute(count).fetchone()[0] == 2
        finally:
            admin.execute("DROP SCHEMA IF EXISTS pytest_batch CASCADE")
