"""The schema a session caches (src/pg/catalog.rs) follows DDL when it commits, never before:
the cache's key is the catalog version's rows the reader's snapshot sees (sql/ddl_log.sql).
Before, the version was a sequence bumped as the command ran, so a session that read the
catalog while a DDL transaction was still open kept what it saw under the new version, until
the next DDL. Samples are off (nl2sql.privacy) so that a reader never waits on the DDL's lock."""
import threading

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
    # a second command each: the transaction's own row takes the new value, read by its address
    for s, name in ((first, "cache_seq_1"), (second, "cache_seq_2")):
        s.execute(f"COMMENT ON SEQUENCE {name} IS 'again'")
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


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_many_commands_in_one_snapshot_leave_one_row(probe, level):
    """Under repeatable read and serializable a bump cannot prune what other transactions left;
    the transaction's own row takes each new value instead, so a long migration leaves one row,
    and its own session still sees each of its changes (the value changes with every command)."""
    admin, session = probe
    s, other = session(), session()
    admin.execute("CREATE SEQUENCE IF NOT EXISTS cache_seq")
    admin.execute("COMMENT ON SEQUENCE cache_seq IS 'start'")  # read committed: one row left
    before = admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0]
    assert before == 1
    # serializable's next pruning (once every 1,000 versions) not yet due
    admin.execute("SELECT setval('nl2sql.ddl_log_pruned', last_value) FROM nl2sql.ddl_version")
    s.execute(f"BEGIN ISOLATION LEVEL {level}")
    s.execute("ALTER TABLE cache_probe ADD COLUMN first_col int")
    assert "first_col" in shown(s)
    s.execute("ALTER TABLE cache_probe ADD COLUMN second_col int")
    assert "second_col" in shown(s)
    # a savepoint rolled back takes its value back with it; the next command still finds the row
    s.execute("SAVEPOINT a")
    s.execute("ALTER TABLE cache_probe ADD COLUMN undone_col int")
    s.execute("ROLLBACK TO a")
    assert "undone_col" not in shown(s)
    s.execute("""DO $$ BEGIN FOR i IN 1..10000 LOOP
                     EXECUTE format('COMMENT ON SEQUENCE cache_seq IS %L', i); END LOOP; END $$""")
    assert "second_col" not in shown(other)
    s.execute("COMMIT")
    rows = admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0]
    # repeatable read prunes the row read committed left; serializable leaves it to the next bump
    # (the transaction's 10,000 versions on one row: its first bump alone may prune)
    assert rows == (1 if level == "REPEATABLE READ" else 2)
    assert "second_col" in shown(other)
    admin.execute("DROP SEQUENCE cache_seq")
    assert admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0] == 1


def test_a_forged_row_address_changes_nothing_but_the_version(probe):
    """The remembered address is a setting any session may set: nonsense is ignored, another
    transaction's row only takes a new value (the version still changes), and DDL never fails."""
    admin, session = probe
    s, other = session(), session()
    shown(other)
    for forged in ["junk", "(0,1)", "(99999999,1)", "(0,999)", "'; DROP TABLE x; --"]:
        s.execute(f"SET nl2sql_ddl_log.own_row = '{forged.replace(chr(39), chr(39) * 2)}'")
        for level in ["REPEATABLE READ", "SERIALIZABLE"]:
            s.execute(f"BEGIN ISOLATION LEVEL {level}")
            s.execute("ALTER TABLE cache_probe ADD COLUMN forged_col int")
            s.execute("COMMIT")
            assert "forged_col" in shown(other)
            admin.execute("ALTER TABLE cache_probe DROP COLUMN forged_col")
            assert "forged_col" not in shown(other)
    s.execute("RESET nl2sql_ddl_log.own_row")
    # forged inside the transaction, with its own id: another transaction's row takes the value
    for level in ["REPEATABLE READ", "SERIALIZABLE"]:
        (row,) = admin.execute("SELECT ctid::text FROM nl2sql.ddl_log").fetchone()
        s.execute(f"BEGIN ISOLATION LEVEL {level}")
        s.execute("SELECT set_config('nl2sql_ddl_log.own_row', %s || '/' || pg_current_xact_id(), true)", (row,))
        s.execute("ALTER TABLE cache_probe ADD COLUMN forged_col int")
        s.execute("COMMIT")
        assert "forged_col" in shown(other)
        admin.execute("ALTER TABLE cache_probe DROP COLUMN forged_col")
        assert "forged_col" not in shown(other)
    assert admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0] == 1


