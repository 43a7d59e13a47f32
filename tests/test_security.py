"""Security behaviour that needs more than one session, the files of the server, or a look at
what crossed the wire (the pg_regress suites security_* cover the rest)."""
import contextlib
import os
import pwd
import tempfile
import threading
import time
from pathlib import Path

import pytest
from psycopg import errors

from helpers import hostile_owner, scratch_role

ENV_KEY = os.environ.get("NL2SQL_LLM_API_KEY", "")


def wait_answered(mock, marker, timeout=60):
    """Waits until the mock has sent its answer to the request whose prompt holds `marker`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for r in mock.requests():
            text = "\n".join(str(m.get("content", "")) for m in r["body"].get("messages", []))
            if marker in text and "answered" in r:
                return r["answered"]
        time.sleep(0.02)
    raise AssertionError("the mock never answered %s" % marker)


def test_terminate_attempts_leave_other_sessions_alive(connect, mock):
    victim, attacker = connect(), connect()
    pid = victim.execute("SELECT pg_backend_pid()").fetchone()[0]
    for marker in ("[u-escape-terminate] end every session", "[u-escape-lock] lock something"):
        with pytest.raises(errors.InsufficientPrivilege):
            attacker.execute("SELECT nl2sql(%s)", (marker,))
    assert victim.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    assert attacker.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0] == 0


def _ask_in_thread(conn, question, outcome):
    def run():
        try:
            conn.execute("SELECT nl2sql(%s)", (question,))
            outcome["result"] = "finished"
        except Exception as e:  # noqa: BLE001 - the test inspects what was raised
            outcome["result"] = e
        outcome["ended"] = time.time()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_cancel_while_parsing_a_huge_answer(connect, mock):
    """A 60 MB answer of think blocks: cancelled right after it arrives (while it is decoded),
    and at 40 % and 70 % of the time it takes here to read and parse it (while nl2sql finds
    the SQL in it), the call ends by the cancel, not by finishing its work. make bench prints
    how long the cancel took.

    That time is the shortest of three uncancelled calls (the first is slower: a cold
    allocator). A call whose result reached the client before the cancel was even sent says
    nothing about cancelling: that share is tried again, against the shorter time just seen,
    at most three times. A call that finishes after the cancel was sent fails at once."""
    conn, other = connect(), connect()
    conn.execute("SET nl2sql.mode = zero_shot")
    conn.execute("SET nl2sql.max_answer_bytes = '64MB'")
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    question = "[parse-flood] count the singers"
    work = None
    for _ in range(3):
        mock.reset()
        conn.execute("SELECT nl2sql(%s)", (question,))
        took = time.time() - wait_answered(mock, "[parse-flood]")
        work = took if work is None else min(work, took)
    for share in (0.0, 0.4, 0.7):
        for attempt in range(3):
            mock.reset()
            outcome = {}
            t = _ask_in_thread(conn, question, outcome)
            answered = wait_answered(mock, "[parse-flood]")
            time.sleep(max(0.0, answered + share * work - time.time()))
            cancelled = time.time()
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))
            t.join(120)
            assert not t.is_alive()
            if outcome["result"] == "finished" and outcome["ended"] < cancelled and attempt < 2:
                work = min(work, outcome["ended"] - answered)
                continue
            break
        assert isinstance(outcome["result"], errors.QueryCanceled), (share, outcome["result"])
        print("cancel at %.0f %% of %.0f ms: ended %.0f ms later" % (share * 100, work * 1000, (outcome["ended"] - cancelled) * 1000))
    assert conn.execute("SELECT 1").fetchone()[0] == 1


def test_statement_timeout_while_parsing_a_huge_answer(connect, mock):
    """statement_timeout ends a call that reads and parses a huge answer. The timeout is half
    of what the whole call takes on this machine, measured first (a fixed one passes the mark
    on a fast machine)."""
    conn = connect()
    conn.execute("SET nl2sql.mode = zero_shot")
    conn.execute("SET nl2sql.max_answer_bytes = '64MB'")
    start = time.time()
    conn.execute("SELECT nl2sql('[parse-flood] count the singers')")
    whole = time.time() - start
    mock.reset()
    conn.execute("SET statement_timeout = %d" % max(1, int(whole * 500)))
    with pytest.raises(errors.QueryCanceled):
        conn.execute("SELECT nl2sql('[parse-flood] count the singers')")
    conn.execute("RESET statement_timeout")
    assert conn.execute("SELECT 1").fetchone()[0] == 1


def _zero_shot_vault(connect, *fill):
    """A connection asking zero-shot without sampled rows, beside a table vault (secret text)
    emptied and filled by the `fill` statements."""
    conn = connect()
    conn.execute("CREATE TABLE IF NOT EXISTS vault (secret text)")
    conn.execute("TRUNCATE vault")
    for statement in fill:
        conn.execute(statement)
    conn.execute("SET nl2sql.mode = zero_shot")
    conn.execute("SET nl2sql.sample_rows = 0")
    return conn


def _correction(conn, mock, question, raised):
    """Asks `question` (the scripted model's query fails, then fails again after the correction
    round); returns PostgreSQL's error as the caller got it and the correction prompt sent."""
    mock.reset()
    with pytest.raises(raised) as e:
        conn.execute("SELECT * FROM nl2sql_run(%s)", (question,))
    return e.value, mock.requests()[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("marker,state,spelt", [("[leaky-cast]", "22P02", "zz-secret-7731"), ("[leaky-regclass]", "42P01", "zz-secret-7731"),
                                                ("[leaky-regoper]", "42883", "zz_secret_nnjh"),
                                                # PostgreSQL prints a value's own quotes, and a ": " in it, as they are.
                                                ("[leaky-quoted-int]", "22P02", "zz_secret_nnjh"), ("[leaky-quoted-regclass]", "42P01", "zz_secret_nnjh"),
                                                ("[leaky-quoted-regoper]", "42883", "zz_secret_nnjh"), ("[leaky-dotted-colon]", "42601", "zz_secret_nnjh")])
def test_correction_prompts_carry_no_data(connect, mock, marker, state, spelt):
    """A candidate fails with an error that quotes a stored value, or (an operator's name read
    from a row) prints it unquoted, spelt in letters; the correction prompt sent to the endpoint
    carries the SQLSTATE and the names the model knows, never the value."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault VALUES ('zz-secret-7731')", "INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 50) g")
    try:
        rows = conn.execute("SELECT * FROM nl2sql_run(%s)", (marker + " how many secrets?",)).fetchall()
        assert rows == [({"n": 51},)]
        bodies = [str(r["body"]) for r in mock.requests()]
        assert len(bodies) == 2
        assert not any(spelt in b for b in bodies), bodies[1]
        correction = mock.requests()[1]["body"]["messages"][-1]["content"]
        assert state in correction and "PostgreSQL rejected" in correction
        # The caller, who may read the table, still sees the real error in the trace.
        trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
        assert spelt in trace["candidates"][0]["error"]
    finally:
        conn.execute("DROP TABLE vault")


def test_the_history_keeps_no_value_an_error_printed_while_the_query_ran(connect, mock):
    """Every answer fails with an error raised while it ran that prints a row's text (between
    quotes of the value's own): the caller gets PostgreSQL's error; the history row, which
    administrators may read, and the correction prompt carry its SQLSTATE, not the value."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault VALUES ('zz-secret-7731')")
    try:
        with pytest.raises(errors.UndefinedTable) as e:
            conn.execute("SELECT * FROM nl2sql_run('[leaky-history] how many secrets?')")
        assert "zz_secret_nnjh" in e.value.diag.message_primary
        bodies = [str(r["body"]) for r in mock.requests()]
        assert len(bodies) == 2 and not any("zz_secret" in b for b in bodies), bodies[-1]
        assert "undefined_table" in mock.requests()[1]["body"]["messages"][-1]["content"]
        # The failed call's row is written by the session's next call.
        conn.execute("SELECT * FROM nl2sql_run('[leaky-cast] how many secrets?')").fetchall()
        row = conn.execute("SELECT sqlstate, error FROM nl2sql.history WHERE question = '[leaky-history] how many secrets?' ORDER BY id DESC LIMIT 1").fetchone()
        assert row == ("42P01", "generated query failed: its message is withheld (raised while it ran, it may quote data)"), row
    finally:
        conn.execute("DROP TABLE vault")


