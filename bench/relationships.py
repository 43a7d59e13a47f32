"""Relationships nobody declared (nl2sql.profile_relationships()), printed, never asserted:

1. Accuracy: each spider-pg and defog-instruct database loaded again with every PRIMARY KEY,
   UNIQUE and FOREIGN KEY constraint dropped (eval/benchmarks.py, as `make eval --no-keys` asks
   them), profiled, and what was inferred set against the foreign keys the original declares:
   precision, recall, every miss and every false one. (Where a database declares few foreign
   keys, a relationship that is real but undeclared counts as false here; the list says which.)
2. Scale: the 1,000-table schema of bench/wide.py, copied with its keys dropped and each
   reference column filled, profiled whole.
3. One pair on large tables: a fact table of 1M rows whose dim_id holds keys of a dimension of
   1M rows, without an index on the key (the check reads the dimension) and with one.
"""
import time

import psycopg
from psycopg import sql as pgsql

import benchmarks  # eval/, on the path bench.py sets
import wide


def _declared(conn):
    return {r for r in conn.execute(
        """SELECT format('%s', c.conrelid::regclass), a.attname, format('%s', c.confrelid::regclass), b.attname
           FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
           JOIN pg_attribute b ON b.attrelid = c.confrelid AND b.attnum = c.confkey[1]
           WHERE c.contype = 'f' AND cardinality(c.conkey) = 1""")}


def _profiled(conn):
    conn.execute("SET client_min_messages = warning")
    t0 = time.monotonic()
    rows = conn.execute(
        """SELECT format('%s', from_relation), from_columns[1], format('%s', to_relation), to_columns[1]
           FROM nl2sql.profile_relationships() WHERE source = 'inferred'""").fetchall()
    return set(rows), time.monotonic() - t0


def _extension(kw, db):
    with psycopg.connect(dbname=db, autocommit=True, **kw) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("DROP EXTENSION IF EXISTS nl2sql CASCADE")
        c.execute("CREATE EXTENSION nl2sql CASCADE")


def accuracy(kw):
    for bench in ("spider-pg", "defog-instruct"):
        truth, found, seconds, misses, false = 0, 0, 0.0, [], []
        right = 0
        for part, dbs in benchmarks.SPLITS[bench].items():
            for db in dbs:
                keyed = benchmarks.load(kw, bench, db, no_keys=False)
                keyless = benchmarks.load(kw, bench, db, no_keys=True)
                with psycopg.connect(dbname=keyed, autocommit=True, **kw) as c:
                    declared = _declared(c)
                _extension(kw, keyless)
                with psycopg.connect(dbname=keyless, autocommit=True, **kw) as c:
                    inferred, s = _profiled(c)
                seconds += s
                truth += len(declared)
                found += len(inferred)
                right += len(declared & inferred)
                misses += [f"{db}: {a}.{b} -> {x}.{y}" for a, b, x, y in sorted(declared - inferred)]
                false += [f"{db}: {a}.{b} -> {x}.{y}" for a, b, x, y in sorted(inferred - declared)]
        precision = right / found if found else float("nan")
        recall = right / truth if truth else float("nan")
        print(f"  {bench}: {truth} declared foreign keys, {found} inferred with the keys dropped, {right} of them declared: "
              f"precision {precision:.3f}, recall {recall:.3f} (profiling {seconds:.1f} s in all)")
        for m in misses:
            print(f"    missed: {m}")
        for f in false:
            print(f"    not declared: {f}")


def scale(kw, tables):
    db = f"nl2sql_wide_{tables}"
    planned = wide.create(kw, db, tables=tables)
    # what bench/wide.py declared: each table's <ref>_id references <ref>.id of its area
    truth = {(f"{area}.{name}", f"{ref}_id", f"{area}.{ref}", "id") for area, name, _, _, ref in planned if ref}
    copy = db + benchmarks.NO_KEYS_SUFFIX
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        c.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(copy)))
        c.execute(pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(pgsql.Identifier(copy), pgsql.Identifier(db)))
    with psycopg.connect(dbname=copy, autocommit=True, **kw) as c:
        c.execute(benchmarks.DROP_KEYS_SQL)
        # every reference column points at the row of the same id in the table it names
        refs = c.execute(
            """SELECT quote_ident(n.nspname) || '.' || quote_ident(t.relname), quote_ident(a.attname)
               FROM pg_attribute a JOIN pg_class t ON t.oid = a.attrelid JOIN pg_namespace n ON n.oid = t.relnamespace
               WHERE a.attname LIKE '%%\\_id' AND a.attnum > 0 AND n.nspname = ANY (%s) AND t.relkind = 'r'""",
            (wide.AREAS,)).fetchall()
        for rel, col in refs:
            c.execute(f"UPDATE {rel} SET {col} = id")
        c.execute("ANALYZE")
    _extension(kw, copy)
    with psycopg.connect(dbname=copy, autocommit=True, **kw) as c:
        inferred, seconds = _profiled(c)
        keys = c.execute("SELECT count(*) FROM nl2sql.candidate_keys WHERE source = 'inferred'").fetchone()[0]
    inferred = {tuple(x.replace('"', '') for x in r) for r in inferred}  # manufacturing."order" is manufacturing.order
    right = len(inferred & truth)
    print(f"  {tables} tables ({len(refs)} reference columns filled, keys dropped): profiled in {seconds:.1f} s, "
          f"{len(inferred)} relationships and {keys} keys inferred; {right} of the {len(truth)} declared found "
          f"(precision {right / max(len(inferred), 1):.3f}, recall {right / max(len(truth), 1):.3f})")
    for f in sorted(inferred - truth)[:5]:
        print(f"    not declared, e.g.: {f[0]}.{f[1]} -> {f[2]}.{f[3]}")


def million(kw, rows=1_000_000):
    db = "nl2sql_profile_1m"
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            c.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(db)))
            with psycopg.connect(dbname=db, autocommit=True, **kw) as d:
                d.execute("CREATE TABLE dims (dim_id int NOT NULL, label text)")
                d.execute("INSERT INTO dims SELECT g, 'label ' || g FROM generate_series(1, %s) g", (rows,))
                d.execute("CREATE TABLE facts (fact_id bigint NOT NULL, dim_id int, amount numeric(10,2))")
                d.execute("INSERT INTO facts SELECT g, 1 + (g::bigint * 7919) %% %s, g %% 1000 FROM generate_series(1, %s) g", (rows, rows))
                d.execute("ANALYZE")
    _extension(kw, db)
    with psycopg.connect(dbname=db, autocommit=True, **kw) as c:
        c.execute("DROP INDEX IF EXISTS dims_dim_id")
        inferred, seconds = _profiled(c)
        print(f"  facts ({rows:,} rows) -> dims ({rows:,} rows), no index on dims.dim_id: {seconds:.2f} s, "
              f"found: {('facts', 'dim_id', 'dims', 'dim_id') in inferred}")
        c.execute("CREATE INDEX dims_dim_id ON dims (dim_id)")
        inferred, seconds = _profiled(c)
        print(f"  the same with an index on dims.dim_id: {seconds:.2f} s, found: {('facts', 'dim_id', 'dims', 'dim_id') in inferred}")


def run(kw, tables=1000):
    accuracy(kw)
    scale(kw, tables)
    million(kw)