def test_temporary_objects_change_only_their_sessions_key(probe):
    """Only the session sees its temporary objects: their DDL changes its key alone (a setting of
    the session, rolled back with the transaction), and leaves no row every reader's key reads,
    even in a serializable loop, which prunes nothing."""
    admin, session = probe
    s, other = session(), session()
    admin.execute("COMMENT ON TABLE cache_probe IS 'start'")
    before = admin.execute("SELECT array_agg(v ORDER BY v) FROM nl2sql.ddl_log").fetchone()[0]
    assert "# cache_probe (" in shown(s) and "# cache_probe (" in shown(other)
    for i in range(50):
        s.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        s.execute(f"CREATE TEMP TABLE cache_scratch_{i} (id serial, label text)")
        s.execute(f"COMMENT ON TABLE cache_scratch_{i} IS 'x'")
        s.execute("COMMIT")
        s.execute(f"DROP TABLE cache_scratch_{i}")
    assert admin.execute("SELECT array_agg(v ORDER BY v) FROM nl2sql.ddl_log").fetchone()[0] == before
    # the session's own key still follows its temporary objects, committed or rolled back
    s.execute("BEGIN")
    s.execute("CREATE TEMP TABLE cache_probe (id int)")
    assert "# public.cache_probe (" in shown(s)
    s.execute("ROLLBACK")
    assert "# cache_probe (" in shown(s)
    s.execute("CREATE TEMP TABLE cache_probe (id int)")
    assert "# public.cache_probe (" in shown(s) and "# cache_probe (" in shown(other)
    s.execute("DROP TABLE pg_temp.cache_probe")
    assert "# cache_probe (" in shown(s)
    # a command that changes a permanent object as well changes everyone's
    s.execute("CREATE TEMP TABLE cache_scratch (id int)")
    s.execute("COMMENT ON TABLE cache_probe IS 'again'")
    assert admin.execute("SELECT array_agg(v ORDER BY v) FROM nl2sql.ddl_log").fetchone()[0] != before
    s.execute("DROP TABLE cache_scratch")


def test_a_serializable_loop_of_grants_leaves_the_log_bounded(probe):
    """A GRANT's objects are not reported, so a GRANT on a temporary table changes everyone's
    version: a role with TEMP alone looping it under serializable (which prunes once every
    1,000 versions) cannot grow the rows every reader's key reads without bound."""
    admin, session = probe
    with scratch_role(admin, "cache_looper"):
        s = session()
        s.execute("SET ROLE cache_looper")
        s.execute("CREATE TEMP TABLE cache_scratch (id int)")
        for i in range(1200):
            s.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            s.execute("GRANT SELECT ON pg_temp.cache_scratch TO PUBLIC")
            s.execute("COMMIT")
            if i == 200:  # a row each: the bound, not the temporary path, keeps them few
                assert admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0] > 150
        assert admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0] <= 1001
        s.execute("DROP TABLE pg_temp.cache_scratch")
        s.execute("RESET ROLE")