def test_a_nul_byte_in_a_generated_query_is_told_as_such(connect, mock):
    """The model writes a NUL byte into a string literal, which PostgreSQL cannot be given: the
    correction prompt says so in nl2sql's words (a syntax error), and the corrected query runs."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 51) g")
    try:
        rows = conn.execute("SELECT * FROM nl2sql_run('[nul-byte] how many secrets?')").fetchall()
        assert rows == [({"n": 51},)]
        correction = mock.requests()[1]["body"]["messages"][-1]["content"]
        assert "ERROR (42601): generated SQL contains a NUL byte" in correction, correction
    finally:
        conn.execute("DROP TABLE vault")


def test_an_error_a_domain_check_raises_while_the_query_is_read_is_not_told_as_reading(connect, mock):
    """A domain's CHECK, built-in functions only, turns the value into a type's name: an array
    literal of the domain is read while the query is parsed, and the CHECK's error is raised in
    the parser's own file, quoting the CHECK's result (which may hold what the CHECK's functions
    read), not the query's text. The model wrote that result into a comment: were the error told
    as a read-time one, whether its name was kept would confirm the guess. It is told as an
    error raised while the query ran: its SQLSTATE only, to the endpoint and in the history."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 51) g")
    conn.execute("CREATE DOMAIN public.pytest_dread AS text CHECK ((upper(VALUE) || 'x')::regtype IS NOT NULL)")
    try:
        with pytest.raises(errors.UndefinedObject) as e:
            conn.execute("SELECT * FROM nl2sql_run('[check-at-read] how many secrets?')")
        # The caller gets PostgreSQL's own error.
        assert 'type "zzguessx" does not exist' in e.value.diag.message_primary
        bodies = mock.requests()
        assert len(bodies) == 2
        correction = bodies[1]["body"]["messages"][-1]["content"]
        assert "undefined_object" in correction and '"zzguessx"' not in correction, correction
        # The failed call's row is written by the session's next call.
        conn.execute("SELECT * FROM nl2sql_run('[nul-byte] how many secrets?')").fetchall()
        row = conn.execute("SELECT sqlstate, error FROM nl2sql.history WHERE question = '[check-at-read] how many secrets?' "
                           "ORDER BY id DESC LIMIT 1").fetchone()
        assert row == ("42704", "generated query failed: its message is withheld (raised while it ran, it may quote data)"), row
    finally:
        conn.execute("DROP DOMAIN public.pytest_dread")
        conn.execute("DROP TABLE vault")


