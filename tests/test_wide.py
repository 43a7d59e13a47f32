"""Wide schemas: Open-SQL's variable-length schema within nl2sql.schema_max_tokens, linked by
retrieval before any model call, and column search by meaning with the in-database sentence
model (nl2sql.column_embedder = minilm)."""
import psycopg
import pytest
from psycopg import errors

DB = "nl2sql_wide_test"
QUESTION = "[wide] How many support tickets are still open?"


@pytest.fixture(scope="module")
def wide(conninfo):
    """A database of 80 unrelated tables of 15 commented columns, plus support_ticket with
    rows and a value index; dropped afterwards."""
    admin = psycopg.connect(autocommit=True, **{**conninfo, "dbname": "postgres"})
    admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {DB}")
    with psycopg.connect(autocommit=True, **{**conninfo, "dbname": DB}) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        for t in range(80):
            cols = ", ".join(f"attr_{i} text" for i in range(15))
            c.execute(f"CREATE TABLE ledger_{t} (id int PRIMARY KEY, {cols})")
            for i in range(15):
                c.execute(f"COMMENT ON COLUMN ledger_{t}.attr_{i} IS 'bookkeeping attribute number {i} of ledger {t}'")
        c.execute("CREATE TABLE support_ticket (ticket_id int PRIMARY KEY, status text NOT NULL, opened_at date)")
        c.execute("INSERT INTO support_ticket SELECT g, (ARRAY['open', 'closed', 'pending'])[g % 3 + 1], "
                  "date '2024-01-01' + g FROM generate_series(1, 30) g")
        c.execute("SELECT count(*) FROM nl2sql.create_value_index('support_ticket')")
    yield {**conninfo, "dbname": DB}
    admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.close()


def test_wide_schema_keeps_linked_tables_in_full_and_others_by_name(wide, mock):
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("SET nl2sql.schema_max_tokens = 1500")
        c.execute("SET nl2sql.candidates = 1")
        sql = c.execute("SELECT nl2sql(%s)", (QUESTION,)).fetchone()[0]
        assert sql == "SELECT count(*) FROM support_ticket WHERE status = 'open'"
        t = c.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    # Retrieval linked the ticket table's columns before any model call.
    assert "support_ticket.status" in t["linked"], t["linked"]
    # The extraction saw it in full (with its values) and the other tables by name, within budget.
    extract = mock.requests()[0]["body"]["messages"][1]["content"]
    assert "# support_ticket (\n" in extract and "#   status: text, VALUES ('closed', 'open', 'pending')" in extract, extract
    assert "# Tables (names only):\n" in extract and "# ledger_0(id, attr_0, attr_1," in extract
    # The candidate's schema: within nl2sql.schema_max_tokens, every table at least by name or
    # counted as left out.
    assert t["schema_tokens"] <= 1500
    assert "#   status: text" in t["schema"] and "(names only):" in t["schema"]
    assert t["tables_shown"] + t["tables_omitted"] == 81
    assert "support_ticket.status" in t["schema_columns"]
    # A budget the whole schema fits leaves the plain form (no linking needed).
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("SET nl2sql.schema_max_tokens = 100000")
        c.execute("SET nl2sql.mode = zero_shot")
        c.execute("SELECT nl2sql(%s)", (QUESTION,))
        t = c.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert "linked" not in t and t["tables_omitted"] == 0 and "names only" not in t["schema"]


def test_zero_shot_links_a_wide_schema_too(wide, mock):
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("SET nl2sql.schema_max_tokens = 1500")
        c.execute("SET nl2sql.mode = zero_shot")
        c.execute("SELECT nl2sql(%s)", (QUESTION,))
        t = c.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert "support_ticket.status" in t["linked"]
    prompt = mock.requests()[0]["body"]["messages"][1]["content"]
    assert "#   status: text, VALUES" in prompt and "(names only):" in prompt
    assert t["schema_tokens"] <= 1500


def test_column_search_by_meaning(wide):
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE TABLE employee (employee_id int PRIMARY KEY, full_name text, salary numeric, hired_on date)")
        question = "how much does each worker earn"
        c.execute("SET nl2sql.column_embedder = minilm")
        c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
        rows = c.execute("SELECT DISTINCT embedder, vector_dims(embedding) FROM nl2sql.column_embeddings").fetchall()
        assert rows == [("all-MiniLM-L6-v2@nl2sql", 384)], rows
        top = c.execute("SELECT relation::text || '.' || column_name FROM nl2sql.search_columns(%s, 3)", (question,)).fetchall()
        assert top[0][0] == "employee.salary", top
        # The examples library's masked questions got the model's vectors too; one added now
        # gets its vector at once, and examples are found by meaning.
        assert c.execute("SELECT count(*) FROM nl2sql.example_store WHERE meaning IS NULL").fetchone()[0] == 0
        c.execute("INSERT INTO employee VALUES (1, 'Ada', 5000, '2020-01-01')")
        eid = c.execute("SELECT nl2sql.add_example('What is the pay of every staff member?', "
                        "'SELECT full_name, salary FROM employee')").fetchone()[0]
        assert c.execute("SELECT vector_dims(meaning) FROM nl2sql.example_store WHERE id = %s", (eid,)).fetchone() == (384,)
        c.execute("SET nl2sql.examples = 1")
        c.execute("SET nl2sql.candidates = 1")
        e = c.execute("SELECT nl2sql_explain(%s)", ("[wide] How much does each worker earn?",)).fetchone()[0]
        assert [x["id"] for x in e["examples"]] == [eid], e["examples"]
        c.execute("RESET nl2sql.examples")
        c.execute("RESET nl2sql.candidates")
        # A refresh embeds only what changed: a new column waits, the others keep their vectors.
        before = c.execute("SELECT xmin::text FROM nl2sql.column_embeddings WHERE relid = 'employee'::regclass AND attnum = 3").fetchone()
        c.execute("ALTER TABLE employee ADD COLUMN bonus numeric")
        assert c.execute("SELECT embedder FROM nl2sql.column_embeddings WHERE relid = 'employee'::regclass AND attnum = 5").fetchone() == ("pending",)
        c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
        assert c.execute("SELECT count(*) FROM nl2sql.column_embeddings WHERE embedder = 'pending'").fetchone()[0] == 0
        after = c.execute("SELECT xmin::text FROM nl2sql.column_embeddings WHERE relid = 'employee'::regclass AND attnum = 3").fetchone()
        assert before == after
        # Back to the built-in embedder: signatures again, and the vectors are not compared.
        c.execute("RESET nl2sql.column_embedder")
        c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
        assert c.execute("SELECT DISTINCT embedder FROM nl2sql.column_embeddings").fetchall() == [("builtin-v1",)]


def test_column_embedder_is_for_superusers(wide):
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("DROP ROLE IF EXISTS wide_ann")
        c.execute("CREATE ROLE wide_ann")
        try:
            c.execute("SELECT nl2sql.last_trace()")  # loads the library: the setting exists
            c.execute("SET ROLE wide_ann")
            with pytest.raises(errors.InsufficientPrivilege):
                c.execute("SET nl2sql.column_embedder = minilm")
        finally:
            c.execute("RESET ROLE")
            c.execute("DROP ROLE wide_ann")
