"""Instructions end to end: what reaches the model's prompt, in which modes and for whom; who may
write them and about what; what a dropped table takes with it."""
import psycopg
import pytest
from psycopg import errors

from helpers import prompts, scratch_role

SENIOR = "A senior singer is one aged 60 or more: singer.age >= 60"
WEEKEND = "Weekend concerts are those held on Saturday or Sunday"


def ask(conn, question):
    try:
        return conn.execute("SELECT nl2sql(%s)", (question,)).fetchone()[0]
    except psycopg.Error as e:
        return e


@pytest.fixture
def clean(connect):
    admin = connect()
    admin.execute("DELETE FROM nl2sql.instruction_store")
    yield admin
    admin.execute("DELETE FROM nl2sql.instruction_store")


def test_instructions_reach_the_prompts_of_every_mode_for_roles_that_may_read_their_tables(connect, mock, clean):
    admin = clean
    # Without tables: those its text names (singer), as the caller's search_path finds them.
    senior = admin.execute("SELECT nl2sql.add_instruction(%s)", (SENIOR,)).fetchone()[0]
    weekend = admin.execute("SELECT nl2sql.add_instruction(%s, ARRAY['concert']::regclass[], "
                            "'extract(isodow FROM date) IN (6, 7)')", (WEEKEND,)).fetchone()[0]
    rows = admin.execute("SELECT id, relations::text, sql, added_by::text, enabled FROM nl2sql.instructions ORDER BY id").fetchall()
    assert rows == [(senior, "{singer}", None, "postgres", True), (weekend, "{concert}", "extract(isodow FROM date) IN (6, 7)", "postgres", True)]

    for mode in ("full", "zero_shot", "interactive"):
        admin.execute("SET nl2sql.mode = %s" % mode)
        mock.reset()
        ask(admin, "[sure] How many senior singers are there?")
        shown = prompts(mock)
        assert shown and all(SENIOR in p for p in shown), mode
        assert not any("Weekend" in p for p in shown), mode
        trace = admin.execute("SELECT nl2sql.last_trace()").fetchone()[0]
        assert [i["id"] for i in trace["instructions"]] == [senior], mode
    admin.execute("RESET nl2sql.mode")

    # The fragment follows the text.
    mock.reset()
    ask(admin, "[sure] How many weekend concerts were there?")
    assert any(WEEKEND + " (SQL: extract(isodow FROM date) IN (6, 7))" in p for p in prompts(mock))

    # Disabled: gone; enabled: back; nl2sql.instructions = 0: none; privacy keeps them.
    assert admin.execute("SELECT nl2sql.enable_instruction(%s, false)", (senior,)).fetchone()[0] is True
    mock.reset()
    ask(admin, "[sure] How many senior singers are there?")
    assert not any(SENIOR in p for p in prompts(mock))
    admin.execute("SELECT nl2sql.enable_instruction(%s)", (senior,))
    admin.execute("SET nl2sql.instructions = 0")
    mock.reset()
    ask(admin, "[sure] How many senior singers are there?")
    assert not any(SENIOR in p for p in prompts(mock))
    admin.execute("RESET nl2sql.instructions")
    admin.execute("SET nl2sql.privacy = on")
    mock.reset()
    ask(admin, "[sure] How many senior singers are there?")
    assert any(SENIOR in p for p in prompts(mock))
    admin.execute("RESET nl2sql.privacy")

    # A role that may not read singer is never shown the instruction about it, nor sees it. (The
    # question must reach the model for that to be tested: it names singers, which this role's
    # tables do not hold, so it would be refused before any prompt.)
    with scratch_role(admin, "iris", "GRANT SELECT ON concert TO iris"):
        conn = connect()
        conn.execute("SET nl2sql.refuse_unrelated = off")
        conn.execute("SET ROLE iris")
        assert [r[0] for r in conn.execute("SELECT id FROM nl2sql.instructions")] == [weekend]
        mock.reset()
        ask(conn, "[sure] How many senior singers are there?")
        shown = prompts(mock)
        assert shown and not any(SENIOR in p for p in shown)
        admin.execute("GRANT SELECT ON singer TO iris")
        mock.reset()
        ask(conn, "[sure] How many senior singers are there?")
        assert any(SENIOR in p for p in prompts(mock))


