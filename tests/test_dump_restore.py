"""pg_dump and pg_restore keep the DBA's configuration: which columns are indexed, curated
examples, instructions, relationships and history. A restored value index has no entries: the
searches name it in a NOTICE until nl2sql.refresh_value_indexes() builds it, and then it answers
again, on the right column even where the restore numbered the columns again."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PG_CONFIG = os.environ.get("PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config")
BIN = Path(subprocess.check_output([PG_CONFIG, "--bindir"], text=True).strip())
FIXTURE = ROOT / "tests" / "fixtures" / "concert_singer.sql"
SOURCE = "nl2sql_dump_source"


def _tool(conninfo, name, *args, dbname=None, stdin=None):
    cmd = [str(BIN / name), "-h", conninfo["host"], "-p", str(conninfo["port"]), "-U", conninfo["user"], *args]
    if dbname:
        cmd += ["-d", dbname]
    done = subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def source(conninfo, tmp_path_factory):
    """A database with two value indexes (one on a column after a dropped one), a curated
    example, an instruction, a confirmed relationship and a history row; dumped plain and custom."""
    import psycopg
    admin = psycopg.connect(autocommit=True, **{**conninfo, "dbname": "postgres"})
    admin.execute(f"DROP DATABASE IF EXISTS {SOURCE} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {SOURCE}")
    _tool(conninfo, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(FIXTURE), dbname=SOURCE)
    db = psycopg.connect(autocommit=True, **{**conninfo, "dbname": SOURCE})
    db.execute("SET client_min_messages = warning")
    db.execute("CREATE EXTENSION nl2sql CASCADE")
    # city.name is column 3 here and column 2 after a restore (the dropped column is not dumped).
    db.execute("CREATE TABLE city (id int PRIMARY KEY, junk text, name text)")
    db.execute("ALTER TABLE city DROP COLUMN junk")
    db.execute("INSERT INTO city VALUES (1, 'Kabul'), (2, 'Paris')")
    db.execute("CREATE TABLE visit (id int PRIMARY KEY, town int)")
    # A child's inherited columns come first after a restore: here x is column 2 and b column 3,
    # then b is 2 and x is 3 (renumbered one at a time, the two would collide).
    db.execute("CREATE TABLE base (a int)")
    db.execute("CREATE TABLE kid (x text) INHERITS (base)")
    db.execute("ALTER TABLE base ADD COLUMN b text")
    db.execute("INSERT INTO kid (a, x, b) VALUES (1, 'Xylophone', 'Bassoon')")
    db.execute("SELECT * FROM nl2sql.create_value_index('kid', 'x')")
    db.execute("SELECT * FROM nl2sql.create_value_index('kid', 'b')")
    db.execute("SELECT * FROM nl2sql.create_value_index('city', 'name')")
    db.execute("SELECT * FROM nl2sql.create_value_index('singer', 'country')")
    db.execute("SELECT nl2sql.add_example('How many concerts were held in 2014?', "
               "'SELECT count(*) FROM concert WHERE year = 2014')")
    db.execute("SELECT nl2sql.add_instruction('a visit''s town is a city', ARRAY['visit', 'city']::regclass[])")
    db.execute("SELECT nl2sql.confirm_relationship('visit', 'town', 'city', 'id')")
    db.execute("SET nl2sql.mode = zero_shot")
    assert db.execute("SELECT nl2sql('How many singers do we have?')").fetchone()[0].startswith("SELECT count(*) FROM singer")
    db.close()
    out = tmp_path_factory.mktemp("dump")
    os.chmod(out, 0o777)
    plain, custom = out / "source.sql", out / "source.dump"
    _tool(conninfo, "pg_dump", "-f", str(plain), dbname=SOURCE)
    _tool(conninfo, "pg_dump", "-Fc", "-f", str(custom), dbname=SOURCE)
    yield {"plain": plain, "custom": custom}
    admin.execute(f"DROP DATABASE IF EXISTS {SOURCE} WITH (FORCE)")
    admin.close()


def _restore(conninfo, connect, source, fmt):
    target = f"nl2sql_restored_{fmt}"
    admin = connect(dbname="postgres")
    admin.execute(f"DROP DATABASE IF EXISTS {target} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {target}")
    if fmt == "plain":
        _tool(conninfo, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(source[fmt]), dbname=target)
    else:
        _tool(conninfo, "pg_restore", "--exit-on-error", str(source[fmt]), dbname=target)
    return target


@pytest.mark.parametrize("fmt", ["plain", "custom"])
def test_a_restored_database_keeps_the_configuration_and_answers(connect, conninfo, mock, source, fmt):
    target = _restore(conninfo, connect, source, fmt)
    try:
        db = connect(dbname=target)
        notices = []  # (severity, sqlstate, message, hint): a notice is only valid inside its callback
        db.add_notice_handler(lambda d: notices.append((d.severity, d.sqlstate, d.message_primary or "", d.message_hint or "")))
        # What the DBA configured came back, on the same tables and columns.
        assert db.execute("SELECT relation::text, column_name::text, status FROM nl2sql.value_indexes ORDER BY 1, 2").fetchall() == [
            ("city", "name", "restored"), ("kid", "b", "restored"), ("kid", "x", "restored"), ("singer", "country", "restored")]
        # Each row points at its column again as soon as it is loaded.
        assert db.execute("SELECT count(*) FROM nl2sql.value_index i JOIN pg_attribute a "
                          "ON a.attrelid = i.relid AND a.attnum = i.attnum AND a.attname = i.attname").fetchone()[0] == 4
        assert db.execute("SELECT question FROM nl2sql.examples WHERE source = 'user'").fetchall() == [
            ("How many concerts were held in 2014?",)]
        assert db.execute("SELECT instruction, relations::text FROM nl2sql.instructions").fetchall() == [
            ("a visit's town is a city", "{city,visit}")]
        assert db.execute("SELECT from_relation::text, from_columns::text, to_relation::text, source "
                          "FROM nl2sql.relationships WHERE source = 'confirmed'").fetchall() == [("visit", "{town}", "city", "confirmed")]
        assert db.execute("SELECT question FROM nl2sql.history").fetchall() == [("How many singers do we have?",)]

        # Until the indexes are built, a search says which ones it cannot use, and finds nothing.
        assert db.execute("SELECT * FROM nl2sql.search_values('kabul', 3)").fetchall() == []
        said = [n for n in notices if "restored without entries" in n[2]]
        assert len(said) == 1, notices
        severity, sqlstate, message, hint = said[0]
        assert severity == "NOTICE" and sqlstate == "01000" and "nl2sql.refresh_value_indexes()" in hint
        assert "city.name" in message and "singer.country" in message and "kid.x" in message
        # DML on an indexed table works meanwhile, without a warning.
        notices.clear()
        db.execute("INSERT INTO city VALUES (3, 'Lima')")
        assert [n for n in notices if n[0] == "WARNING"] == []

        # New rows get ids of their own: the sequences came back with the rows.
        db.execute("SELECT nl2sql.add_instruction('a singer''s country is where they were born', ARRAY['singer']::regclass[])")
        db.execute("CREATE TABLE trip (id int PRIMARY KEY, visit_id int)")
        db.execute("SELECT nl2sql.confirm_relationship('trip', 'visit_id', 'visit', 'id')")
        assert db.execute("SELECT count(*) FROM nl2sql.relationships WHERE source = 'confirmed'").fetchone()[0] == 2
        db.execute("SELECT * FROM nl2sql.create_value_index('singer', 'name')")
        assert db.execute("SELECT count(*) FROM nl2sql.instructions").fetchone()[0] == 2
        # Building one restored index by hand builds that column, and no other.
        assert db.execute("SELECT column_name::text, \"values\" FROM nl2sql.create_value_index('kid', 'x')").fetchall() == [("x", 1)]
        assert db.execute("SELECT column_name::text, status FROM nl2sql.value_indexes WHERE relation = 'kid'::regclass ORDER BY 1").fetchall() == [
            ("b", "restored"), ("x", "ready")]
        assert db.execute("SELECT column_name::text, value FROM nl2sql.search_values('xylophone', 1)").fetchall() == [("x", "Xylophone")]

        # A refresh builds the restored indexes; each reads its own column again.
        built = db.execute("SELECT relation::text, column_name::text, status, \"values\" "
                           "FROM nl2sql.refresh_value_indexes() ORDER BY 1, 2").fetchall()
        assert [b[:3] for b in built] == [("city", "name", "ready"), ("kid", "b", "ready"), ("singer", "country", "ready")]
        assert built[0][3] == 3
        assert db.execute("SELECT relation::text, column_name::text, status FROM nl2sql.value_indexes ORDER BY 1, 2").fetchall() == [
            ("city", "name", "ready"), ("kid", "b", "ready"), ("kid", "x", "ready"), ("singer", "country", "ready"), ("singer", "name", "ready")]
        assert db.execute("SELECT column_name::text, value FROM nl2sql.search_values('bassoon', 1)").fetchall() == [("b", "Bassoon")]
        notices.clear()
        assert db.execute("SELECT relation::text, column_name::text, value FROM nl2sql.search_values('kabul', 1)").fetchall() == [
            ("city", "name", "Kabul")]
        assert db.execute("SELECT value FROM nl2sql.search_values('lima', 1)").fetchall() == [("Lima",)]
        assert not [n for n in notices if "restored" in n[2]]
        # DML reaches the rebuilt index.
        db.execute("INSERT INTO city VALUES (4, 'Quito')")
        assert db.execute("SELECT value FROM nl2sql.search_values('quito', 1)").fetchall() == [("Quito",)]

        # And questions are answered and recorded as before.
        db.execute("SET nl2sql.mode = zero_shot")
        assert db.execute("SELECT nl2sql('How many singers do we have?')").fetchone()[0].startswith("SELECT count(*) FROM singer")
        assert db.execute("SELECT count(*) FROM nl2sql.history").fetchone()[0] == 2
    finally:
        connect(dbname="postgres").execute(f"DROP DATABASE IF EXISTS {target} WITH (FORCE)")


def test_the_dumped_column_name_follows_a_rename(connect, source):
    """The name a dump writes (and a restore looks for) follows ALTER TABLE ... RENAME COLUMN,
    in the children of a renamed parent's column too."""
    db = connect(dbname=SOURCE)
    db.execute("ALTER TABLE city RENAME COLUMN name TO city_name")
    db.execute("ALTER TABLE base RENAME COLUMN b TO bee")
    try:
        assert db.execute("SELECT column_name::text, status FROM nl2sql.value_indexes WHERE relation = 'city'::regclass").fetchall() == [
            ("city_name", "ready")]
        assert db.execute("SELECT relid::text, attname::text FROM nl2sql.value_index WHERE relid IN ('city'::regclass, 'kid'::regclass) "
                          "ORDER BY 1, 2").fetchall() == [("city", "city_name"), ("kid", "bee"), ("kid", "x")]
    finally:
        db.execute("ALTER TABLE city RENAME COLUMN city_name TO name")
        db.execute("ALTER TABLE base RENAME COLUMN bee TO b")


