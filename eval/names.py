#!/usr/bin/env python3
"""Counts, per result file of eval/harness.py, what "Only names that exist" is measured by:
questions right, first answers that fail on a name (42703, 42P01, a missing FROM-clause
entry), distinct first-round candidates that do, answers writing the grammar's `unknown_`
name, the kind of name those first answers fail on (a qualified column, a bare column, an
undeclared qualifier, a relation), p50/p90 latency and the model's completion tokens a second (median call, extraction
left out), for the whole file and, where it holds more than one, for each part (tuning,
held-out). Counts only: it prints no question, so it may be run on a held-out benchmark.

    .venv/bin/python eval/names.py eval/results/full-spider-train-all-t10.jsonl ...
"""
import json
import re
import statistics
import sys

NAME_STATES = ("42703", "42P01")


def fails_on_a_name(candidate):
    error = candidate.get("error") or ""
    return (candidate.get("sqlstate") in NAME_STATES
            or bool(re.match(r"(column|relation) .* does not exist", error))
            or "missing FROM-clause entry" in error)


def kind(candidate):
    """Which name a failing candidate's error reads: a qualified column (`s.nme`), a bare column, a
    qualifier no FROM declares, a relation."""
    error = candidate.get("error") or ""
    if "missing FROM-clause entry" in error:
        return "undeclared qualifier"
    if re.match(r'column "?[^" ]+"?\.', error):
        return "qualified column"
    if error.startswith("column "):
        return "bare column"
    if error.startswith("relation "):
        return "relation"
    return "other"


def first_round(row):
    """The row's first-round candidates, the first answer first."""
    return [c for c in (row.get("candidates") or []) if c.get("round") == 0]


def count(rows):
    first, distinct, distinct_failing, unknown = 0, 0, 0, 0
    kinds = {}
    for r in rows:
        round0 = first_round(r)
        if round0 and fails_on_a_name(round0[0]):
            first += 1
            kinds[kind(round0[0])] = kinds.get(kind(round0[0]), 0) + 1
        seen = set()
        for c in round0:
            if c.get("duplicate_of") is not None or c.get("sql") in seen:
                continue
            seen.add(c.get("sql"))
            distinct += 1
            distinct_failing += fails_on_a_name(c)
        unknown += "unknown_" in (r.get("predicted") or "")
    return first, distinct, distinct_failing, unknown, kinds


def summary(label, rows):
    n = len(rows)
    right = sum(1 for r in rows if r["correct"])
    first, distinct, distinct_failing, unknown, kinds = count(rows)
    latency = sorted(r["latency_ms"] / 1000 for r in rows)
    rates = [c["completion_tokens"] / (c["latency_ms"] / 1000) for r in rows for c in (r.get("calls") or [])
             if c.get("stage") != "extract" and c.get("completion_tokens") and c.get("latency_ms")]
    print(f"{label}: n={n} right={right} ({100 * right / n:.1f} %) "
          f"first answers failing on a name={first} ({100 * first / n:.1f} %) "
          f"distinct first-round candidates={distinct}, failing on a name={distinct_failing} "
          f"unknown_={unknown} p50={statistics.median(latency):.2f} s p90={latency[int(0.9 * (n - 1))]:.2f} s "
          f"tokens/s={statistics.median(rates) if rates else 0:.1f} "
          f"timed out={sum(1 for r in rows if r.get('sqlstate') == '57014')} "
          f"first answers failing on a name by kind={dict(sorted(kinds.items()))}")


def main(paths):
    for path in paths:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if not rows:
            print(f"{path}: empty")
            continue
        name = path.rsplit('/', 1)[-1]
        summary(name, rows)
        parts = sorted({r.get("part") for r in rows if r.get("part")})
        if len(parts) > 1:
            # each part on its own line: the held-out part counted, never printed
            for part in parts:
                summary(f"  {part}", [r for r in rows if r.get("part") == part])


if __name__ == "__main__":
    main(sys.argv[1:])
