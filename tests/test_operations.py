"""Operating nl2sql: history (who sees what, rollbacks, read-only), feedback, follow-ups,
abstention, the cost guard, the token budget and privacy mode, with the scripted model."""
import contextlib
import json

import pytest
from psycopg import errors


def trace(conn):
    return conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]


def prompts(mock):
    return ["\n".join(m["content"] for m in r["body"]["messages"]) for r in mock.requests()
            if r["path"].endswith("/chat/completions")]


@contextlib.contextmanager
def roles(admin, *names):
    """Login roles that may read concert_singer's tables; dropped with what they own after."""
    for n in names:
        admin.execute(f"DROP OWNED BY {n}") if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (n,)).fetchone() else None
        admin.execute(f"DROP ROLE IF EXISTS {n}")
        admin.execute(f"CREATE ROLE {n} LOGIN")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {n}")
    try:
        yield
    finally:
        for n in names:
            admin.execute(f"DROP OWNED BY {n}")
            admin.execute(f"DROP ROLE {n}")


@pytest.fixture
def admin(connect):
    a = connect()
    a.execute("DELETE FROM nl2sql.history")
    a.execute("DELETE FROM nl2sql.example_store WHERE source <> 'builtin'")
    yield a
    a.execute("DELETE FROM nl2sql.history")
    a.execute("DELETE FROM nl2sql.example_store WHERE source <> 'builtin'")


def history(conn):
    return conn.execute("SELECT id, role_name::text, question, sql, sqlstate, confidence, candidates, "
                        "prompt_tokens, completion_tokens, latency_ms, follows, mode FROM nl2sql.history ORDER BY id").fetchall()


def test_history_one_row_per_call_each_role_its_own(connect, mock, admin):
    with roles(admin, "ops_alice", "ops_bob", "ops_boss"):
        admin.execute("GRANT nl2sql_admin TO ops_boss")
        alice, bob, boss = (connect(user=u) for u in ("ops_alice", "ops_bob", "ops_boss"))
        assert alice.execute("SELECT nl2sql('[ops-count] How many singers?')").fetchone()[0] == "SELECT count(*) FROM singer"
        t = trace(alice)
        rows = history(alice)
        assert len(rows) == 1 and rows[0][0] == t["history_id"]
        _, role, question, sql, state, confidence, candidates, ptok, ctok, ms, follows, mode = rows[0]
        assert (role, question, sql, state, mode) == ("ops_alice", "[ops-count] How many singers?", "SELECT count(*) FROM singer", None, "full")
        assert confidence == 1.0 and candidates == 2 and ptok > 0 and ctok > 0 and ms > 0 and follows is None
        vote = alice.execute("SELECT vote FROM nl2sql.history").fetchone()[0]
        assert vote[0]["votes"] == 2 and vote[0]["rows"] == 1
        # bob sees none of alice's rows, and his own; the administrator sees both.
        assert history(bob) == []
        bob.execute("SELECT nl2sql('[ops-count] How many singers?')")
        assert [r[1] for r in history(bob)] == ["ops_bob"]
        assert sorted(r[1] for r in history(boss)) == ["ops_alice", "ops_bob"]
        # A row is its role's while its OID and name both match: renamed (or restored with new
        # OIDs), the rows are left to the administrators.
        admin.execute("ALTER ROLE ops_bob RENAME TO ops_bob2")
        try:
            assert history(connect(user="ops_bob2")) == []
        finally:
            admin.execute("ALTER ROLE ops_bob2 RENAME TO ops_bob")
        # Nobody writes the table directly, not even an administrator.
        for conn, sql in [(alice, "INSERT INTO nl2sql.history (asked_by, role_name, asked_at, question, mode, latency_ms) "
                                  "VALUES (1, 'x', now(), 'q', 'full', 1)"),
                          (alice, "UPDATE nl2sql.history SET sql = 'SELECT 1'"),
                          (boss, "DELETE FROM nl2sql.history")]:
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(sql)