def test_a_temporary_table_has_no_value_index(connect):
    """pg_dump could not name it, and it would outlive the session's table."""
    db = connect()
    db.execute("CREATE TEMP TABLE scratch (name text)")
    with pytest.raises(Exception) as e:
        db.execute("SELECT * FROM nl2sql.create_value_index('scratch', 'name')")
    assert e.value.sqlstate == "0A000" and "temporary table" in str(e.value)


@pytest.mark.parametrize("fmt", ["plain", "custom"])
def test_a_dump_without_a_table_restores_the_other_value_indexes(connect, conninfo, tmp_path, fmt):
    """pg_dump -T leaves a table out: the value index names its table as text, so each index is
    resolved as it loads; the one of the missing table is reported in a WARNING and left out,
    the others come back (under the names their tables have now: a rename after the index was
    made is followed). Nothing else here names the missing table."""
    import psycopg
    src, target = f"nl2sql_partial_src_{fmt}", f"nl2sql_partial_dst_{fmt}"
    admin = connect(dbname="postgres")
    for d in (src, target):
        admin.execute(f"DROP DATABASE IF EXISTS {d} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {d}")
    try:
        db = psycopg.connect(autocommit=True, **{**conninfo, "dbname": src})
        db.execute("SET client_min_messages = warning")
        db.execute("CREATE EXTENSION nl2sql CASCADE")
        db.execute("CREATE SCHEMA shop")
        db.execute("CREATE TABLE shop.items (id int, label text)")
        db.execute("CREATE TABLE shop.\"left out\" (id int, label text)")
        db.execute("CREATE TABLE kept (id int, junk text, colour text)")
        db.execute("INSERT INTO shop.items VALUES (1, 'Anvil')")
        db.execute("INSERT INTO kept VALUES (1, 'x', 'Vermilion')")
        for rel, col in (("shop.items", "label"), ('shop."left out"', "label"), ("kept", "colour")):
            db.execute("SELECT * FROM nl2sql.create_value_index(%s, %s)", (rel, col))
        # renamed after the index was made: the dump writes the names they have now
        db.execute("ALTER TABLE shop.items RENAME TO goods")
        db.execute("ALTER SCHEMA shop RENAME TO store")
        db.execute("ALTER TABLE kept DROP COLUMN junk")
        # PostgreSQL renames a table by ALTER INDEX too
        db.execute("ALTER INDEX kept RENAME TO kept2")
        db.close()
        out = tmp_path / "partial"
        out.mkdir()
        os.chmod(out, 0o777)
        dump = out / ("partial.sql" if fmt == "plain" else "partial.dump")
        _tool(conninfo, "pg_dump", "-T", 'store."left out"', *([] if fmt == "plain" else ["-Fc"]), "-f", str(dump), dbname=src)
        if fmt == "plain":
            done = _tool(conninfo, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), dbname=target)
        else:
            # (pg_restore shows the server's warnings only when verbose)
            done = _tool(conninfo, "pg_restore", "--verbose", "--exit-on-error", str(dump), dbname=target)
        assert "nl2sql left out the restored value index of store.\"left out\".label" in done.stderr, done.stderr
        assert done.stderr.count("WARNING") == 1, done.stderr
        db = connect(dbname=target)
        assert db.execute("SELECT relation::text, column_name::text, status FROM nl2sql.value_indexes ORDER BY 1").fetchall() == [
            ("kept2", "colour", "restored"), ("store.goods", "label", "restored")]
        built = db.execute("SELECT relation::text, \"values\" FROM nl2sql.refresh_value_indexes() ORDER BY 1").fetchall()
        assert built == [("kept2", 1), ("store.goods", 1)]
        assert db.execute("SELECT column_name::text, value FROM nl2sql.search_values('vermilion', 1)").fetchall() == [
            ("colour", "Vermilion")]
        # and what pg_dump keeps follows the restored rows: a second dump of this one has both
        assert db.execute("SELECT relation, attname::text FROM nl2sql.value_index_saved ORDER BY 1").fetchall() == [
            ("public.kept2", "colour"), ("store.goods", "label")]
    finally:
        for d in (src, target):
            admin.execute(f"DROP DATABASE IF EXISTS {d} WITH (FORCE)")


