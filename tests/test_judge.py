"""The evaluation's sql-eval judging rule (eval/judge.py): no server needed."""
import datetime
import decimal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "eval"))
import judge  # noqa: E402


def test_braces_stand_for_every_non_empty_subset_and_group_by_follows():
    qs = judge.acceptable_queries("SELECT {a, b}, count(*) FROM t GROUP BY {}")
    assert qs == [
        "SELECT a, count(*) FROM t GROUP BY a",
        "SELECT b, count(*) FROM t GROUP BY b",
        "SELECT a, b, count(*) FROM t GROUP BY a, b",
    ]
    assert judge.acceptable_queries("SELECT 1; SELECT 2;") == ["SELECT 1", "SELECT 2"]


def test_extra_columns_and_column_order_do_not_matter():
    gold = [(1, "x"), (2, "y")]
    assert judge.matches(gold, 2, [("y", 2, "extra"), ("x", 1, "extra")], 3)
    assert judge.matches(gold, 2, [("x", 1), ("y", 2)], 2)


def test_values_must_agree_row_by_row_not_only_column_by_column():
    gold = [(1, "x"), (2, "y")]
    # each column holds the right values, but paired wrongly
    assert not judge.matches(gold, 2, [(1, "y"), (2, "x")], 2)
    # a missing gold column
    assert not judge.matches(gold, 2, [(1,), (2,)], 1)
    # a row too many
    assert not judge.matches(gold, 2, [(1, "x"), (2, "y"), (3, "z")], 2)


def test_numbers_compare_by_value_dates_by_iso_form():
    gold = [(decimal.Decimal("1.50"), datetime.date(2024, 1, 2))]
    assert judge.matches(gold, 2, [(1.5, datetime.date(2024, 1, 2))], 2)
    assert judge.matches([(1 / 3,)], 1, [(decimal.Decimal("0.333333333"),)], 1)
    assert not judge.matches([(1.5,)], 1, [(1.6,)], 1)
    assert judge.matches([(None, 1)], 2, [(None, 1)], 2)


def test_empty_gold_needs_an_empty_answer():
    assert judge.matches([], 1, [], 1)
    assert not judge.matches([], 1, [(1,)], 1)


def test_any_acceptable_query_will_do():
    golds = [([(1,)], 1), ([(2,)], 1)]
    assert judge.judge(golds, ([(2,)], 1))
    assert not judge.judge(golds, ([(3,)], 1))
