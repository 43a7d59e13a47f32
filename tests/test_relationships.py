"""Profiling relationships nobody declared, against hostile table owners, odd names, slow reads
and cancels; what the stores allow; and a dump and restore keeping the DBA's decisions."""
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest

KEYLESS = """
CREATE SCHEMA {s};
CREATE TABLE {s}.customers (id int NOT NULL, name text);
CREATE TABLE {s}.orders (order_no int NOT NULL, customer_id int, total numeric);
INSERT INTO {s}.customers SELECT g, 'c' || g FROM generate_series(1, 50) g;
INSERT INTO {s}.orders SELECT g, 1 + g % 50, g FROM generate_series(1, 200) g;
"""


def notices(conn):
    got = []
    conn.add_notice_handler(lambda d: got.append(d.message_primary))
    return got


def inferred(conn, schema):
    return conn.execute(
        "SELECT format('%%s.%%s -> %%s.%%s', from_relation, from_columns[1], to_relation, to_columns[1]), source "
        "FROM nl2sql.relationships WHERE from_relation::text LIKE %s ORDER BY 1", (schema + ".%",)).fetchall()


@pytest.fixture
def db(connect):
    c = connect()
    c.execute("SET client_min_messages = warning")
    yield c
    c.execute("DROP SCHEMA IF EXISTS rel_a CASCADE")
    c.execute("DROP SCHEMA IF EXISTS rel_m CASCADE")
    c.execute("DROP SCHEMA IF EXISTS \"rel odd\" CASCADE")
    for role in ("rel_mallory", "rel_viewer"):
        if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


def test_a_table_whose_read_runs_its_owners_code_is_not_read(db):
    # mallory's table forces row-level security with a policy that would try to make her a
    # superuser, write, and see the values a check looks for; a superuser profiles everything:
    # a table with row-level security is never read (its relationships are confirmed by hand)
    db.execute(KEYLESS.format(s="rel_a"))
    db.execute("CREATE ROLE rel_mallory")
    db.execute("CREATE SCHEMA rel_m AUTHORIZATION rel_mallory")
    db.execute("SET ROLE rel_mallory")
    db.execute("CREATE TABLE rel_m.loot (id int NOT NULL, customer_id int)")
    db.execute("INSERT INTO rel_m.loot VALUES (1, 1), (2, 2)")
    db.execute("CREATE TABLE rel_m.notes (t text)")
    db.execute("""CREATE FUNCTION rel_m.grab() RETURNS boolean LANGUAGE plpgsql AS $$
                  BEGIN
                      BEGIN ALTER ROLE rel_mallory SUPERUSER; EXCEPTION WHEN OTHERS THEN NULL; END;
                      INSERT INTO rel_m.notes VALUES (current_user);
                      RETURN true;
                  END $$""")
    db.execute("ALTER TABLE rel_m.loot ENABLE ROW LEVEL SECURITY")
    db.execute("ALTER TABLE rel_m.loot FORCE ROW LEVEL SECURITY")
    db.execute("CREATE POLICY p ON rel_m.loot USING (rel_m.grab())")
    db.execute("RESET ROLE")
    db.execute("SET client_min_messages = notice")
    said = notices(db)
    db.execute("SELECT * FROM nl2sql.profile_relationships(ARRAY['rel_a', 'rel_m'])").fetchall()
    assert not db.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'rel_mallory'").fetchone()[0]
    assert db.execute("SELECT count(*) FROM rel_m.notes").fetchone()[0] == 0
    assert any("tables not profiled, they have row-level security" in m and "rel_m.loot" in m for m in said), said
    # the other tables were profiled all the same
    assert inferred(db, "rel_a") == [("rel_a.orders.customer_id -> rel_a.customers.id", "inferred")]


def test_names_that_need_quoting_are_read_and_never_spliced(db):
    db.execute('CREATE SCHEMA "rel odd"')
    db.execute('CREATE TABLE "rel odd"."Clients; DROP TABLE x" ("Client Id" int NOT NULL, "na""me" text)')
    db.execute('CREATE TABLE "rel odd".invoices ("Client Id" int, amount int)')
    db.execute('INSERT INTO "rel odd"."Clients; DROP TABLE x" SELECT g, g::text FROM generate_series(1, 5) g')
    db.execute('INSERT INTO "rel odd".invoices SELECT 1 + g % 5, g FROM generate_series(1, 20) g')
    rows = db.execute("SELECT from_columns, to_relation::text, to_columns FROM nl2sql.profile_relationships(ARRAY['rel odd'])").fetchall()
    assert rows == [(["Client Id"], '"rel odd"."Clients; DROP TABLE x"', ["Client Id"])]
    keys = db.execute("""SELECT columns FROM nl2sql.candidate_keys WHERE relation = '"rel odd"."Clients; DROP TABLE x"'::regclass""").fetchall()
    assert keys == [(["Client Id"],)]


