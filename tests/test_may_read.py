"""One meaning of "may read" (sql/may_read.sql), seen through every consumer: the schema prompt,
join paths, abstention's list of tables, the value indexes and searches, the relationships and
keys, the examples and the instructions. Two roles that each lack something: one has SELECT on a
schema's tables and no USAGE on the schema (it cannot read them: PostgreSQL refuses), one has
USAGE and SELECT on some columns only (it reads those)."""
import psycopg
import pytest
from psycopg import errors

from helpers import prompts, scratch_role

SETUP = [
    "DROP SCHEMA IF EXISTS vault CASCADE",
    "CREATE SCHEMA vault",
    "CREATE TABLE vault.ledger (id int PRIMARY KEY, holder text, balance_cents int)",
    "CREATE TABLE vault.entry (id int PRIMARY KEY, ledger_id int REFERENCES vault.ledger, memo text)",
    "COMMENT ON COLUMN vault.ledger.balance_cents IS 'what the holder has left'",
    "INSERT INTO vault.ledger VALUES (1, 'Quentin Marchetti', 500), (2, 'Ysolde Brannigan', 70)",
    "INSERT INTO vault.entry VALUES (1, 1, 'opening'), (2, 2, 'opening')",
]
# nina: SELECT on the tables, no USAGE on vault; colin: USAGE, and some columns only.
NINA = ["GRANT SELECT ON vault.ledger, vault.entry, stadium TO nina"]
COLIN = ["GRANT USAGE ON SCHEMA vault TO colin", "GRANT SELECT (id, holder) ON vault.ledger TO colin",
         "GRANT SELECT (id, ledger_id) ON vault.entry TO colin", "GRANT SELECT ON stadium TO colin"]


@pytest.fixture
def vault(connect):
    admin = connect()
    admin.execute("SET client_min_messages = warning")
    for s in SETUP:
        admin.execute(s)
    admin.execute("DELETE FROM nl2sql.example_store WHERE source <> 'builtin'")
    admin.execute("DELETE FROM nl2sql.instruction_store")
    with scratch_role(admin, "nina", *NINA), scratch_role(admin, "colin", *COLIN):
        yield admin
        admin.execute("DELETE FROM nl2sql.example_store WHERE source <> 'builtin'")
        admin.execute("DELETE FROM nl2sql.instruction_store")
    admin.execute("DROP SCHEMA vault CASCADE")  # the sql_drop trigger takes its value indexes


def as_role(connect, role):
    c = connect()
    c.execute(f"SET ROLE {role}")
    return c


def test_without_usage_nothing_of_the_schema_is_shown(connect, mock, vault):
    admin = vault
    nina = as_role(connect, "nina")
    # PostgreSQL's own answer: the role cannot read the table.
    with pytest.raises(errors.InsufficientPrivilege):
        nina.execute("SELECT holder FROM vault.ledger")
    # The schema prompt, and what it feeds: join paths.
    prompt = nina.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
    assert "stadium" in prompt and "ledger" not in prompt and "entry" not in prompt
    ledger, entry = admin.execute("SELECT 'vault.ledger'::regclass::oid, 'vault.entry'::regclass::oid").fetchone()
    with pytest.raises(errors.UndefinedTable):
        nina.execute("SELECT * FROM nl2sql.join_path(%s::oid::regclass, %s::oid::regclass)", (entry, ledger))
    # Relationships and keys.
    assert nina.execute("SELECT count(*) FROM nl2sql.relationships WHERE from_relation::oid = %s", (entry,)).fetchone()[0] == 0
    assert nina.execute("SELECT count(*) FROM nl2sql.candidate_keys WHERE relation::oid IN (%s, %s)", (entry, ledger)).fetchone()[0] == 0
    # Values.
    admin.execute("SELECT * FROM nl2sql.create_value_index('vault.ledger', 'holder')")
    assert admin.execute("SELECT value FROM nl2sql.search_values('marchetti', 1)").fetchone()[0] == "Quentin Marchetti"
    assert nina.execute("SELECT count(*) FROM nl2sql.value_indexes WHERE relation::oid = %s", (ledger,)).fetchone()[0] == 0
    assert nina.execute("SELECT count(*) FROM nl2sql.search_values('marchetti')").fetchone()[0] == 0
    # Examples and instructions about the schema's tables.
    admin.execute("SELECT nl2sql.add_example('Which holders have more than 100?', "
                  "'SELECT holder FROM vault.ledger WHERE balance_cents > 10000')")
    admin.execute("SELECT nl2sql.add_instruction('Balances are kept in cents', ARRAY['vault.ledger']::regclass[])")
    assert nina.execute("SELECT count(*) FROM nl2sql.examples WHERE source = 'user'").fetchone()[0] == 0
    assert nina.execute("SELECT count(*) FROM nl2sql.instructions").fetchone()[0] == 0
    mock.reset()
    try:
        nina.execute("SELECT nl2sql('[sure] Which holders have a balance in cents above 100?')")
    except psycopg.Error:
        pass
    sent = "\n".join(prompts(mock))
    assert sent and "Marchetti" not in sent and "kept in cents" not in sent and "vault" not in sent
    # Abstention names only what the role may read.
    nina.execute("SET nl2sql.refuse_unrelated = on")
    with pytest.raises(errors.NoDataFound) as e:
        nina.execute("SELECT nl2sql('[no] How many singers are there?')")
    assert e.value.diag.message_hint.startswith("The role may read stadium;")
    assert "ledger" not in e.value.diag.message_hint and "entry" not in e.value.diag.message_hint