def test_only_curators_write_instructions_and_only_about_what_they_may_read(connect, clean):
    admin = clean
    senior = admin.execute("SELECT nl2sql.add_instruction(%s)", (SENIOR,)).fetchone()[0]
    with scratch_role(admin, "ivy", "GRANT SELECT ON concert, singer TO ivy"):
        conn = connect()
        conn.execute("SET ROLE ivy")
        with pytest.raises(errors.InsufficientPrivilege) as e:
            conn.execute("SELECT nl2sql.add_instruction('revenue excludes refunds')")
        assert e.value.diag.message_hint == "GRANT nl2sql_curator TO the role that curates instructions."
        for call in ("SELECT nl2sql.remove_instruction(%s)", "SELECT nl2sql.enable_instruction(%s, false)"):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(call, (senior,))
    with scratch_role(admin, "cura", "GRANT nl2sql_curator TO cura", "GRANT SELECT ON concert TO cura"):
        conn = connect()
        conn.execute("SET ROLE cura")
        with pytest.raises(errors.InsufficientPrivilege) as e:
            conn.execute("SELECT nl2sql.add_instruction('old singers', ARRAY['singer']::regclass[])")
        assert e.value.diag.message_primary == "permission denied for table singer"
        # A table its text names that it may not read: refused, not left out.
        with pytest.raises(errors.InsufficientPrivilege) as e:
            conn.execute("SELECT nl2sql.add_instruction('concerts of singer stars')")
        assert e.value.diag.message_primary == "permission denied for table singer"
        assert e.value.diag.message_hint.startswith("Pass tables => ARRAY")
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        mine = conn.execute("SELECT nl2sql.add_instruction('a sold-out concert sold every seat')").fetchone()[0]
        assert notices == ["nl2sql: the instruction concerns concert"]
        assert admin.execute("SELECT relations::text FROM nl2sql.instructions WHERE id = %s", (mine,)).fetchone()[0] == "{concert}"
        # Naming no table is an error; an empty list says it is about the whole database.
        with pytest.raises(errors.InvalidParameterValue) as e:
            conn.execute("SELECT nl2sql.add_instruction('the fiscal year starts on 1 April')")
        assert e.value.diag.message_primary == "instruction names no table"
        wide = conn.execute("SELECT nl2sql.add_instruction('the fiscal year starts on 1 April', '{}')").fetchone()[0]
        assert admin.execute("SELECT relations::text FROM nl2sql.instructions WHERE id = %s", (wide,)).fetchone()[0] == "{}"
        # What it may not see, it can neither remove nor disable, nor learn exists.
        assert conn.execute("SELECT nl2sql.remove_instruction(%s)", (senior,)).fetchone()[0] is False
        assert conn.execute("SELECT nl2sql.enable_instruction(%s, false)", (senior,)).fetchone()[0] is False
        assert admin.execute("SELECT enabled FROM nl2sql.instruction_store WHERE id = %s", (senior,)).fetchone()[0] is True
        assert conn.execute("SELECT nl2sql.remove_instruction(%s)", (mine,)).fetchone()[0] is True
        # Nobody writes the store directly.
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("UPDATE nl2sql.instruction_store SET instruction = 'x'")


def test_bad_instructions_are_refused_with_their_sqlstate(clean):
    admin = clean
    cases = [
        ("SELECT nl2sql.add_instruction('  ')", errors.InvalidParameterValue),
        ("SELECT nl2sql.add_instruction(NULL)", errors.NullValueNotAllowed),
        ("SELECT nl2sql.add_instruction(repeat('x', 2001))", errors.ProgramLimitExceeded),
        ("SELECT nl2sql.add_instruction('x', NULL, repeat('y', 4001))", errors.ProgramLimitExceeded),
        ("SELECT nl2sql.add_instruction('x', ARRAY['singer', NULL]::regclass[])", errors.NullValueNotAllowed),
        ("SELECT nl2sql.add_instruction('x', ARRAY[4294967000]::oid[]::regclass[])", errors.UndefinedTable),
        ("SELECT nl2sql.add_instruction('x', ARRAY['pg_catalog.pg_class']::regclass[])", errors.WrongObjectType),
        ("SELECT nl2sql.add_instruction('x', ARRAY['nl2sql.example_store']::regclass[])", errors.WrongObjectType),
        ("SELECT nl2sql.add_instruction('x', array_fill('singer'::regclass, ARRAY[101]))", errors.ProgramLimitExceeded),
        ("SELECT nl2sql.add_instruction('x')", errors.InvalidParameterValue),
    ]
    for sql, error in cases:
        with pytest.raises(error):
            admin.execute(sql)
    admin.execute("CREATE TEMP TABLE scratch (a int)")
    with pytest.raises(errors.FeatureNotSupported):
        admin.execute("SELECT nl2sql.add_instruction('x', ARRAY['scratch']::regclass[])")
    assert admin.execute("SELECT count(*) FROM nl2sql.instruction_store").fetchone()[0] == 0
    assert admin.execute("SELECT nl2sql.remove_instruction(-1)").fetchone()[0] is False


def test_a_dropped_table_takes_its_instructions(clean):
    admin = clean
    admin.execute("CREATE TABLE tour (id int, city text)")
    try:
        about_tour = admin.execute("SELECT nl2sql.add_instruction('a long tour visits more than 10 cities', ARRAY['tour']::regclass[])").fetchone()[0]
        general = admin.execute("SELECT nl2sql.add_instruction('the fiscal year starts on 1 April', '{}')").fetchone()[0]
    finally:
        admin.execute("DROP TABLE tour")
    assert [r[0] for r in admin.execute("SELECT id FROM nl2sql.instruction_store")] == [general]
    assert about_tour != general
