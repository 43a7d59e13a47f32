"""Value index behaviour that needs timing, several sessions, or a look at the catalog."""
import contextlib
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


@pytest.mark.parametrize("op, left, right", [
    ("=", "oid", "regclass"), ("=", "regclass", "oid"), ("-", "integer", "double precision"),
    ("||", "text", "text[]"), ("||", "text", "text"), ("<>", "oid", "regclass")])
def test_an_operator_planted_in_the_vector_schema_changes_no_search(connect, op, left, right):
    # The owner's queries run with pgvector's schema on the search path (for its operators).
    # Where another role may create there (public, in databases from before PostgreSQL 15), an
    # operator of hers that matches exactly where pg_catalog's needs a coercion (`=(oid,
    # regclass)`, `-(integer, double precision)`) would be chosen: nl2sql names pg_catalog's
    # operators or writes its comparisons so that pg_catalog's matches exactly. Hers raise.
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
            admin.execute(f"""CREATE FUNCTION {schema}.her_op({left}, {right}) RETURNS bool LANGUAGE plpgsql
                              AS $$ BEGIN RAISE EXCEPTION 'her operator ran as %', current_user; END $$""")
            admin.execute(f"CREATE OPERATOR {schema}.{op} (LEFTARG = {left}, RIGHTARG = {right}, FUNCTION = {schema}.her_op)")
        finally:
            admin.execute("RESET ROLE")
        try:
            asker, notices = search_and_refresh(connect, "planted_towns")
            asker.execute("INSERT INTO planted_towns VALUES ('Perth')")
            assert asker.execute("SELECT value FROM nl2sql.search_values('perth', 1)").fetchall() == [("Perth",)]
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


def test_pgvector_in_a_schema_named_user_is_refused_not_misread(connect):
    """search_path reads "$user", quoted or not, as the current role's own schema: with pgvector
    in a schema of that name, the extension owner's path would name the owner's own schema
    instead (where others may be able to create). nl2sql refuses to act as the owner."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS user_towns")
    admin.execute("CREATE TABLE user_towns (town text)")
    admin.execute("INSERT INTO user_towns VALUES ('Aberdeen'), ('Dundee')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('user_towns')")
    vector = admin.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    if vector == '"$user"':  # left there by a run that died
        vector = "public"
    try:
        admin.execute('CREATE SCHEMA IF NOT EXISTS "$user"')
        admin.execute('ALTER EXTENSION vector SET SCHEMA "$user"')
        with pytest.raises(errors.ObjectNotInPrerequisiteState) as refused:
            admin.execute("SELECT * FROM nl2sql.search_values('dundee', 1)")
        assert '"$user"' in refused.value.diag.message_primary
        assert "ALTER EXTENSION vector SET SCHEMA" in refused.value.diag.message_hint
    finally:
        admin.execute(f"ALTER EXTENSION vector SET SCHEMA {vector}")
        admin.execute('DROP SCHEMA IF EXISTS "$user"')
    assert admin.execute("SELECT value FROM nl2sql.search_values('dundee', 1)").fetchall() == [("Dundee",)]
    admin.execute("DROP TABLE user_towns")


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



@pytest.fixture
def two_schemas(connect):
    """A role that owns two schemas, race_a and race_b, and may index its own tables; in race_b,
    a table of the same name that the superuser owns and lets everyone read. Yields a function
    that opens a session as that role, and one that swaps the two schemas' names."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    role = "pytest_renamer"
    for s in ("race_a", "race_b", "race_tmp"):
        admin.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
    database = admin.execute("SELECT current_database()").fetchone()[0]
    # Renaming a schema takes its ownership and CREATE on the database.
    grants = [f"GRANT CREATE ON DATABASE {database} TO {role}"]
    grants += [f"CREATE SCHEMA {s} AUTHORIZATION {role}" for s in ("race_a", "race_b")]
    grants += [f"GRANT EXECUTE ON FUNCTION nl2sql.{f} TO {role}" for f in (
        "create_value_index(regclass, name, boolean)", "_create_value_index(oid, text, boolean)",
        "drop_value_index(regclass, name)", "_drop_value_index(oid, text)")]
    with scratch_role(admin, role, *grants):
        admin.execute("CREATE TABLE race_b.towns (town text)")
        admin.execute("INSERT INTO race_b.towns VALUES ('Dundee')")
        admin.execute("GRANT SELECT ON race_b.towns TO PUBLIC")

        def as_her():
            c = connect()
            c.execute("SET client_min_messages = warning")
            c.execute(f"SET ROLE {role}")
            return c

        def swap():
            her = as_her()
            for old, new in (("race_a", "race_tmp"), ("race_b", "race_a"), ("race_tmp", "race_b")):
                her.execute(f"ALTER SCHEMA {old} RENAME TO {new}")

        her = as_her()
        her.execute("CREATE TABLE race_a.towns (town text)")
        her.execute("INSERT INTO race_a.towns VALUES ('Aberdeen')")
        theirs = admin.execute("SELECT 'race_b.towns'::regclass::oid").fetchone()[0]
        mine = admin.execute("SELECT 'race_a.towns'::regclass::oid").fetchone()[0]
        try:
            yield as_her, swap, mine, theirs
        finally:
            for s in ("race_a", "race_b", "race_tmp"):
                admin.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")


