#!/usr/bin/env python3
"""Recomputes the oracle bound and the per-generator shares of a result file of eval/harness.py
(records written before those fields counted duplicates), against the harness's cluster.

A --no-keys record is judged again in the database with its keys (same data), as the harness
now judges it: a gold query that selects a table's columns grouped by its primary key runs only
while the key is declared, and such questions used to count as wrong whatever the answer."""
import argparse
import json

import psycopg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--host", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    args = ap.parse_args()
    conns, out = {}, []
    for line in open(args.results):
        r = json.loads(line)
        if r["db"] not in conns:
            conns[r["db"]] = psycopg.connect(host=args.host, port=args.port, user="postgres", dbname=r["db"], autocommit=True)
            conns[r["db"]].execute("LOAD 'nl2sql'")
        if r.get("no_keys") and r.get("predicted") and r.get("bench", "spider-pg") == "spider-pg":
            m = conns[r["db"]].execute("SELECT nl2sql.compare_results(%s, %s, 1)", (r["gold"], r["predicted"])).fetchone()[0]
            r["correct"] = m["match"] is True
            r["correct_any_column_order"] = m.get("match_any_column_order") is True
        if r["db"] not in conns:
            conns[r["db"]] = psycopg.connect(host=args.host, port=args.port, user="postgres", dbname=r["db"], autocommit=True)
            conns[r["db"]].execute("LOAD 'nl2sql'")
        conn, cands, right = conns[r["db"]], r["candidates"], {}
        r["oracle"], r["generators_right"] = r["correct"], {}
        for c in cands:
            ran = cands[c["duplicate_of"]] if c.get("duplicate_of") is not None else c
            q = ran.get("aligned") or ran.get("sql")
            if not q or not ran.get("ok") or ran.get("rows") is None:
                continue
            if q not in right:
                m = conn.execute("SELECT nl2sql.compare_results(%s, %s, 1)", (r["gold"], q)).fetchone()[0]
                right[q] = m["match"] is True
            r["oracle"] = r["oracle"] or right[q]
            g = c.get("generator")
            if g:
                r["generators_right"][g] = r["generators_right"].get(g, False) or right[q]
        out.append(r)
    with open(args.results, "w") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")
    n = len(out)
    print(f"{n} questions: EX {100.0 * sum(r['correct'] for r in out) / n:.1f}, oracle {100.0 * sum(r['oracle'] for r in out) / n:.1f}")
    for g in sorted({g for r in out for g in r["generators_right"]}):
        print(f"  {g}: some candidate right on {100.0 * sum(1 for r in out if r['generators_right'].get(g)) / n:.1f} %")


if __name__ == "__main__":
    main()