def test_a_role_that_rolls_back_each_prune_is_outlasted_by_a_reader(probe):
    """setval is not transactional: a role looping GRANTs on a temporary table under
    serializable that rolls back each of its transactions that pruned (it sees its own delete)
    keeps every row; the next read-committed reader whose key read a new version trims the log
    to its newest row. A reader under repeatable read, or in a read-only transaction, does not
    write."""
    admin, session = probe
    admin.execute("SELECT setval('nl2sql.ddl_log_pruned', last_value) FROM nl2sql.ddl_version")
    with scratch_role(admin, "cache_undoer"):
        s = session()
        s.execute("SET ROLE cache_undoer")
        s.execute("CREATE TEMP TABLE cache_scratch (id int)")
        undone = 0
        for _ in range(1100):
            s.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            (before,) = s.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()
            s.execute("GRANT SELECT ON pg_temp.cache_scratch TO PUBLIC")
            (after,) = s.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()
            if after <= before:
                s.execute("ROLLBACK")
                undone += 1
            else:
                s.execute("COMMIT")
        assert undone >= 1, "no transaction of hers pruned"
        count = lambda: admin.execute("SELECT count(*) FROM nl2sql.ddl_log").fetchone()[0]
        assert count() > 1001, count()
        # Negative: readers that may not write leave the rows.
        for begin in ("BEGIN ISOLATION LEVEL REPEATABLE READ", "BEGIN READ ONLY"):
            r = session()
            r.execute(begin)
            assert "cache_probe" in shown(r)
            r.execute("COMMIT")
            assert count() > 1001, (begin, count())
        reader = session()
        assert "cache_probe" in shown(reader)
        assert count() == 1
        s.execute("DROP TABLE pg_temp.cache_scratch")
        s.execute("RESET ROLE")


def test_a_temporary_type_a_permanent_table_uses_changes_everyones_key(probe):
    """A permanent table may have a column of a session's temporary type: changing the type
    changes what every session is shown, so it is not the session's alone."""
    admin, session = probe
    s, other = session(), session()
    s.execute("CREATE TYPE pg_temp.cache_tone AS ENUM ('calm', 'loud')")
    s.execute("CREATE TABLE public.cache_toned (id int, tier pg_temp.cache_tone)")
    try:
        assert "cache_tone" in shown(other) and "cache_mood" not in shown(other)
        s.execute("ALTER TYPE pg_temp.cache_tone RENAME TO cache_mood")
        assert "cache_mood" in shown(other)
    finally:
        s.execute("DROP TABLE public.cache_toned")


def test_a_reset_all_does_not_take_a_temporary_tables_key_back(probe):
    """A temporary table hiding a permanent one is in the session's key itself, not only in a
    setting that RESET ALL (a pooler's reset) takes back."""
    admin, session = probe
    s = session()
    s.execute("CREATE TEMP TABLE cache_first (id int)")
    assert "# cache_probe (" in shown(s)
    s.execute("CREATE TEMP TABLE cache_probe (id int)")
    s.execute("RESET ALL")
    s.execute("SET nl2sql.privacy = on")
    assert "# public.cache_probe (" in shown(s)
    # Renamed, and the setting taken back before the next question: the temporary tables'
    # names are in the key too (a rename keeps the OID), so the permanent table comes back,
    # and is hidden again by another renamed to its name.
    for temp, to, written in (("cache_probe", "cache_gone", "# cache_probe ("), ("cache_first", "cache_probe", "# public.cache_probe (")):
        s.execute(f"ALTER TABLE pg_temp.{temp} RENAME TO {to}")
        s.execute("RESET ALL")
        s.execute("SET nl2sql.privacy = on")
        assert written in shown(s), (temp, to)
    s.execute("DROP TABLE pg_temp.cache_probe, pg_temp.cache_gone")


def test_a_revoke_reaches_a_transaction_that_began_before_it(probe):
    """Under repeatable read the key reads the catalog's version with the transaction's
    snapshot, which does not see a REVOKE committed since; privileges are read as they are now:
    the schema is read again at every call there, so the revoked table is no longer shown."""
    admin, session = probe
    with scratch_role(admin, "cache_reader", "GRANT SELECT ON cache_probe TO cache_reader"):
        r = session()
        r.execute("SET ROLE cache_reader")
        assert "cache_probe" in shown(r)
        r.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert "cache_probe" in shown(r)
        admin.execute("REVOKE SELECT ON cache_probe FROM cache_reader")
        assert "cache_probe" not in shown(r)
        r.execute("COMMIT")
        r.execute("RESET ROLE")