def test_history_keeps_failed_and_rolled_back_calls(connect, mock, admin):
    conn = connect()
    # A failed call raises: its transaction rolls back, and its row is written by the next call.
    with pytest.raises(errors.DivisionByZero):
        conn.execute("SELECT nl2sql('[ops-fail] Which names?')")
    assert history(conn) == []
    # A call whose transaction the caller rolls back.
    conn.execute("BEGIN")
    conn.execute("SELECT nl2sql('[ops-count] rolled back')")
    conn.execute("ROLLBACK")
    # A call in a savepoint rolled back, in a transaction that commits.
    conn.execute("BEGIN")
    conn.execute("SAVEPOINT s")
    conn.execute("SELECT nl2sql('[ops-count] in a savepoint')")
    conn.execute("ROLLBACK TO SAVEPOINT s")
    conn.execute("COMMIT")
    conn.execute("SELECT nl2sql('[ops-count] kept')")
    rows = history(conn)
    assert [r[2] for r in rows] == ["[ops-fail] Which names?", "[ops-count] rolled back", "[ops-count] in a savepoint", "[ops-count] kept"]
    assert rows[0][3] is None and rows[0][4] == "22012"
    # A read-only transaction: answered, not recorded, and the trace says why.
    conn.execute("BEGIN READ ONLY")
    assert conn.execute("SELECT nl2sql('[ops-count] read only')").fetchone()[0] == "SELECT count(*) FROM singer"
    t = trace(conn)
    conn.execute("COMMIT")
    assert t["history_skipped"].startswith("read-only transaction") and "history_id" not in t
    assert len(history(conn)) == 4
    # ... and recorded by the next call outside one.
    conn.execute("SELECT nl2sql('[ops-count] after')")
    assert [r[2] for r in history(conn)][-2:] == ["[ops-count] read only", "[ops-count] after"]
    # Turned off by a superuser: not recorded; no other role turns it off.
    conn.execute("SET nl2sql.history = off")
    conn.execute("SELECT nl2sql('[ops-count] off')")
    assert trace(conn)["history_skipped"] == "nl2sql.history is off" and len(history(conn)) == 6
    with roles(admin, "ops_carol"):
        carol = connect(user="ops_carol")
        carol.execute("SELECT nl2sql.last_trace()")  # loads the library: its settings exist
        with pytest.raises(errors.InsufficientPrivilege):
            carol.execute("SET nl2sql.history = off")


def test_purge_is_for_administrators_and_follows_the_retention(connect, mock, admin):
    conn = connect()
    for q in ("[ops-count] old", "[ops-count] new"):
        conn.execute("SELECT nl2sql(%s)", (q,))
    admin.execute("UPDATE nl2sql.history SET asked_at = now() - interval '40 days' WHERE question = '[ops-count] old'")
    with roles(admin, "ops_dave"):
        with pytest.raises(errors.InsufficientPrivilege):
            connect(user="ops_dave").execute("SELECT nl2sql.purge_history()")
    # The default retention is 30 days.
    assert admin.execute("SELECT nl2sql.purge_history()").fetchone()[0] == 1
    assert [r[2] for r in history(admin)] == ["[ops-count] new"]
    assert admin.execute("SELECT nl2sql.purge_history(interval '0 seconds')").fetchone()[0] == 1
    with pytest.raises(errors.InvalidParameterValue):
        admin.execute("SELECT nl2sql.purge_history(interval '-1 day')")