def nl2sql_triggers(conn, rel):
    return conn.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::oid AND tgfoid = 'nl2sql._values_changed'::regproc",
                        (rel,)).fetchone()[0]


def wait_until_blocked(conn, pid):
    for _ in range(200):
        if conn.execute("SELECT cardinality(pg_blocking_pids(%s)) > 0", (pid,)).fetchone()[0]:
            return
        time.sleep(0.05)
    raise AssertionError("the session never waited")


def in_thread(conn, sql):
    """Runs `sql` on `conn` in a thread; joining gives its rows or its error."""
    out = {}

    def run():
        try:
            cur = conn.execute(sql)
            out["rows"] = cur.fetchall() if cur.description else []
        except psycopg.Error as e:  # reported by the caller
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_drop_waiting_while_schemas_are_renamed_drops_only_its_own_tables_triggers(connect, two_schemas):
    """A drop resolves its table once; while it waits for a build of that table, the table's
    owner swaps her schema's name with another of hers holding someone else's table of the
    same name. The triggers dropped are those of the table the drop was asked for."""
    as_her, swap, mine, theirs = two_schemas
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("SELECT * FROM nl2sql.create_value_index('race_b.towns')")
    her = as_her()
    her.execute("SELECT * FROM nl2sql.create_value_index('race_a.towns')")
    assert nl2sql_triggers(admin, theirs) == 4 and nl2sql_triggers(admin, mine) == 4
    builder, dropper = as_her(), as_her()
    builder.execute("BEGIN")
    builder.execute("SELECT * FROM nl2sql.create_value_index('race_a.towns')")  # holds the column's row
    t, out = in_thread(dropper, "SELECT * FROM nl2sql.drop_value_index('race_a.towns')")
    wait_until_blocked(admin, dropper.info.backend_pid)
    swap()
    builder.execute("COMMIT")
    t.join(30)
    assert out.get("rows") == [("town",)], out
    assert nl2sql_triggers(admin, mine) == 0
    assert nl2sql_triggers(admin, theirs) == 4
    assert admin.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid::oid = %s::oid", (theirs,)).fetchone()[0] == 1


def test_a_first_build_waiting_while_schemas_are_renamed_makes_no_trigger_on_another_table(connect, two_schemas):
    """A first build waits for a lock on its table; meanwhile the schemas are swapped so that
    the name it started with is another table's. The triggers are made on its own table and
    the values indexed are its own."""
    as_her, swap, mine, theirs = two_schemas
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    holder, builder = as_her(), as_her()
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE race_a.towns IN SHARE MODE")
    t, out = in_thread(builder, "SELECT column_name, status FROM nl2sql.create_value_index('race_a.towns')")
    wait_until_blocked(admin, builder.info.backend_pid)
    swap()
    holder.execute("COMMIT")
    t.join(30)
    assert out.get("rows") == [("town", "ready")], out
    assert nl2sql_triggers(admin, theirs) == 0
    assert nl2sql_triggers(admin, mine) == 4
    values = admin.execute("SELECT value FROM nl2sql.search_values('aberdeen', 1) WHERE relation = %s::oid::regclass",
                           (mine,)).fetchall()
    assert values == [("Aberdeen",)]
    assert admin.execute("SELECT count(*) FROM nl2sql.search_values('dundee', 1) WHERE relation = %s::oid::regclass",
                         (mine,)).fetchone()[0] == 0


