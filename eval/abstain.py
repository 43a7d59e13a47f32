#!/usr/bin/env python3
"""Abstention, both sides: how many questions the databases cannot answer nl2sql refuses
(eval/unanswerable.json, written for this), and how many answerable benchmark questions it
refuses wrongly (spider-pg and defog-instruct, every question).

The refusal (nl2sql.refuse_unrelated) is decided before any query is written: by the question's
words, and where none is matched by the model's yes or no on whether the tables hold what it
asks about. With --model URL a proxy in front of that endpoint passes the yes-or-no questions on
and fails every other request (a question that is not refused fails writing its query, quickly);
without it the endpoint is a closed port and the words decide alone. Prints the counts per
benchmark and kind, and every false refusal.

With --generate the questions the words and the model let through go on to their queries, and
every query failing on a name the question asked for refuses too (the unanswerable side only).

  .venv/bin/python eval/abstain.py [--no-setup] [--instructions] [--model http://127.0.0.1:8080/v1 [--generate [--grammar]]]
"""
import argparse
import json
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import psycopg

import benchmarks
import data
import endpoint
import harness

ROOT = Path(__file__).resolve().parent.parent
REFUSED = ("nl2sql abstains: the question is about nothing this database holds",
           "nl2sql abstains: the tables do not hold what the question asks about")


# The DETAIL of a refusal after generation: every query failed on a name the question asked for.
MISSING = "No table, column or description the role may read matches"
WHEN = Counter()


def refused(conn, question, hint=None):
    """Whether nl2sql refuses the question as unrelated; the error's message otherwise. Counts in
    WHEN whether a refusal came before generation or after it."""
    try:
        conn.execute("SELECT nl2sql(%s, %s)", (question, hint))
        return False, "answered"
    except psycopg.Error as e:
        ok = e.sqlstate == "P0002" and e.diag.message_primary in REFUSED
        if ok:
            WHEN["after generation" if (e.diag.message_detail or "").startswith(MISSING) else "before generation"] += 1
        return ok, e.diag.message_primary


ANSWERS = Counter()
# The answerability task's last words (core/src/prompt/text/answerable_task.txt).
ANSWERABLE = "Answer with one word: yes or no."


def proxy(upstream):
    """A local endpoint passing the answerability requests to `upstream` and failing the rest;
    returns its URL."""
    def respond(body, headers, path):
        try:
            last = json.loads(body)["messages"][-1]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            last = ""
        if ANSWERABLE not in last:
            return 503, None
        forward = {"Content-Type": "application/json"}
        if headers.get("Authorization"):
            forward["Authorization"] = headers["Authorization"]
        req = urllib.request.Request(upstream.rstrip("/") + path.removeprefix("/v1"), data=body, headers=forward)
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                reply = r.read()
            word = json.loads(reply)["choices"][0]["message"]["content"].strip().strip(".!\"'*`").lower()
        except Exception:  # counted, then failed: the question falls back to its words
            ANSWERS["failed"] += 1
            return 502, None
        ANSWERS[word if word in ("yes", "no") else "other"] += 1
        return 200, reply

    return endpoint.serve(respond)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-setup", action="store_true", help="databases and extension are ready")
    ap.add_argument("--instructions", action="store_true",
                    help="defog-instruct's definitions stored as instructions, its questions asked without hints")
    ap.add_argument("--model", help="the model endpoint that answers the yes-or-no questions (OpenAI-compatible)")
    ap.add_argument("--generate", action="store_true",
                    help="with --model: the unanswerable questions go on to their queries (nl2sql's defaults, "
                         "the full pipeline), so failed queries can refuse too; the answerable side is skipped "
                         "(measure it with harness.py --configs full-refuse)")
    ap.add_argument("--grammar", action="store_true",
                    help="with --generate: queries written under the grammar of the names each prompt shows "
                         "(nl2sql.grammar = auto), which offers the model a name for 'nothing fits'")
    ap.add_argument("--pgdir", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    args = ap.parse_args()
    data.require("spider-pg", "defog-instruct")
    conn_kw = harness.start_cluster(args)
    if args.generate and not args.model:
        ap.error("--generate needs --model")
    if args.grammar and not args.generate:
        ap.error("--grammar needs --generate")
    url = args.model if args.generate else proxy(args.model) if args.model else "http://127.0.0.1:9/v1"
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
            c.execute("SELECT set_config('nl2sql.llm_url', %s, false)", (url,))
            c.execute("SET nl2sql.llm_max_retries = 0")
            c.execute("SET nl2sql.llm_timeout = 120000")
            c.execute("SET nl2sql.history = off")
            c.execute("SET nl2sql.refuse_unrelated = on")
            if args.grammar:
                c.execute("SET nl2sql.grammar = auto")
            if not args.instructions:
                c.execute("SET nl2sql.instructions = 0")
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
    for q in [] if args.generate else answerable:
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
    print(f"  refused {dict(WHEN)}")
    if args.model and not args.generate:
        print(f"the model's answers: {dict(ANSWERS)}")
    if args.generate:
        return
    print("answerable benchmark questions refused:")
    for bench in ("spider-pg", "defog-instruct"):
        print(f"  {bench:15} {false[bench]:3} / {total[bench]:3}  {100 * false[bench] / total[bench]:.1f} %")


if __name__ == "__main__":
    main()
