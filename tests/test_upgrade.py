"""ALTER EXTENSION nl2sql UPDATE from the previous release gives the same objects as a fresh
install, and the value index works after it."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PG_CONFIG = os.environ.get("PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config")
OLD = "0.1.0"
LAST = "0.2.0"  # the release before the version being written

# What defines the extension's objects: functions, relations with their columns, views, triggers.
OBJECTS = """
SELECT 'function ' || p.oid::regprocedure || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || p.proacl::text
FROM pg_proc p WHERE p.pronamespace = 'nl2sql'::regnamespace AND p.prokind <> 'a'
UNION ALL
SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '')
       || ' ' || coalesce((SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY a.attnum)
                           FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '')
FROM pg_class c WHERE c.relnamespace = 'nl2sql'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S') AND NOT c.relispartition
  AND c.relname !~ '^value_entries_[0-9]'  -- a column's entries, made by its build
UNION ALL
SELECT 'view ' || c.relname || ' ' || md5(pg_get_viewdef(c.oid))
FROM pg_class c WHERE c.relnamespace = 'nl2sql'::regnamespace AND c.relkind = 'v'
UNION ALL
SELECT 'function ' || p.oid::regprocedure || ' ' || md5(pg_get_functiondef(p.oid))
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'nl2sql'
WHERE p.pronamespace <> 'nl2sql'::regnamespace
UNION ALL
SELECT 'trigger ' || t.tgrelid::regclass::text || ' ' || pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'nl2sql'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'event trigger ' || e.evtname || ' ' || e.evtevent || ' ' || e.evtfoid::regproc::text
FROM pg_event_trigger e WHERE e.evtname LIKE 'nl2sql%'
UNION ALL
-- what pg_dump keeps
SELECT 'dumped ' || x.extconfig::regclass::text || ' ' || coalesce(x.extcondition, '')
FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(extconfig, extcondition)
WHERE e.extname = 'nl2sql'
ORDER BY 1
"""


def _current_version():
    for line in (ROOT / "Cargo.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split('"')[1]
    raise AssertionError("no version in Cargo.toml")


def _release_script(version):
    """Puts a release's install script (pg_test/fixtures/) beside the installed extension."""
    extdir = Path(subprocess.check_output([PG_CONFIG, "--sharedir"], text=True).strip()) / "extension"
    target = extdir / f"nl2sql--{version}.sql"
    if not target.exists():
        if not os.access(extdir, os.W_OK):
            pytest.skip(f"cannot write {extdir} to install the {version} script")
        shutil.copy(ROOT / "pg_test" / "fixtures" / f"nl2sql--{version}.sql", target)
    return target


@pytest.fixture(scope="module")
def old_script():
    """The 0.1.0 install script, beside the installed extension."""
    return _release_script(OLD)


@pytest.fixture(scope="module")
def last_release_script():
    """The last release's install script, beside the installed extension."""
    return _release_script(LAST)


def _old_and_fresh(connect, admin, old_db, version):
    """Two new databases: `old_db` with the extension at `version` and a table of towns, and
    nl2sql_fresh for a fresh install; the connection to the first."""
    for db in (old_db, "nl2sql_fresh"):
        admin.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.execute(f"CREATE DATABASE {db}")
    old = connect(dbname=old_db)
    old.execute("SET client_min_messages = warning")
    old.execute(f"CREATE EXTENSION nl2sql VERSION '{version}' CASCADE")
    old.execute("CREATE TABLE towns (name text)")
    old.execute("INSERT INTO towns VALUES ('Aberdeen'), ('Inverness'), ('Perth')")
    return old