def test_a_domain_check_of_casts_alone_confirms_no_guess(connect, mock):
    """A CHECK with no function call, `(session_user)::regtype IS NOT NULL`, run while an array
    or record literal of the domain (or of a domain based on it) is read, raises `type "<login>" does not
    exist` from the parser's own file; the model, having written its guess of the login name in
    a comment, must not learn from the correction prompt whether the guess was right. A query
    that reaches no such domain is still told its reading error in full."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 51) g")
    conn.execute("CREATE DOMAIN public.pytest_dsess AS text CHECK ((session_user)::regtype IS NOT NULL)")
    conn.execute("CREATE DOMAIN public.pytest_dsess2 AS public.pytest_dsess")
    conn.execute("CREATE TYPE public.pytest_dsrow AS (a public.pytest_dsess)")
    try:
        for marker in ("[cast-only-check]", "[cast-only-nested]", "[cast-only-record]"):
            raised, correction = _correction(conn, mock, marker + " how many secrets?", errors.UndefinedObject)
            # The caller is told PostgreSQL's error; the model only its SQLSTATE.
            assert 'type "postgres" does not exist' in raised.diag.message_primary, marker
            assert "undefined_object" in correction and '"postgres"' not in correction, (marker, correction)
        _, correction = _correction(conn, mock, "[cast-only-control] how many secrets?", errors.UndefinedColumn)
        assert 'column "pytest_nosuch" does not exist' in correction, correction
    finally:
        conn.execute("DROP TYPE public.pytest_dsrow")
        conn.execute("DROP DOMAIN public.pytest_dsess2")
        conn.execute("DROP DOMAIN public.pytest_dsess")


def test_a_domain_created_after_the_transaction_began_confirms_no_guess(connect, mock):
    """The domains a CHECK applies to are listed as the parser finds types, committed now, not by
    the transaction's snapshot: in a REPEATABLE READ transaction that began before another
    session created a casts-only domain, a query reading an array literal of that domain still
    gets only the error's SQLSTATE in its correction prompt."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 51) g")
    other = connect()
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM vault")
        other.execute("CREATE DOMAIN public.pytest_dlate AS text CHECK ((session_user)::regtype IS NOT NULL)")
        _, correction = _correction(conn, mock, "[cast-only-late] how many secrets?", errors.UndefinedObject)
        assert "undefined_object" in correction and '"postgres"' not in correction, correction
    finally:
        conn.execute("ROLLBACK")
        other.execute("DROP DOMAIN IF EXISTS public.pytest_dlate")


