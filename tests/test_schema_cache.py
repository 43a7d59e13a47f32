"""The schema a session caches (src/pg/catalog.rs) follows DDL when it commits, never before:
the cache's key is the catalog version's rows the reader's snapshot sees (sql/ddl_log.sql).
Before, the version was a sequence bumped as the command ran, so a session that read the
catalog while a DDL transaction was still open kept what it saw under the new version, until
the next DDL. Samples are off (nl2sql.privacy) so that a reader never waits on the DDL's lock."""
import pytest
from psycopg import errors

from helpers import scratch_role


def shown(conn):
    return conn.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]


@pytest.fixture
def probe(connect):
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS cache_probe")
    admin.execute("CREATE TABLE cache_probe (id int PRIMARY KEY, label text)")
    opened = []

    def session():
        c = connect()
        c.execute("SET nl2sql.privacy = on")
        opened.append(c)
        return c

    yield admin, session
    for c in opened:
        c.rollback()
    admin.execute("DROP TABLE IF EXISTS cache_probe")


def test_ddl_reaches_a_session_that_read_the_catalog_while_it_was_open(probe):
    admin, session = probe
    ddl, reader = session(), session()
    assert "cache_probe" in shown(reader)
    ddl.execute("BEGIN")
    ddl.execute("ALTER TABLE cache_probe ADD COLUMN berth_count int")
    assert "berth_count" not in shown(reader)
    ddl.execute("COMMIT")
    assert "berth_count" in shown(reader)


def test_a_revoke_reaches_a_session_that_read_the_catalog_while_it_was_open(probe):
    admin, session = probe
    with scratch_role(admin, "cache_reader", "GRANT SELECT (id, label) ON cache_probe TO cache_reader"):
        ddl, reader = session(), session()
        reader.execute("SET ROLE cache_reader")
        assert "label" in shown(reader)
        ddl.execute("BEGIN")
        ddl.execute("REVOKE SELECT (label) ON cache_probe FROM cache_reader")
        assert "label" in shown(reader)
        ddl.execute("COMMIT")
        assert "label" not in shown(reader)
        reader.execute("RESET ROLE")


def test_ddl_rolled_back_leaves_the_session_its_schema(probe):
    admin, session = probe
    s = session()
    assert "berth_count" not in shown(s)
    s.execute("BEGIN")
    s.execute("ALTER TABLE cache_probe ADD COLUMN berth_count int")
    assert "berth_count" in shown(s)
    s.execute("ROLLBACK")
    assert "berth_count" not in shown(s)


def test_ddl_in_an_old_snapshot_is_never_failed_by_the_version(probe):
    """A repeatable-read transaction whose snapshot predates other DDL cannot delete the rows
    those deleted, and serializable ones must not read what each other wrote: their DDL
    succeeds, and a later bump prunes what they left."""
    admin, session = probe
    old, other = session(), session()
    old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    old.execute("SELECT 1")
    for i in range(3):
        other.execute(f"ALTER TABLE cache_probe ADD COLUMN c{i} int")
    old.execute("ALTER TABLE cache_probe ADD COLUMN late int")
    old.execute("COMMIT")
    assert "late" in shown(other)
    # Two serializable transactions' DDL, each committed after the other began: their bumps
    # make neither fail. (Sequences: a table's DDL also refreshes its column embeddings, whose
    # reads and writes two serializable transactions can conflict on, docs/operations.md.)
    first, second = session(), session()
    for s, ddl in ((first, "CREATE SEQUENCE cache_seq_1"), (second, "CREATE SEQUENCE cache_seq_2")):
        s.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        s.execute("SELECT 1")
        s.execute(ddl)
    first.execute("COMMIT")
    second.execute("COMMIT")
    other.execute("DROP SEQUENCE cache_seq_1, cache_seq_2")
    # The next command prunes what was left.
    other.execute("ALTER TABLE cache_probe DROP COLUMN c0")
    assert admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0] == 1
    # A temporary table hides the permanent one of its name, which is then written with its
    # schema; dropped, the name is the permanent one's again (the session's temporary schema
    # exists before, so its search path does not change).
    other.execute("CREATE TEMP TABLE cache_scratch (id int)")
    assert "# cache_probe (" in shown(other)
    other.execute("CREATE TEMP TABLE cache_probe (id int)")
    assert "# public.cache_probe (" in shown(other)
    other.execute("DROP TABLE pg_temp.cache_probe")
    assert "# cache_probe (" in shown(other)


def test_no_role_can_hold_the_version_against_anothers_ddl(probe):
    """PUBLIC reads the rows and may lock them no way that makes a bump wait, nor change them."""
    admin, session = probe
    with scratch_role(admin, "cache_reader"):
        s = session()
        s.execute("SET ROLE cache_reader")
        assert s.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0] >= 1
        for statement in ["SELECT v FROM nl2sql.ddl_log FOR SHARE", "SELECT v FROM nl2sql.ddl_log FOR KEY SHARE",
                          "LOCK TABLE nl2sql.ddl_log IN SHARE MODE", "DELETE FROM nl2sql.ddl_log",
                          "INSERT INTO nl2sql.ddl_log VALUES (0)", "SELECT nl2sql._ddl_changed()"]:
            s.execute("BEGIN")
            with pytest.raises(errors.InsufficientPrivilege):
                s.execute(statement)
            s.execute("ROLLBACK")
        # the lock it may take does not stop DDL
        s.execute("BEGIN")
        s.execute("LOCK TABLE nl2sql.ddl_log IN ACCESS SHARE MODE")
        admin.execute("SET lock_timeout = '2s'")
        admin.execute("ALTER TABLE cache_probe ADD COLUMN berth_count int")
        s.execute("ROLLBACK")
        s.execute("RESET ROLE")
