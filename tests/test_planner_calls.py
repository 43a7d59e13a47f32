"""What the planner calls itself, out of the executor's sight and, for built-in functions, out of
the fmgr hooks' too: the functions of the operators it estimates (and of their negators and
commutators, however many hops away), range types' support functions, and the predicates of
partial indexes the query never names. A table owner plants them; a superuser asks."""
import threading
import time

import pytest
from psycopg import errors

from helpers import hostile_owner

LOCKS = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
LOCKED = "function pg_catalog.pg_try_advisory_lock is not allowed in generated SQL"


def major(conn):
    return int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000


def ages(table, rows=100):
    """A table of ages 0 to 4 everyone may read, with statistics (its most common values)."""
    return [
        f"CREATE TABLE {table} (age int)",
        f"INSERT INTO {table} SELECT g % 5 FROM generate_series(1, {rows}) g",
        f"ANALYZE {table}",
        f"GRANT SELECT ON {table} TO PUBLIC",
    ]


def test_an_operators_negator_is_judged(connect, mock):
    # The planner estimates `a <~> b` with neqsel, which calls the NEGATOR's function on the
    # column's most common values: a built-in function (never seen by the fmgr hooks) run
    # during planning (no executor, no object-access hook). A table owner makes it one that
    # takes an advisory lock, behind an operator whose own function is harmless, in a view (which
    # nl2sql also samples for the schema prompt) and, on 18, in a virtual generated column.
    conn = connect()
    # 18+: the same operator behind a virtual generated column, expanded inside the planner.
    virtual = [
        "CREATE TABLE pytest_oflags (age int, flag bool GENERATED ALWAYS AS (age <~> 4303) VIRTUAL)",
        "INSERT INTO pytest_oflags (age) SELECT g % 5 FROM generate_series(1, 100) g",
        "ANALYZE pytest_oflags",
        "GRANT SELECT ON pytest_oflags TO PUBLIC",
    ] if major(conn) >= 18 else []
    owner = hostile_owner(
        conn, "pytest_omallory",
        "CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.pg_try_advisory_lock)",
        """CREATE OPERATOR public.<~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
           NEGATOR = OPERATOR(public.~=~), RESTRICT = neqsel)""",
        "CREATE OPERATOR public.=~= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4eq)",
        """CREATE OPERATOR public.<!> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
           NEGATOR = OPERATOR(public.=~=), RESTRICT = neqsel)""",
        "CREATE TABLE pytest_oages (age int)",
        "INSERT INTO pytest_oages SELECT g % 5 FROM generate_series(1, 100) g",
        "ANALYZE pytest_oages",
        "CREATE VIEW pytest_oadults AS SELECT * FROM pytest_oages WHERE age <~> 4303",
        "GRANT SELECT ON pytest_oages, pytest_oadults TO PUBLIC",
        *virtual,
    )
    with owner:
        questions = ["[negator-view] how many adults?", "[negator-direct] ages other than 4303"]
        if virtual:
            questions.append("[negator-virtual] how many flagged?")
        for question in questions:
            with pytest.raises(errors.InsufficientPrivilege) as e:
                conn.execute("SELECT nl2sql(%s)", (question,))
            assert e.value.diag.message_primary == LOCKED, question
            assert conn.execute(LOCKS).fetchone()[0] == 0, question
        # An operator of hers whose negator is harmless: the same kind of query runs.
        assert conn.execute("SELECT nl2sql('[negator-harmless] ages other than 4303')").fetchone()[0].startswith("SELECT count(*)")


def test_the_commutator_of_a_negator_is_judged(connect, mock):
    # Two hops: the planner folds NOT (4303 <~~ age) into 4303 >>~ age (the negator), then
    # estimates it with the column on the right through >>~'s commutator, whose function runs
    # on the most common values. Her function: pg_try_advisory_lock, two operators away from the
    # one she writes. Reached directly, through nl2sql's sampling of a view the question never
    # names, and on 18 behind a virtual generated column.
    conn = connect()
    virtual = [
        "CREATE TABLE pytest_zflags (age int, flag bool GENERATED ALWAYS AS (NOT (4303 <~~ age)) VIRTUAL)",
        "INSERT INTO pytest_zflags (age) SELECT g % 5 FROM generate_series(1, 100) g",
        "ANALYZE pytest_zflags",
        "GRANT SELECT ON pytest_zflags TO PUBLIC",
    ] if major(conn) >= 18 else []
    owner = hostile_owner(
        conn, "pytest_zmallory",
        "CREATE OPERATOR public.<<~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.pg_try_advisory_lock)",
        """CREATE OPERATOR public.>>~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ge,
           COMMUTATOR = OPERATOR(public.<<~), RESTRICT = scalargesel)""",
        """CREATE OPERATOR public.<~~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4lt,
           NEGATOR = OPERATOR(public.>>~), RESTRICT = scalarltsel)""",
        *ages("pytest_zages"),
        "CREATE VIEW pytest_zview AS SELECT * FROM pytest_zages WHERE NOT (4303 <~~ age)",
        "GRANT SELECT ON pytest_zview TO PUBLIC",
        *virtual,
    )
    with owner:
        questions = ["[twohop-direct] ages not above 4303"] + (["[twohop-virtual] how many flagged?"] if virtual else [])
        for question in questions:
            with pytest.raises(errors.InsufficientPrivilege) as e:
                conn.execute("SELECT nl2sql(%s)", (question,))
            assert e.value.diag.message_primary == LOCKED, question
            assert conn.execute(LOCKS).fetchone()[0] == 0, question
        # A question that never names the view: nl2sql samples it for the prompt, the planner
        # would run her function there; the view is shown without samples and the question is
        # answered.
        assert conn.execute("SELECT nl2sql('[twohop-sampled] say one')").fetchone()[0] == "SELECT 1 AS one"
        assert conn.execute(LOCKS).fetchone()[0] == 0


