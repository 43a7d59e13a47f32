"""Questions about nothing the database holds are refused before the model is asked
(nl2sql.refuse_unrelated, off by default)."""
import psycopg
import pytest
from psycopg import errors


def chat_requests(mock):
    return [r for r in mock.requests() if r["path"].endswith("/chat/completions")]


@pytest.fixture
def conn(connect):
    c = connect()
    c.execute("SET nl2sql.refuse_unrelated = on")
    return c


def test_a_question_about_nothing_the_tables_hold_is_refused_without_asking_the_model(conn, mock):
    with pytest.raises(errors.NoDataFound) as e:
        conn.execute("SELECT nl2sql('Which planet is the largest in the solar system?')")
    d = e.value.diag
    assert d.message_primary == "nl2sql abstains: the question is about nothing this database holds"
    assert d.message_detail == ('No table, column, description or stored value the role may read matches a word of '
                                'the question ("planet", "solar", "system").')
    assert d.message_hint.startswith("The role may read concert, singer, singer_in_concert, stadium")
    assert chat_requests(mock) == []
    # nl2sql_explain shows the decision instead of raising; the history keeps the refusal (a
    # failed call's row is written by the session's next call).
    explain = conn.execute("SELECT nl2sql_explain('Who wrote the novel 1984?')").fetchone()[0]
    assert explain["coverage"] == {"covered": [], "uncovered": ["novel", "wrote"]}
    assert explain["error"]["sqlstate"] == "P0002"
    rows = conn.execute("SELECT sqlstate, sql FROM nl2sql.history WHERE question = 'Which planet is the largest in the solar system?'").fetchall()
    assert rows == [("P0002", None)]


def test_questions_naming_the_tables_are_answered_and_the_decision_is_traced(conn, mock):
    assert conn.execute("SELECT nl2sql('[sure] How many singers are there?')").fetchone()[0] == "SELECT count(*) FROM singer"
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert trace["coverage"]["covered"] == ["singer"]
    # A misspelt table, a word inside a column name, a hint naming a table: each enough.
    for question, hint in (("[sure] How many sinegrs?", None), ("[sure] Which stadiums have the biggest capacity?", None),
                           ("[sure] What is dark matter?", "count the singers")):
        assert conn.execute("SELECT nl2sql(%s, %s)", (question, hint)).fetchone()[0].startswith("SELECT"), question
    # Off: asked anyway.
    conn.execute("SET nl2sql.refuse_unrelated = off")
    mock.reset()
    try:
        conn.execute("SELECT nl2sql('[sure] Which planet is the largest?')")
    except psycopg.Error:
        pass
    assert chat_requests(mock)


def test_a_role_is_refused_about_tables_it_may_not_read(connect, conn, mock):
    """What the role may not read does not make a question about the database: the HINT names
    only what it may read."""
    admin = connect()
    admin.execute("DROP ROLE IF EXISTS noor")
    admin.execute("CREATE ROLE noor")
    admin.execute("GRANT SELECT ON stadium TO noor")
    try:
        conn.execute("SET ROLE noor")
        with pytest.raises(errors.NoDataFound) as e:
            conn.execute("SELECT nl2sql('How many singers are there?')")
        assert e.value.diag.message_hint.startswith("The role may read stadium;")
        assert "singer" not in e.value.diag.message_hint
        conn.execute("RESET ROLE")
    finally:
        admin.execute("DROP OWNED BY noor")
        admin.execute("DROP ROLE noor")


def test_a_follow_up_is_never_refused(conn, mock):
    sql = conn.execute("SELECT nl2sql('[sure] and on Mars?', previous_question => 'How many singers are there?', "
                       "previous_sql => 'SELECT count(*) FROM singer')").fetchone()[0]
    assert sql.startswith("SELECT")
    assert chat_requests(mock)
