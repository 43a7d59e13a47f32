#!/usr/bin/env python3
"""Replays the model's stored answers through the installed build: what the alignment rules
make of them now, whether they run, and whether they are right. No model is called: a scripted
endpoint on 127.0.0.1 answers every request of a question with that question's stored answer,
so a rule's reach is measured on real model output, the same answers before and after a change.

Reads a results file of eval/harness.py (its stored candidates, the model's first answers,
before any correction) and replays those whose error matches --error (a regular expression on
PostgreSQL's message; every first answer when omitted). Each is asked on the full pipeline
(its alignment rules; one candidate, no correction), with the benchmark's hint, and judged by
the benchmark's rule.
Prints, for each replayed answer, the rules that fired and the outcome, then the counts.

  .venv/bin/python eval/replay.py eval/results/full-defog-instruct-all-w2.jsonl --error 'column .* does not exist'

Databases must be loaded (a harness.py run of the day); results are judged against today's
data, so a file from another day replays date questions against other rows.
"""
import argparse
import json
import re
import sys
from collections import Counter

import psycopg

import endpoint
import harness

ANSWER = {"sql": ""}


def scripted():
    """The scripted model: every chat request gets ANSWER["sql"] in one sql block; its URL."""
    def respond(body, headers, path):
        content = "```sql\n" + ANSWER["sql"] + "\n```"
        return 200, json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                             "finish_reason": "stop"}],
                                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()

    return endpoint.serve(respond)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a results file of eval/harness.py (.jsonl)")
    ap.add_argument("--error", help="replay only first answers whose error matches this regular expression")
    ap.add_argument("--host", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    ap.add_argument("--user", default="postgres")
    args = ap.parse_args()
    conn_kw = {"host": args.host, "port": args.port, "user": args.user}
    pattern = re.compile(args.error) if args.error else None
    url = scripted()
    items = [json.loads(line) for line in open(args.results)]
    conns = {}
    counts = Counter()
    for item in items:
        seen = set()
        for cand in item.get("candidates") or []:
            sql = cand.get("sql")
            if cand.get("round") != 0 or not sql or sql in seen:
                continue
            if pattern and not pattern.search(cand.get("error") or ""):
                continue
            seen.add(sql)
            conn = conns.get(item["db"])
            if conn is None:
                conn = conns[item["db"]] = psycopg.connect(dbname=item["db"], autocommit=True, **conn_kw)
                harness.configure(conn, {**harness.DEFAULTS, "nl2sql.llm_url": url, "nl2sql.candidates": "1",
                                         "nl2sql.llm_n": "off", "nl2sql.max_corrections": "0",
                                         "nl2sql.history": "off", "nl2sql.llm_max_retries": "0"})
            ANSWER["sql"] = sql
            trace = conn.execute("SELECT nl2sql_explain(%s, %s)", (item["question"], item.get("hint"))).fetchone()[0]
            first = (trace.get("candidates") or [{}])[0]
            rules = first.get("rules") or []
            ran = bool(first.get("ok"))
            right = ran and harness.candidate_right(conn, item, first.get("aligned") or first.get("sql"))
            was_right = bool(cand.get("ok")) and harness.candidate_right(conn, item, cand.get("aligned") or sql)
            counts["replayed"] += 1
            counts["rule fired"] += bool(rules)
            counts["ran before"] += bool(cand.get("ok"))
            counts["runs now"] += ran
            counts["right before"] += was_right
            counts["right now"] += right
            state = "right" if right else "runs" if ran else (first.get("error") or "fails")
            print(f"#{item['id']} ({item['db']}) {state}; rules: {rules}", file=sys.stderr)
    for c in conns.values():
        c.close()
    for k in ("replayed", "rule fired", "ran before", "runs now", "right before", "right now"):
        print(f"  {k:12} {counts[k]:4}")


if __name__ == "__main__":
    main()