def test_column_privileges_show_those_columns_and_nothing_written_about_the_rest(connect, mock, vault):
    admin = vault
    colin = as_role(connect, "colin")
    assert colin.execute("SELECT holder FROM vault.ledger ORDER BY id").fetchall() == [("Quentin Marchetti",), ("Ysolde Brannigan",)]
    prompt = colin.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
    assert "ledger" in prompt and "holder" in prompt and "ledger_id" in prompt
    assert "balance_cents" not in prompt and "what the holder has left" not in prompt and "memo" not in prompt
    ledger, entry = admin.execute("SELECT 'vault.ledger'::regclass::oid, 'vault.entry'::regclass::oid").fetchone()
    rows = colin.execute("SELECT join_condition FROM nl2sql.join_path(%s::oid::regclass, %s::oid::regclass)", (entry, ledger)).fetchall()
    assert rows == [("vault.entry.ledger_id = vault.ledger.id",)]
    # The relationship between readable columns is shown; keys on readable columns too.
    assert colin.execute("SELECT from_columns::text, to_columns::text FROM nl2sql.relationships WHERE from_relation::oid = %s",
                         (entry,)).fetchall() == [("{ledger_id}", "{id}")]
    assert colin.execute("SELECT count(*) FROM nl2sql.candidate_keys WHERE relation::oid = %s", (ledger,)).fetchone()[0] == 1
    # A value index on a granted column serves; one on another column is not shown.
    admin.execute("SELECT * FROM nl2sql.create_value_index('vault.ledger')")
    assert [r[0] for r in colin.execute("SELECT column_name FROM nl2sql.value_indexes WHERE relation::oid = %s", (ledger,))] == ["holder"]
    assert colin.execute("SELECT value FROM nl2sql.search_values('brannigan', 1)").fetchone()[0] == "Ysolde Brannigan"
    # Text a curator wrote about the table may name any of its columns: shown to roles that may
    # read all of it, not to colin.
    admin.execute("SELECT nl2sql.add_example('Which holders have more than 100?', "
                  "'SELECT holder FROM vault.ledger WHERE balance_cents > 10000')")
    admin.execute("SELECT nl2sql.add_instruction('Balances are kept in cents', ARRAY['vault.ledger']::regclass[])")
    assert colin.execute("SELECT count(*) FROM nl2sql.examples WHERE source = 'user'").fetchone()[0] == 0
    assert colin.execute("SELECT count(*) FROM nl2sql.instructions").fetchone()[0] == 0
    # Granted every column one by one, it may read all of the table: the same as SELECT on it.
    admin.execute("GRANT SELECT (balance_cents) ON vault.ledger TO colin")
    assert colin.execute("SELECT count(*) FROM nl2sql.examples WHERE source = 'user'").fetchone()[0] == 1
    assert colin.execute("SELECT count(*) FROM nl2sql.instructions").fetchone()[0] == 1
    mock.reset()
    try:
        colin.execute("SELECT nl2sql('[sure] Which holders have a balance in cents above 100?')")
    except psycopg.Error:
        pass
    assert "kept in cents" in "\n".join(prompts(mock))


def test_the_definition_itself(connect, vault):
    """The three functions, for roles given by OID: a relation, a column, all of a relation."""
    admin = vault
    q = ("SELECT nl2sql._may_read(r.oid, %(rel)s::regclass), nl2sql._may_read_column(r.oid, %(rel)s::regclass, 2::int2), "
         "nl2sql._may_read_column(r.oid, %(rel)s::regclass, 3::int2), nl2sql._may_read_all(r.oid, %(rel)s::regclass) "
         "FROM pg_roles r WHERE r.rolname = %(role)s")
    assert admin.execute(q, {"rel": "vault.ledger", "role": "nina"}).fetchone() == (False, False, False, False)
    assert admin.execute(q, {"rel": "vault.ledger", "role": "colin"}).fetchone() == (True, True, False, False)
    assert admin.execute(q, {"rel": "stadium", "role": "colin"}).fetchone() == (True, True, True, True)
    # A dropped column, a column number that does not exist, a relation that does not: no.
    assert admin.execute("SELECT nl2sql._may_read_column(nl2sql._me(), 'vault.ledger'::regclass, 99::int2), "
                         "nl2sql._may_read(nl2sql._me(), 0), nl2sql._may_read_all(nl2sql._me(), 0)").fetchone() == (False, False, False)
    # Not a relation rows are read from.
    assert admin.execute("SELECT nl2sql._may_read(nl2sql._me(), 'vault.ledger_pkey'::regclass)").fetchone()[0] is False
    # Another session's temporary table: not even for a superuser.
    other = connect()
    other.execute("CREATE TEMP TABLE scratch (x int)")
    oid = other.execute("SELECT 'scratch'::regclass::oid").fetchone()[0]
    assert other.execute("SELECT nl2sql._may_read(nl2sql._me(), %s)", (oid,)).fetchone()[0] is True
    assert admin.execute("SELECT nl2sql._may_read(nl2sql._me(), %s)", (oid,)).fetchone()[0] is False


