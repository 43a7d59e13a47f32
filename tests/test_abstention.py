"""Questions about nothing the database holds are refused (nl2sql.refuse_unrelated, off by
default): before any query is written when none of their words matches anything the role's
tables hold and the model, asked, does not say yes (the mock answers no for planets, novels and
salaries, yes otherwise; "[mute]" gets neither, "[no]" a no); after, when every query failed on a
name the tables lack that the question asked for ("[missing]": the mock writes s.salary), or the
model's first queries did and a correction dropped it ("[dropped]")."""
import psycopg
import pytest
from psycopg import errors


ANSWERABLE = "Answer with one word: yes or no."


def chat_requests(mock):
    return [r for r in mock.requests() if r["path"].endswith("/chat/completions")]


def asked_answerable(mock):
    """How many of the requests were the yes-or-no question, and how many anything else."""
    texts = ["\n".join(m["content"] for m in r["body"]["messages"]) for r in chat_requests(mock)]
    yes_no = sum(ANSWERABLE in t for t in texts)
    return yes_no, len(texts) - yes_no


def abstention(conn, mock, question):
    """The diagnostics of nl2sql's refusal of `question` (asked with a fresh mock): P0002 and the
    message a refusal for what the tables do not hold carries."""
    mock.reset()
    with pytest.raises(errors.NoDataFound) as e:
        conn.execute("SELECT nl2sql(%s)", (question,))
    d = e.value.diag
    assert d.message_primary == "nl2sql abstains: the tables do not hold what the question asks about"
    return d


@pytest.fixture
def conn(connect):
    c = connect()
    c.execute("SET nl2sql.refuse_unrelated = on")
    return c


def test_a_question_about_nothing_the_tables_hold_is_refused_when_the_model_agrees(conn, mock):
    d = abstention(conn, mock, "Which planet is the largest in the solar system?")
    assert d.message_detail == ('The model, shown the tables the role may read, said they do not hold what the question '
                                'asks about; no table, column, description or stored value matches "planet", "solar", "system".')
    assert d.message_hint.startswith("The role may read concert, singer, singer_in_concert, stadium")
    # One request: the yes-or-no question, behind the schema; no query was written.
    assert asked_answerable(mock) == (1, 0)
    prompt = chat_requests(mock)[0]["body"]["messages"][1]["content"]
    assert "singer" in prompt and prompt.rstrip().endswith("### Question: Which planet is the largest in the solar system?")
    # nl2sql_explain shows the decision instead of raising; the history keeps the refusal (a
    # failed call's row is written by the session's next call).
    explain = conn.execute("SELECT nl2sql_explain('Who wrote the novel 1984?')").fetchone()[0]
    assert explain["coverage"] == {"covered": [], "uncovered": ["novel", "wrote"]}
    assert explain["answerable"] is False
    assert [c["stage"] for c in explain["llm_calls"]] == ["answerable"]
    assert explain["error"]["sqlstate"] == "P0002"
    rows = conn.execute("SELECT sqlstate, sql FROM nl2sql.history WHERE question = 'Which planet is the largest in the solar system?'").fetchall()
    assert rows == [("P0002", None)]


def test_a_paraphrase_the_model_recognises_is_answered_and_a_missing_column_is_not_caught(conn, mock):
    # No word matches, the model says yes: answered.
    mock.reset()
    assert conn.execute("SELECT nl2sql('[sure] Who is the most famous performer?')").fetchone()[0].startswith("SELECT")
    assert conn.execute("SELECT nl2sql.last_trace()->'answerable'").fetchone()[0] is True
    assert asked_answerable(mock) == (1, 1)
    # "singer" matches a table, "salary" nothing: answered without asking whether it is held (a
    # query that runs is an answer, whatever the question asked for; the mock model would have
    # said no).
    mock.reset()
    assert conn.execute("SELECT nl2sql('[sure] What is the salary of each singer?')").fetchone()[0].startswith("SELECT")
    assert asked_answerable(mock) == (0, 1)


