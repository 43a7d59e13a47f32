"""The examples library end to end: what reaches the model's prompt, for whom; synthetic pairs
(QA-SQL) kept only when they run; chains of thought written from the SQL; degrading stages."""
import contextlib

import pytest
from psycopg import errors

from helpers import prompts, scratch_role


def ask(conn, question):
    return conn.execute("SELECT nl2sql(%s)", (question,)).fetchone()[0]


@pytest.fixture
def clean(connect):
    admin = connect()
    admin.execute("DELETE FROM nl2sql.example_store WHERE source <> 'builtin'")
    yield admin
    admin.execute("DELETE FROM nl2sql.example_store WHERE source <> 'builtin'")


def test_examples_reach_the_prompts_of_roles_that_may_read_their_tables(connect, mock, clean):
    admin = clean
    # The chain of thought is written from the SQL when the example is added (a model is set).
    ex_id = admin.execute("SELECT nl2sql.add_example('How many concerts were held in 2014?', "
                          "'SELECT count(*) FROM concert WHERE year = 2014')").fetchone()[0]
    thought = admin.execute("SELECT thought FROM nl2sql.examples WHERE id = %s", (ex_id,)).fetchone()[0]
    assert thought.startswith("#reason: count the concerts of one year") and "#SQL-like:" in thought
    mock.reset()
    admin.execute("SET nl2sql.examples = 3")
    assert ask(admin, "[examples] How many singers are from France?") == "SELECT count(*) FROM singer WHERE country = 'France'"
    trace = admin.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert ex_id in [e["id"] for e in trace["examples"]]
    assert trace["masked_question"].endswith("How many <name> are from <value>")
    gen = [p for p in prompts(mock) if "### Task: write the PostgreSQL query" in p]
    # The Open-SQL generator shows it, with its query in the answer format; the CREATE TABLE
    # generator asks plainly.
    shown = "Question: How many concerts were held in 2014?\n```sql\nSELECT count(*) FROM concert WHERE year = 2014\n```"
    assert len(gen) == 2 and sorted(shown in p for p in gen) == [False, True]
    # The chain of thought goes only to prompts that ask for one.
    assert not any("#reason: count the concerts" in p for p in gen)
    # Disabled: gone from the prompt.
    admin.execute("SELECT nl2sql.enable_example(%s, false)", (ex_id,))
    mock.reset()
    ask(admin, "[examples] How many singers are from France?")
    assert not any("FROM concert WHERE year = 2014" in p for p in prompts(mock))
    admin.execute("SELECT nl2sql.enable_example(%s)", (ex_id,))
    # nl2sql.examples = 0 (the default) shows none.
    admin.execute("RESET nl2sql.examples")
    mock.reset()
    ask(admin, "[examples] How many singers are from France?")
    assert not any("### Examples:" in p for p in prompts(mock))

    # A role that may not read concert is never shown the example, nor its question.
    with scratch_role(admin, "dora", "GRANT SELECT ON singer TO dora"):
        conn = connect()
        conn.execute("SET nl2sql.examples = 3")
        conn.execute("SET ROLE dora")
        mock.reset()
        assert ask(conn, "[examples] How many singers are from France?").startswith("SELECT count(*)")
        assert not any("concerts were held" in p for p in prompts(mock))
        # Granted: shown at once.
        admin.execute("GRANT SELECT ON concert TO dora")
        mock.reset()
        ask(conn, "[examples] How many singers are from France?")
        assert any("concerts were held" in p for p in prompts(mock))


