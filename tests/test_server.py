"""Behaviour that needs more than one session, timing, or a look at what crossed the wire."""
import math
import os
import threading
import time

import psycopg
import pytest
from psycopg import errors

API_KEY = os.environ.get("NL2SQL_LLM_API_KEY", "")


def ask(conn, question, hint=None):
    return conn.execute("SELECT nl2sql(%s, %s)", (question, hint)).fetchone()[0]


def test_happy_path_on_spider_database(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.extraction_min_tokens = 0")  # extraction even on this small schema
    assert ask(conn, "How many singers do we have?") == "SELECT count(*) FROM singer"
    rows = conn.execute("SELECT * FROM nl2sql_run('How many singers do we have?')").fetchall()
    assert rows == [({"count": 6},)]
    # The full pipeline: one extraction at temperature 0, then a first wave of one candidate
    # per generator (nl2sql.generators), at temperature 0 too: the Open-SQL prompt and the
    # CREATE TABLE prompt. They agree, so sampling stops.
    reqs = mock.requests()
    assert len(reqs) == 6
    extraction = reqs[0]["body"]
    first, second = sorted((r["body"] for r in reqs[1:3]), key=lambda b: "CREATE TABLE statements" in b["messages"][1]["content"])
    assert extraction["model"] == "mock-model"
    assert extraction["temperature"] == 0
    assert "### Question: How many singers do we have?" in extraction["messages"][-1]["content"]
    assert first["temperature"] == second["temperature"] == 0
    assert "### Tables, one column a line" in first["messages"][1]["content"]
    assert "### Tables, as PostgreSQL CREATE TABLE statements:\nCREATE TABLE concert (" in second["messages"][1]["content"]
    # Candidates answer with the query alone (nl2sql.use_chain_of_thought is off by default).
    for c in (first, second):
        assert "one ```sql block" in c["messages"][1]["content"] and "#SQL-like" not in c["messages"][1]["content"]
    # Extraction and candidates start alike: the same system text (naming the server's version).
    assert extraction["messages"][0] == first["messages"][0] == second["messages"][0]
    major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
    assert extraction["messages"][0]["content"].startswith(f"You work on a PostgreSQL {major} database")
    # Two different prompts are two requests: nothing asked several answers at once.
    assert [r for r in mock.requests(probes=True) if r not in reqs] == []


def test_zero_shot_mode_is_one_call(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.mode = zero_shot")
    assert ask(conn, "How many singers do we have?") == "SELECT count(*) FROM singer"
    reqs = mock.requests()
    assert len(reqs) == 1
    body = reqs[0]["body"]
    assert body["temperature"] == 0
    assert "### Question: How many singers do we have?" in body["messages"][-1]["content"]


def test_candidates_are_requested_concurrently(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.agreement = 0")  # all five candidates in one wave
    assert ask(conn, "[concurrent] names") == "SELECT name FROM singer ORDER BY name"
    gen = [r for r in mock.requests() if "### Task: write" in r["body"]["messages"][1]["content"]]
    assert len(gen) == 5
    # Each answer takes 600 ms: all five requests arrived before the first could be answered.
    arrivals = sorted(r["received"] for r in gen)
    assert arrivals[-1] - arrivals[0] < 0.5
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    # A schema this small is not extracted: the one wave is the only round trip.
    assert trace["round_trips"] == 1 and trace["waves"] == 1


def test_small_schema_skips_extraction_and_shares_the_zero_shot_prefix(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.generators = open_sql")  # the Open-SQL prompt only
    conn.execute("SET nl2sql.use_chain_of_thought = on")  # even with a task of their own
    assert ask(conn, "How many singers do we have?") == "SELECT count(*) FROM singer"
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert trace.get("extraction") is None
    assert "nl2sql.extraction_min_tokens (3000)" in trace["extraction_skipped"]
    assert [c["stage"] for c in trace["llm_calls"]] == ["generate", "generate"]
    assert trace["round_trips"] == 1
    conn.execute("SET nl2sql.mode = zero_shot")
    assert ask(conn, "How many singers do we have?") == "SELECT count(*) FROM singer"
    cand, zero = mock.requests()[0]["body"]["messages"], mock.requests()[-1]["body"]["messages"]
    # One system text, then the same whole-schema block: a prompt cache serves both up to the task.
    assert cand[0] == zero[0]
    head = cand[1]["content"].index("### Task:")
    assert head > 100 and cand[1]["content"][:head] == zero[1]["content"][:head]
    assert "#SQL-like" in cand[1]["content"] and "#SQL-like" not in zero[1]["content"]


def test_candidates_in_one_request_where_the_endpoint_takes_n(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.generators = open_sql")  # samples of one prompt
    assert ask(conn, "[n-choices] how many singers?") == "SELECT count(*) FROM singer"
    reqs = mock.requests(probes=True)
    assert len(reqs) == 1 and reqs[0]["body"]["n"] == 2 and reqs[0]["status"] == 200
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    first, second = trace["llm_calls"]
    assert first["choices"] == 2 and second["same_request"] is True
    assert second["prompt_tokens"] == 0 and first["prompt_tokens"] > 0
    # Switched off: one request per candidate, never an n.
    conn.execute("SET nl2sql.llm_n = off")
    mock.reset()
    assert ask(conn, "[n-choices] how many singers?") == "SELECT count(*) FROM singer"
    reqs = mock.requests(probes=True)
    assert len(reqs) == 2 and all("n" not in r["body"] for r in reqs)


def test_a_sure_first_answer_stands_alone(connect, mock):
    conn = connect()
    assert ask(conn, "[sure] how many singers?") == "SELECT count(*) FROM singer"
    reqs = mock.requests()
    # One request, for the Open-SQL prompt, asking for log probabilities; the CREATE TABLE
    # generator is never asked.
    assert len(reqs) == 1 and reqs[0]["body"]["logprobs"] is True and reqs[0]["body"]["top_logprobs"] == 5
    assert "CREATE TABLE" not in reqs[0]["body"]["messages"][1]["content"]
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert abs(trace["alone"] - math.exp(-0.05)) < 1e-6 and trace["stopped_early"] and trace["round_trips"] == 1
    assert trace["confidence"] == 1.0 and trace["samples"] == 1
    # Less sure, under a threshold (0.3): the other generator is asked after it, without log
    # probabilities, and they agree.
    conn.execute("SET nl2sql.alone_confidence = 0.3")
    mock.reset()
    assert ask(conn, "[unsure] how many singers?") == "SELECT count(*) FROM singer"
    reqs = mock.requests()
    assert [r["body"].get("logprobs", False) for r in reqs] == [True, False]
    assert "CREATE TABLE" in reqs[1]["body"]["messages"][1]["content"]
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert "alone" not in trace and trace["round_trips"] == 2 and trace["confidence"] == 1.0
    assert abs(trace["candidates"][0]["confidence"] - math.exp(-2.0)) < 1e-6
    # At the default (0), the unsure answer stands alone all the same: it ran and returned rows.
    conn.execute("SET nl2sql.alone_confidence = 0")
    mock.reset()
    assert ask(conn, "[unsure] how many singers?") == "SELECT count(*) FROM singer"
    assert len(mock.requests()) == 1
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert abs(trace["alone"] - math.exp(-2.0)) < 1e-6 and trace["round_trips"] == 1
    # Off (nl2sql.agreement = 0): both generators at once, nothing scored.
    fresh = connect()
    fresh.execute("SET nl2sql.agreement = 0")
    mock.reset()
    assert ask(fresh, "[sure] how many singers?") == "SELECT count(*) FROM singer"
    reqs = mock.requests()
    assert len(reqs) >= 2 and not any("logprobs" in r["body"] for r in reqs)


# A hostile model sure of its answer gets no further than an unsure one: the answer that would
# stand alone is judged like every other (PostgreSQL's parse tree, the function policy), and a
# refused one stands for nothing.
@pytest.mark.parametrize("tag,state", [
    ("[sure-write]", "25006"),    # a data-modifying WITH
    ("[sure-two]", "42601"),      # two statements
    ("[sure-setting]", "42501"),  # set_config on this very setting
    ("[sure-file]", "42501"),     # attribute notation: (text).pg_read_file
    ("[sure-escaped]", "42601"),  # the same function as a Unicode-escaped identifier: refused unparsed
])
def test_a_sure_hostile_answer_is_refused_as_any_other(connect, mock, tag, state):
    conn = connect()
    before = conn.execute("SELECT count(*) FROM singer").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        ask(conn, f"{tag} singers?")
    assert e.value.sqlstate == state, e.value
    assert conn.execute("SELECT count(*) FROM singer").fetchone()[0] == before
    reqs = mock.requests()
    # It was asked for alone and sure, and did not stand alone: the other generator was asked.
    assert reqs[0]["body"]["logprobs"] is True and len(reqs) > 1
    assert conn.execute("SHOW nl2sql.alone_confidence").fetchone()[0] == "0.3"


# With nl2sql.alone_confidence on, the first generator is in flight alone (one scored request);
# with nl2sql.agreement = 0 every candidate's request is (nl2sql.candidates, 5).
@pytest.mark.parametrize("setting,in_flight", [("nl2sql.alone_confidence = 0.3", 1), ("nl2sql.agreement = 0", 5)])
def test_cancel_while_candidates_are_generated(connect, mock, setting, in_flight):
    conn, other = connect(), connect()
    conn.execute(f"SET {setting}")
    pid = conn.info.backend_pid
    cancelled_at = []

    def cancel():
        time.sleep(1.0)
        other.execute("SELECT pg_cancel_backend(%s)", (pid,))
        cancelled_at.append(time.monotonic())

    t = threading.Thread(target=cancel)
    t.start()
    with pytest.raises(errors.QueryCanceled):
        conn.execute("SET nl2sql.extraction_min_tokens = 0")
        ask(conn, "[cancel-candidates] who sings?")
    returned = time.monotonic()
    t.join()
    assert returned - cancelled_at[0] < 1.0
    # Extraction was done and the candidates were in flight when the cancel came.
    reqs = mock.requests()
    assert len(reqs) == 1 + in_flight
    assert all("### Task: write" in r["body"]["messages"][1]["content"] for r in reqs[1:])
    assert [r["body"].get("logprobs", False) for r in reqs[1:]] == [in_flight == 1] * in_flight
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_api_key_from_server_environment_is_sent(connect, mock):
    assert API_KEY, "tests/run.sh sets NL2SQL_LLM_API_KEY for the server"
    ask(connect(), "How many singers do we have?")
    assert mock.requests()[0]["authorization"] == "Bearer " + API_KEY


def test_key_never_in_errors_or_server_log(connect, server_log):
    conn = connect()
    with pytest.raises(errors.InvalidAuthorizationSpecification) as e:
        ask(conn, "[unauthorized] echo my key")
    diag = e.value.diag
    for text in (diag.message_primary, diag.message_detail, diag.message_hint):
        assert API_KEY not in (text or "")
    assert "***" in diag.message_detail
    with open(server_log, encoding="utf-8", errors="replace") as f:
        assert API_KEY not in f.read()


def test_prompt_only_shows_what_the_role_may_select(connect, mock):
    admin = connect()
    admin.execute("DROP ROLE IF EXISTS carol")
    admin.execute("CREATE ROLE carol")
    admin.execute("CREATE TABLE hr_salaries (employee text, salary_amount numeric)")
    try:
        admin.execute("INSERT INTO hr_salaries VALUES ('Ann', 5000)")
        admin.execute("GRANT SELECT (singer_id, name) ON singer TO carol")
        conn = connect()
        conn.execute("SET ROLE carol")
        assert ask(conn, "How many singers do we have?") == "SELECT count(*) FROM singer"
        prompt = "\n".join(m["content"] for r in mock.requests() for m in r["body"]["messages"])
        assert "singer_id" in prompt and "Claire Dubois" in prompt
        for hidden in ("hr_salaries", "salary_amount", "5000", "country", "France", "stadium", "concert"):
            assert hidden not in prompt, hidden
    finally:
        admin.execute("DROP TABLE hr_salaries")
        admin.execute("DROP OWNED BY carol")
        admin.execute("DROP ROLE carol")


def test_cancel_during_slow_llm_call_returns_promptly(connect):
    conn, other = connect(), connect()
    pid = conn.info.backend_pid
    cancelled_at = []

    def cancel():
        time.sleep(1.0)
        other.execute("SELECT pg_cancel_backend(%s)", (pid,))
        cancelled_at.append(time.monotonic())

    t = threading.Thread(target=cancel)
    t.start()
    with pytest.raises(errors.QueryCanceled):
        ask(conn, "[cancel-me] the model takes 30 seconds")
    returned = time.monotonic()
    t.join()
    # The model would answer after 30 s; the call ends right after the cancel.
    assert returned - cancelled_at[0] < 1.0
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_statement_timeout_interrupts_llm_wait(connect):
    conn = connect()
    conn.execute("SET statement_timeout = '700ms'")
    t0 = time.monotonic()
    with pytest.raises(errors.QueryCanceled) as e:
        ask(conn, "[cancel-me] the model takes 30 seconds")
    assert "statement timeout" in str(e.value)
    assert time.monotonic() - t0 < 3.0


def test_terminate_during_llm_call_ends_session(connect):
    conn, other = connect(), connect()
    pid = conn.info.backend_pid
    threading.Timer(0.5, lambda: other.execute("SELECT pg_terminate_backend(%s)", (pid,))).start()
    t0 = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        ask(conn, "[cancel-me] the model takes 30 seconds")
    assert time.monotonic() - t0 < 3.0
    assert other.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() == (0,)


@pytest.mark.parametrize("question,sqlstate", [
    ("[http500] x", "08006"),
    ("[garbage] x", "08P01"),
    ("[truncated] x", "08P01"),
    ("[slow] x", "57014"),
])
def test_endpoint_failures_fail_in_bounded_time(connect, question, sqlstate):
    conn = connect()
    conn.execute("SET nl2sql.llm_timeout = '1s'")
    conn.execute("SET nl2sql.llm_max_retries = 1")
    t0 = time.monotonic()
    with pytest.raises(psycopg.Error) as e:
        ask(conn, question)
    assert e.value.sqlstate == sqlstate
    assert time.monotonic() - t0 < 3.0


def test_endpoint_down_fails_fast(connect):
    conn = connect()
    conn.execute("SET nl2sql.llm_url = 'http://127.0.0.1:9/v1'")
    t0 = time.monotonic()
    with pytest.raises(errors.SqlclientUnableToEstablishSqlconnection):
        ask(conn, "How many singers do we have?")
    assert time.monotonic() - t0 < 2.0


def test_retries_then_succeeds(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.mode = zero_shot")
    assert ask(conn, "[flaky] how many stadiums are there?") == "SELECT count(*) AS stadiums FROM stadium"
    assert len(mock.requests()) == 3


def test_correction_round_shows_the_error_to_the_model(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.mode = zero_shot")
    assert ask(conn, "Which singers are older than 40?") == "SELECT name FROM singer WHERE age > 40 ORDER BY name"
    reqs = mock.requests()
    assert len(reqs) == 2
    second = reqs[1]["body"]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert 'column "singer_age" does not exist' in second[-1]["content"]


def test_hostile_answers_leave_data_and_session_intact(connect):
    conn = connect()
    for q in ["[drop] x", "[cte-delete] x", "[select-into] x", "[terminate] x", "[set-config] x",
              "[two-statements] x", "[sleep] x", "[for-update] x"]:
        with pytest.raises(psycopg.Error):
            ask(conn, q)
    assert conn.execute("SELECT count(*) FROM singer").fetchone() == (6,)
    assert conn.execute("SHOW search_path").fetchone() == ('"$user", public',)
    assert conn.execute("SELECT to_regclass('singer_copy')").fetchone() == (None,)
    # Every other session survived pg_terminate_backend attempts: this one still works.
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_concurrent_sessions(connect):
    results, errs = [], []

    def worker():
        try:
            results.append(ask(connect(), "How many singers do we have?"))
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs
    assert results == ["SELECT count(*) FROM singer"] * 4