def test_feedback_offers_a_checked_example_to_curators(connect, mock, admin):
    with roles(admin, "ops_erin", "ops_finn"):
        erin, finn = connect(user="ops_erin"), connect(user="ops_finn")
        erin.execute("SELECT nl2sql('[ops-count] How many singers?')")
        hid = trace(erin)["history_id"]
        # Only the role that asked (or an administrator) gives feedback: to others it does not exist.
        with pytest.raises(errors.UndefinedObject):
            finn.execute("SELECT nl2sql.feedback(%s, true)", (hid,))
        ex = erin.execute("SELECT nl2sql.feedback(%s, true)", (hid,)).fetchone()[0]
        row = admin.execute("SELECT question, sql, source, enabled, added_by::text FROM nl2sql.examples WHERE id = %s", (ex,)).fetchone()
        assert row == ("[ops-count] How many singers?", "SELECT count(*) FROM singer", "feedback", False, "ops_erin")
        fb = erin.execute("SELECT feedback, example_id, feedback_at IS NOT NULL FROM nl2sql.history WHERE id = %s", (hid,)).fetchone()
        assert fb == (True, ex, True)
        with pytest.raises(errors.ObjectNotInPrerequisiteState):
            erin.execute("SELECT nl2sql.feedback(%s, false)", (hid,))
        # A corrected query is checked as the role that gives it: refused when unsafe, failed
        # when it does not run, stored when it does.
        erin.execute("SELECT nl2sql('[ops-count] How many French singers?')")
        hid = trace(erin)["history_id"]
        with pytest.raises(errors.ReadOnlySqlTransaction):
            erin.execute("SELECT nl2sql.feedback(%s, false, 'DELETE FROM singer')", (hid,))
        with pytest.raises(errors.UndefinedColumn):
            erin.execute("SELECT nl2sql.feedback(%s, false, 'SELECT count(*) FROM singer WHERE nation = 1')", (hid,))
        with pytest.raises(errors.InvalidParameterValue):
            erin.execute("SELECT nl2sql.feedback(%s, true, 'SELECT 1 FROM singer')", (hid,))
        # A query that reads no table would be shown to every role: refused.
        with pytest.raises(errors.InvalidParameterValue):
            erin.execute("SELECT nl2sql.feedback(%s, false, 'SELECT 1')", (hid,))
        fixed = "SELECT count(*) FROM singer WHERE country = 'France'"
        ex2 = erin.execute("SELECT nl2sql.feedback(%s, false, %s)", (hid, fixed)).fetchone()[0]
        assert admin.execute("SELECT sql, enabled FROM nl2sql.examples WHERE id = %s", (ex2,)).fetchone() == (fixed, False)
        assert erin.execute("SELECT corrected_sql FROM nl2sql.history WHERE id = %s", (hid,)).fetchone()[0] == fixed
        # Wrong, with nothing better: recorded, no example.
        erin.execute("SELECT nl2sql('[ops-count] How many stadiums?')")
        hid = trace(erin)["history_id"]
        assert erin.execute("SELECT nl2sql.feedback(%s, false)", (hid,)).fetchone()[0] is None
        # Erin is no curator: she cannot enable her own example; a curator can, and then it is shown.
        with pytest.raises(errors.InsufficientPrivilege):
            erin.execute("SELECT nl2sql.enable_example(%s)", (ex2,))
        admin.execute("SELECT nl2sql.enable_example(%s)", (ex2,))
        admin.execute("SET nl2sql.examples = 3")
        mock.reset()
        admin.execute("SELECT nl2sql('[ops-count] How many Dutch singers?')")
        assert any(fixed in p for p in prompts(mock))