def test_synthetic_pairs_are_kept_only_when_they_run_and_return_rows(connect, mock, clean):
    admin = clean
    notices = []
    admin.add_notice_handler(lambda d: notices.append(d.message_primary))
    rows = admin.execute("SELECT * FROM nl2sql.generate_examples(3)").fetchall()
    # Every table, then every pair of tables joined by a foreign key.
    scopes = [r[0] for r in rows]
    assert scopes[:4] == ["concert", "singer", "singer_in_concert", "stadium"] and len(scopes) == 7
    assert "concert + stadium" in scopes
    first = rows[0]
    # Six pairs written: one repeats the first (normalised: not run again), one fails, one is
    # not a query; three ran, one of them returned no rows; two are kept, and later scopes only
    # repeat them.
    assert first[1:4] == (6, 3, 2)
    assert sum(r[3] for r in rows) == 2
    assert all(r[4] > 0 and r[5] > 0 for r in rows)
    kept = admin.execute("SELECT e.question, e.sql, e.executed, e.relations::text, s.sampled::text FROM nl2sql.examples e "
                         "JOIN nl2sql.example_store s USING (id) WHERE e.source = 'synthetic' ORDER BY id").fetchall()
    # Shown only to roles that may read what the query reads and the tables the model was shown;
    # kept for rows of all of them.
    assert kept == [("How many singers are there?", "SELECT count(*) FROM singer", True, "{concert,singer}", "{concert,singer}"),
                    ("How many stadiums are there?", "SELECT count(*) FROM stadium", True, "{concert,stadium}", "{concert,stadium}")]
    assert any(n.startswith("nl2sql: 1/7 concert: 6 pairs written, 3 ran, 2 kept") for n in notices), notices
    assert any("synthetic examples kept of" in n and "completion tokens" in n for n in notices), notices
    with pytest.raises(errors.InvalidParameterValue):
        admin.execute("SELECT * FROM nl2sql.generate_examples(0)")


def test_synthetic_pairs_never_rest_on_rows_that_depend_on_the_reader(connect, mock, clean):
    """A pair is kept when it returns rows for the curator: over a table with row-level security
    that would tell other readers what only the curator's policy shows. Such pairs are not kept."""
    admin = clean
    try:
        admin.execute("ALTER TABLE stadium ENABLE ROW LEVEL SECURITY")
        rows = admin.execute("SELECT * FROM nl2sql.generate_examples(3)").fetchall()
        kept = admin.execute("SELECT sql FROM nl2sql.examples WHERE source = 'synthetic'").fetchall()
        assert kept == [("SELECT count(*) FROM singer",)] and sum(r[3] for r in rows) == 1
    finally:
        admin.execute("ALTER TABLE stadium DISABLE ROW LEVEL SECURITY")


def test_a_dropped_table_takes_its_examples_with_it(connect, mock, clean):
    """Its OID may name another table later (after wraparound, or in a restore): an example
    left pointing at it would be shown to that table's readers."""
    admin = clean
    admin.execute("DROP TABLE IF EXISTS gone_soon")
    admin.execute("CREATE TABLE gone_soon (id int)")
    admin.execute("INSERT INTO gone_soon VALUES (1)")
    ex = admin.execute("SELECT nl2sql.add_example('How many rows are gone soon?', 'SELECT count(*) FROM gone_soon')").fetchone()[0]
    kept = admin.execute("SELECT nl2sql.add_example('How many concerts were held in 2014?', "
                         "'SELECT count(*) FROM concert WHERE year = 2014')").fetchone()[0]
    # A dropped column is not the table: its examples stay.
    admin.execute("ALTER TABLE gone_soon ADD COLUMN spare int")
    admin.execute("ALTER TABLE gone_soon DROP COLUMN spare")
    assert admin.execute("SELECT count(*) FROM nl2sql.example_store WHERE id = %s", (ex,)).fetchone()[0] == 1
    # A DROP whose examples cannot be deleted in time fails, rather than leaving them behind.
    blocker = connect()
    blocker.execute("BEGIN")
    blocker.execute("LOCK TABLE nl2sql.example_store IN SHARE MODE")
    try:
        admin.execute("SET lock_timeout = '200ms'")
        with pytest.raises(errors.LockNotAvailable):
            admin.execute("DROP TABLE gone_soon")
    finally:
        admin.execute("RESET lock_timeout")
        blocker.execute("ROLLBACK")
    assert admin.execute("SELECT to_regclass('gone_soon') IS NOT NULL").fetchone()[0]
    assert admin.execute("SELECT count(*) FROM nl2sql.example_store WHERE id = %s", (ex,)).fetchone()[0] == 1
    admin.execute("DROP TABLE gone_soon")
    assert admin.execute("SELECT id FROM nl2sql.example_store WHERE id IN (%s, %s)", (ex, kept)).fetchall() == [(kept,)]