def test_a_sort_on_a_checked_domain_keeps_a_reading_error_told(connect, mock):
    """Sorting a column of a domain with a CHECK makes the type cache look its operators up (its
    entry's flags change) without running the CHECK: in a session's first question, the
    reading error raised after it is still told to the model in full."""
    admin = connect()
    admin.execute("CREATE DOMAIN public.pytest_dord AS text CHECK (VALUE <> '')")
    admin.execute("CREATE TABLE public.pytest_dord_t (d public.pytest_dord)")
    try:
        _, correction = _correction(_zero_shot_vault(connect), mock, "[domain-sort-control] list them", errors.UndefinedColumn)
        assert 'column "pytest_nosuch" does not exist' in correction, correction
    finally:
        admin.execute("DROP TABLE public.pytest_dord_t")
        admin.execute("DROP DOMAIN public.pytest_dord")


def test_past_ten_thousand_checked_domains_every_reading_error_is_withheld(connect, mock):
    """Up to 10,000 domains with a CHECK, each is watched and a reading error that reaches none
    is told in full; past that, every error raised while a generated query is read counts as
    code run, and the model is told its SQLSTATE only (what docs/security.md says; a role that
    may create types can make this happen in its database). Dropped again, told in full."""
    admin = connect()
    # Counted as the sandbox lists them (its own query, every row).
    listing = (Path(__file__).resolve().parent.parent / "sql/queries/sandbox_checked_domains.sql").read_text()
    checked = admin.execute(f"SELECT count(*) FROM ({listing.replace('$1', 'ALL')}\n) AS listed").fetchone()[0]
    admin.execute("CREATE SCHEMA pytest_many_domains")
    # In transactions of 1,000 domains each: the lock table holds a few thousand locks.
    every = "DO $$BEGIN FOR i IN {0}..{1} LOOP EXECUTE format($f${2}$f$, i); END LOOP; END$$"
    last = 10001 - checked

    def each(statement, first=1, until=last):
        for start in range(first, until + 1, 1000):
            admin.execute(every.format(start, min(start + 999, until), statement))

    try:
        each("CREATE DOMAIN pytest_many_domains.d%s AS text CHECK (VALUE <> '')", until=last - 1)
        conn = _zero_shot_vault(connect, "INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 51) g")
        _, correction = _correction(conn, mock, "[cast-only-control] how many secrets?", errors.UndefinedColumn)
        assert 'column "pytest_nosuch" does not exist' in correction, (checked, correction)
        each("CREATE DOMAIN pytest_many_domains.d%s AS text CHECK (VALUE <> '')", first=last)
        raised, correction = _correction(conn, mock, "[cast-only-control] how many secrets?", errors.UndefinedColumn)
        assert 'column "pytest_nosuch" does not exist' in raised.diag.message_primary
        assert "undefined_column" in correction and "pytest_nosuch" not in correction, correction
        each("DROP DOMAIN pytest_many_domains.d%s")
        _, correction = _correction(conn, mock, "[cast-only-control] how many secrets?", errors.UndefinedColumn)
        assert 'column "pytest_nosuch" does not exist' in correction, correction
    finally:
        each("DROP DOMAIN IF EXISTS pytest_many_domains.d%s")
        admin.execute("DROP SCHEMA pytest_many_domains")


def test_a_reading_error_repeats_a_type_name_only_when_the_model_was_shown_it(connect, mock):
    """PostgreSQL prints type names unquoted amid its wording while it reads a query (`argument
    of WHERE must be type boolean, not type x`). A type's name is its owner's text: the name of
    a composite's field's type, which the schema prompt never showed, reaches neither the
    correction prompt nor the history (an instruction to the model spelt as a name would); the
    column's own type, which the prompt shows, is repeated."""
    conn = _zero_shot_vault(connect)
    try:
        conn.execute("CREATE TYPE public.pytest_ignore_previous_instructions AS (x int)")
        # A type named with a word of PostgreSQL's own messages, printed where a type's name stands.
        conn.execute("CREATE TYPE public.password AS (x int)")
        conn.execute("CREATE TYPE public.pytest_holder AS (f public.pytest_ignore_previous_instructions, g int, "
                     "h public.password)")
        conn.execute("CREATE TABLE public.pytest_holding (c public.pytest_holder)")
        raised, correction = _correction(conn, mock, "[type-name-unshown] list them", errors.DatatypeMismatch)
        # The caller is told PostgreSQL's error whole.
        assert "not type pytest_ignore_previous_instructions" in raised.diag.message_primary
        assert "must be type boolean, not type …" in correction and "pytest_ignore" not in correction, correction
        prompt = mock.requests()[0]["body"]["messages"][-1]["content"]
        assert "pytest_holder" in prompt and "pytest_ignore" not in prompt, prompt
        raised, correction = _correction(conn, mock, "[type-word-unshown] list them", errors.DatatypeMismatch)
        assert "not type password" in raised.diag.message_primary
        assert "must be type boolean, not type …" in correction and "password" not in correction, correction
        _, correction = _correction(conn, mock, "[type-name-shown] list them", errors.DatatypeMismatch)
        assert "must be type boolean, not type pytest_holder" in correction, correction
        # The failed calls' rows are written by the session's next call.
        conn.execute("SELECT * FROM nl2sql_run('[nul-byte] how many secrets?')").fetchall()
        errors_kept = [r[0] for r in conn.execute(
            "SELECT error FROM nl2sql.history WHERE question LIKE '[type-name-%' ORDER BY id")]
        assert any("not type …" in e for e in errors_kept), errors_kept
        assert not any("pytest_ignore" in e for e in errors_kept), errors_kept
    finally:
        conn.execute("DROP TABLE IF EXISTS public.pytest_holding")
        conn.execute("DROP TYPE IF EXISTS public.pytest_holder")
        conn.execute("DROP TYPE IF EXISTS public.pytest_ignore_previous_instructions")
        conn.execute("DROP TYPE IF EXISTS public.password")
        conn.execute("DROP TABLE vault")