def test_feedback_on_rows_that_depend_on_the_reader_offers_no_example(connect, mock, admin):
    """The model wrote the call's query from the asker's rows (samples, values): under row-level
    security those are rows other readers of the table may not see, so the query is not offered
    as an example; one offered before the table got row-level security is hidden from then on."""
    with roles(admin, "ops_hana", "ops_ivan"):
        hana, ivan = connect(user="ops_hana"), connect(user="ops_ivan")
        seen = []
        hana.add_notice_handler(lambda d: seen.append(d.message_primary))
        try:
            admin.execute("ALTER TABLE singer ENABLE ROW LEVEL SECURITY")
            hana.execute("SELECT nl2sql('[ops-count] How many singers?')")
            hid = trace(hana)["history_id"]
            assert hana.execute("SELECT nl2sql.feedback(%s, true)", (hid,)).fetchone()[0] is None
            assert any("not offered as an example" in n and "singer" in n for n in seen), seen
            assert hana.execute("SELECT feedback, example_id FROM nl2sql.history WHERE id = %s", (hid,)).fetchone() == (True, None)
            assert admin.execute("SELECT count(*) FROM nl2sql.example_store WHERE source = 'feedback'").fetchone()[0] == 0
            # Offered while every reader saw the same rows: shown, until row-level security.
            admin.execute("ALTER TABLE singer DISABLE ROW LEVEL SECURITY")
            hana.execute("SELECT nl2sql('[ops-count] How many singers?')")
            ex = hana.execute("SELECT nl2sql.feedback(%s, true)", (trace(hana)["history_id"],)).fetchone()[0]
            shown = "SELECT count(*) FROM nl2sql.examples WHERE id = %s"
            assert ivan.execute(shown, (ex,)).fetchone()[0] == 1
            # It records every relation whose rows the call's prompts showed (the whole schema's
            # samples here), and its chain of thought, written later, leaves that as it was.
            everything = "{concert,singer,singer_in_concert,stadium}"
            assert admin.execute("SELECT sampled::text FROM nl2sql.example_store WHERE id = %s", (ex,)).fetchone()[0] == everything
            assert admin.execute("SELECT nl2sql.write_example_thoughts()").fetchone()[0] >= 1
            assert admin.execute("SELECT sampled::text FROM nl2sql.example_store WHERE id = %s", (ex,)).fetchone()[0] == everything
            admin.execute("ALTER TABLE singer ENABLE ROW LEVEL SECURITY")
            assert ivan.execute(shown, (ex,)).fetchone()[0] == 0
            assert admin.execute(shown, (ex,)).fetchone()[0] == 0
            # Hidden from curators too: not enabled, as if absent.
            assert admin.execute("SELECT nl2sql.enable_example(%s)", (ex,)).fetchone()[0] is False
        finally:
            admin.execute("ALTER TABLE singer DISABLE ROW LEVEL SECURITY")
        assert ivan.execute(shown, (ex,)).fetchone()[0] == 1
        # A curator removes a hidden one (a table's owner turning row-level security on cannot
        # keep it in the library), as long as it may read the tables the example reads.
        admin.execute("ALTER TABLE singer ENABLE ROW LEVEL SECURITY")
        try:
            assert admin.execute("SELECT nl2sql.remove_example(%s)", (ex,)).fetchone()[0] is True
        finally:
            admin.execute("ALTER TABLE singer DISABLE ROW LEVEL SECURITY")
        assert admin.execute("SELECT count(*) FROM nl2sql.example_store WHERE id = %s", (ex,)).fetchone()[0] == 0


def test_feedback_checks_every_relation_the_prompts_showed(connect, mock, admin):
    """The model may copy rows it was shown into any part of its query (a literal, a comment), not
    only from the tables the query reads: a call whose prompts showed rows of a table under
    row-level security offers no example, whatever its query reads."""
    with roles(admin, "ops_jude", "ops_kim"):
        jude = connect(user="ops_jude")
        seen = []
        jude.add_notice_handler(lambda d: seen.append(d.message_primary))
        admin.execute("ALTER TABLE singer ENABLE ROW LEVEL SECURITY")
        admin.execute("CREATE POLICY own_singers ON singer FOR SELECT USING (country = 'France')")
        try:
            assert jude.execute("SELECT nl2sql('[ops-concerts] How many concerts were there?')").fetchone()[0] == \
                "SELECT count(*) FROM concert"
            hid = trace(jude)["history_id"]
            # The whole schema went to the model, with samples of every table jude may read.
            shown = admin.execute("SELECT shown::text[] FROM nl2sql.history WHERE id = %s", (hid,)).fetchone()[0]
            assert {"concert", "singer", "stadium", "singer_in_concert"} <= set(shown), shown
            assert jude.execute("SELECT nl2sql.feedback(%s, true)", (hid,)).fetchone()[0] is None
            assert any("not offered as an example" in n and "showed rows of singer" in n for n in seen), seen
            assert admin.execute("SELECT count(*) FROM nl2sql.example_store WHERE source = 'feedback'").fetchone()[0] == 0
        finally:
            admin.execute("DROP POLICY own_singers ON singer")
            admin.execute("ALTER TABLE singer DISABLE ROW LEVEL SECURITY")
        # Without row-level security it is offered, and records every relation it was written from.
        jude.execute("SELECT nl2sql('[ops-concerts] How many concerts were there?')")
        ex = jude.execute("SELECT nl2sql.feedback(%s, true)", (trace(jude)["history_id"],)).fetchone()[0]
        assert ex is not None
        sampled = admin.execute("SELECT sampled::text[], relations::text[] FROM nl2sql.example_store WHERE id = %s", (ex,)).fetchone()
        assert "singer" in sampled[0] and sampled[1] == ["concert"]
        # A follow-up's prompt carries the earlier call's query: it inherits what that call was shown.
        kim = connect(user="ops_kim")
        kim.execute("SET nl2sql.sample_rows = 0")
        kim.execute("SET nl2sql.use_values = off")
        kim.execute("SELECT nl2sql('[ops-count] How many singers?')")
        alone = trace(kim)["history_id"]
        assert admin.execute("SELECT shown::text[] FROM nl2sql.history WHERE id = %s", (alone,)).fetchone()[0] == ["singer"]
        kim.execute("RESET nl2sql.sample_rows")
        kim.execute("SELECT nl2sql('[ops-concerts] How many concerts were there?')")
        first = trace(kim)["history_id"]
        kim.execute("SET nl2sql.sample_rows = 0")
        kim.execute("SELECT nl2sql('[ops-follow] and from France?', follows => %s)", (first,))
        follow = trace(kim)["history_id"]
        shown = admin.execute("SELECT shown::text[] FROM nl2sql.history WHERE id = %s", (follow,)).fetchone()[0]
        assert {"concert", "singer", "stadium", "singer_in_concert"} <= set(shown), shown


