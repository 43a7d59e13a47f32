#!/usr/bin/env python3
"""Which instructions nl2sql chooses for each question, without a model.

defog-instruct's definitions are stored once per database as instructions (as
`harness.py --definitions instructions` stores them); each question of the chosen suite is then
explained (`nl2sql_explain`) against a closed endpoint, which traces the choice before the first
call fails. A question's own definitions are the lines of its hint (the basic suite's questions
have none). Printed per database and in all: the questions whose own definitions were all
chosen, and how many instructions were chosen that are not their own (what hints never carry).

    .venv/bin/python eval/choice.py --host /tmp/nl2sql-eval --port 55440 [--no-setup]
        [--suite advanced] [--instructions 5] [--verbose]
"""
import argparse
import json
import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmarks  # noqa: E402
import data  # noqa: E402
import harness  # noqa: E402

BENCH = "defog-instruct"
# Nothing listens here: the pipeline chooses the instructions, then its first call fails.
CLOSED = "http://127.0.0.1:9/v1"


def own_lines(hint):
    return [line.strip().removeprefix("- ").strip() for line in (hint or "").splitlines() if line.strip()]


def explain(conn, question, k):
    conn.execute("SELECT set_config('nl2sql.llm_url', %s, false)", (CLOSED,))
    conn.execute("SELECT set_config('nl2sql.instructions', %s, false)", (str(k),))
    out = conn.execute("SELECT nl2sql_explain(%s)", (question,)).fetchone()[0]
    return out if isinstance(out, dict) else json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=55440)
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--suite", choices=["basic", "advanced"], default="advanced")
    ap.add_argument("--instructions", type=int, default=5, help="nl2sql.instructions (default 5)")
    ap.add_argument("--no-setup", action="store_true", help="the instructions are stored already")
    ap.add_argument("--verbose", action="store_true", help="a line per question")
    args = ap.parse_args()
    data.require("defog-instruct")
    conn_kw = {"host": args.host, "port": args.port, "user": args.user}
    items = [q for q in benchmarks.questions(BENCH) if q["suite"] == args.suite]
    totals = {}
    for db in sorted({q["db"] for q in items}):
        if not args.no_setup:
            harness.prepare_database(conn_kw, BENCH, db, instructions=True)
        with psycopg.connect(dbname=db, autocommit=True, **conn_kw) as conn:
            conn.execute("LOAD 'nl2sql'")
            for q in (q for q in items if q["db"] == db):
                trace = explain(conn, q["question"], args.instructions)
                chosen = [" ".join(i["text"].split()) for i in trace.get("instructions") or []]
                own = [" ".join(line.split()) for line in own_lines(q["hint"])]
                found = sum(1 for line in own if line in chosen)
                extra = sum(1 for line in chosen if line not in own)
                t = totals.setdefault(db, [0, 0, 0, 0])
                t[0] += 1
                t[1] += found == len(own)
                t[2] += len(chosen)
                t[3] += extra
                scored = [(" ".join(i["text"].split()), i["score"]) for i in trace.get("instructions") or []]
                if args.verbose:
                    print(f"#{q['id']} {db}: own {found}/{len(own)}, chosen {len(chosen)}, extra {extra}: {q['question'][:70]!r}")
                    for line, sc in scored:
                        print(f"    {'own  ' if line in own else 'extra'} {sc:.2f} {line[:100]}")
    print(f"{'database':<16} {'questions':>9} {'own all chosen':>15} {'chosen (mean)':>14} {'extra (mean)':>13}")
    grand = [0, 0, 0, 0]
    for db, t in sorted(totals.items()):
        grand = [a + b for a, b in zip(grand, t)]
        print(f"{db:<16} {t[0]:>9} {t[1]:>15} {t[2] / t[0]:>14.2f} {t[3] / t[0]:>13.2f}")
    if grand[0]:
        print(f"{'all':<16} {grand[0]:>9} {grand[1]:>15} {grand[2] / grand[0]:>14.2f} {grand[3] / grand[0]:>13.2f}")


if __name__ == "__main__":
    main()