def test_an_example_cannot_read_a_temporary_table(connect, clean):
    """A temporary table goes at the end of its session with no sql_drop trigger to take its
    examples with it; its OID could name another table later."""
    admin = clean
    admin.execute("CREATE TEMP TABLE scratch_pad (id int)")
    admin.execute("INSERT INTO scratch_pad VALUES (1)")
    with pytest.raises(errors.FeatureNotSupported) as e:
        admin.execute("SELECT nl2sql.add_example('How many rows are on the pad?', 'SELECT count(*) FROM scratch_pad')")
    assert "temporary" in e.value.diag.message_primary
    assert admin.execute("SELECT count(*) FROM nl2sql.example_store WHERE source <> 'builtin'").fetchone()[0] == 0


def test_generating_needs_the_curator_right(connect, clean):
    admin = clean
    with scratch_role(admin, "eve", "GRANT SELECT ON singer TO eve"):
        conn = connect()
        conn.execute("SET ROLE eve")
        with pytest.raises(errors.InsufficientPrivilege) as e:
            conn.execute("SELECT * FROM nl2sql.generate_examples(3)")
        assert "nl2sql_curator" in e.value.diag.message_hint
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT nl2sql.write_example_thoughts()")
        # A curator writes only about what it may read.
        conn.execute("RESET ROLE")
        admin.execute("GRANT nl2sql_curator TO eve")
        conn.execute("SET ROLE eve")
        rows = conn.execute("SELECT * FROM nl2sql.generate_examples(3)").fetchall()
        assert [r[0] for r in rows] == ["singer"]
        assert conn.execute("SELECT array_agg(DISTINCT relations::text) FROM nl2sql.examples "
                            "WHERE source = 'synthetic'").fetchone()[0] == ["{singer}"]


