"""Value index behaviour that needs timing, several sessions, or a look at the catalog."""
import threading
import time

import psycopg
import pytest
from psycopg import errors

from helpers import scratch_role


@pytest.fixture
def big_table(connect):
    """A table with 300,000 distinct names, dropped afterwards."""
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS big_names")
    admin.execute("CREATE TABLE big_names (id int, name text)")
    admin.execute("INSERT INTO big_names SELECT g, 'name ' || g FROM generate_series(1, 300000) g")
    yield admin
    admin.execute("DROP TABLE IF EXISTS big_names")


def index_state(conn):
    return conn.execute(
        """SELECT (SELECT count(*) FROM nl2sql.value_index i WHERE i.relid = 'big_names'::regclass),
                  (SELECT count(*) FROM pg_class WHERE relname LIKE 'value_entries_%' AND relkind = 'r'
                   AND relnamespace = 'nl2sql'::regnamespace AND NOT EXISTS (
                       SELECT 1 FROM nl2sql.value_index i WHERE relname = 'value_entries_' || i.id || '_' || i.generation)
                   AND NOT EXISTS (
                       SELECT 1 FROM nl2sql.value_generations g WHERE relname = 'value_entries_' || g.column_id || '_' || g.generation)),
                  (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'big_names'::regclass)""").fetchone()


def test_cancel_during_a_large_build_leaves_nothing(connect, big_table):
    conn, other = connect(), connect()
    pid = conn.info.backend_pid
    threading.Timer(1.5, lambda: other.execute("SELECT pg_cancel_backend(%s)", (pid,))).start()
    t0 = time.monotonic()
    with pytest.raises(errors.QueryCanceled):
        conn.execute("SELECT * FROM nl2sql.create_value_index('big_names', 'name')")
    assert time.monotonic() - t0 < 10
    # No registry row, no orphaned partition, no triggers: the build was one transaction.
    assert index_state(conn) == (0, 0, 0)
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_cancel_while_waiting_for_a_slow_embedding_endpoint(connect, mock):
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS slow_names")
    admin.execute("CREATE TABLE slow_names (name text)")
    admin.execute("INSERT INTO slow_names VALUES ('alpha'), ('[embed-slow] beta')")
    try:
        conn, other = connect(), connect()
        conn.execute("SELECT set_config('nl2sql.embedding_url', %s, false)", (mock.url + "/v1",))
        pid = conn.info.backend_pid
        # The time the cancel is sent: the build may end before pg_cancel_backend() returns to
        # the thread that sent it.
        cancelled = []
        timer = threading.Timer(1.0, lambda: (cancelled.append(time.monotonic()),
                                              other.execute("SELECT pg_cancel_backend(%s)", (pid,))))
        timer.start()
        with pytest.raises(errors.QueryCanceled):
            conn.execute("SELECT * FROM nl2sql.create_value_index('slow_names')")
        ended = time.monotonic()
        timer.join()
        assert ended - cancelled[0] < 1.0
        assert conn.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid = 'slow_names'::regclass").fetchone() == (0,)
    finally:
        admin.execute("DROP TABLE slow_names")


def test_embedding_endpoint_error_is_clear(connect, mock):
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS failing_names")
    admin.execute("CREATE TABLE failing_names (name text)")
    admin.execute("INSERT INTO failing_names VALUES ('gamma'), ('[embed-500] delta')")
    try:
        conn = connect()
        conn.execute("SELECT set_config('nl2sql.embedding_url', %s, false)", (mock.url + "/v1",))
        conn.execute("SET nl2sql.llm_max_retries = 0")
        with pytest.raises(errors.ConnectionFailure) as e:
            conn.execute("SELECT * FROM nl2sql.create_value_index('failing_names')")
        assert e.value.diag.message_primary.startswith("embedding endpoint")
        assert conn.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid = 'failing_names'::regclass").fetchone() == (0,)
    finally:
        admin.execute("DROP TABLE failing_names")