def test_a_first_build_under_an_older_snapshot_makes_its_triggers_on_its_own_table(connect, two_schemas):
    """Under REPEATABLE READ the transaction's snapshot still shows the names from before the
    schemas were swapped; PostgreSQL resolves a name by the catalog as committed. The triggers
    are made on the table asked for, and what is read is its own."""
    as_her, swap, mine, theirs = two_schemas
    admin = connect()
    builder = as_her()
    builder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    builder.execute("SELECT count(*) FROM pg_class")
    swap()
    built = builder.execute("SELECT column_name, status FROM nl2sql.create_value_index(%s::oid::regclass)", (mine,)).fetchall()
    builder.execute("COMMIT")
    assert built == [("town", "ready")]
    assert nl2sql_triggers(admin, theirs) == 0
    assert nl2sql_triggers(admin, mine) == 4
    assert admin.execute("SELECT count(*) FROM nl2sql.search_values('dundee', 1) WHERE relation = %s::oid::regclass",
                         (mine,)).fetchone()[0] == 0


def test_a_role_no_longer_the_tables_owner_cannot_drop_its_index_under_an_older_snapshot(connect, two_schemas):
    """Who may drop a table's value index is read as committed now: a snapshot taken while she
    owned the table does not let her drop it once it is another role's."""
    as_her, _, mine, _ = two_schemas
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    her = as_her()
    her.execute("SELECT * FROM nl2sql.create_value_index('race_a.towns')")
    her.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    her.execute("SELECT count(*) FROM pg_class")
    her.execute("SELECT %s::oid::regclass::text", (mine,))  # the table's catalog row in this backend's cache
    admin.execute("ALTER TABLE race_a.towns OWNER TO postgres")
    with pytest.raises(errors.InsufficientPrivilege):
        her.execute("SELECT * FROM nl2sql.drop_value_index(%s::oid::regclass)", (mine,))
    her.execute("ROLLBACK")
    assert nl2sql_triggers(admin, mine) == 4


def test_a_drop_that_waited_while_its_table_changed_owner_is_refused(connect, two_schemas):
    """A drop is checked again once it holds the table: while it waited for a build, the table
    became another role's, and the drop is refused (nothing of it is kept)."""
    as_her, _, mine, _ = two_schemas
    admin, owner_change = connect(), connect()
    as_her().execute("SELECT * FROM nl2sql.create_value_index('race_a.towns')")
    builder, dropper = as_her(), as_her()
    builder.execute("BEGIN")
    builder.execute("SELECT * FROM nl2sql.create_value_index('race_a.towns')")
    dropping, dropped = in_thread(dropper, "SELECT * FROM nl2sql.drop_value_index('race_a.towns')")
    wait_until_blocked(admin, dropper.info.backend_pid)
    changing, changed = in_thread(owner_change, "ALTER TABLE race_a.towns OWNER TO postgres")
    wait_until_blocked(admin, owner_change.info.backend_pid)
    builder.execute("COMMIT")
    changing.join(30)
    dropping.join(30)
    assert "error" not in changed, changed
    assert isinstance(dropped.get("error"), errors.InsufficientPrivilege), dropped
    assert nl2sql_triggers(admin, mine) == 4
    assert admin.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid::oid = %s::oid", (mine,)).fetchone()[0] == 1


