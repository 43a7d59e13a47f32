#!/usr/bin/env python3
"""Where the vote loses to the oracle, read off a result file of `eval/harness.py`.

Runs every executed candidate of every question again in the harness's cluster (which must be
running: `make eval` leaves it up), groups candidates by their rows as the vote does (order kept
only when the query orders), marks each group right or wrong against the gold query with
nl2sql.compare_results(), and replays a few selection rules on the same groups:

- recorded: what the product chose (its ties go to the cheaper plan, then the faster query);
- vote-earliest: the largest group (a duplicate or a correction counts for the sample it
  answers), non-empty before empty, ties to the group holding the earliest candidate;
- first: the first candidate that executed with rows (the first generator at temperature 0);
- generators: the group that more generators (prompts) agree on, then the vote: agreement
  between differently asked prompts is not sampling noise;
- empty-majority: the vote, where an empty result loses to a non-empty one only when it holds no
  strict majority of the votes (most samples agreeing that nothing matches is an answer).

Prints EX for each and, with --show, the questions where some candidate was right and the vote
was not. Nothing here changes the product: it tells which rule to try in it.

--samples N keeps only the first N samples the model was asked for (round 0, in the order
asked) and the corrections of those: what a smaller nl2sql.candidates would have chosen among
the same answers ("recorded" stays the run's own). The questions where none of them returned
rows in the run, and some other candidate did, are counted too (they stay in the totals): there
the smaller n would have run a correction round, which is not replayed.
"""
import argparse
import json

import psycopg


def some_rows(cands):
    """Whether some of these candidates returned rows in the run."""
    return any(c.get("ok") and (c.get("rows") or 0) > 0 for c in cands)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--host", default="/tmp/nl2sql-eval")
    ap.add_argument("--port", type=int, default=55440)
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--samples", type=int, help="keep only the first N samples and their corrections")
    args = ap.parse_args()
    conns = {}

    def conn(db):
        if db not in conns:
            c = psycopg.connect(host=args.host, port=args.port, user="postgres", dbname=db, autocommit=True)
            c.execute("LOAD 'nl2sql'")
            c.execute("SET statement_timeout = '10s'")
            conns[db] = c
        return conns[db]

    def rows(db, sql):
        try:
            cur = conn(db).execute(sql)
            r = [tuple(None if v is None else str(v) for v in row) for row in cur.fetchall()]
            return r
        except psycopg.Error:
            return None

    def right(db, gold, sql):
        try:
            r = conn(db).execute("SELECT nl2sql.compare_results(%s, %s, 1)", (gold, sql)).fetchone()[0]
            return r["match"] is True
        except psycopg.Error:
            return False

    totals = {"recorded": 0, "vote-earliest": 0, "first": 0, "generators": 0, "empty-majority": 0, "oracle": 0}
    n = 0
    no_rows = 0
    for line in open(args.results):
        rec = json.loads(line)
        if rec.get("error") and not rec.get("candidates"):
            n += 1
            continue
        n += 1
        db = rec["db"]
        cands = rec.get("candidates") or []
        finals = {}
        roots = {}
        for i in range(len(cands)):
            root = i
            while cands[root].get("corrects") is not None:
                root = cands[root]["corrects"]
            roots[i] = root
        kept = set(range(len(cands)))
        if args.samples is not None:
            samples = set([i for i, c in enumerate(cands) if c.get("round") == 0][:args.samples])
            kept = {i for i in kept if roots[i] in samples}
        # A failed candidate answers through its correction: the sample's final candidate.
        for i, c in enumerate(cands):
            if c.get("ok") and i in kept:
                finals[roots[i]] = i if c.get("duplicate_of") is None else c["duplicate_of"]
        groups = []  # [key, [candidate indexes], weight, right]
        for i, c in enumerate(cands):
            if not c.get("ok") or c.get("duplicate_of") is not None or i not in kept:
                continue
            sql = c.get("aligned") or c.get("sql")
            r = rows(db, sql)
            if r is None:
                continue
            ordered = "order by" in sql.lower()
            key = (tuple(r) if ordered else tuple(sorted(r, key=repr)), len(r))
            weight = sum(1 for v in finals.values() if v == i)
            gens = {cands[root].get("generator") for root, v in finals.items() if v == i}
            for g in groups:
                if g[0] == key:
                    g[1].append(i)
                    g[2] += weight
                    g[4] |= gens
                    break
            else:
                groups.append([key, [i], weight, right(db, rec["gold"], sql), gens])
        oracle = any(g[3] for g in groups)
        nonempty = lambda g: g[0][1] > 0
        # Compared on the run's own row counts on both sides (today's data may differ).
        if args.samples is not None and some_rows(cands) and not some_rows([cands[i] for i in kept]):
            no_rows += 1
        vote = sorted(groups, key=lambda g: (not nonempty(g), -g[2], min(g[1])))
        first = sorted(groups, key=lambda g: (not nonempty(g), min(g[1])))
        by_gens = sorted(groups, key=lambda g: (not nonempty(g), -len(g[4]), -g[2], min(g[1])))
        total = sum(g[2] for g in groups)
        weak_empty = lambda g: not nonempty(g) and 2 * g[2] <= total
        majority = sorted(groups, key=lambda g: (weak_empty(g), -g[2], min(g[1])))
        picks = {"vote-earliest": vote, "first": first, "generators": by_gens, "empty-majority": majority}
        for k, v in picks.items():
            totals[k] += bool(v and v[0][3])
        totals["oracle"] += oracle
        totals["recorded"] += bool(rec.get("correct"))
        if args.show and oracle and not rec.get("correct"):
            print(f"#{rec['id']} {db}: {rec['question']}\n  gold: {rec['gold']}")
            for g in vote:
                c = cands[g[1][0]]
                print(f"  {'RIGHT' if g[3] else 'wrong'} w={g[2]} g={len(g[4])} rows={g[0][1]} cands={g[1]} gen={[cands[i].get('generator') for i in g[1]]} {(c.get('aligned') or c.get('sql'))[:160]!r}")
    print(f"{n} questions")
    if args.samples is not None:
        print(f"  the first {args.samples} samples left no rows where all had some: {no_rows} (a correction round would have run)")
    for k, v in totals.items():
        print(f"  {k:15} {v:4} {100.0 * v / max(n, 1):5.1f} %")


if __name__ == "__main__":
    main()
