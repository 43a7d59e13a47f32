"""The value index under live traffic: sessions asking questions while one session rebuilds and
refreshes the indexes in a loop and another writes the table (INSERT, UPDATE, DELETE, COPY).
No session may fail; afterwards the index holds exactly the table's values."""
import random
import threading
import time

import psycopg
import pytest

ROUNDS = 9


@pytest.fixture
def towns(connect):
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    admin.execute("DROP TABLE IF EXISTS live_towns")
    admin.execute("CREATE TABLE live_towns (id serial PRIMARY KEY, name text, region text)")
    admin.execute("INSERT INTO live_towns (name, region) SELECT 'Town ' || g, 'Region ' || (g % 40) FROM generate_series(1, 3000) g")
    admin.execute("SELECT * FROM nl2sql.create_value_index('live_towns')")
    yield admin
    admin.execute("DROP TABLE IF EXISTS live_towns")


def test_questions_rebuilds_and_dml_side_by_side(conninfo, towns):
    errors, asked, stop = [], [0], threading.Event()

    def session():
        c = psycopg.connect(autocommit=True, **conninfo)
        c.execute("SET client_min_messages = warning")
        return c

    def asker(n):
        rnd = random.Random(n)
        try:
            c = session()
            c.execute("SET nl2sql.mode = zero_shot")
            while not stop.is_set():
                i = rnd.randrange(1, 3000)
                c.execute("SELECT * FROM nl2sql.search_values(%s, 5)", (f"town {i}",)).fetchall()
                c.execute("SELECT * FROM nl2sql.search_values('regoin 7', 5)").fetchall()
                # A question: value retrieval inside the pipeline, then the scripted model.
                assert c.execute("SELECT nl2sql('How many singers do we have?')").fetchone()[0]
                asked[0] += 1
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 -- every failure is the test's finding
            errors.append(f"asker {n}: {e!r}")

    def maintainer():
        try:
            c = session()
            for r in range(ROUNDS):
                if r % 3 == 2:
                    c.execute("SELECT * FROM nl2sql.create_value_indexes()").fetchall()
                elif r % 3 == 1:
                    c.execute("SELECT * FROM nl2sql.create_value_index('live_towns', 'name')").fetchall()
                else:
                    c.execute("SELECT * FROM nl2sql.refresh_value_indexes('live_towns')").fetchall()
        except Exception as e:  # noqa: BLE001
            errors.append(f"maintainer: {e!r}")
        finally:
            stop.set()

    def writer():
        rnd = random.Random(7)
        try:
            c = session()
            n = 10_000
            while not stop.is_set():
                op = rnd.randrange(4)
                if op == 0:
                    c.execute("INSERT INTO live_towns (name, region) VALUES (%s, 'Region 1')", (f"Town {n}",))
                    n += 1
                elif op == 1:
                    c.execute("UPDATE live_towns SET name = %s WHERE id = %s", (f"Town {n}", rnd.randrange(1, 3000)))
                    n += 1
                elif op == 2:
                    c.execute("DELETE FROM live_towns WHERE id = %s", (rnd.randrange(1, 3000),))
                else:
                    with c.cursor().copy("COPY live_towns (name, region) FROM STDIN") as cp:
                        for _ in range(20):
                            cp.write_row((f"Town {n}", "Region 2"))
                            n += 1
                # Within a transaction too: DML never waits for a rebuild.
                with c.transaction():
                    c.execute("INSERT INTO live_towns (name, region) VALUES (%s, 'Region 3')", (f"Town {n}",))
                    n += 1
                # A steady trickle, not a flood: the table stays about its size.
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001
            errors.append(f"writer: {e!r}")

    threads = [threading.Thread(target=asker, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=maintainer), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a session hung"
    assert not errors, errors
    assert asked[0] > 0
    # Nothing lost: after a last refresh (removals applied, old generations dropped) the index
    # holds exactly the table's values.
    admin = towns
    admin.execute("SELECT * FROM nl2sql.refresh_value_indexes('live_towns')").fetchall()
    # Generations retired by a transaction are dropped by a later one.
    for _ in range(2):
        admin.execute("SELECT * FROM nl2sql.refresh_value_indexes()").fetchall()
    table_values = {r[0] for r in admin.execute("SELECT DISTINCT name FROM live_towns")}
    gen = admin.execute("SELECT format('nl2sql.value_entries_%s_%s', i.id, i.generation) FROM nl2sql.value_index i "
                        "JOIN pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum "
                        "WHERE i.relid = 'live_towns'::regclass AND a.attname = 'name'").fetchone()[0]
    indexed = {r[0] for r in admin.execute(f"SELECT value FROM {gen} WHERE term = value")}
    assert indexed == table_values, (len(indexed - table_values), len(table_values - indexed))
    # Every generation a build replaced is gone, once no snapshot can read it: a snapshot still
    # open elsewhere in the cluster (autovacuum's ANALYZE after this much DML, say) can keep one
    # for a moment, so later refreshes get a bounded number of chances (it passed after the two
    # above in isolation, and failed once in a full CI run with one left).
    left_sql = ("SELECT count(*) FROM nl2sql.value_generations g JOIN nl2sql.value_index i ON i.id = g.column_id "
                "WHERE i.relid = 'live_towns'::regclass")
    left = admin.execute(left_sql).fetchone()[0]
    for _ in range(20):
        if left == 0:
            break
        time.sleep(0.25)
        admin.execute("SELECT * FROM nl2sql.refresh_value_indexes()").fetchall()
        left = admin.execute(left_sql).fetchone()[0]
    assert left == 0