@contextlib.contextmanager
def ascii_database(connect, name):
    """A SQL_ASCII database `name` with the extension (a connection to it yielded), dropped after."""
    admin = connect(dbname="postgres")
    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    try:
        db = connect(dbname=name)
        db.execute("SET client_min_messages = warning")
        db.execute("CREATE EXTENSION nl2sql CASCADE")
        yield db
        db.close()
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_name_that_is_not_utf8_never_reads_the_relation_its_lossy_spelling_names(connect):
    """In a SQL_ASCII database a schema's name may hold a byte that is not UTF-8 (`d\\xff`).
    Spelled with U+FFFD in its place, the name is another role's schema, holding a view that
    runs her function. Building the index of the first table refuses (22021); her function never
    runs as the table's owner (a sequence's setval, which no rollback undoes, shows it)."""
    with ascii_database(connect, "nl2sql_ascii") as db:
        with scratch_role(db, "lossy_eve", "GRANT CREATE ON DATABASE nl2sql_ascii TO lossy_eve"):
            db.execute(r"""DO $$BEGIN EXECUTE format('CREATE SCHEMA %I', E'd\xff');
                           EXECUTE format('CREATE TABLE %I.t (c text)', E'd\xff');
                           EXECUTE format('INSERT INTO %I.t VALUES (''dba'')', E'd\xff'); END$$""")
            db.execute("CREATE SEQUENCE public.witness")
            db.execute("GRANT ALL ON SEQUENCE public.witness TO PUBLIC")
            db.execute("SET ROLE lossy_eve")
            db.execute(r"""DO $$DECLARE s text := E'd\xef\xbf\xbd'; BEGIN
                EXECUTE format('CREATE SCHEMA %I', s);
                EXECUTE format('CREATE FUNCTION %I.evil() RETURNS text LANGUAGE sql AS '
                               '$f$ SELECT pg_catalog.setval(''public.witness'', 42)::text $f$', s);
                EXECUTE format('CREATE VIEW %I.t AS SELECT %I.evil() AS c', s, s);
                EXECUTE format('GRANT USAGE ON SCHEMA %I TO PUBLIC', s);
                EXECUTE format('GRANT SELECT ON %I.t TO PUBLIC', s); END$$""")
            db.execute("RESET ROLE")
            oid = db.execute(r"SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                             r"WHERE n.nspname = E'd\xff'").fetchone()[0]
            with pytest.raises(errors.CharacterNotInRepertoire):
                db.execute("SELECT * FROM nl2sql.create_value_index(%s::oid::regclass)", (oid,))
            assert db.execute("SELECT last_value FROM public.witness").fetchone()[0] == 1
            # A table indexed under a UTF-8 name, then renamed to one that is not: a refresh of
            # every index skips it with a WARNING naming it (bytes shown replaced) and goes on.
            db.execute("CREATE SCHEMA e_ok")
            db.execute("CREATE TABLE e_ok.t (c text)")
            db.execute("INSERT INTO e_ok.t VALUES ('Montrose')")
            db.execute("SELECT * FROM nl2sql.create_value_index('e_ok.t')")
            db.execute(r"DO $$BEGIN EXECUTE format('ALTER SCHEMA e_ok RENAME TO %I', E'e\xfe'); END$$")
            db.execute("UPDATE nl2sql.value_index SET status = 'stale'")
            db.execute("SET client_min_messages = warning")
            db.execute("SELECT * FROM nl2sql.refresh_value_indexes()")


def test_values_that_are_not_utf8_are_left_out_and_the_rest_indexed(connect):
    """In a SQL_ASCII database a value may hold any bytes: those that are not UTF-8 are left out
    of the index, and the table's other values, the schema's other tables and a refresh of
    every index go on (before, the first such value ended the whole call with XX000)."""
    with ascii_database(connect, "nl2sql_ascii_values") as db:
        db.execute("CREATE SCHEMA s")
        db.execute("CREATE TABLE s.a_good (v text)")
        db.execute("INSERT INTO s.a_good VALUES ('fine')")
        db.execute(r"CREATE TABLE s.b_mixed (v text)")
        db.execute(r"INSERT INTO s.b_mixed VALUES (E'caf\xe9'), ('plain'), (E'na\xefve')")
        db.execute("CREATE TABLE s.c_good (v text)")
        db.execute("INSERT INTO s.c_good VALUES ('also fine')")
        # Text comes back as bytes from a SQL_ASCII database.
        built = [(r.decode(), s.decode(), n) for r, s, n in
                 db.execute("SELECT relation::text, status, \"values\" FROM nl2sql.create_value_indexes(ARRAY['s']) ORDER BY 1")]
        assert built == [("s.a_good", "ready", 1), ("s.b_mixed", "ready", 1), ("s.c_good", "ready", 1)], built
        db.execute(r"INSERT INTO s.c_good VALUES (E'na\xefve'), ('more')")
        db.execute("UPDATE nl2sql.value_index SET status = 'stale'")
        refreshed = db.execute("SELECT relation::text, status FROM nl2sql.refresh_value_indexes() ORDER BY 1").fetchall()
        assert refreshed and all(status == b"ready" for _, status in refreshed), refreshed
        held = db.execute("SELECT i.relid::regclass::text, i.value_count FROM nl2sql.value_index i ORDER BY 1").fetchall()
        assert (b"s.c_good", 2) in held, held


def test_a_trigger_of_the_owners_under_nl2sqls_name_is_neither_trusted_nor_dropped(connect):
    """Her own trigger, named as one of nl2sql's, calls her function: a build refuses it (42710:
    taken for nl2sql's, the index would miss the DML it reports nothing of) and a drop leaves
    it where it is, dropping only nl2sql's."""
    conn = connect()
    conn.execute("SET client_min_messages = warning")
    conn.execute("DROP TABLE IF EXISTS trig_towns")
    conn.execute("CREATE TABLE trig_towns (town text)")
    conn.execute("INSERT INTO trig_towns VALUES ('Perth')")
    conn.execute("""CREATE OR REPLACE FUNCTION public.trig_mine() RETURNS trigger LANGUAGE plpgsql
                    AS $$ BEGIN RETURN NULL; END $$""")
    rel = conn.execute("SELECT 'trig_towns'::regclass::oid").fetchone()[0]
    try:
        conn.execute("SELECT * FROM nl2sql.create_value_index('trig_towns')")
        assert nl2sql_triggers(conn, rel) == 4
        conn.execute("DROP TRIGGER nl2sql_values_insert ON trig_towns")
        conn.execute("""CREATE TRIGGER nl2sql_values_insert AFTER INSERT ON trig_towns
                        FOR EACH STATEMENT EXECUTE FUNCTION public.trig_mine()""")
        with pytest.raises(errors.DuplicateObject, match="nl2sql_values_insert"):
            conn.execute("SELECT * FROM nl2sql.create_value_index('trig_towns')")
        conn.execute("SELECT * FROM nl2sql.drop_value_index('trig_towns')")
        assert nl2sql_triggers(conn, rel) == 0
        assert conn.execute("SELECT tgfoid::regproc::text FROM pg_trigger WHERE tgrelid = %s::oid",
                            (rel,)).fetchall() == [("trig_mine",)]
        with pytest.raises(errors.DuplicateObject):
            conn.execute("SELECT * FROM nl2sql.create_value_index('trig_towns')")
        assert conn.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid::oid = %s::oid", (rel,)).fetchone()[0] == 0
    finally:
        conn.execute("DROP TABLE IF EXISTS trig_towns")
        conn.execute("DROP FUNCTION IF EXISTS public.trig_mine()")


def swap_columns_under_a_snapshot(session, admin, table):
    """Opens a REPEATABLE READ transaction on `session` and takes its snapshot; then `admin`
    swaps the names of `table`'s columns a and b, which that snapshot still shows as before."""
    session.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    session.execute("SELECT count(*) FROM pg_attribute")
    for old, new in (("a", "tmp"), ("b", "a"), ("tmp", "b")):
        admin.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")


def test_a_column_renamed_under_an_older_snapshot_is_not_indexed_under_its_old_name(connect):
    """Under REPEATABLE READ the snapshot still names the columns as before two were swapped;
    spliced, the old name would read the other column. The build refuses (40001) and indexes
    nothing."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS swap_cols")
    admin.execute("CREATE TABLE swap_cols (a text, b text)")
    admin.execute("INSERT INTO swap_cols VALUES ('Alpha', 'Beta')")
    rel = admin.execute("SELECT 'swap_cols'::regclass::oid").fetchone()[0]
    builder = connect()
    builder.execute("SET client_min_messages = warning")
    try:
        swap_columns_under_a_snapshot(builder, admin, "swap_cols")
        with pytest.raises(errors.SerializationFailure):
            builder.execute("SELECT * FROM nl2sql.create_value_index(%s::oid::regclass)", (rel,))
        builder.execute("ROLLBACK")
        assert admin.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid::oid = %s::oid", (rel,)).fetchone()[0] == 0
        # Asked again, each column is indexed under its own name.
        admin.execute("SELECT * FROM nl2sql.create_value_index('swap_cols')")
        found = admin.execute("SELECT value, column_name::text FROM nl2sql.search_values('alpha', 50) "
                              "WHERE relation = 'swap_cols'::regclass AND value = 'Alpha'").fetchall()
        assert found == [("Alpha", "b")], found
    finally:
        builder.close()
        admin.execute("DROP TABLE IF EXISTS swap_cols")


def test_dml_under_an_older_snapshot_indexes_the_column_by_its_current_name(connect):
    """A writer's REPEATABLE READ snapshot names the columns as before two were swapped; the
    transition tables name them as now. What the writer adds goes to the index of the column
    it went into, never to the other's."""
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS swap_dml")
    admin.execute("CREATE TABLE swap_dml (a text, b text)")
    admin.execute("INSERT INTO swap_dml VALUES ('Alpha', 'Beta')")
    admin.execute("SELECT * FROM nl2sql.create_value_index('swap_dml', 'a')")
    writer = connect()
    try:
        swap_columns_under_a_snapshot(writer, admin, "swap_dml")
        # The indexed column (the first) is now named b.
        writer.execute("INSERT INTO swap_dml (b, a) VALUES ('Oban', 'Troon')")
        writer.execute("COMMIT")
        found = admin.execute("SELECT value, column_name::text FROM nl2sql.search_values('oban troon', 50) "
                              "WHERE relation = 'swap_dml'::regclass AND value IN ('Oban', 'Troon')").fetchall()
        assert found == [("Oban", "b")], found
    finally:
        writer.close()
        admin.execute("DROP TABLE IF EXISTS swap_dml")


def test_names_holding_quotes_dots_and_spaces_are_read_under_quote_all_identifiers(connect):
    """A table owner's names built like the quoting a name check reads (`"`, `.`, a space), and
    the DBA's session quoting every identifier: the build, the DML trigger and a refresh read the
    table itself (no false 40001), and its values are found."""
    admin = connect()
    with scratch_role(admin, "quoting_eve", "GRANT CREATE ON DATABASE " + admin.info.dbname + " TO quoting_eve"):
        admin.execute("SET ROLE quoting_eve")
        admin.execute('CREATE SCHEMA "a"".b c"')
        admin.execute('CREATE TABLE "a"".b c"."c.d ""x""" ("v "" w" text)')
        admin.execute('INSERT INTO "a"".b c"."c.d ""x""" VALUES (\'Montrose\')')
        admin.execute("RESET ROLE")
        admin.execute("SET quote_all_identifiers = on")
        try:
            table = '"a"".b c"."c.d ""x"""'
            assert admin.execute("SELECT status FROM nl2sql.create_value_index(%s)", (table,)).fetchone()[0] == "ready"
            admin.execute(f"INSERT INTO {table} VALUES ('Arbroath')")
            found = {r[0] for r in admin.execute("SELECT value FROM nl2sql.search_values('arbroath', 3)").fetchall()}
            assert "Arbroath" in found
            admin.execute("UPDATE nl2sql.value_index SET status = 'stale' WHERE relid::oid = %s::regclass::oid", (table,))
            admin.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
            assert admin.execute("SELECT DISTINCT status FROM nl2sql.value_index WHERE relid::oid = %s::regclass::oid",
                                 (table,)).fetchall() == [("ready",)]
        finally:
            admin.execute("RESET quote_all_identifiers")
            admin.execute("SELECT nl2sql.drop_value_index(%s)", ('"a"".b c"."c.d ""x"""',))
