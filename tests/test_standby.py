"""nl2sql on a hot standby: the read path never writes. A real streaming replica of the test
cluster (scripts/pg.sh standby: pg_basebackup -R, a second cluster on another port) answers
questions with the value index built on the primary, and sees values added there."""
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
STANDBY_PORT = int(os.environ.get("NL2SQL_TEST_STANDBY_PORT", "57412"))


@pytest.fixture(scope="module")
def standby(conninfo):
    """A hot standby of the test cluster; yields its connection parameters."""
    primary = psycopg.connect(autocommit=True, **conninfo)
    # What the standby must already hold when it is copied: a table and its value index.
    primary.execute("SET client_min_messages = warning")
    primary.execute("DROP TABLE IF EXISTS harbours")
    primary.execute("CREATE TABLE harbours (id int PRIMARY KEY, name text, country text)")
    primary.execute("INSERT INTO harbours VALUES (1, 'Aberdeen Harbour', 'Scotland'), (2, 'Port of Rotterdam', 'Netherlands'),"
                    " (3, 'Port of Antwerp', 'Belgium'), (4, 'Le Havre', 'France')")
    primary.execute("SELECT * FROM nl2sql.create_value_index('harbours')")
    tmp = Path(tempfile.mkdtemp(prefix="nl2sql-standby."))
    os.chmod(tmp, 0o755)
    pg = [str(ROOT / "scripts" / "pg.sh")]
    subprocess.run(pg + ["standby", str(tmp / "sb"), str(STANDBY_PORT), conninfo["host"], str(conninfo["port"])],
                   check=True, capture_output=True, timeout=300)
    info = {**conninfo, "host": str(tmp / "sb"), "port": str(STANDBY_PORT)}
    try:
        yield primary, info
    finally:
        subprocess.run(pg + ["stop", str(tmp / "sb")], capture_output=True, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
        primary.execute("DROP TABLE IF EXISTS harbours")
        primary.close()


def caught_up(primary, replica, timeout=30):
    """Waits until the standby has replayed everything the primary has written so far."""
    lsn = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if replica.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            return
        time.sleep(0.1)
    raise AssertionError("the standby did not catch up")


def test_the_read_path_works_on_a_standby(standby):
    primary, info = standby
    replica = psycopg.connect(autocommit=True, **info)
    try:
        assert replica.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        caught_up(primary, replica)
        found = replica.execute("SELECT value FROM nl2sql.search_values('aberden harbor', 3)").fetchall()
        assert ("Aberdeen Harbour",) in found
        # Another form of the word: the adjective finds the country.
        assert ("France",) in replica.execute("SELECT value FROM nl2sql.search_values('french', 3)").fetchall()
        columns = replica.execute("SELECT column_name FROM nl2sql.search_columns('harbour names', 5)").fetchall()
        assert ("name",) in columns
        # nl2sql() in both modes, nl2sql_run() and nl2sql_explain(): the scripted model answers.
        replica.execute("SET nl2sql.mode = zero_shot")
        assert replica.execute("SELECT nl2sql('How many singers do we have?')").fetchone()[0].startswith("SELECT count(*) FROM singer")
        assert replica.execute("SELECT * FROM nl2sql_run('How many singers do we have?')").fetchall() == [({"count": 6},)]
        replica.execute("SET nl2sql.mode = full")
        sql = replica.execute("SELECT nl2sql('How many concerts took place in 2014?')").fetchone()[0]
        assert "2014" in sql
        explain = replica.execute("SELECT nl2sql_explain('How many concerts took place in 2014?')").fetchone()[0]
        assert explain["vote"] is not None and "values_skipped" not in explain
        # The examples library is read there too; it is written on the primary only.
        replica.execute("SET nl2sql.examples = 3")
        explain = replica.execute("SELECT nl2sql_explain('How many concerts took place in 2014?')").fetchone()[0]
        assert len(explain["examples"]) == 3
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as e:
            replica.execute("SELECT nl2sql.add_example('How many singers?', 'SELECT count(*) FROM singer')")
        assert e.value.diag.message_primary == "cannot add examples on a hot standby"
        # Nothing on the read path asked for a transaction ID.
        assert replica.execute("SELECT pg_current_xact_id_if_assigned() IS NULL").fetchone()[0]
    finally:
        replica.close()


def test_values_added_on_the_primary_are_found_on_the_standby(standby):
    primary, info = standby
    replica = psycopg.connect(autocommit=True, **info)
    try:
        primary.execute("INSERT INTO harbours VALUES (5, 'Port of Hamburg', 'Germany')")
        caught_up(primary, replica)
        assert ("Port of Hamburg",) in replica.execute("SELECT value FROM nl2sql.search_values('hamburg', 3)").fetchall()
        # A rebuild on the primary (a new generation, the old one dropped later) while the
        # standby searches: the standby keeps answering, then sees the new generation.
        primary.execute("SELECT * FROM nl2sql.create_value_index('harbours', 'name')")
        primary.execute("DELETE FROM harbours WHERE id = 1")
        primary.execute("SELECT * FROM nl2sql.refresh_value_indexes('harbours')")
        caught_up(primary, replica)
        found = replica.execute("SELECT value FROM nl2sql.search_values('rotterdam', 3)").fetchall()
        assert ("Port of Rotterdam",) in found
        assert ("Aberdeen Harbour",) not in replica.execute("SELECT value FROM nl2sql.search_values('aberdeen harbour', 3)").fetchall()
        gens = replica.execute("SELECT generation FROM nl2sql.value_indexes WHERE column_name = 'name'").fetchone()[0]
        assert gens >= 1
    finally:
        replica.close()


def test_relationships_profiled_on_the_primary_serve_on_the_standby(standby):
    """Profiling writes on the primary; the standby's prompts and join paths read what it kept,
    without a transaction ID; profiling itself is refused there."""
    primary, info = standby
    primary.execute("CREATE TABLE berths (berth_no int NOT NULL, harbour_id int)")
    primary.execute("INSERT INTO berths VALUES (1, 2), (2, 2), (3, 3)")
    primary.execute("SELECT * FROM nl2sql.profile_relationships(ARRAY['public'])")
    replica = psycopg.connect(autocommit=True, **info)
    try:
        caught_up(primary, replica)
        assert "berths.harbour_id = harbours.id (inferred)" in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        steps = replica.execute("SELECT join_condition FROM nl2sql.join_path('berths', 'harbours')").fetchall()
        assert steps == [("berths.harbour_id = harbours.id",)]
        assert replica.execute("SELECT pg_current_xact_id_if_assigned() IS NULL").fetchone()[0]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as e:
            replica.execute("SELECT * FROM nl2sql.profile_relationships()")
        assert e.value.diag.message_primary == "cannot profile relationships on a hot standby"
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            replica.execute("SELECT nl2sql.reject_relationship('berths', 'harbour_id', 'harbours', 'id')")
    finally:
        replica.close()
        primary.execute("DROP TABLE berths")
        for store in ("relationship_store", "key_store", "profile_store"):
            primary.execute(f"DELETE FROM nl2sql.{store}")


def test_history_feedback_and_follow_ups_on_a_standby(standby):
    """Behind a pooler, reads go to standbys: a question there is answered, not recorded (the
    trace says why); feedback is refused (it writes); a follow-up names a call recorded on the
    primary (replicated) or passes the earlier question itself."""
    primary, info = standby
    primary.execute("DELETE FROM nl2sql.history")
    primary.execute("SELECT nl2sql('[ops-count] How many singers?')")
    first = primary.execute("SELECT nl2sql.last_trace()").fetchone()[0]["history_id"]
    replica = psycopg.connect(autocommit=True, **info)
    try:
        caught_up(primary, replica)
        assert replica.execute("SELECT nl2sql('[ops-count] How many singers?')").fetchone()[0] == "SELECT count(*) FROM singer"
        trace = replica.execute("SELECT nl2sql.last_trace()").fetchone()[0]
        assert trace["history_skipped"] == "hot standby: history is written on the primary only"
        assert replica.execute("SELECT count(*) FROM nl2sql.history").fetchone()[0] == 1
        sql = replica.execute("SELECT nl2sql('[ops-follow] and from France?', follows => %s)", (first,)).fetchone()[0]
        assert sql == "SELECT count(*) FROM singer WHERE country = 'France'"
        rows = replica.execute("SELECT * FROM nl2sql_run('[ops-follow] only the French ones', previous_question => "
                               "'Which singers are there?', previous_sql => 'SELECT name FROM singer')").fetchall()
        assert len(rows) == 4
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            replica.execute("SELECT nl2sql.feedback(%s, true)", (first,))
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            replica.execute("SELECT nl2sql.purge_history()")
        assert replica.execute("SELECT pg_current_xact_id_if_assigned() IS NULL").fetchone()[0]
    finally:
        replica.close()
        primary.execute("DELETE FROM nl2sql.history")


def test_instructions_added_on_the_primary_reach_the_standby_prompts(standby, mock):
    """Instructions are chosen on the standby without a transaction ID; they are written on the
    primary only."""
    primary, info = standby
    primary.execute("DELETE FROM nl2sql.instruction_store")
    primary.execute("SELECT nl2sql.add_instruction('A harbour is busy when it has more than 2 berths')")
    replica = psycopg.connect(autocommit=True, **info)
    try:
        caught_up(primary, replica)
        explain = replica.execute("SELECT nl2sql_explain('[sure] Which harbours are busy?')").fetchone()[0]
        assert [i["text"] for i in explain["instructions"]] == ["A harbour is busy when it has more than 2 berths"]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as e:
            replica.execute("SELECT nl2sql.add_instruction('ports are harbours')")
        assert e.value.diag.message_primary == "cannot add instructions on a hot standby"
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            replica.execute("SELECT nl2sql.enable_instruction(1, false)")
    finally:
        replica.close()
        primary.execute("DELETE FROM nl2sql.instruction_store")


def test_ddl_on_the_primary_reaches_a_standby_sessions_schema(standby):
    """A standby session keeps its introspected schema until the primary's DDL replays there:
    each DDL command's version reaches the standby (a sequence is written to the WAL every 32
    values: bumped by one, a cached schema outlived most DDL there)."""
    primary, info = standby
    replica = psycopg.connect(autocommit=True, **info)
    try:
        caught_up(primary, replica)
        assert "harbours" in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        for i in range(4):
            primary.execute(f"ALTER TABLE harbours ADD COLUMN berth_{i} int")
            caught_up(primary, replica)
            assert f"berth_{i}" in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0], i
        # A column revoked there is gone from the same session's prompt too.
        primary.execute("DROP ROLE IF EXISTS sb_reader")
        primary.execute("CREATE ROLE sb_reader")
        primary.execute("GRANT SELECT (id, name, berth_0) ON harbours TO sb_reader")
        caught_up(primary, replica)
        replica.execute("SET ROLE sb_reader")
        assert "berth_0" in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        primary.execute("REVOKE SELECT (berth_0) ON harbours FROM sb_reader")
        caught_up(primary, replica)
        assert "berth_0" not in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        replica.execute("RESET ROLE")
    finally:
        replica.close()
        for i in range(4):
            primary.execute(f"ALTER TABLE harbours DROP COLUMN IF EXISTS berth_{i}")
        primary.execute("DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'sb_reader') THEN "
                        "REVOKE ALL ON harbours FROM sb_reader; DROP ROLE sb_reader; END IF; END $$")


