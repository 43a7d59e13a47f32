"""Wide schemas: Open-SQL's variable-length schema within nl2sql.schema_max_tokens, linked by
retrieval before any model call, and column search by meaning with the in-database sentence
model (nl2sql.column_embedder = minilm)."""
import os
import re

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
    # Which ledger tables retrieval ranks (or links, then shown under "# Tables for this
    # question:") is a tie among 1,200 near-identical comments: any of them may be named.
    assert "# Tables (names only):\n" in extract, extract
    names = extract.split("# Tables (names only):\n", 1)[1].split("# Tables for this question:\n", 1)[0]
    assert re.search(r"^# ledger_\d+\(id, attr_0, attr_1,", names, re.M), extract
    assert "support_ticket(" not in names, extract
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


def test_a_placeholder_set_before_the_library_loads_is_not_trusted(wide):
    """A role sets nl2sql.column_embedder while the library is not loaded yet (a placeholder
    any role may set); the SECURITY DEFINER refresh its DDL runs loads the library first, which
    drops a value the role had no right to set."""
    with psycopg.connect(autocommit=True, **wide) as admin:
        admin.execute("DROP ROLE IF EXISTS wide_bob")
        admin.execute("CREATE ROLE wide_bob")
        admin.execute("GRANT CREATE ON SCHEMA public TO wide_bob")
        try:
            with psycopg.connect(autocommit=True, **wide) as c:  # a new backend: not loaded
                c.execute("SET client_min_messages = error")
                c.execute("SET ROLE wide_bob")
                c.execute("SET nl2sql.column_embedder = 'minilm'")
                c.execute("CREATE TABLE bob_t (a int, b text)")
            rows = admin.execute("SELECT DISTINCT embedder FROM nl2sql.column_embeddings "
                                 "WHERE relid = 'bob_t'::regclass").fetchall()
            assert rows == [("builtin-v1",)], rows
        finally:
            admin.execute("DROP TABLE IF EXISTS bob_t")
            admin.execute("REVOKE CREATE ON SCHEMA public FROM wide_bob")
            admin.execute("DROP ROLE wide_bob")


def test_huge_comments_and_search_texts_are_cut(wide):
    """A table owner's megabyte comment is not copied into every column's description, and a
    search text longer than a question is refused before any work."""
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("CREATE TABLE huge_comment (a int, b int, c int)")
        try:
            c.execute("DO $$ BEGIN EXECUTE format('COMMENT ON TABLE huge_comment IS %L', repeat('x', 1000000)); "
                      "EXECUTE format('COMMENT ON COLUMN huge_comment.a IS %L', repeat('y', 1000000)); END $$")
            n, longest = c.execute("SELECT count(*), max(length(description)) FROM nl2sql.column_embeddings "
                                   "WHERE relid = 'huge_comment'::regclass").fetchone()
            assert n == 3 and longest <= 2000, (n, longest)
            # The schema prompt of a comment of 20 MB of words shows at most 120 characters of
            # it (the introspection reads 1,000 as a slice; prose() reads no further than its cut).
            c.execute("DO $$ BEGIN EXECUTE format('COMMENT ON COLUMN huge_comment.b IS %L', repeat('z ', 10000000)); END $$")
            prompt = c.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
            assert "huge_comment" in prompt
            for letter in "xyz":
                assert letter * 121 not in prompt and (letter + " ") * 61 not in prompt
            assert len(prompt) < 200_000, len(prompt)
        finally:
            c.execute("DROP TABLE huge_comment")
        for fn in ("search_columns", "search_values"):
            with pytest.raises(errors.InvalidParameterValue):
                c.execute(f"SELECT * FROM nl2sql.{fn}(repeat('a ', 100000), 1)")
        assert c.execute("SELECT count(*) FROM nl2sql.search_columns(repeat('a ', 4000), 1)").fetchone()[0] <= 1


