"""The benchmarks the harness asks, their databases and how they are split.

- spider-pg: ten Spider dev databases, 342 questions, gold judged by nl2sql.compare_results().
- spider-train: fifteen Spider training databases, 225 questions, judged as spider-pg is; held
  out entirely (its one part is held-out: run it, report it, never read its failures).
- defog-instruct: four business databases of Defog's sql-eval, 104 questions (basic suite: ids
  0-39, advanced suite: ids 100-163, whose `instructions` go in as the hint), judged by
  sql-eval's rule (eval/judge.py). Its rows are written relative to CURRENT_DATE, so a database
  loaded on another day is loaded again; each column description becomes COMMENT ON COLUMN.

Each benchmark's databases are split once, here, into a tuning part (failures may be read there)
and a held-out part (never read; reported beside it). `--no-keys` asks copies of the databases
with every PRIMARY KEY, UNIQUE and FOREIGN KEY constraint dropped after loading.
"""
import csv
import datetime
import json
import os
import subprocess
from pathlib import Path

import psycopg
from psycopg import sql as pgsql

from data import bench_dir

ROOT = Path(__file__).resolve().parent.parent
# Fixed once (written down in bench/README.md): a change that helps the tuning part and not the
# held-out part is not a win.
SPLITS = {
    "spider-pg": {
        "tuning": ["car_1", "concert_singer", "course_teach", "employee_hire_evaluation", "museum_visit", "real_estate_properties"],
        "held-out": ["battle_death", "pets_1", "poker_player", "singer"],
    },
    "defog-instruct": {
        "tuning": ["broker", "car_dealership"],
        "held-out": ["derm_treatment", "ewallet"],
    },
    # Fifteen Spider training databases, held out entirely: run and reported, never tuned on.
    "spider-train": {
        "held-out": ["aircraft", "architecture", "customers_and_invoices", "dorm_1", "election", "icfp_1",
                     "insurance_policies", "medicine_enzyme_interaction", "movie_1", "music_1", "scientist_1",
                     "soccer_2", "storm_record", "tracking_orders", "tracking_software_problems"],
    },
}
NO_KEYS_SUFFIX = "__nokeys"
ADVANCED_ID_BASE = 100

DROP_KEYS_SQL = """
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.conrelid::regclass AS t, c.conname FROM pg_constraint c
             JOIN pg_namespace n ON n.oid = c.connamespace
             WHERE c.contype = 'f' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'nl2sql') LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname);
    END LOOP;
    FOR r IN SELECT c.conrelid::regclass AS t, c.conname FROM pg_constraint c
             JOIN pg_namespace n ON n.oid = c.connamespace
             WHERE c.contype IN ('p', 'u') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'nl2sql') LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname);
    END LOOP;
END
$$
"""


def part_of(bench, db):
    base = db[: -len(NO_KEYS_SUFFIX)] if db.endswith(NO_KEYS_SUFFIX) else db
    for part, dbs in SPLITS[bench].items():
        if base in dbs:
            return part
    return "other"


def questions(bench):
    """[{id, db, question, gold, hint, suite, category}] of a benchmark."""
    if bench in ("spider-pg", "spider-train"):
        items = json.loads((bench_dir(bench) / "questions.json").read_text())
        for q in items:
            q.update(hint=None, suite="dev", category=None)
        return items
    out = []
    d = bench_dir(bench)
    for suite, base in (("basic", 0), ("advanced", ADVANCED_ID_BASE)):
        with open(d / f"instruct_{suite}_postgres.csv", newline="") as f:
            for i, r in enumerate(csv.DictReader(f)):
                out.append({"id": base + i, "db": r["db_name"], "question": r["question"], "gold": r["query"],
                            "hint": (r.get("instructions") or "").strip() or None,
                            "suite": suite, "category": r["query_category"]})
    return out


def glossary_items(text):
    """A glossary's definitions, one per top-level "- " bullet (indented lines stay with theirs)."""
    items = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        if line.startswith("- ") or not items:
            items.append(line[2:].strip() if line.startswith("- ") else line.strip())
        else:
            items[-1] += "\n" + line.rstrip()
    return items


def definitions(bench, db):
    """What a DBA would store once as instructions for `db`: its glossary's definitions and the
    distinct definitions its questions come with (defog-instruct's `instructions`, one a line);
    none for Spider's."""
    if bench != "defog-instruct":
        return []
    meta = json.loads((bench_dir(bench) / "meta" / f"{db}.json").read_text())
    out = glossary_items(meta.get("glossary", ""))
    for q in questions(bench):
        if q["db"] != db or not q["hint"]:
            continue
        for line in q["hint"].splitlines():
            line = line.strip().removeprefix("- ").strip()
            if line and line not in out:
                out.append(line)
    return out


def _psql_file(conn_kw, db, path):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(conn_kw["host"]), "-p", str(conn_kw["port"]),
                    "-U", conn_kw["user"], "-d", db, "-f", str(path)], check=True, stdout=subprocess.DEVNULL)


def _comment_columns(conn, meta):
    """Each column description as COMMENT ON COLUMN, as a DBA would."""
    for table, columns in meta.get("table_metadata", {}).items():
        for c in columns:
            text = (c.get("column_description") or "").strip()
            if not text:
                continue
            parts = table.split(".")
            conn.execute(pgsql.SQL("COMMENT ON COLUMN {} IS {}").format(
                pgsql.Identifier(*(p.lower() for p in parts), c["column_name"].lower()), pgsql.Literal(text)))


def load(conn_kw, bench, db, no_keys):
    """Creates the database from its dump when it is missing (or, for defog-instruct, was loaded
    on another day); returns its name (the keyless copy's with no_keys)."""
    name = db + (NO_KEYS_SUFFIX if no_keys else "")
    today = datetime.date.today().isoformat()
    stamp = f"loaded {today}" + (", keys dropped" if no_keys else "")
    with psycopg.connect(dbname="postgres", autocommit=True, **conn_kw) as c:
        row = c.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (name,)).fetchone()
        fresh = row is not None and (bench != "defog-instruct" or row[0] == stamp)
        if fresh:
            return name
        if row is not None:
            c.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))
        print(f"loading {name}", flush=True)
        c.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    _psql_file(conn_kw, name, bench_dir(bench) / "dumps" / f"{db}.sql")
    with psycopg.connect(dbname=name, autocommit=True, **conn_kw) as c:
        meta = bench_dir(bench) / "meta" / f"{db}.json"
        if meta.exists():
            _comment_columns(c, json.loads(meta.read_text()))
        if no_keys:
            c.execute(DROP_KEYS_SQL)
        c.execute("ANALYZE")
        c.execute(pgsql.SQL("COMMENT ON DATABASE {} IS {}").format(pgsql.Identifier(name), pgsql.Literal(stamp)))
    return name