def test_ddl_open_on_the_primary_reaches_a_standby_session_when_it_commits(standby, conninfo):
    """A standby session that reads the catalog while a DDL transaction is open on the primary,
    with what that transaction wrote so far replayed there, keeps nothing of it once it commits
    (the version was a sequence, whose bump replayed before the commit did)."""
    primary, info = standby
    replica = psycopg.connect(autocommit=True, **info)
    ddl = psycopg.connect(autocommit=True, **conninfo)
    try:
        caught_up(primary, replica)
        replica.execute("SET nl2sql.privacy = on")
        assert "harbours" in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        ddl.execute("BEGIN")
        ddl.execute("ALTER TABLE harbours ADD COLUMN quay_length int")
        # what the open transaction wrote reaches the standby: another transaction's commit
        # flushes the WAL up to it
        lsn = ddl.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        primary.execute("SELECT pg_current_xact_id()")
        deadline = time.monotonic() + 30
        while not replica.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the standby did not replay the open transaction"
            time.sleep(0.1)
        assert "quay_length" not in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        ddl.execute("COMMIT")
        caught_up(primary, replica)
        assert "quay_length" in replica.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
    finally:
        ddl.close()
        replica.close()
        primary.execute("ALTER TABLE harbours DROP COLUMN IF EXISTS quay_length")
