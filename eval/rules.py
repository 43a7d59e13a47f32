#!/usr/bin/env python3
"""What one alignment rule did to the candidates of a result file of eval/harness.py: each
candidate it fired on is judged as the model wrote it and as aligned, against the harness's
cluster (the same databases, loaded the same day as the run), by the benchmark's rule.

A candidate another rule also changed is judged the same way and counted apart ("with other
rules"): its model-written query lacks those rules' changes too. Whether the winner of a question
changed with the rule is not replayed (the vote saw the aligned candidates only); the question's
own judgement is printed beside."""
import argparse
import json

import psycopg

from harness import candidate_right


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--rule", required=True, help="a substring of the rule's trace line, e.g. 'window ends'")
    ap.add_argument("--host", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    args = ap.parse_args()
    conns = {}
    totals = {"alone": [0, 0, 0], "with other rules": [0, 0, 0]}
    for path in args.results:
        for line in open(path):
            r = json.loads(line)
            fired = [c for c in r["candidates"] if c.get("aligned") and any(args.rule in x for x in c.get("rules") or [])]
            if not fired:
                continue
            db = r.get("dbname") or r["db"]
            if db not in conns:
                conns[db] = psycopg.connect(host=args.host, port=args.port, user="postgres", dbname=db, autocommit=True)
                conns[db].execute("LOAD 'nl2sql'")
            for c in fired:
                before = candidate_right(conns[db], r, c["sql"])
                after = candidate_right(conns[db], r, c["aligned"])
                kind = "alone" if all(args.rule in x for x in c["rules"]) else "with other rules"
                t = totals[kind]
                t[0] += 1
                t[1] += before
                t[2] += after
                print(f"{path.split('/')[-1]} q{r['id']} ({kind}): model's {before}, aligned {after}; question judged {r['correct']}")
    for kind, (n, b, a) in totals.items():
        print(f"{kind}: {n} candidates, right as written {b}, right aligned {a}")


if __name__ == "__main__":
    main()