def test_a_failed_extraction_falls_back_to_the_whole_schema(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.extraction_min_tokens = 0")
    conn.execute("SET nl2sql.llm_max_retries = 0")
    assert ask(conn, "[extract-fails] How many singers?") == "SELECT count(*) FROM singer"
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert "500" in trace["extraction_failed"]
    assert "stadium.capacity" in trace["schema_columns"]


def test_a_lost_generator_leaves_the_others(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.llm_max_retries = 0")
    assert ask(conn, "[one-generator-fails] How many singers?") == "SELECT count(*) FROM singer"
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert [c["generator"] for c in trace["candidates"]][:1] == ["open_sql"]
    assert any(c["error"] for c in trace["llm_calls"])


def test_writing_missing_chains_of_thought(connect, mock, clean):
    admin = clean
    admin.execute("INSERT INTO nl2sql.example_store (question, question_masked, sql, source, executed, relations, added_by, embedding) "
                  "SELECT 'How many concerts were held in 2014?', k.masked, 'SELECT count(*) FROM concert WHERE year = 2014', "
                  "'user', true, ARRAY['concert'::regclass::oid], 10, k.embedding::vector "
                  "FROM nl2sql._example_key('How many concerts were held in 2014?', 'SELECT count(*) FROM concert WHERE year = 2014') k")
    assert admin.execute("SELECT nl2sql.write_example_thoughts()").fetchone()[0] == 1
    assert admin.execute("SELECT thought FROM nl2sql.examples WHERE source = 'user'").fetchone()[0].startswith("#reason:")
    assert admin.execute("SELECT nl2sql.write_example_thoughts()").fetchone()[0] == 0


def test_chains_of_thought_show_no_rows_of_tables_with_row_level_security(connect, mock, clean):
    """A chain of thought is shown to every role that may read the example's tables; a curator
    whose policy shows rows another reader's hides must not have them written into it: the
    prompt that writes it carries no samples of a table with row-level security, nor of a view
    (whose rows may depend on who reads it)."""
    admin = clean
    admin.execute("DROP TABLE IF EXISTS rls_vault")
    admin.execute("CREATE TABLE rls_vault (id int, label text)")
    admin.execute("INSERT INTO rls_vault VALUES (1, 'zz-rls-secret'), (2, 'zz-rls-secret')")
    admin.execute("ALTER TABLE rls_vault ENABLE ROW LEVEL SECURITY")
    # A view that shows each reader its own rows (no row-level security anywhere).
    admin.execute("DROP TABLE IF EXISTS rls_plain")
    admin.execute("CREATE TABLE rls_plain (owner name, label text)")
    admin.execute("INSERT INTO rls_plain VALUES ('rls_cur', 'zz-rls-secret'), ('rls_cur', 'zz-rls-secret'), ('bob', 'x')")
    try:
        with scratch_role(admin, "rls_cur", "GRANT nl2sql_curator TO rls_cur", "GRANT SELECT ON rls_vault TO rls_cur",
                          "CREATE POLICY cur_sees_all ON rls_vault FOR SELECT TO rls_cur USING (true)"):
            admin.execute("CREATE VIEW rls_mine WITH (security_barrier) AS "
                          "SELECT label FROM rls_plain WHERE owner = current_user")
            admin.execute("GRANT SELECT ON rls_mine TO rls_cur")
            admin.execute("SET ROLE rls_cur")
            try:
                assert admin.execute("SELECT count(*) FROM rls_vault").fetchone()[0] == 2
                assert admin.execute("SELECT count(*) FROM rls_mine").fetchone()[0] == 2
                for table in ("rls_vault", "rls_mine"):
                    mock.reset()
                    admin.execute("SELECT nl2sql.add_example('How many labels are there?', "
                                  f"'SELECT count(label) FROM {table}')")
                    sent = prompts(mock)
                    assert sent and any(table in p for p in sent), sent
                    assert not any("zz-rls-secret" in p for p in sent), (table, sent)
            finally:
                admin.execute("RESET ROLE")
    finally:
        admin.execute("DROP VIEW IF EXISTS rls_mine")
        admin.execute("DROP TABLE IF EXISTS rls_vault, rls_plain")


def test_text_written_from_samples_is_hidden_once_the_table_gets_row_level_security(connect, mock, clean):
    """A chain of thought or a synthetic pair written while a table had no row-level security
    may quote its rows, which every reader could read then. Once the table gets row-level
    security, a reader its policy shows none of them must not read them in the example: the
    thought is hidden until written again without samples, the synthetic pair altogether."""
    admin = clean
    admin.execute("DROP TABLE IF EXISTS later_vault")
    admin.execute("CREATE TABLE later_vault (id int, label text)")
    admin.execute("INSERT INTO later_vault VALUES (1, 'zz-later-secret'), (2, 'zz-later-secret')")
    try:
        with scratch_role(admin, "lv_reader", "GRANT SELECT ON later_vault TO lv_reader"):
            mock.reset()
            ex = admin.execute("SELECT nl2sql.add_example('How many vault labels are there?', "
                               "'SELECT count(label) FROM later_vault')").fetchone()[0]
            # The samples were shown, and the model quoted one.
            assert any("zz-later-secret" in p for p in prompts(mock))
            stored = "SELECT sampled::text FROM nl2sql.example_store WHERE id = %s"
            assert admin.execute(stored, (ex,)).fetchone()[0] == "{later_vault}"
            # A synthetic pair written from the same samples (as generate_examples stores one).
            synthetic = ("INSERT INTO nl2sql.example_store (question, question_masked, sql, source, executed, relations, sampled, added_by, embedding) "
                         "SELECT %s, k.masked, %s, 'synthetic', true, '{later_vault}', %s, 10, k.embedding::vector "
                         "FROM nl2sql._example_key(%s, %s) k")
            q, sql = "Which vault rows say zz-later-secret?", "SELECT id FROM later_vault WHERE label = 'zz-later-secret'"
            admin.execute(synthetic, (q, sql, "{later_vault}", q, sql))
            reader = connect()
            reader.execute("SET ROLE lv_reader")
            seen = "SELECT coalesce(string_agg(concat_ws(' ', question, sql, thought), ' '), '') FROM nl2sql.examples"
            # Everyone with SELECT read those rows: shown.
            assert reader.execute(seen).fetchone()[0].count("zz-later-secret") == 3
            admin.execute("ALTER TABLE later_vault ENABLE ROW LEVEL SECURITY")
            assert reader.execute("SELECT count(*) FROM later_vault").fetchone()[0] == 0
            assert "zz-later-secret" not in reader.execute(seen).fetchone()[0]
            # Nor in a prompt made for the reader.
            reader.execute("SET nl2sql.examples = 3")
            mock.reset()
            with contextlib.suppress(errors.Error):  # the scripted answer reads singer
                ask(reader, "[examples] How many vault labels are there?")
            assert not any("zz-later-secret" in p for p in prompts(mock))
            # The user's example stays, without its thought; written again, without the samples.
            assert reader.execute("SELECT thought FROM nl2sql.examples WHERE id = %s", (ex,)).fetchone() == (None,)
            mock.reset()
            assert admin.execute("SELECT nl2sql.write_example_thoughts()").fetchone()[0] == 1
            assert prompts(mock) and not any("zz-later-secret" in p for p in prompts(mock))
            assert admin.execute(stored, (ex,)).fetchone()[0] == "{}"
            assert reader.execute("SELECT thought FROM nl2sql.examples WHERE id = %s", (ex,)).fetchone()[0] is not None
            # A pair written while the table had row-level security saw no samples: shown.
            q, sql = "How many vault rows?", "SELECT count(*) FROM later_vault"
            admin.execute(synthetic, (q, sql, "{}", q, sql))
            assert reader.execute("SELECT count(*) FROM nl2sql.examples WHERE source = 'synthetic'").fetchone()[0] == 1
            reader.execute("RESET ROLE")
    finally:
        admin.execute("DROP TABLE IF EXISTS later_vault")


def test_roles_found_with_members_are_warned_about(connect, conninfo):
    """nl2sql_curator and nl2sql_admin belong to the cluster: CREATE EXTENSION in another
    database, finding them with members, says so rather than trusting them silently."""
    import psycopg
    admin = connect()
    admin.execute("DROP DATABASE IF EXISTS nl2sql_roles_test")
    admin.execute("CREATE DATABASE nl2sql_roles_test")
    with scratch_role(admin, "roles_member", "GRANT nl2sql_curator TO roles_member", "GRANT nl2sql_admin TO roles_member"):
        try:
            with psycopg.connect(autocommit=True, **{**conninfo, "dbname": "nl2sql_roles_test"}) as c:
                seen = []
                c.add_notice_handler(lambda d: seen.append((d.severity_nonlocalized, d.message_primary)))
                c.execute("CREATE EXTENSION nl2sql CASCADE")
            warned = [m for s, m in seen if s == "WARNING"]
            assert any("nl2sql_curator already exists" in m for m in warned), seen
            assert any("nl2sql_admin already exists" in m for m in warned), seen
        finally:
            admin.execute("DROP DATABASE IF EXISTS nl2sql_roles_test WITH (FORCE)")