def test_without_the_models_word_the_words_decide(conn, mock):
    # Neither yes nor no: no word matched, refused.
    with pytest.raises(errors.NoDataFound) as e:
        conn.execute("SELECT nl2sql('[mute] Which planet is the largest in the solar system?')")
    assert e.value.diag.message_primary == "nl2sql abstains: the question is about nothing this database holds"
    assert e.value.diag.message_detail.startswith("No table, column, description or stored value the role may read matches")
    assert conn.execute("SELECT nl2sql.last_trace() ? 'answerable'").fetchone()[0] is False
    # The endpoint down: the same.
    conn.execute("SELECT set_config('nl2sql.llm_url', 'http://127.0.0.1:9/v1', false)")
    conn.execute("SET nl2sql.llm_max_retries = 0")
    with pytest.raises(errors.NoDataFound) as e:
        conn.execute("SELECT nl2sql('Which planet is the largest in the solar system?')")
    assert e.value.diag.message_detail.startswith("No table, column")


def test_questions_naming_the_tables_are_answered_and_the_decision_is_traced(conn, mock):
    assert conn.execute("SELECT nl2sql('[sure] How many singers are there?')").fetchone()[0] == "SELECT count(*) FROM singer"
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert trace["coverage"]["covered"] == ["singer"]
    assert "answerable" not in trace  # every word matched: the model was not asked
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
            conn.execute("SELECT nl2sql('[no] How many singers are there?')")
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


def test_every_query_failing_on_the_name_the_question_asked_for_is_a_refusal(conn, mock):
    d = abstention(conn, mock, "[missing] What is the salary of each singer?")
    assert d.message_detail == ('No table, column or description the role may read matches "salary" of the question, and '
                                'no query could be written without "salary", which no table the role may read has.\n'
                                'Generated SQL: SELECT s.name, s.salary FROM singer AS s')
    assert d.message_hint.startswith("The role may read concert, singer, singer_in_concert, stadium")
    # Written and corrected, never asked whether the tables hold it ("singer" matched).
    assert asked_answerable(mock)[0] == 0
    explain = conn.execute("SELECT nl2sql_explain('[missing] What is the salary of each singer?')").fetchone()[0]
    assert explain["missing"] == ["salary"]
    assert explain["error"]["sqlstate"] == "P0002"
    assert not any(c["ok"] for c in explain["candidates"])
    assert any(c.get("sqlstate") == "42703" for c in explain["candidates"])
    # The setting off: the failure as it was.
    conn.execute("SET nl2sql.refuse_unrelated = off")
    with pytest.raises(errors.UndefinedColumn) as e:
        conn.execute("SELECT nl2sql('[missing] What is the salary of each singer?')")
    assert e.value.diag.message_primary == 'generated query failed: column s.salary does not exist'
    # A follow-up rests on the earlier question: its failure stays a failure.
    conn.execute("SET nl2sql.refuse_unrelated = on")
    with pytest.raises(errors.UndefinedColumn):
        conn.execute("SELECT nl2sql('[missing] and their salary?', previous_question => 'Who are the singers?', "
                     "previous_sql => 'SELECT name FROM singer')")


def test_a_correction_dropping_the_name_the_question_asked_for_is_no_answer(conn, mock):
    # Every first query reads s.salary; the correction drops it and runs: refused all the same.
    d = abstention(conn, mock, "[dropped] What is the salary of each singer?")
    assert d.message_detail.startswith('No table, column or description the role may read matches "salary" of the question, and ')
    # All five first queries failed so: DETAIL shows the first of them as such.
    assert "and 5 of the model's 5 first queries read \"salary\", which no table the role may read has.\nThe first of them: SELECT s.name, s.salary FROM singer AS s" in d.message_detail
    explain = conn.execute("SELECT nl2sql_explain('[dropped] What is the salary of each singer?')").fetchone()[0]
    assert explain["missing"] == ["salary"] and explain["error"]["sqlstate"] == "P0002"
    assert any(c["ok"] for c in explain["candidates"]), "a correction ran"
    assert all(c.get("error_kind") == "undefined_column" for c in explain["candidates"] if c["round"] == 0)
    # The setting off: the correction's answer.
    conn.execute("SET nl2sql.refuse_unrelated = off")
    assert conn.execute("SELECT nl2sql('[dropped] What is the salary of each singer?')").fetchone()[0] == "SELECT s.name FROM singer AS s"
    # A hint saying what the word means: the first queries' name is the model's slip, not a refusal.
    conn.execute("SET nl2sql.refuse_unrelated = on")
    sql = conn.execute("SELECT nl2sql('[dropped] What is the salary of each singer?', 'salary means the singer age')").fetchone()[0]
    assert sql == "SELECT s.name FROM singer AS s"