@pytest.mark.parametrize("embedder", ["values", "minilm"])
def test_columns_a_role_cannot_read_do_not_crowd_out_its_own(wide, embedder):
    """A hostile owner makes 300 columns whose names and comments match a common question; a
    role that cannot read them still finds the one column it can read."""
    with psycopg.connect(autocommit=True, **wide) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("DROP ROLE IF EXISTS wide_victim")
        c.execute("CREATE ROLE wide_victim")
        cols = ", ".join(f"revenue_{i} numeric" for i in range(300))
        c.execute(f"CREATE TABLE customer_revenue_bait ({cols})")
        c.execute("DO $$ BEGIN FOR i IN 0..299 LOOP EXECUTE format("
                  "'COMMENT ON COLUMN customer_revenue_bait.%I IS %L', 'revenue_' || i, 'customer revenue'); "
                  "END LOOP; END $$")
        c.execute("CREATE TABLE sales (sale_id int, revenue numeric)")
        c.execute("GRANT SELECT ON sales TO wide_victim")
        try:
            c.execute(f"SET nl2sql.column_embedder = {embedder}")
            c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
            c.execute("SET ROLE wide_victim")
            found = [r[0] for r in c.execute("SELECT relation::text || '.' || column_name "
                                             "FROM nl2sql.search_columns('customer revenue', 5)")]
            assert "sales.revenue" in found, found
            assert not any(f.startswith("customer_revenue_bait.") for f in found), found
        finally:
            c.execute("RESET ROLE")
            c.execute("RESET nl2sql.column_embedder")
            c.execute("DROP TABLE customer_revenue_bait, sales")
            c.execute("DROP ROLE wide_victim")
            c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")


def test_a_missing_model_degrades_column_search_to_names(wide):
    """With nl2sql.column_embedder = minilm and the model's files gone, column search warns
    (without the server's paths, for a plain role) and ranks by names instead of failing
    every question."""
    with psycopg.connect(autocommit=True, **wide) as c:
        share = c.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'").fetchone()[0]
    model = os.path.join(share, "extension", "nl2sql", "all-MiniLM-L6-v2")
    if not os.path.isdir(model) or not os.access(os.path.dirname(model), os.W_OK):
        pytest.skip("the model's directory cannot be moved aside here")
    hidden = model + ".moved-by-test"
    os.rename(model, hidden)
    try:
        with psycopg.connect(autocommit=True, **wide) as c:  # a new backend: nothing loaded
            c.execute("DROP ROLE IF EXISTS wide_carol")
            c.execute("CREATE ROLE wide_carol")
            c.execute("GRANT SELECT ON support_ticket TO wide_carol")
            warnings = []
            # (a notice's fields are read in the handler: they are gone after it)
            c.add_notice_handler(lambda d: warnings.append((d.sqlstate, d.message_primary, d.message_detail, d.message_hint)))
            try:
                c.execute("SET nl2sql.column_embedder = minilm")
                c.execute("SET ROLE wide_carol")
                found = [r[0] for r in c.execute("SELECT relation::text || '.' || column_name "
                                                 "FROM nl2sql.search_columns('support ticket status', 3)")]
                assert "support_ticket.status" in found, found
                w = [d for d in warnings if d[0] == "58P01"]
                assert w and w[0][2] is None and "superuser" in w[0][3], warnings
                assert share not in str(warnings)
                # A refresh a DBA lets her run fails (it is maintenance), and the model loads
                # as the extension's owner: still no path for her.
                c.execute("RESET ROLE")
                c.execute("GRANT EXECUTE ON FUNCTION nl2sql.refresh_value_indexes(regclass), "
                          "nl2sql._refresh_value_indexes(oid) TO wide_carol")
                c.execute("UPDATE nl2sql.column_embeddings SET embedder = 'pending' WHERE relid = 'support_ticket'::regclass")
                c.execute("SET ROLE wide_carol")
                with pytest.raises(psycopg.Error) as e:
                    c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
                assert e.value.sqlstate == "58P01" and e.value.diag.message_detail is None, e.value.diag.message_detail
            finally:
                c.execute("RESET ROLE")
                c.execute("REVOKE ALL ON FUNCTION nl2sql.refresh_value_indexes(regclass), "
                          "nl2sql._refresh_value_indexes(oid) FROM wide_carol")
                c.execute("REVOKE SELECT ON support_ticket FROM wide_carol")
                c.execute("DROP ROLE wide_carol")
                c.execute("RESET nl2sql.column_embedder")
                c.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
    finally:
        os.rename(hidden, model)