def test_a_search_path_she_chose_changes_nothing_the_definition_asks(connect, vault):
    """Every name in the definition is pg_catalog's: functions a role puts first on its own
    search_path (as ALTER ROLE ... SET would) are never called by it."""
    admin = vault
    ledger = admin.execute("SELECT 'vault.ledger'::regclass::oid").fetchone()[0]
    with scratch_role(admin, "mr_evil"):
        admin.execute("CREATE SCHEMA mr_evil AUTHORIZATION mr_evil")
        evil = as_role(connect, "mr_evil")
        for fn in ("has_schema_privilege(oid, oid, text)", "has_any_column_privilege(oid, oid, text)",
                   "has_table_privilege(oid, oid, text)", "has_column_privilege(oid, oid, smallint, text)",
                   "pg_my_temp_schema()"):
            returns = "oid" if fn.startswith("pg_my_temp_schema") else "boolean"
            body = "SELECT 'vault'::regnamespace::oid" if returns == "oid" else "SELECT true"
            evil.execute(f"CREATE FUNCTION mr_evil.{fn} RETURNS {returns} LANGUAGE sql AS $${body}$$")
        evil.execute("SET search_path = mr_evil, pg_catalog")
        got = evil.execute("SELECT nl2sql._may_read(nl2sql._me(), %s), nl2sql._may_read_column(nl2sql._me(), %s, 2::int2), "
                           "nl2sql._may_read_all(nl2sql._me(), %s)", (ledger, ledger, ledger)).fetchone()
        assert got == (False, False, False)
        admin.execute("SELECT nl2sql.add_instruction('Balances are kept in cents', ARRAY['vault.ledger']::regclass[])")
        assert evil.execute("SELECT count(*) FROM nl2sql.instructions").fetchone()[0] == 0
        evil.close()


def test_a_primary_key_is_shown_only_when_every_column_of_it_may_be_read(connect):
    """A key names its columns: one over a column the role was not granted is not shown at all
    (its name is the role's to see only with the column)."""
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS mr_badge")
    admin.execute("CREATE TABLE mr_badge (site int, mr_hidden_ssn text, label text, PRIMARY KEY (site, mr_hidden_ssn))")
    try:
        with scratch_role(admin, "mr_pia", "GRANT USAGE ON SCHEMA public TO mr_pia", "GRANT SELECT (site, label) ON mr_badge TO mr_pia"):
            pia = connect()
            pia.execute("SET ROLE mr_pia")
            prompt = pia.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
            assert "mr_badge" in prompt and "label" in prompt, prompt
            assert "mr_hidden_ssn" not in prompt and "PRIMARY_KEY" not in prompt, prompt
            pia.execute("RESET ROLE")
            admin.execute("GRANT SELECT (mr_hidden_ssn) ON mr_badge TO mr_pia")
            pia.execute("SET ROLE mr_pia")
            prompt = pia.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
            assert "site: integer, PRIMARY_KEY" in prompt and "mr_hidden_ssn: text, PRIMARY_KEY" in prompt, prompt
    finally:
        admin.execute("DROP TABLE IF EXISTS mr_badge")


def test_a_noinherit_member_is_shown_only_what_its_own_role_may_read(connect, mock, vault):
    """A role created NOINHERIT does not use its roles' privileges until it SETs ROLE to one
    (PostgreSQL's rule): nothing of the tables only its role may read is shown, searched or
    named, and SET ROLE to that role shows them."""
    admin = vault
    admin.execute("SELECT * FROM nl2sql.create_value_index('vault.ledger', 'holder')")
    admin.execute("DROP ROLE IF EXISTS nora")
    admin.execute("CREATE ROLE nora NOINHERIT IN ROLE colin")
    try:
        nora = as_role(connect, "nora")
        with pytest.raises(errors.InsufficientPrivilege):
            nora.execute("SELECT holder FROM vault.ledger")
        assert "ledger" not in nora.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        assert nora.execute("SELECT count(*) FROM nl2sql.search_values('quentin marchetti')").fetchone()[0] == 0
        assert ("vault.ledger",) not in nora.execute("SELECT relation::text FROM nl2sql.search_columns('ledger holder', 50)").fetchall()
        # As colin it reads the columns colin may, and is shown those.
        nora.execute("SET ROLE colin")
        assert "holder" in nora.execute("SELECT nl2sql.schema_prompt()").fetchone()[0]
        assert nora.execute("SELECT value FROM nl2sql.search_values('quentin marchetti', 1)").fetchall() == [("Quentin Marchetti",)]
    finally:
        admin.execute("DROP ROLE nora")