def test_a_partial_index_predicate_is_judged(connect, mock):
    # The planner estimates the clauses of a partial index's predicate that the query's own
    # clauses do not imply: her operator <~> (harmless itself, negator pg_try_advisory_lock,
    # estimated by neqsel) in the predicate of an index on a table the query reads, never in
    # the query.
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_pmallory",
        "CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.pg_try_advisory_lock)",
        """CREATE OPERATOR public.<~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
           NEGATOR = OPERATOR(public.~=~), RESTRICT = neqsel)""",
        "CREATE TABLE pytest_ppages (x int, y int, age int)",
        "INSERT INTO pytest_ppages SELECT g, g % 10, g % 5 FROM generate_series(1, 10000) g",
        "CREATE INDEX ON pytest_ppages (x) WHERE (age <~> 4303 OR y > 1)",
        "ANALYZE pytest_ppages",
        "GRANT SELECT ON pytest_ppages TO PUBLIC",
        # The same predicate on a partition: the planner opens each partition itself.
        "CREATE TABLE pytest_pparts (x int, y int, age int) PARTITION BY RANGE (x)",
        "CREATE TABLE pytest_pparts_1 PARTITION OF pytest_pparts FOR VALUES FROM (0) TO (100000)",
        "INSERT INTO pytest_pparts SELECT g, g % 10, g % 5 FROM generate_series(1, 10000) g",
        "CREATE INDEX ON pytest_pparts_1 (x) WHERE (age <~> 4303 OR y > 1)",
        "ANALYZE pytest_pparts",
        "GRANT SELECT ON pytest_pparts TO PUBLIC",
    )
    with owner:
        for question in ("[partial-negator] how many rows", "[partial-partition] how many rows"):
            with pytest.raises(errors.InsufficientPrivilege) as e:
                conn.execute("SELECT nl2sql(%s)", (question,))
            assert e.value.diag.message_primary == LOCKED, question
            assert conn.execute(LOCKS).fetchone()[0] == 0, question


def test_a_range_type_in_a_partial_index_predicate_is_judged(connect, mock):
    # Her range type appears only in a partial index's predicate: estimating it, rangesel calls
    # the subtype_diff the type cache keeps (filled here by her own statements in this session,
    # outside any check, so the fmgr hooks never see the call).
    conn = connect()
    owner = hostile_owner(
        conn, "pytest_rmallory",
        """CREATE FUNCTION public.pytest_rdiff(text, text) RETURNS float8 IMMUTABLE LANGUAGE plpgsql
           AS $$BEGIN RAISE NOTICE 'pytest_rdiff ran as %', current_user; RETURN 1; END$$""",
        "CREATE TYPE public.pytest_rspan AS RANGE (subtype = text, subtype_diff = public.pytest_rdiff)",
        "CREATE TABLE pytest_rspans (s public.pytest_rspan, x int, y int)",
        """INSERT INTO pytest_rspans SELECT public.pytest_rspan(chr(97 + g % 5), chr(98 + g % 5)), g, g % 10
           FROM generate_series(1, 3000) g""",
        "CREATE INDEX ON pytest_rspans (x) WHERE (s && public.pytest_rspan('b', 'c') OR y > 1)",
        "ANALYZE pytest_rspans",
        "GRANT SELECT ON pytest_rspans TO PUBLIC",
    )
    with owner as ran:
        with pytest.raises(errors.InsufficientPrivilege) as e:
            conn.execute("SELECT nl2sql('[partial-range] how many rows')")
        assert e.value.diag.message_primary == "function public.pytest_rdiff is not trusted in generated SQL"
        assert not [n for n in ran if "pytest_rdiff ran" in n]
        # Allow-listed, the same query runs: the refusal was her function's.
        conn.execute("SET nl2sql.allowed_functions = 'public.pytest_rdiff, public.pytest_rspan'")
        assert conn.execute("SELECT nl2sql('[partial-range] how many rows')").fetchone()[0].startswith("SELECT count(*)")
        conn.execute("RESET nl2sql.allowed_functions")