def test_a_domain_check_folded_before_the_query_is_judged_again(connect, mock):
    """A domain's CHECK calls an IMMUTABLE function that reads the vault: the first use of the
    domain in the session folds the function's value (a row's) into the type cache, and from
    then on the CHECK runs with built-in functions only, which would print that value (cast to
    an operator's name) while an array literal of the domain is read. nl2sql drops the cache's
    CHECKs before each generated query, so every CHECK the query reaches is loaded again under
    its hooks, which refuse the function wherever it runs: an array literal read while the
    query is parsed, an array cast while it runs, a value coerced to the domain (judged on the
    tree, as the catalog stores the CHECK). Nothing of the value reaches the endpoint."""
    conn = _zero_shot_vault(connect, "INSERT INTO vault VALUES ('zz-secret-7731')")
    conn.execute("CREATE OR REPLACE FUNCTION public.pytest_fold_secret() RETURNS text IMMUTABLE LANGUAGE plpgsql "
                 "AS $$BEGIN RETURN (SELECT max(secret) FROM vault); END$$")
    conn.execute("CREATE DOMAIN public.pytest_dfold AS text CHECK (VALUE IS NULL OR length(VALUE) < 100 "
                 "OR translate(public.pytest_fold_secret(), '-0123456789', '_ghijklmnop')::regoper IS NULL)")
    try:
        for private in ("off", "on"):
            conn.execute(f"SET nl2sql.privacy = {private}")
            for marker in ("[leaky-fold]", "[fold-array-runtime]", "[fold-runtime]"):
                # An ordinary use of the domain by the session: the CHECK is folded now.
                assert conn.execute("SELECT ('{ok}'::public.pytest_dfold[])::text").fetchone()[0] == "{ok}"
                mock.reset()
                with pytest.raises(errors.InsufficientPrivilege) as e:
                    conn.execute("SELECT * FROM nl2sql_run(%s)", (marker + " how many secrets?",))
                assert "pytest_fold_secret is not trusted" in e.value.diag.message_primary, marker
                bodies = [str(r["body"]) for r in mock.requests()]
                assert bodies and not any("zz_secret" in b for b in bodies), (marker, bodies)
    finally:
        conn.execute("RESET nl2sql.privacy")
        conn.execute("DROP DOMAIN public.pytest_dfold")
        conn.execute("DROP FUNCTION public.pytest_fold_secret()")
        conn.execute("DROP TABLE vault")


def test_a_cost_estimate_is_told_only_for_tables_the_role_may_read(connect, mock):
    """The planner's estimate reads the statistics of every table it plans (their most common
    values): with nl2sql.max_cost, a role that may not read a table would learn from the
    estimate which value the table holds most. It gets PostgreSQL's permission error instead,
    and neither it nor the endpoint is told an estimate, whatever value the query compares."""
    admin = connect()
    admin.execute("CREATE TABLE IF NOT EXISTS public.pytest_skewed (s text)")
    admin.execute("TRUNCATE public.pytest_skewed")
    admin.execute("INSERT INTO public.pytest_skewed SELECT CASE WHEN g % 10 = 0 THEN 'rare' || g ELSE 'common' END "
                  "FROM generate_series(1, 20000) g")
    admin.execute("ANALYZE public.pytest_skewed")
    try:
        with scratch_role(admin, "pytest_nocost", "GRANT SELECT ON singer TO pytest_nocost"):
            c = connect()
            c.execute("SET ROLE pytest_nocost")
            c.execute("SET nl2sql.mode = zero_shot")
            c.execute("SET nl2sql.max_cost = 1")
            c.execute("SET nl2sql.sample_rows = 0")
            with pytest.raises(errors.InsufficientPrivilege) as e:
                c.execute("SELECT * FROM nl2sql_run('[cost-of-unreadable] how many?')")
            assert "pytest_skewed" in e.value.diag.message_primary
            trace = c.execute("SELECT nl2sql.last_trace()").fetchone()[0]
            errors_seen = " ".join(str(x.get("error")) for x in trace["candidates"])
            assert "cost" not in errors_seen, errors_seen
            assert not any("estimated cost" in str(r["body"]) for r in mock.requests())
            c.execute("RESET ROLE")
    finally:
        admin.execute("DROP TABLE public.pytest_skewed")


