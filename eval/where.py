#!/usr/bin/env python3
"""Where the column lives that first answers read after a qualifier whose relation lacks it
(`column t.x does not exist`), per result file of eval/harness.py and per part: in a table the
query reads, in a table one key away from one it reads (many rows to one: the key is on the read
table; one row to many: on the other), farther, or in no table. Keys are the declared ones and
the relationships nl2sql stores (confirmed or profiled). Counts only: it prints no question and
no query, so it may be run on a held-out benchmark. Reads the databases of a harness run of the
day (its own cluster by default).

    .venv/bin/python eval/where.py eval/results/full-grammar-defog-instruct-all-r27.jsonl
"""
import argparse
import json
import re
from collections import Counter

import psycopg

from names import fails_on_a_name, first_round, kind

COLUMNS = """
SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'nl2sql') AND n.nspname NOT LIKE 'pg_toast%'"""
KEYS = """
SELECT f.conrelid::regclass::text, f.confrelid::regclass::text FROM pg_catalog.pg_constraint f WHERE f.contype = 'f'
UNION
SELECT from_relation::text, to_relation::text FROM nl2sql.relationships WHERE source IN ('confirmed', 'inferred')"""


def bare(name):
    """A relation's name without its schema or quotes, folded as written names are."""
    return name.rsplit(".", 1)[-1].strip('"').lower()


def catalog(conn):
    columns = {}
    for table, column in conn.execute(COLUMNS):
        columns.setdefault(table.lower(), set()).add(column.lower())
    keys = [(bare(a), bare(b)) for a, b in conn.execute(KEYS)]
    return columns, keys


def where(sql, column, columns, keys):
    read = {bare(m) for m in re.findall(r'\b(?:FROM|JOIN)\s+([\w."]+)', sql, re.I)} & set(columns)
    holders = {t for t, cols in columns.items() if column in cols}
    if not holders:
        return "in no table"
    if holders & read:
        return "in a table the query reads"
    if any(a in read and b in holders for a, b in keys):
        return "one key away, many rows to one"
    if any(b in read and a in holders for a, b in keys):
        return "one key away, one row to many"
    return "farther"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--host", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    ap.add_argument("--user", default="postgres")
    args = ap.parse_args()
    cats = {}
    for path in args.results:
        rows = [json.loads(line) for line in open(path) if line.strip()]
        counts = {}
        for r in rows:
            round0 = first_round(r)
            if not round0 or not fails_on_a_name(round0[0]) or kind(round0[0]) != "qualified column":
                continue
            m = re.match(r'column "?([^" ]+?)"?\.(?:"([^"]+)"|(\S+)) does not exist', round0[0].get("error") or "")
            if not m:
                counts.setdefault(r.get("part", "all"), Counter())["error not read"] += 1
                continue
            column = (m.group(2) or m.group(3)).lower()
            db = r.get("dbname") or r["db"]
            if db not in cats:
                with psycopg.connect(dbname=db, host=args.host, port=args.port, user=args.user, autocommit=True) as conn:
                    cats[db] = catalog(conn)
            counts.setdefault(r.get("part", "all"), Counter())[where(round0[0].get("aligned") or round0[0].get("sql") or "", column, *cats[db])] += 1
        print(path.rsplit("/", 1)[-1])
        for part, c in sorted(counts.items()):
            print(f"  {part}: {dict(sorted(c.items()))}")


if __name__ == "__main__":
    main()
