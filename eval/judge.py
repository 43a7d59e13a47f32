"""Defog sql-eval's judging rule, as the defog-instruct README states it.

The gold `query` may hold several acceptable queries separated by `;`; the first `{a, b}` in one
of them stands for any non-empty subset of those columns (`GROUP BY {}` takes the same subset).
An answer is right when, for some acceptable query, its rows equal the answer's exactly, or each
of the gold result's columns matches a distinct column of the answer holding the same values
(sorted, so the row counts must agree), and the rows over those matched columns are the same
set. Column names, column order and extra answer columns do not matter; values compare by
kind: numbers to six significant digits, dates and times by their ISO form.
"""
import datetime
import decimal
import itertools
import re

BRACES = re.compile(r"\{([^{}]*)\}")


def acceptable_queries(gold):
    """Every query the gold text accepts (sql-eval's get_all_minimal_queries)."""
    out = []
    for q in gold.split(";"):
        q = q.strip()
        if not q:
            continue
        m = BRACES.search(q)
        if not m or m.group(1).strip() == "":
            out.append(q)
            continue
        options = [c.strip() for c in m.group(1).split(",") if c.strip()]
        left, right = q[: m.start()], q[m.end():]
        for r in range(1, len(options) + 1):
            for subset in itertools.combinations(options, r):
                cols = ", ".join(subset)
                out.append(left + cols + right.replace("GROUP BY {}", f"GROUP BY {cols}"))
    return out


def norm(v):
    """A value as the rule compares it (hashable)."""
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float, decimal.Decimal)):
        f = float(v)
        if f != f:  # NaN
            return ("nan",)
        return ("num", float(f"{f:.6g}"))
    if isinstance(v, datetime.datetime):
        return ("ts", v.replace(tzinfo=None).isoformat())
    if isinstance(v, (datetime.date, datetime.time)):
        return ("ts", v.isoformat())
    if isinstance(v, datetime.timedelta):
        return ("interval", v.total_seconds())
    return ("text", str(v))


def _sort_key(v):
    return (v[0], str(v[1:]))


def matches(gold_rows, gold_width, answer_rows, answer_width):
    """Whether an answer (rows of `answer_width` columns) is right for one gold result."""
    g = [tuple(norm(v) for v in r) for r in gold_rows]
    a = [tuple(norm(v) for v in r) for r in answer_rows]
    if g == a and gold_width == answer_width:
        return True
    if not g:
        # sql-eval: an empty gold result is never a subset; only the exact match above counts
        return not a and gold_width == answer_width
    if len(g) != len(a):
        return False
    gcols = [sorted((r[i] for r in g), key=_sort_key) for i in range(gold_width)]
    acols = [sorted((r[j] for r in a), key=_sort_key) for j in range(answer_width)]
    used, chosen = set(), []
    for gc in gcols:
        j = next((j for j in range(answer_width) if j not in used and acols[j] == gc), None)
        if j is None:
            return False
        used.add(j)
        chosen.append(j)
    return set(g) == {tuple(r[j] for j in chosen) for r in a}


def judge(golds, answer):
    """golds: [(rows, width)] of the acceptable queries that ran; answer: (rows, width)."""
    return any(matches(rows, width, answer[0], answer[1]) for rows, width in golds)