@contextlib.contextmanager
def _vault_read_by_an_allowed_function(connect, objects=()):
    """A vault of 51 secrets whose largest is zz-secret-7731, read by an allow-listed STABLE
    function public.pytest_top_secret(); zero-shot, no sampled rows. `objects`: (create, drop)
    statements run after the function is made, and dropped before it."""
    conn = connect()
    conn.execute("CREATE TABLE IF NOT EXISTS vault (secret text)")
    conn.execute("TRUNCATE vault")
    conn.execute("INSERT INTO vault VALUES ('zz-secret-7731')")
    conn.execute("INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 50) g")
    conn.execute("CREATE OR REPLACE FUNCTION public.pytest_top_secret() RETURNS text STABLE LANGUAGE sql AS 'SELECT max(secret) FROM vault'")
    for create, _ in objects:
        conn.execute(create)
    conn.execute("SET nl2sql.allowed_functions = 'public.pytest_top_secret'")
    conn.execute("SET nl2sql.mode = zero_shot")
    conn.execute("SET nl2sql.sample_rows = 0")
    try:
        yield conn
    finally:
        conn.execute("RESET nl2sql.allowed_functions")
        for _, drop in reversed(objects):
            conn.execute(drop)
        conn.execute("DROP FUNCTION public.pytest_top_secret()")
        conn.execute("DROP TABLE vault")


def _correction_confirms_no_guess(conn, mock, question, state="22P02"):
    """Asks `question`, whose scripted first query fails with 22P02 quoting the vault's secret
    and whose correction counts the vault; the correction prompt names the SQLSTATE and
    confirms none of the guesses the model wrote."""
    rows = conn.execute("SELECT * FROM nl2sql_run(%s)", (question,)).fetchall()
    assert rows == [({"n": 51},)]
    assert len(mock.requests()) == 2
    correction = mock.requests()[1]["body"]["messages"][-1]["content"]
    assert state in correction and "PostgreSQL rejected" in correction, correction
    assert "zz-secret" not in correction, correction


def test_an_error_raised_while_planning_confirms_no_guess(connect, mock):
    """Planning evaluates functions (a LIMIT is estimated, constants are folded), so an error it
    raises may quote a row: it reaches the endpoint as an error raised while the query ran. The
    model wrote three guesses in its query; the correction prompt confirms none of them."""
    with _vault_read_by_an_allowed_function(connect) as conn:
        _correction_confirms_no_guess(conn, mock, "[leaky-plan] how many secrets?")
        # The planner raised it: the caller's trace has the real error.
        trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
        assert "zz-secret-7731" in trace["candidates"][0]["error"]


def test_a_domain_check_run_while_reading_confirms_no_guess(connect, mock):
    """An array literal of a domain type runs the domain's CHECK while PostgreSQL reads the
    query (array_in), before planning; the CHECK calls a function that reads a row. The error
    reaches the endpoint as one raised while the query ran: no guess the model wrote comes back."""
    domain = ("CREATE DOMAIN public.pytest_dsecret AS text CHECK (VALUE <> public.pytest_top_secret()::int::text)",
              "DROP DOMAIN public.pytest_dsecret")
    with _vault_read_by_an_allowed_function(connect, [domain]) as conn:
        _correction_confirms_no_guess(conn, mock, "[leaky-domain] how many secrets?")