def test_follow_ups_by_history_id_or_passed(connect, mock, admin):
    with roles(admin, "ops_gus"):
        conn = connect()
        conn.execute("SELECT nl2sql('[ops-count] How many singers?')")
        first = trace(conn)["history_id"]
        mock.reset()
        sql = conn.execute("SELECT nl2sql('[ops-follow] and from France?', follows => %s)", (first,)).fetchone()[0]
        assert sql == "SELECT count(*) FROM singer WHERE country = 'France'"
        assert all("### Its query:\n```sql\nSELECT count(*) FROM singer\n```" in p for p in prompts(mock))
        t = trace(conn)
        assert t["follows"]["history_id"] == first
        assert conn.execute("SELECT follows FROM nl2sql.history WHERE id = %s", (t["history_id"],)).fetchone()[0] == first
        # Passed explicitly (works where there is no history: a standby, a pooler).
        rows = conn.execute("SELECT * FROM nl2sql_run('[ops-follow] only the French ones', "
                            "previous_question => 'Which singers are there?', previous_sql => 'SELECT name FROM singer')").fetchall()
        assert [r[0]["name"] for r in rows] == ["Claire Dubois", "Henri Lefevre", "Luc Moreau", "Paul Girard"]
        # Another role's call cannot be followed up: it does not exist for that role.
        with pytest.raises(errors.UndefinedObject):
            connect(user="ops_gus").execute("SELECT nl2sql('[ops-follow] and from France?', follows => %s)", (first,))
        with pytest.raises(errors.InvalidParameterValue):
            conn.execute("SELECT nl2sql('x', follows => %s, previous_sql => 'SELECT 1')", (first,))
        with pytest.raises(errors.InvalidParameterValue):
            conn.execute("SELECT nl2sql('x', previous_question => 'q')")


def test_low_confidence_notice_or_abstention(connect, mock, admin):
    conn = connect()
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    # Five candidates, five different answers: confidence 0.2.
    assert conn.execute("SELECT nl2sql('[ops-split] How many?')").fetchone()[0]
    assert notices == ["nl2sql is unsure of this answer"]
    conn.execute("SET nl2sql.on_low_confidence = error")
    mock.reset()
    with pytest.raises(errors.NoDataFound) as e:
        conn.execute("SELECT nl2sql('[ops-split] How many?')")
    assert "confidence 0.20 is below nl2sql.min_confidence (0.50)" in e.value.diag.message_primary
    detail = e.value.diag.message_detail
    assert detail.startswith("5 candidates sampled") and "1 vote, 1 row: SELECT count(*) + 200 FROM singer" in detail
    # Agreeing candidates are answered; so is zero-shot, which has no confidence.
    assert conn.execute("SELECT nl2sql('[ops-count] How many singers?')").fetchone()[0] == "SELECT count(*) FROM singer"
    # The abstention is in the history (written by the next call: it rolled its transaction back).
    assert [r[4] for r in history(conn)] == [None, "P0002", None]
    conn.execute("SET nl2sql.mode = zero_shot")
    assert conn.execute("SELECT nl2sql('[ops-split] How many?')").fetchone()[0].startswith("SELECT count(*)")
    assert trace(conn)["confidence"] is None