def test_a_load_without_triggers_is_reconciled_at_the_next_refresh(connect):
    """pg_restore --disable-triggers (session_replication_role = replica) loads what pg_dump
    kept without the trigger that makes indexes of it: the next refresh does, and gives an index
    left without a saved row one."""
    db = connect()
    db.execute("SET client_min_messages = warning")
    db.execute("CREATE TABLE recon_a (name text)")
    db.execute("CREATE TABLE recon_b (name text)")
    db.execute("INSERT INTO recon_a VALUES ('Ochre'); INSERT INTO recon_b VALUES ('Umber')")
    try:
        db.execute("SELECT * FROM nl2sql.create_value_index('recon_a', 'name')")
        db.execute("SET session_replication_role = replica")
        db.execute("DELETE FROM nl2sql.value_index_saved WHERE relation = 'public.recon_a'")
        db.execute("INSERT INTO nl2sql.value_index_saved VALUES (987654, 'public.recon_b', 'name', 'builtin', 256, false, 200)")
        db.execute("RESET session_replication_role")
        assert db.execute("SELECT count(*) FROM nl2sql.value_index WHERE relid = 'recon_b'::regclass").fetchone()[0] == 0
        db.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
        assert db.execute("SELECT relation, attname::text FROM nl2sql.value_index_saved WHERE relation LIKE 'public.recon%' ORDER BY 1").fetchall() == [
            ("public.recon_a", "name"), ("public.recon_b", "name")]
        assert db.execute("SELECT value FROM nl2sql.search_values('umber', 1)").fetchall() == [("Umber",)]
    finally:
        db.execute("DROP TABLE recon_a, recon_b")
    assert db.execute("SELECT count(*) FROM nl2sql.value_index_saved WHERE relation LIKE 'public.recon%'").fetchone()[0] == 0


