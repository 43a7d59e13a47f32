"""PostgreSQL's idioms the alignment rules make sure of, end to end: what runs is what the question
said, whatever the model wrote."""
import pytest

QUESTION = "[window] How many visits were there in the last 2 months, excluding the current month?"


@pytest.fixture
def visits(connect):
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS idiom_visits")
    admin.execute("CREATE TABLE idiom_visits (id int PRIMARY KEY, visited_on date NOT NULL)")
    # Around the window's two ends: the current month's first day and today are outside it, and
    # so is the day before its start.
    admin.execute("""
        INSERT INTO idiom_visits
        SELECT i, d FROM (VALUES
            (1, CURRENT_DATE),
            (2, date_trunc('month', CURRENT_DATE)::date),
            (3, (date_trunc('month', CURRENT_DATE) - INTERVAL '1 day')::date),
            (4, (date_trunc('month', CURRENT_DATE) - INTERVAL '2 months')::date),
            (5, (date_trunc('month', CURRENT_DATE) - INTERVAL '2 months' - INTERVAL '1 day')::date)
        ) AS v(i, d)""")
    yield admin
    admin.execute("DROP TABLE idiom_visits")


def test_a_window_excluding_the_current_month_ends_where_it_starts(visits, mock):
    admin = visits
    admin.execute("SET nl2sql.candidates = 1")
    rows = admin.execute("SELECT nl2sql_run(%s)", (QUESTION,)).fetchall()
    # Visits 3 and 4: the two whole months before this one.
    assert rows == [({"visits": 2},)]
    trace = admin.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    cand = trace["candidates"][0]
    assert cand["aligned"] == (
        "SELECT count(*) AS visits FROM idiom_visits WHERE visited_on >= date_trunc('month', CURRENT_DATE) - INTERVAL '2 months' "
        "AND visited_on < date_trunc('month', CURRENT_DATE)")
    assert cand["rules"] == ["function: the window ends where the current month starts (date_trunc('month', CURRENT_DATE))"]
    # As the model wrote it, the query counts the current month and today too.
    written = admin.execute(cand["sql"]).fetchone()[0]
    assert written > 2
    # The family's setting turns it off: the query runs as written.
    admin.execute("SET nl2sql.align_function = off")
    assert admin.execute("SELECT nl2sql_run(%s)", (QUESTION,)).fetchall() == [({"visits": written},)]
    admin.execute("RESET nl2sql.align_function")
    admin.execute("RESET nl2sql.candidates")