def test_cost_guard_plans_without_running(connect, mock, admin):
    conn = connect()
    conn.execute("SET nl2sql.generators = open_sql")
    conn.execute("SET nl2sql.candidates = 1")
    conn.execute("SET nl2sql.max_cost = 10000")
    assert conn.execute("SELECT nl2sql('[ops-cost] How many singers?')").fetchone()[0] == "SELECT count(*) FROM singer"
    first, fix = trace(conn)["candidates"]
    assert first["error_kind"] == "cost" and "exceeds nl2sql.max_cost (10000); not executed" in first["error"]
    assert first["exec_ms"] is None and fix["corrects"] == 0 and fix["ok"]
    conn.execute("SET nl2sql.max_corrections = 0")
    with pytest.raises(errors.ConfigurationLimitExceeded) as e:
        conn.execute("SELECT nl2sql('[ops-cost] How many singers?')")
    assert "exceeds nl2sql.max_cost (10000)" in e.value.diag.message_primary
    # Off (0): the same query runs.
    conn.execute("SET nl2sql.max_cost = 0")
    conn.execute("SET nl2sql.statement_timeout = '50ms'")
    with pytest.raises(errors.QueryCanceled):
        conn.execute("SELECT nl2sql('[ops-cost] How many singers?')")


def test_token_budget(connect, mock, admin):
    conn = connect()
    conn.execute("SELECT nl2sql('[ops-count] How many singers?')")
    t = trace(conn)
    estimate = max(c["prompt_tokens_estimate"] for c in t["llm_calls"])
    assert t["tokens"]["prompt"] == sum(c["prompt_tokens"] for c in t["llm_calls"])
    # Room for one candidate of two: the first wave is cut, and the total stays within the budget.
    budget = estimate + 64 + 20
    conn.execute("SET nl2sql.max_tokens_per_call = %s" % budget)
    mock.reset()
    assert conn.execute("SELECT nl2sql('[ops-count] How many singers?')").fetchone()[0] == "SELECT count(*) FROM singer"
    t = trace(conn)
    # The second wave (the one candidate agrees with none) does not fit either.
    assert len(prompts(mock)) == 1 and t["tokens"]["cut"] == ["1 of 2 candidates in wave 1", "3 of 3 candidates in wave 2"]
    assert t["tokens"]["prompt"] + t["tokens"]["completion"] <= budget == t["tokens"]["budget"]
    row = conn.execute("SELECT prompt_tokens + completion_tokens FROM nl2sql.history WHERE id = %s", (t["history_id"],)).fetchone()
    assert row[0] == t["tokens"]["prompt"] + t["tokens"]["completion"]
    # Not even one candidate fits: refused before any request.
    conn.execute("SET nl2sql.max_tokens_per_call = 50")
    mock.reset()
    with pytest.raises(errors.ConfigurationLimitExceeded) as e:
        conn.execute("SELECT nl2sql('[ops-count] How many singers?')")
    assert e.value.diag.message_primary == "question does not fit nl2sql.max_tokens_per_call"
    assert prompts(mock) == []


def stored_values(conn):
    """Every value stored in the test database's tables that could be recognised in a prompt."""
    found = set()
    for (table,) in conn.execute("SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public'").fetchall():
        for (row,) in conn.execute(f"SELECT row_to_json(t) FROM {table} t").fetchall():
            for v in row.values():
                s = str(v).strip()
                if (isinstance(v, str) and len(s) >= 4 and not s.isdigit()) or (isinstance(v, (int, float)) and len(s) >= 5):
                    found.add(s)
    return found


