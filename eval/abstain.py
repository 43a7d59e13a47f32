#!/usr/bin/env python3
"""Abstention, both sides: how many questions the databases cannot answer nl2sql refuses
(eval/unanswerable.json, written for this), and how many answerable benchmark questions it
refuses wrongly (spider-pg and defog-instruct, every question).

The refusal of a question about nothing the role's tables hold (nl2sql.refuse_unrelated) is made
before the model is asked, so this runs without a model: the endpoint is a closed port, and a
question that is not refused fails reaching it. Prints the counts per benchmark and kind, and
every false refusal.

  .venv/bin/python eval/abstain.py [--no-setup] [--instructions]
"""
import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import psycopg

import benchmarks
import harness

ROOT = Path(__file__).resolve().parent.parent
REFUSED = "nl2sql abstains: the question is about nothing this database holds"


def refused(conn, question, hint=None):
    """Whether nl2sql refuses the question as unrelated; the error's message otherwise."""
    try:
        conn.execute("SELECT nl2sql(%s, %s)", (question, hint))
        return False, "answered"
    except psycopg.Error as e:
        return e.sqlstate == "P0002" and e.diag.message_primary == REFUSED, e.diag.message_primary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-setup", action="store_true", help="databases and extension are ready")
    ap.add_argument("--instructions", action="store_true",
                    help="defog-instruct's definitions stored as instructions, its questions asked without hints")
    ap.add_argument("--pgdir", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    args = ap.parse_args()
    conn_kw = harness.start_cluster(args)
    unanswerable = json.loads((ROOT / "eval" / "unanswerable.json").read_text())["questions"]
    answerable = []
    for bench in ("spider-pg", "defog-instruct"):
        for q in benchmarks.questions(bench):
            hint = None if args.instructions else q["hint"]
            answerable.append({"bench": bench, "db": q["db"], "question": q["question"], "hint": hint, "id": q["id"]})
    bench_of = {q["db"]: q["bench"] for q in answerable}
    if not args.no_setup:
        for db in sorted(bench_of):
            harness.prepare_database(conn_kw, bench_of[db], db, instructions=args.instructions and bench_of[db] == "defog-instruct")
    conns = {}

    def conn_for(db):
        if db not in conns:
            c = psycopg.connect(dbname=db, autocommit=True, **conn_kw)
            c.execute("SET nl2sql.llm_url = 'http://127.0.0.1:9/v1'")
            c.execute("SET nl2sql.llm_max_retries = 0")
            c.execute("SET nl2sql.history = off")
            c.execute("SET nl2sql.refuse_unrelated = on")
            conns[db] = c
        return conns[db]

    refusals = Counter()
    asked = Counter()
    for q in unanswerable:
        key = (bench_of[q["db"]], q["kind"])
        asked[key] += 1
        ok, why = refused(conn_for(q["db"]), q["question"])
        refusals[key] += ok
        if not ok:
            print(f"  not refused ({q['db']}, {q['kind']}): {q['question']!r}", file=sys.stderr)
    false = Counter()
    total = Counter()
    for q in answerable:
        total[q["bench"]] += 1
        ok, why = refused(conn_for(q["db"]), q["question"], q["hint"])
        if ok:
            false[q["bench"]] += 1
            print(f"  FALSE REFUSAL {q['bench']} #{q['id']} ({q['db']}): {q['question']!r}", file=sys.stderr)
    for c in conns.values():
        c.close()
    print("unanswerable questions refused (eval/unanswerable.json):")
    for bench in ("spider-pg", "defog-instruct"):
        for kind in ("general", "domain", "column"):
            n = asked[(bench, kind)]
            print(f"  {bench:15} {kind:8} {refusals[(bench, kind)]:3} / {n:3}")
    n_all, r_all = sum(asked.values()), sum(refusals.values())
    print(f"  all                      {r_all:3} / {n_all:3}  {100 * r_all / n_all:.1f} %")
    print("answerable benchmark questions refused:")
    for bench in ("spider-pg", "defog-instruct"):
        print(f"  {bench:15} {false[bench]:3} / {total[bench]:3}  {100 * false[bench] / total[bench]:.1f} %")


if __name__ == "__main__":
    main()