def test_update_matches_a_fresh_install(connect, old_script):
    admin = connect(dbname="postgres")
    try:
        old = _old_and_fresh(connect, admin, "nl2sql_upgraded", OLD)
        # An index as 0.1.0 built it: a partition of nl2sql.value_entries, and its triggers.
        cid = old.execute("INSERT INTO nl2sql.value_index (relid, attnum, embedder, dims, status) "
                          "VALUES ('towns'::regclass, 1, 'builtin-v1', 256, 'ready') RETURNING id").fetchone()[0]
        part = f"nl2sql.value_entries_{cid}"
        old.execute(f"CREATE TABLE {part} PARTITION OF nl2sql.value_entries FOR VALUES IN ({cid})")
        old.execute(f"INSERT INTO {part} SELECT {cid}, name, name, nl2sql.fold(name), nl2sql.signature(name)::bit(256) FROM towns")
        old.execute(f"CREATE INDEX ON {part} (key)")
        old.execute(f"CREATE INDEX ON {part} USING hnsw ((sig::bit(256)) bit_hamming_ops)")
        old.execute("CREATE TRIGGER nl2sql_values_insert AFTER INSERT ON towns REFERENCING NEW TABLE AS nl2sql_new "
                    "FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._values_changed()")
        # New binaries come with ALTER EXTENSION UPDATE; the 0.1.0 entries serve as generation 0
        # at once, DML adds to them, and a rebuild makes generation 1.
        old.execute("ALTER EXTENSION nl2sql UPDATE")
        assert old.execute("SELECT value FROM nl2sql.search_values('inverness', 1)").fetchone()[0] == "Inverness"
        old.execute("INSERT INTO towns VALUES ('Dundee')")
        assert old.execute("SELECT value FROM nl2sql.search_values('dundee', 1)").fetchone()[0] == "Dundee"
        old.execute("SELECT * FROM nl2sql.create_value_index('towns')")
        assert old.execute("SELECT generation FROM nl2sql.value_indexes").fetchone()[0] == 1
        old.execute("SELECT * FROM nl2sql.refresh_value_indexes()")
        assert old.execute(f"SELECT to_regclass('{part}_0')").fetchone()[0] is None
        assert old.execute("SELECT extversion FROM pg_extension WHERE extname = 'nl2sql'").fetchone()[0] == _current_version()
        old.execute("DELETE FROM towns WHERE name = 'Perth'")
        assert old.execute("SELECT pending_removals FROM nl2sql.value_indexes").fetchone()[0] == 1
        assert old.execute("SELECT count(*) FROM nl2sql.search_values('perth')").fetchone()[0] == 0
        assert old.execute("SELECT value FROM nl2sql.search_values('aberdeen', 1)").fetchone()[0] == "Aberdeen"
        fresh = connect(dbname="nl2sql_fresh")
        fresh.execute("SET client_min_messages = warning")
        fresh.execute("CREATE EXTENSION nl2sql CASCADE")
        upgraded = [r[0] for r in old.execute(OBJECTS).fetchall()]
        made = [r[0] for r in fresh.execute(OBJECTS).fetchall()]
        assert upgraded == made
    finally:
        for c in ("nl2sql_upgraded", "nl2sql_fresh"):
            admin.execute(f"DROP DATABASE IF EXISTS {c} WITH (FORCE)")



def test_update_from_the_last_release_matches_a_fresh_install(connect, last_release_script):
    """The last release installed, a value index built by it, ALTER EXTENSION nl2sql UPDATE: the
    objects of a fresh install, and the index still serves."""
    admin = connect(dbname="postgres")
    try:
        old = _old_and_fresh(connect, admin, "nl2sql_updated", LAST)
        old.execute("SELECT * FROM nl2sql.create_value_index('towns')")
        old.execute("ALTER EXTENSION nl2sql UPDATE")
        assert old.execute("SELECT extversion FROM pg_extension WHERE extname = 'nl2sql'").fetchone()[0] == _current_version()
        assert old.execute("SELECT value FROM nl2sql.search_values('inverness', 1)").fetchone()[0] == "Inverness"
        assert old.execute("SELECT count(*) FROM nl2sql.value_indexes").fetchone()[0] == 1
        fresh = connect(dbname="nl2sql_fresh")
        fresh.execute("SET client_min_messages = warning")
        fresh.execute("CREATE EXTENSION nl2sql CASCADE")
        updated = [r[0] for r in old.execute(OBJECTS).fetchall()]
        made = [r[0] for r in fresh.execute(OBJECTS).fetchall()]
        assert updated == made
    finally:
        for c in ("nl2sql_updated", "nl2sql_fresh"):
            admin.execute(f"DROP DATABASE IF EXISTS {c} WITH (FORCE)")

V010 = "00e3ea18d8285549c1d24799d870ab93c565d225"  # tagged v0.1.0


def _install(src, dst):
    """Replaces a file the way an installer must replace a loaded library: a new file renamed
    over the old one (backends that mapped the old one keep it)."""
    tmp = dst.with_name(dst.name + ".nl2sql-test")
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)


@pytest.fixture(scope="module")
def release_010():
    """The 0.1.0 library built from its commit (git archive, cargo build; kept under target/ for
    the next run) and the installed library it temporarily replaces."""
    version = subprocess.check_output([PG_CONFIG, "--version"], text=True).split()[1]
    if not version.startswith("15."):
        pytest.skip(f"0.1.0 was released for PostgreSQL 15 only: no 0.1.0 library exists for {version} to update from")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{V010}^{{commit}}"],
                            capture_output=True, text=True).stdout.strip()
    if not commit:
        pytest.skip(f"this checkout lacks the history of 0.1.0 (commit {V010[:7]}); git fetch --unshallow --tags")
    libdir = Path(subprocess.check_output([PG_CONFIG, "--pkglibdir"], text=True).strip())
    if not os.access(libdir, os.W_OK):
        pytest.skip(f"cannot write {libdir} to install the 0.1.0 library")
    work = ROOT / "target" / "v0.1.0"
    src = work / "src"
    if (src / ".commit").exists() and (src / ".commit").read_text() != commit:
        shutil.rmtree(src)
    if not (src / ".commit").exists():
        src.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        (src / ".commit").write_text(commit)
    env = dict(os.environ, CARGO_TARGET_DIR=str(work / "target"))
    build = subprocess.run(["cargo", "build", "--lib", "--locked"], cwd=src, env=env, capture_output=True, text=True, timeout=3000)
    assert build.returncode == 0, build.stderr[-3000:]
    current = libdir / "nl2sql.so"
    saved = work / "nl2sql-current.so"
    shutil.copyfile(current, saved)
    yield work / "target" / "debug" / "libnl2sql.so", current, saved
    _install(saved, current)