def test_an_extensions_function_run_while_reading_sends_nothing_under_privacy(connect, mock):
    """A function of an extension a superuser installed is trusted like a built-in, but it is
    not compiled into the server and may read rows. Called by a domain's CHECK while an array
    literal is read, its error (a row spelt in letters as an operator's name, which PostgreSQL
    quotes whole) is one raised while the query ran: under nl2sql.privacy only its SQLSTATE
    reaches the endpoint."""
    ext = ("CREATE FUNCTION public.pytest_top_secret_ext() RETURNS text STABLE LANGUAGE plpgsql "
           "AS $$ BEGIN RETURN (SELECT max(secret) FROM vault); END $$",
           "DROP FUNCTION public.pytest_top_secret_ext()")
    member = ("ALTER EXTENSION plpgsql ADD FUNCTION public.pytest_top_secret_ext()",
              "ALTER EXTENSION plpgsql DROP FUNCTION public.pytest_top_secret_ext()")
    domain = ("CREATE DOMAIN public.pytest_dsecret_ext AS text CHECK (VALUE <> "
              "translate(public.pytest_top_secret_ext(), '-0123456789', '_ghijklmnop')::regoper::text)",
              "DROP DOMAIN public.pytest_dsecret_ext")
    with _vault_read_by_an_allowed_function(connect, [ext, member, domain]) as conn:
        conn.execute("SET nl2sql.privacy = on")
        try:
            _correction_confirms_no_guess(conn, mock, "[leaky-ext] how many secrets?", "42883")
            bodies = [str(r["body"]) for r in mock.requests()]
            assert not any("zz_secret" in b for b in bodies), bodies[-1]
        finally:
            conn.execute("RESET nl2sql.privacy")


def _postgres_owned(path):
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)


def test_key_file(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.mode = zero_shot")
    d = tempfile.mkdtemp(prefix="nl2sql-key-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "llm.key")
    with open(path, "w") as f:
        f.write("sk-from-file-5d2e\n")
    os.chmod(path, 0o600)
    _postgres_owned(path)
    try:
        conn.execute(f"SET nl2sql.llm_api_key_file = '{path}'")
        echo = conn.execute("SELECT nl2sql('[echo-key] what were you sent?')").fetchone()[0]
        assert "sk-from-file" not in echo
        assert mock.requests()[-1]["authorization"] == "Bearer sk-from-file-5d2e"
        # Readable by others: refused, and the error never quotes the file.
        os.chmod(path, 0o644)
        with pytest.raises(errors.ConfigFileError) as e:
            conn.execute("SELECT nl2sql('[echo-key] what were you sent?')")
        assert "sk-from-file" not in str(e.value) and "other than its owner" in str(e.value.diag.message_detail)
    finally:
        os.remove(path)
        os.rmdir(d)


def test_a_key_stored_as_a_placeholder_is_never_sent(connect, mock):
    # A fresh session has not loaded nl2sql: no check can refuse the setting there.
    connect().execute("ALTER DATABASE concert_singer SET nl2sql.llm_api_key = 'sk-placeholder-91'")
    try:
        conn = connect()
        conn.execute("SET nl2sql.mode = zero_shot")
        conn.execute("SELECT nl2sql('[echo-key] what were you sent?')")
        sent = mock.requests()[-1]["authorization"]
        assert "sk-placeholder-91" not in (sent or "")
        assert sent == "Bearer " + ENV_KEY
    finally:
        connect().execute("ALTER DATABASE concert_singer RESET nl2sql.llm_api_key")



def test_a_range_type_returned_by_a_json_expression_is_judged(connect, mock):
    # JSON_VALUE (17+) makes its value with the type's input function, in no node of the tree
    # but the JSON one. Indexed, that expression has statistics, and the planner estimates a
    # comparison on it with the range type's subtype_diff, which the type cache keeps from the
    # owner's own query, out of the execution hooks' sight: the tree check must see the type.
    conn = connect()
    if int(conn.execute("SHOW server_version_num").fetchone()[0]) < 170000:
        pytest.skip("JSON_VALUE is new in PostgreSQL 17")
    owner = hostile_owner(
        conn, "pytest_jmallory",
        """CREATE FUNCTION pytest_jdiff(text, text) RETURNS float8 IMMUTABLE LANGUAGE plpgsql
           AS $$ BEGIN RAISE NOTICE 'pytest_jdiff ran as %', current_user; RETURN 1; END $$""",
        "CREATE TYPE pytest_jspan AS RANGE (subtype = text, subtype_diff = pytest_jdiff)",
        "CREATE TABLE pytest_jdocs (doc jsonb)",
        """INSERT INTO pytest_jdocs SELECT jsonb_build_object('r', format('[%s,%s)', chr(97 + g % 20), chr(98 + g % 20)))
           FROM generate_series(1, 300) g""",
        "CREATE INDEX ON pytest_jdocs ((JSON_VALUE(doc, '$.r' RETURNING pytest_jspan)))",
        "ANALYZE pytest_jdocs",
        "GRANT SELECT ON pytest_jdocs TO PUBLIC",
        # Her own query: her function runs as herself, and the type cache keeps it.
        "SELECT count(*) FROM pytest_jdocs WHERE JSON_VALUE(doc, '$.r' RETURNING pytest_jspan) @> 'b'::text",
    )
    with owner as ran:
        with pytest.raises(errors.InsufficientPrivilege) as e:
            conn.execute("SELECT nl2sql('[json-range] spans holding b')")
        assert e.value.diag.message_primary == "function public.pytest_jdiff is not trusted in generated SQL"
        assert not [m for m in ran if "pytest_jdiff ran" in m], "her subtype_diff ran: %s" % ran
        # Allow-listed, the same query runs: the refusal was the function's, not the syntax's.
        conn.execute("SET nl2sql.allowed_functions = 'pytest_jdiff'")
        assert conn.execute("SELECT nl2sql('[json-range] spans holding b')").fetchone()[0].startswith("SELECT count(*)")
        conn.execute("RESET nl2sql.allowed_functions")


def test_the_callers_cancel_caught_in_a_generated_query_still_ends_the_call(connect, mock):
    """A function the DBA allowed in generated SQL whose owner's code catches every cancel
    (three 30 s busy loops, each catching query_canceled). The caller's pg_cancel_backend is
    not hers to swallow: nl2sql() ends with query_canceled soon after, rather than running her
    loops to nl2sql.statement_timeout and answering as if nobody had cancelled."""
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_cbusy_owner",
        """CREATE FUNCTION pytest_cbusy() RETURNS int LANGUAGE plpgsql AS $$
           DECLARE t timestamptz;
           BEGIN
             FOR i IN 1..3 LOOP
               t := clock_timestamp();
               BEGIN
                 WHILE clock_timestamp() < t + interval '30 s' LOOP END LOOP;
               EXCEPTION WHEN query_canceled THEN NULL;
               END;
             END LOOP;
             RETURN 1;
           END $$""",
    )
    with owner:
        conn.execute("SET nl2sql.allowed_functions = 'pytest_cbusy'")
        conn.execute("SET nl2sql.statement_timeout = '120s'")
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        other = connect()

        def cancel_in_her_loop():
            # Her loop runs once the model has answered and the query started: cancel 1 s in.
            time.sleep(max(0.0, wait_answered(mock, "[catching-busy]") + 1.0 - time.time()))
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))

        canceller = threading.Thread(target=cancel_in_her_loop)
        canceller.start()
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled):
            conn.execute("SELECT nl2sql('[catching-busy] is it done')")
        canceller.join()
        assert time.monotonic() - started < 20
        # Nothing is left pending, and PostgreSQL's own handler is back.
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.execute("RESET nl2sql.allowed_functions")
        conn.execute("RESET nl2sql.statement_timeout")