def test_bulk_load_and_concurrent_inserts_stay_indexed(connect):
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS cities")
    admin.execute("CREATE TABLE cities (id serial, city text)")
    admin.execute("INSERT INTO cities (city) VALUES ('Lisbon')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('cities')")
    try:
        # COPY of 20,000 rows in one statement, and four sessions inserting at once.
        with admin.cursor().copy("COPY cities (city) FROM STDIN") as copy:
            for i in range(20000):
                copy.write_row((f"Town {i}",))
        errs = []

        def insert(n):
            try:
                c = connect()
                for i in range(25):
                    c.execute("INSERT INTO cities (city) VALUES (%s)", (f"Village {n}-{i}",))
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append(e)

        threads = [threading.Thread(target=insert, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errs
        found = admin.execute("SELECT value FROM nl2sql.search_values('Town 19999', 1)").fetchall()
        assert found == [("Town 19999",)]
        assert admin.execute("SELECT value FROM nl2sql.search_values('village 3-24', 1)").fetchall() == [("Village 3-24",)]
        table = admin.execute(
            "SELECT format('nl2sql.value_entries_%s_%s', id, generation) FROM nl2sql.value_index "
            "WHERE relid = 'cities'::regclass").fetchone()[0]
        entries = admin.execute(f"SELECT count(*) FROM {table} e WHERE e.term = e.value").fetchone()[0]
        assert entries == 1 + 20000 + 100
    finally:
        admin.execute("DROP TABLE cities")


def test_search_reveals_nothing_to_a_role_without_privileges(connect):
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS secret_codes")
    admin.execute("CREATE TABLE secret_codes (code text)")
    admin.execute("INSERT INTO secret_codes VALUES ('Operation Aberdeen')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('secret_codes')")
    admin.execute("DROP ROLE IF EXISTS eve")
    admin.execute("CREATE ROLE eve")
    try:
        conn = connect()
        conn.execute("SET ROLE eve")
        assert conn.execute("SELECT count(*) FROM nl2sql.search_values('operation aberdeen')").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM nl2sql.search_columns('code')").fetchone()[0] >= 0
        cols = conn.execute("SELECT relation::text FROM nl2sql.search_columns('secret codes code', 50)").fetchall()
        assert ("secret_codes",) not in cols
        for q in ["SELECT * FROM nl2sql.value_entries", "SELECT * FROM nl2sql.column_embeddings",
                  "SELECT * FROM nl2sql.value_index"]:
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(q)
    finally:
        admin.execute("DROP TABLE secret_codes")
        admin.execute("DROP ROLE eve")


def search_and_refresh(connect, table):
    """A new session finds Aberdeen in `table`'s value index and refreshes it; the session, and
    the notices it receives from then on (her planted operators say when they run)."""
    asker = connect()
    notices = []
    asker.add_notice_handler(lambda n: notices.append(n.message_primary))
    found = asker.execute(f"SELECT value FROM nl2sql.search_values('aberdeen', 1) WHERE relation::text = '{table}'").fetchall()
    assert found == [("Aberdeen",)]
    asker.execute(f"SELECT * FROM nl2sql.refresh_value_indexes('{table}')")
    return asker, notices

def test_an_operator_planted_in_the_vector_schema_changes_no_search(connect):
    # The owner's queries run with pgvector's schema on the search path (for its operators).
    # Where another role may create there (public, in databases from before PostgreSQL 15), an
    # `=(oid, regclass)` of hers matches exactly where pg_catalog's needs a coercion: nl2sql's
    # comparisons of a regclass are written so that pg_catalog's own operator matches exactly.
    admin = connect()
    schema = admin.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()[0]
    admin.execute("DROP TABLE IF EXISTS planted_towns")
    admin.execute("CREATE TABLE planted_towns (town text)")
    admin.execute("INSERT INTO planted_towns VALUES ('Aberdeen'), ('Dundee')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('planted_towns')")
    role = "pytest_planter"
    with scratch_role(admin, role, f"GRANT CREATE ON SCHEMA {schema} TO {role}"):
        admin.execute(f"SET ROLE {role}")
        try:
            admin.execute(f"""CREATE FUNCTION {schema}.her_eq(oid, regclass) RETURNS bool LANGUAGE plpgsql
                              AS $$ BEGIN RAISE NOTICE 'her operator ran as %', current_user; RETURN true; END $$""")
            admin.execute(f"CREATE OPERATOR {schema}.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = {schema}.her_eq)")
        finally:
            admin.execute("RESET ROLE")
        try:
            asker, notices = search_and_refresh(connect, "planted_towns")
            asker.execute("SELECT * FROM nl2sql.drop_value_index('planted_towns')")
            assert not [n for n in notices if "her operator" in n], notices
        finally:
            admin.execute("DROP TABLE planted_towns")


def test_an_operator_planted_in_pg_trgm_schema_changes_no_search(connect):
    # pg_trgm may live in a schema of its own where another role may create. Had that schema a
    # place on the owner's search_path before pgvector's, her `<~>(bit, bit)` would be what a
    # search resolves (and the hooks, refusing to run it as the owner, would fail every search);
    # nl2sql names nothing of pg_trgm, so its schema is not on that path.
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    trgm, vector = admin.execute(
        "SELECT (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'), "
        "(SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector')").fetchone()
    admin.execute("DROP TABLE IF EXISTS trgm_towns")
    admin.execute("CREATE TABLE trgm_towns (town text)")
    admin.execute("INSERT INTO trgm_towns VALUES ('Aberdeen'), ('Dundee')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('trgm_towns')")
    if trgm == "a_trgm":  # left there by a run that died: pg_trgm goes back beside pgvector
        trgm = vector
    role = "pytest_trgm_planter"
    try:
        admin.execute("CREATE SCHEMA IF NOT EXISTS a_trgm")  # sorts before the schema pgvector is in
        admin.execute("ALTER EXTENSION pg_trgm SET SCHEMA a_trgm")
        with scratch_role(admin, role, f"GRANT USAGE, CREATE ON SCHEMA a_trgm TO {role}"):
            admin.execute(f"SET ROLE {role}")
            try:
                for op, arg in (("<~>", "bit"), ("<=>", f"{vector}.vector")):
                    fn = "her_hamming" if op == "<~>" else "her_cosine"
                    admin.execute(f"""CREATE FUNCTION a_trgm.{fn}({arg}, {arg}) RETURNS float8 LANGUAGE plpgsql
                                      AS $$ BEGIN RAISE NOTICE 'her operator ran as %', current_user; RETURN 0; END $$""")
                    admin.execute(f"CREATE OPERATOR a_trgm.{op} (LEFTARG = {arg}, RIGHTARG = {arg}, FUNCTION = a_trgm.{fn})")
            finally:
                admin.execute("RESET ROLE")
            asker, notices = search_and_refresh(connect, "trgm_towns")
            assert asker.execute("SELECT value FROM nl2sql.search_values('dundee', 1)").fetchall() == [("Dundee",)]
            assert not [n for n in notices if "her operator" in n], notices
    finally:
        admin.execute("RESET ROLE")
        admin.execute(f"ALTER EXTENSION pg_trgm SET SCHEMA {trgm}")
        admin.execute("DROP SCHEMA IF EXISTS a_trgm")
        admin.execute("DROP TABLE IF EXISTS trgm_towns")


def test_a_locked_index_is_skipped_and_named_in_the_trace(connect):
    """A search never waits long: a column whose entries it cannot lock in time is left out,
    and nl2sql_explain() says which."""
    admin, holder = connect(), connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS locked_towns")
    admin.execute("CREATE TABLE locked_towns (name text)")
    admin.execute("INSERT INTO locked_towns VALUES ('Aberdeen'), ('Inverness')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('locked_towns')")
    try:
        table = admin.execute("SELECT format('nl2sql.value_entries_%s_%s', id, generation) FROM nl2sql.value_index "
                              "WHERE relid = 'locked_towns'::regclass").fetchone()[0]
        with holder.transaction():
            holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            t0 = time.monotonic()
            assert admin.execute("SELECT count(*) FROM nl2sql.search_values('aberdeen')").fetchone()[0] == 0
            admin.execute("SET nl2sql.mode = zero_shot")
            trace = admin.execute("SELECT nl2sql_explain('How many singers do we have?')").fetchone()[0]
            assert time.monotonic() - t0 < 5
            # Named as the value hints name columns.
            assert [c.split(".", 1)[-1] for c in trace["values_skipped"]] == ["locked_towns.name"]
        # The lock released, the column is searched again.
        assert admin.execute("SELECT value FROM nl2sql.search_values('aberdeen', 1)").fetchone()[0] == "Aberdeen"
    finally:
        admin.execute("DROP TABLE IF EXISTS locked_towns")


def test_truncate_under_an_older_snapshot_leaves_no_value_shown(connect):
    """A TRUNCATE whose snapshot predates a rebuild's switch empties the retired generation;
    the column is marked so that searches re-check what the new one still holds."""
    admin, old = connect(), connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS trunc_towns")
    admin.execute("CREATE TABLE trunc_towns (name text)")
    admin.execute("INSERT INTO trunc_towns VALUES ('Aberdeen'), ('Inverness')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('trunc_towns')")
    try:
        old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT count(*) FROM nl2sql.value_index")
        admin.execute("SELECT * FROM nl2sql.create_value_index('trunc_towns')")
        old.execute("TRUNCATE trunc_towns")
        old.execute("COMMIT")
        found = admin.execute("SELECT count(*) FROM nl2sql.search_values('aberdeen') WHERE relation::text = 'trunc_towns'").fetchone()[0]
        assert found == 0
    finally:
        admin.execute("DROP TABLE IF EXISTS trunc_towns")


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
        admin.execute("INSERT INTO nl2sql.value_flags (column_id, flag) SELECT id, 'stale' FROM nl2sql.value_index "
                      "WHERE relid IN ('closed_towns'::regclass, 'open_towns'::regclass)")
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


def test_row_security_enabled_after_a_build_hides_the_values(connect):
    """An index built without include_rls holds values a policy may later hide: from the moment
    the table has row-level security, it is searched by nobody (the owner included) until it is
    built again with include_rls, which re-checks every value as the caller."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS late_towns")
    admin.execute("CREATE TABLE late_towns (town text)")
    admin.execute("INSERT INTO late_towns VALUES ('Aberdeen'), ('Dundee')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('late_towns')")
    found = "SELECT value FROM nl2sql.search_values('aberdeen', 1) WHERE relation::text = 'late_towns'"
    role = "pytest_late_reader"
    try:
        with scratch_role(admin, role, f"GRANT SELECT ON late_towns TO {role}"):
            reader = connect()
            reader.execute(f"SET ROLE {role}")
            assert reader.execute(found).fetchall() == [("Aberdeen",)]
            admin.execute("ALTER TABLE late_towns ENABLE ROW LEVEL SECURITY")
            assert reader.execute("SELECT count(*) FROM late_towns").fetchone()[0] == 0
            assert reader.execute(found).fetchall() == []
            assert admin.execute(found).fetchall() == []
            # Built again with the re-check: each caller finds what its policies let it read.
            admin.execute("SELECT * FROM nl2sql.create_value_index('late_towns', include_rls => true)")
            assert admin.execute(found).fetchall() == [("Aberdeen",)]
            assert reader.execute(found).fetchall() == []
            admin.execute(f"CREATE POLICY scots ON late_towns FOR SELECT TO {role} USING (town = 'Aberdeen')")
            assert reader.execute(found).fetchall() == [("Aberdeen",)]
            assert reader.execute("SELECT count(*) FROM nl2sql.search_values('dundee', 1) "
                                  "WHERE relation::text = 'late_towns'").fetchone()[0] == 0
    finally:
        admin.execute("DROP TABLE IF EXISTS late_towns")
