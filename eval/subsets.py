#!/usr/bin/env python3
"""What fewer candidates would have answered, read off a run that sampled all of them.

Takes a result file of `eval/harness.py` whose config asked for n candidates in one wave
(`full-n5-one-wave`: nl2sql.candidates = 5, nl2sql.agreement = 0) and replays adaptive n for
k = 1..n on the same samples, in the order they were drawn: a first wave of two that stops when
both return the same non-empty rows, else the first k; the largest group of executed, non-empty
candidates wins (ties: the earlier sample). Prints EX and the completion tokens the samples used
(the cost that dominates on a local CPU model, which decodes them one after another).

Approximations: corrections are left out (a failed sample counts for nothing), and ties go to
the earlier sample instead of the faster query. Rows are compared by nl2sql.compare_results()
in the harness's cluster, which must be running (`make eval` leaves it up).
"""
import argparse
import json
import statistics

import psycopg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="eval/results/full-n5-one-wave-….jsonl")
    ap.add_argument("--host", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    args = ap.parse_args()
    conns = {}

    def same(db, reference, predicted):
        if db not in conns:
            conns[db] = psycopg.connect(host=args.host, port=args.port, user="postgres", dbname=db, autocommit=True)
            conns[db].execute("LOAD 'nl2sql'")
        r = conns[db].execute("SELECT nl2sql.compare_results(%s, %s, 1)", (reference, predicted)).fetchone()[0]
        return r["match"] is True

    questions = []
    for line in open(args.results):
        r = json.loads(line)
        cands = r["candidates"]
        samples = []
        for c in (c for c in cands if c["round"] == 0):
            ran = cands[c["duplicate_of"]] if c.get("duplicate_of") is not None else c
            ok = ran.get("ok") and (ran.get("rows") or 0) > 0
            samples.append((ran.get("aligned") or ran.get("sql")) if ok else None)
        tokens = [c.get("completion_tokens") or 0 for c in r.get("calls", []) if c["stage"] == "generate"]
        right = [s is not None and same(r["db"], r["gold"], s) for s in samples]
        questions.append((r["db"], samples, right, tokens))
    n = max(len(s) for _, s, _, _ in questions)

    def replay(k):
        ex, used_tokens, stopped = [], [], 0
        for db, samples, right, tokens in questions:
            first = samples[:2]
            if k >= 2 and len(first) == 2 and all(first) and same(db, first[0], first[1]):
                chosen, used = 0, 2
                stopped += 1
            else:
                used = min(k, len(samples))
                groups = []
                for i in range(used):
                    if samples[i] is None:
                        continue
                    for g in groups:
                        if same(db, samples[g[0]], samples[i]):
                            g.append(i)
                            break
                    else:
                        groups.append([i])
                chosen = max(groups, key=len)[0] if groups else None
            ex.append(chosen is not None and right[chosen])
            used_tokens.append(sum(tokens[:used]))
        return 100.0 * sum(ex) / len(ex), statistics.median(used_tokens), statistics.mean(used_tokens), stopped

    print(f"{len(questions)} questions, {n} samples each, from {args.results}")
    print(f"{'k':>3}{'EX':>7}{'compl tok p50':>15}{'mean':>7}{'stopped at 2':>14}")
    for k in range(1, n + 1):
        ex, p50, mean, stopped = replay(k)
        print(f"{k:>3}{ex:>7.1f}{p50:>15.0f}{mean:>7.0f}{stopped:>14}")
    oracle = sum(any(r) for _, _, r, _ in questions)
    print(f"some sample right: {100.0 * oracle / len(questions):.1f} %")
    for c in conns.values():
        c.close()


if __name__ == "__main__":
    main()