def test_domain_checks_run_without_a_domain_node_are_refused(connect, mock):
    # Domain CHECKs PostgreSQL runs from a type's input function, with no CoerceToDomain in the
    # tree for the policy to see: an XMLTABLE column of the domain, a text literal cast to a
    # composite type with such a column (during parse analysis), a column definition list and
    # json_populate_record filling such a column, and on 17+ JSON_VALUE
    # RETURNING the domain (its default NULL ON ERROR does not swallow the refusal). The
    # execution hooks judge the CHECK's function as it starts.
    conn = connect()
    major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
    owner = hostile_owner(
        conn, "pytest_dmallory",
        """CREATE FUNCTION pytest_dcheck(text) RETURNS boolean LANGUAGE plpgsql
           AS $$ BEGIN RAISE NOTICE 'pytest_dcheck ran as %', current_user; RETURN true; END $$""",
        "CREATE DOMAIN pytest_dtext AS text CHECK (pytest_dcheck(VALUE))",
        "CREATE TYPE pytest_drec AS (a pytest_dtext)",
    )
    with owner as ran:
        cases = ["[domain-record] x as a record", "[domain-to-record] x through a column list", "[domain-populate] x populated"]
        try:
            conn.execute("SELECT '<a/>'::xml")
            cases.append("[domain-xmltable] x as a table")
        except errors.FeatureNotSupported:  # a server built without libxml
            pass
        if major >= 17:
            cases.append("[domain-json-value] x as json")
        for question in cases:
            ran.clear()
            with pytest.raises(errors.InsufficientPrivilege) as e:
                conn.execute("SELECT nl2sql(%s)", (question,))
            assert e.value.diag.message_primary == "function public.pytest_dcheck is not trusted in generated SQL", question
            assert not [m for m in ran if "pytest_dcheck ran" in m], "%s: her CHECK ran: %s" % (question, ran)