@pytest.mark.parametrize("first_row", ["cached", "read"])
def test_a_revoke_reaches_the_next_row_of_the_statement_that_asks(probe, first_row):
    """A statement that asks for many rows runs its read-only queries with the snapshot it began
    with, which does not see a REVOKE committed while it runs; the key reads the catalog as
    committed now, so the row after the REVOKE no longer shows the table. Where the first row
    read the catalog (DDL just before), the statement holds the catalogs' locks: the privilege
    checks of the second row still see the REVOKE, and no later statement is served the
    schema from before it."""
    admin, session = probe
    with scratch_role(admin, "cache_reader", "GRANT SELECT ON cache_probe TO cache_reader"):
        r = session()
        r.execute("SET ROLE cache_reader")
        assert "cache_probe" in shown(r)
        if first_row == "read":
            admin.execute("COMMENT ON TABLE cache_probe IS 'probed'")
        revoke = threading.Timer(1.0, lambda: admin.execute("REVOKE SELECT ON cache_probe FROM cache_reader"))
        revoke.start()
        try:
            rows = r.execute("SELECT n, nl2sql.schema_prompt() FROM (SELECT 1 AS n UNION ALL SELECT 2 FROM pg_sleep(3)) s").fetchall()
        finally:
            revoke.join()
        assert [n for n, _ in rows] == [1, 2]
        assert "cache_probe" in rows[0][1]
        assert "cache_probe" not in rows[1][1], rows[1][1]
        assert "cache_probe" not in shown(r)
        r.execute("RESET ROLE")


def test_a_sample_is_taken_again_after_ddl(probe):
    """A table's sample is reused only at the catalog version it was taken at: a row security
    policy added since (no row changed, so the row counters did not move) hides the rows from
    the next prompt, not ten minutes later."""
    admin, session = probe
    admin.execute("INSERT INTO cache_probe VALUES (1, 'cache_secret_label'), (2, 'cache_secret_label')")
    with scratch_role(admin, "cache_sampler", "GRANT SELECT ON cache_probe TO cache_sampler"):
        r = session()
        r.execute("SET nl2sql.privacy = off")
        r.execute("SET ROLE cache_sampler")
        assert "cache_secret_label" in shown(r)
        admin.execute("ALTER TABLE cache_probe ENABLE ROW LEVEL SECURITY")
        admin.execute("CREATE POLICY cache_none ON cache_probe USING (false)")
        text = shown(r)
        assert "cache_probe" in text and "cache_secret_label" not in text, text
        # Under repeatable read the key's version is the snapshot's: a policy lifted since is
        # not seen by it, and a sample taken there is never reused.
        admin.execute("DROP POLICY cache_none ON cache_probe")
        admin.execute("CREATE POLICY cache_all ON cache_probe USING (true)")
        r.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert "cache_secret_label" in shown(r)
        admin.execute("DROP POLICY cache_all ON cache_probe")
        admin.execute("CREATE POLICY cache_none ON cache_probe USING (false)")
        assert "cache_secret_label" not in shown(r)
        r.execute("COMMIT")
        r.execute("RESET ROLE")


def test_a_new_superuser_is_trusted_without_ddl(probe):
    """Whose tables a caller trusts changes with ALTER ROLE ... SUPERUSER and ALTER DATABASE ...
    OWNER TO, which fire no event trigger: the key reads the superusers and the database's
    owner itself. Another role's table off the search path is shown without her comment; once
    she is a superuser, with it."""
    admin, session = probe
    with scratch_role(admin, "cache_owner"):
        admin.execute("CREATE SCHEMA cache_theirs AUTHORIZATION cache_owner")
        admin.execute("SET ROLE cache_owner")
        admin.execute("CREATE TABLE cache_theirs.cache_notes (id int)")
        admin.execute("COMMENT ON TABLE cache_theirs.cache_notes IS 'their own words'")
        admin.execute("GRANT USAGE ON SCHEMA cache_theirs TO PUBLIC")
        admin.execute("GRANT SELECT ON cache_theirs.cache_notes TO PUBLIC")
        admin.execute("RESET ROLE")
        s = session()
        text = shown(s)
        assert "cache_theirs.cache_notes" in text and "their own words" not in text, text
        assert text.index("# cache_probe (") < text.index("cache_theirs.cache_notes"), text
        admin.execute("ALTER ROLE cache_owner SUPERUSER")
        assert "their own words" in shown(s)
        admin.execute("ALTER ROLE cache_owner NOSUPERUSER")
        assert "their own words" not in shown(s)


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