def test_an_operator_changed_while_the_planner_waits_is_refused(connect, mock):
    # What the planner calls is judged before it plans; it reads the operators again later, and
    # takes in other sessions' catalog changes each time it takes a new lock. She names a
    # negator that does not exist yet (a shell: refused, it could be completed later), completes
    # it harmlessly (answered), then holds a lock on her table's index so that the planner waits
    # there, drops that negator and creates another in its place on pg_try_advisory_lock (which
    # links it back to her operator), and lets the planner go on: neqsel would call it on the
    # column's most common values. The change, taken in while the planner runs, stops the query;
    # a change to an operator the planner does not reach does not.
    conn, first, second = connect(), connect(), connect()
    owner = hostile_owner(
        conn, "pytest_xmallory",
        """CREATE OPERATOR public.<~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4ne,
           NEGATOR = OPERATOR(public.~=~), RESTRICT = neqsel)""",
        *ages("pytest_xages"),
        "CREATE INDEX pytest_xages_age ON pytest_xages (age)",
        "ANALYZE pytest_xages",
    )
    question = "SELECT nl2sql('[race-negator] ages other than 4303')"
    with owner:
        with pytest.raises(errors.InsufficientPrivilege) as shell:
            conn.execute(question)
        assert shell.value.diag.message_primary == "operator public.~=~(integer,integer) has no function yet"
        assert shell.value.diag.message_hint == "Its owner can give it a function (CREATE OPERATOR) or drop it."
        for c in (first, second):
            c.execute("SET ROLE pytest_xmallory")
        second.execute("""CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4eq,
                          NEGATOR = OPERATOR(public.<~>))""")
        assert conn.execute(question).fetchone()[0].startswith("SELECT count(*)")
        # No samples: the generated query is the first to plan a read of her table.
        conn.execute("SET nl2sql.sample_rows = 0")
        # Another operator created meanwhile, one the planner never reaches: nothing stops.
        outcome = _while_the_planner_waits(conn, first, "[race-negator] ages other than 4303", lambda: second.execute(
            "CREATE OPERATOR public.@~@ (LEFTARG = int4, RIGHTARG = int4, FUNCTION = pg_catalog.int4eq)"))
        assert outcome["result"] == "finished", outcome
        # Her negator dropped and created again on pg_try_advisory_lock, which links it back.
        outcome = _while_the_planner_waits(conn, first, "[race-negator] ages other than 4303", lambda: (
            second.execute("DROP OPERATOR public.~=~ (int4, int4)"),
            second.execute("""CREATE OPERATOR public.~=~ (LEFTARG = int4, RIGHTARG = int4,
                              FUNCTION = pg_catalog.pg_try_advisory_lock, NEGATOR = OPERATOR(public.<~>))""")))
        e = outcome["result"]
        assert isinstance(e, errors.SerializationFailure), e
        assert e.diag.message_primary == "an operator changed while nl2sql planned a query"
        assert e.diag.message_hint == "Ask again."
        assert conn.execute(LOCKS).fetchone()[0] == 0
        # Asked again, the new negator is judged like any other.
        with pytest.raises(errors.InsufficientPrivilege) as refused:
            conn.execute(question)
        assert refused.value.diag.message_primary == LOCKED
        for c in (first, second):
            c.execute("RESET ROLE")


def _while_the_planner_waits(conn, blocker, question, change):
    """Asks `question` on `conn` while `blocker` holds her index (REINDEX in a transaction), runs
    `change` once the planner waits for it, then lets the planner go on; what the call ended
    with."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    blocker.execute("BEGIN")
    blocker.execute("REINDEX INDEX pytest_xages_age")
    outcome = {}
    t = threading.Thread(target=_ask, args=(conn, question, outcome))
    t.start()
    try:
        deadline = time.time() + 30
        waiting = "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted"
        while not blocker.execute(waiting, (pid,)).fetchone()[0]:
            assert time.time() < deadline and t.is_alive(), "the planner never waited on her index: %s" % outcome
            time.sleep(0.05)
        change()
    finally:
        blocker.execute("COMMIT")
        t.join(60)
    return outcome


def _ask(conn, question, outcome):
    try:
        conn.execute("SELECT nl2sql(%s)", (question,))
        outcome["result"] = "finished"
    except Exception as e:  # noqa: BLE001 - the test inspects what was raised
        outcome["result"] = e