def test_privacy_mode_sends_no_stored_value(connect, mock, admin):
    values = stored_values(admin)
    assert {"Mara Jansen", "Netherlands", "Elm Park"} <= values
    admin.execute("SELECT * FROM nl2sql.create_value_index('singer', 'country')")
    try:
        admin.execute("SELECT nl2sql.add_example('Which stadiums in Millbrook hold more than 52000 people?', "
                      "'SELECT name FROM stadium WHERE location = ''Millbrook'' AND capacity > 52000', 'Millbrook is a place')")
        conn = connect()
        conn.execute("SET nl2sql.examples = 3")
        conn.execute("SET nl2sql.extraction_min_tokens = 0")

        def leaked():
            text = "\n".join(prompts(mock))
            return sorted(v for v in values if v in text)

        # Without privacy the same questions send samples, values and the example's literals.
        mock.reset()
        conn.execute("SELECT nl2sql('[ops-privacy] How many Dutch singers?')")
        assert len(leaked()) > 5
        conn.execute("SET nl2sql.privacy = on")
        for mode in ("full", "zero_shot"):
            conn.execute(f"SET nl2sql.mode = {mode}")
            mock.reset()
            for q in ("[ops-privacy] How many Dutch singers?", "[ops-fail] Which singer names?"):
                try:
                    conn.execute("SELECT nl2sql(%s)", (q,))
                except errors.DivisionByZero:
                    pass
            assert prompts(mock) and leaked() == [], mode
        assert trace(conn)["privacy"] is True
        shown = conn.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        assert "singer" in shown and not [v for v in values if v in shown]
        # What would send rows is refused; only a superuser sets privacy.
        with pytest.raises(errors.FeatureNotSupported):
            conn.execute("SELECT * FROM nl2sql.generate_examples(1)")
        # An embedding endpoint would receive every indexed value.
        conn.execute("SELECT set_config('nl2sql.embedding_url', %s, false)", (mock.url + "/v1",))
        with pytest.raises(errors.FeatureNotSupported):
            conn.execute("SELECT * FROM nl2sql.create_value_index('stadium', 'name')")
        conn.execute("RESET nl2sql.embedding_url")
        with roles(admin, "ops_hal"):
            # Set by the DBA for the role; the role cannot turn it off: not with SET, not
            # before the library is loaded (a placeholder the load refuses), not in its
            # connection options, not by resetting or changing its own role settings.
            # (Spelled as PostgreSQL also reads true: the catalog is read with its spellings.)
            admin.execute("ALTER ROLE ops_hal SET nl2sql.privacy = 'tru'")
            hal = connect(user="ops_hal", options="-c nl2sql.privacy=off")
            hal.execute("SET nl2sql.privacy = off")
            mock.reset()
            hal.execute("SELECT nl2sql('[ops-privacy] How many Dutch singers?')")
            assert trace(hal)["privacy"] is True and prompts(mock) and leaked() == []
            for sql in ("SET nl2sql.privacy = off", "ALTER ROLE ops_hal RESET nl2sql.privacy",
                        "ALTER ROLE ops_hal SET nl2sql.privacy = off", "ALTER ROLE ops_hal IN DATABASE concert_singer SET nl2sql.privacy = off"):
                with pytest.raises(errors.InsufficientPrivilege):
                    hal.execute(sql)
            hal.execute("ALTER ROLE ops_hal RESET ALL")  # leaves what a superuser set
            fresh = connect(user="ops_hal")
            fresh.execute("SELECT nl2sql.last_trace()")  # loads the library: the value is read as a boolean
            assert fresh.execute("SHOW nl2sql.privacy").fetchone()[0] == "on"
        conn.execute("SET nl2sql.privacy = off")
    finally:
        admin.execute("SELECT * FROM nl2sql.drop_value_index('singer', 'country')")


def test_explain_reports_the_operations_settings(connect, mock, admin):
    conn = connect()
    conn.execute("SET nl2sql.max_cost = 5000")
    e = conn.execute("SELECT nl2sql_explain('[ops-count] How many singers?')").fetchone()[0]
    s = e["settings"]
    assert (s["max_cost"], s["privacy"], s["on_low_confidence"], s["history"]) == (5000, False, "notice", True)
    assert e["history_id"] and e["tokens"]["prompt"] > 0
    assert json.dumps(e).count("sk-nl2sql-test") == 0