def test_a_table_locked_too_long_runs_out_of_time_and_a_cancel_ends_profiling(db, connect):
    db.execute(KEYLESS.format(s="rel_a"))
    db.execute("CREATE TABLE rel_a.busy (id int NOT NULL)")
    db.execute("INSERT INTO rel_a.busy SELECT generate_series(1, 10)")
    # another session holds a lock the read waits for
    locker = connect()
    locker.execute("BEGIN")
    locker.execute("LOCK TABLE rel_a.busy IN ACCESS EXCLUSIVE MODE")
    try:
        db.execute("SET client_min_messages = notice")
        db.execute("SET nl2sql.profile_timeout = '300ms'")
        said = notices(db)
        t0 = time.monotonic()
        db.execute("SELECT * FROM nl2sql.profile_relationships(ARRAY['rel_a'])").fetchall()
        assert time.monotonic() - t0 < 5
        assert any("rel_a.busy not profiled: reading it took longer than 300 ms" in m for m in said), said
        assert inferred(db, "rel_a") == [("rel_a.orders.customer_id -> rel_a.customers.id", "inferred")]
        # with time enough, a cancel ends it at once, and nothing of the run is kept
        db.execute("SELECT nl2sql.forget_relationship('rel_a.orders', 'customer_id', 'rel_a.customers', 'id')")
        db.execute("SET nl2sql.profile_timeout = '60s'")
        pid = db.execute("SELECT pg_backend_pid()").fetchone()[0]
        other = connect()
        timer = threading.Timer(1.0, lambda: other.execute("SELECT pg_cancel_backend(%s)", (pid,)))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            db.execute("SELECT * FROM nl2sql.profile_relationships(ARRAY['rel_a'])").fetchall()
        assert time.monotonic() - t0 < 4
        timer.join()
        assert inferred(db, "rel_a") == []
    finally:
        locker.execute("ROLLBACK")


def test_the_stores_are_the_extension_owners(db):
    db.execute("CREATE ROLE rel_viewer")
    db.execute("SET ROLE rel_viewer")
    for sql in ("SELECT * FROM nl2sql.relationship_store",
                "INSERT INTO nl2sql.key_store VALUES ('pg_class', '{oid}')",
                "SELECT nl2sql._profile_save('{}', '{}', '{}', '{}', '[]', '[]')",
                "SELECT nl2sql._relationship_decide('singer', '{singer_id}', 'concert', '{concert_id}', 'confirmed', 'rel_viewer')"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            db.execute(sql)
    db.execute("RESET ROLE")


def test_dump_and_restore_keep_what_was_found_and_decided(conninfo):
    source, target = "nl2sql_rel_source", "nl2sql_rel_restored"
    admin = psycopg.connect(autocommit=True, **{**conninfo, "dbname": "postgres"})
    for name in (source, target):
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    env = {**os.environ, "PGHOST": conninfo["host"], "PGPORT": str(conninfo["port"]), "PGUSER": "postgres"}
    bindir = subprocess.run([os.environ.get("PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config"), "--bindir"],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        with psycopg.connect(autocommit=True, **{**conninfo, "dbname": source}) as s:
            s.execute("SET client_min_messages = warning")
            s.execute("CREATE EXTENSION nl2sql CASCADE")
            s.execute(KEYLESS.format(s="rel_a"))
            s.execute("SELECT * FROM nl2sql.profile_relationships(ARRAY['rel_a'])").fetchall()
            s.execute("SELECT nl2sql.confirm_relationship('rel_a.orders', 'total', 'rel_a.customers', 'id')")
            before = inferred(s, "rel_a")
        with tempfile.TemporaryDirectory() as tmp:
            for fmt in ("-Fc", "-Fp"):
                dump = Path(tmp) / f"db{fmt}"
                subprocess.run([f"{bindir}/pg_dump", fmt, "-f", str(dump), source], env=env, check=True, capture_output=True)
                admin.execute(f"DROP DATABASE IF EXISTS {target} WITH (FORCE)")
                admin.execute(f"CREATE DATABASE {target}")
                restore = ([f"{bindir}/pg_restore", "--exit-on-error", "-d", target, str(dump)] if fmt == "-Fc"
                           else [f"{bindir}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target, "-f", str(dump)])
                subprocess.run(restore, env=env, check=True, capture_output=True)
                with psycopg.connect(autocommit=True, **{**conninfo, "dbname": target}) as r:
                    assert inferred(r, "rel_a") == before == [
                        ("rel_a.orders.customer_id -> rel_a.customers.id", "inferred"),
                        ("rel_a.orders.total -> rel_a.customers.id", "confirmed")], fmt
                    assert len(r.execute("SELECT * FROM nl2sql.join_path('rel_a.orders', 'rel_a.customers')").fetchall()) == 1
                    keys = r.execute("SELECT count(*) FROM nl2sql.candidate_keys WHERE relation::text LIKE 'rel_a.%'").fetchone()[0]
                    assert keys == 2, fmt
    finally:
        for name in (source, target):
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def test_a_decision_on_a_table_dropped_meanwhile_is_refused_not_kept(db, connect):
    # a DROP not yet committed: the decision waits for it, then finds the table gone, instead of
    # keeping a row about a relation that no longer exists
    db.execute(KEYLESS.format(s="rel_a"))
    dropper = connect()
    dropper.execute("BEGIN")
    dropper.execute("DROP TABLE rel_a.orders")
    got = {}

    def decide():
        try:
            db.execute("SELECT nl2sql.confirm_relationship(%s::oid::regclass, '{customer_id}', 'rel_a.customers', '{id}')",
                       (oid,))
            got["ok"] = True
        except psycopg.Error as e:
            got["error"] = e

    oid = db.execute("SELECT 'rel_a.orders'::regclass::oid").fetchone()[0]
    t = threading.Thread(target=decide)
    t.start()
    time.sleep(0.5)
    assert t.is_alive(), "the decision waits for the DROP"
    dropper.execute("COMMIT")
    t.join(10)
    assert isinstance(got.get("error"), psycopg.errors.UndefinedTable), got
    assert db.execute("SELECT count(*) FROM nl2sql.relationship_store WHERE from_relation::oid = %s::oid", (oid,)).fetchone()[0] == 0