def test_a_restore_binds_each_saved_name_exactly_and_never_to_a_system_table(connect):
    """A saved row names its table as text (pg_dump keeps it): the name is read as the quoted
    identifiers it is, so public."sv_a.b" is not schema sv_a's table b; a row naming a system
    catalog, information_schema or nl2sql's own tables is reported and left out, and nothing of
    those is ever indexed."""
    db = connect()
    db.execute("SET client_min_messages = warning")
    db.execute("DROP SCHEMA IF EXISTS sv_a CASCADE")
    db.execute('DROP TABLE IF EXISTS public."sv_a.b"')
    db.execute("CREATE SCHEMA sv_a")
    db.execute('CREATE TABLE sv_a.b ("x""y" text)')
    db.execute('CREATE TABLE public."sv_a.b" ("x""y" text)')
    db.execute("INSERT INTO sv_a.b VALUES ('Decoy')")
    db.execute('INSERT INTO public."sv_a.b" VALUES (\'Genuine\')')
    warnings = []
    db.add_notice_handler(lambda d: warnings.append(d.message_primary))
    saved = "INSERT INTO nl2sql.value_index_saved VALUES (%s, %s, %s, 'builtin', 256, false, 200)"
    try:
        db.execute(saved, (987101, 'public."sv_a.b"', 'x"y'))
        for i, (rel, col) in enumerate([("pg_catalog.pg_authid", "rolname"), ("information_schema.sql_features", "feature_name"),
                                        ("nl2sql.value_index_saved", "relation"), ("pg_catalog.pg_class", "relname")]):
            db.execute(saved, (987102 + i, rel, col))
        assert db.execute("SELECT relid::text, attname::text FROM nl2sql.value_index WHERE id >= 987101 ORDER BY id").fetchall() == [
            ('"sv_a.b"', 'x"y')]
        assert sum("left out the restored value index" in w for w in warnings) == 4, warnings
        assert db.execute("SELECT count(*) FROM nl2sql.value_index_saved WHERE id > 987101").fetchone()[0] == 0
        db.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
        assert db.execute("SELECT relation::text, column_name::text, value FROM nl2sql.search_values('genuine', 1)").fetchall() == [
            ('"sv_a.b"', 'x"y', "Genuine")]
        assert db.execute("SELECT count(*) FROM nl2sql.search_values('decoy')").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM nl2sql.value_index i JOIN pg_class c ON c.oid = i.relid "
                          "WHERE c.relnamespace IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, "
                          "'nl2sql'::regnamespace)").fetchone()[0] == 0
    finally:
        db.execute('DROP TABLE IF EXISTS public."sv_a.b"')
        db.execute("DROP SCHEMA IF EXISTS sv_a CASCADE")