def test_a_010_database_updates_and_still_answers(connect, conninfo, mock, old_script, release_010):
    """0.1.0's own library and install script: a value index built and questions answered by
    0.1.0; then the new library, ALTER EXTENSION nl2sql UPDATE, and everything answers."""
    old_so, current, saved = release_010
    admin = connect(dbname="postgres")
    admin.execute("DROP DATABASE IF EXISTS nl2sql_v010 WITH (FORCE)")
    admin.execute("CREATE DATABASE nl2sql_v010")
    dump = ROOT / "tests" / "fixtures" / "concert_singer.sql"
    subprocess.run([str(Path(subprocess.check_output([PG_CONFIG, "--bindir"], text=True).strip()) / "psql"), "-X", "-q",
                    "-v", "ON_ERROR_STOP=1", "-h", conninfo["host"], "-p", str(conninfo["port"]), "-U", conninfo["user"],
                    "-d", "nl2sql_v010", "-f", str(dump)], check=True, capture_output=True)
    try:
        _install(old_so, current)
        try:
            db = connect(dbname="nl2sql_v010")  # a new backend: loads 0.1.0
            db.execute("SET client_min_messages = warning")
            db.execute("DROP EXTENSION IF EXISTS nl2sql CASCADE")
            db.execute(f"CREATE EXTENSION nl2sql VERSION '{OLD}' CASCADE")
            # This backend runs the 0.1.0 library: it has none of the new settings.
            db.execute("LOAD 'nl2sql'")
            assert db.execute("SELECT current_setting('nl2sql.privacy', true)").fetchone()[0] is None
            db.execute("SELECT * FROM nl2sql.create_value_index('singer', 'country')")
            db.execute("SET nl2sql.mode = zero_shot")
            assert db.execute("SELECT nl2sql('How many singers do we have?')").fetchone()[0].startswith("SELECT count(*) FROM singer")
            assert db.execute("SELECT value FROM nl2sql.search_values('netherland', 1)").fetchone()[0] == "Netherlands"
            db.close()
        finally:
            _install(saved, current)
        db = connect(dbname="nl2sql_v010")  # a new backend: loads the new library
        db.execute("SET client_min_messages = warning")
        db.execute("LOAD 'nl2sql'")
        assert db.execute("SELECT current_setting('nl2sql.privacy')").fetchone()[0] == "off"
        db.execute("ALTER EXTENSION nl2sql UPDATE")
        assert db.execute("SELECT extversion FROM pg_extension WHERE extname = 'nl2sql'").fetchone()[0] == _current_version()
        # The 0.1.0 index serves, DML reaches it, questions are answered and recorded.
        assert db.execute("SELECT value FROM nl2sql.search_values('netherland', 1)").fetchone()[0] == "Netherlands"
        db.execute("INSERT INTO singer (singer_id, name, country, song_name, song_release_year, age, is_male) "
                   "VALUES (7, 'Ola Nordmann', 'Norway', 'Fjord', '2020', 30, 't')")
        assert db.execute("SELECT value FROM nl2sql.search_values('norway', 1)").fetchone()[0] == "Norway"
        for mode in ("zero_shot", "full"):
            db.execute(f"SET nl2sql.mode = {mode}")
            assert db.execute("SELECT nl2sql('How many singers do we have?')").fetchone()[0].startswith("SELECT count(*) FROM singer")
        hid = db.execute("SELECT nl2sql.last_trace()").fetchone()[0]["history_id"]
        assert db.execute("SELECT count(*) FROM nl2sql.history").fetchone()[0] == 2
        assert db.execute("SELECT nl2sql('[ops-follow] and from France?', follows => %s)", (hid,)).fetchone()[0]
        assert db.execute("SELECT nl2sql.feedback(%s, true)", (hid,)).fetchone()[0] > 0
        db.execute("SELECT * FROM nl2sql.create_value_index('singer', 'country')")
        assert db.execute("SELECT generation FROM nl2sql.value_indexes").fetchone()[0] == 1
        db.close()
    finally:
        admin.execute("DROP DATABASE IF EXISTS nl2sql_v010 WITH (FORCE)")
