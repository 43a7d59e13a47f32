"""Interactive mode (Interactive-T2S) with the scripted model: the agent's turns, its tools as
SQL functions, the same privileges as everything else."""
import pytest
from psycopg import errors


def test_the_agent_answers_in_turns(connect, mock):
    conn = connect()
    conn.execute("SET nl2sql.mode = interactive")
    sql = conn.execute("SELECT nl2sql('[agent] How many concerts had a French singer?')").fetchone()[0]
    assert sql == ("SELECT count(DISTINCT sic.concert_id) FROM singer_in_concert sic JOIN singer s "
                   "ON s.singer_id = sic.singer_id WHERE s.country = 'France'")
    t = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    tools = [turn["action"]["tool"] for turn in t["turns"]]
    assert tools == ["search_columns", "join_path", "execute_sql", "done"]
    assert "singer.country: text" in t["turns"][0]["observation"]
    assert t["turns"][1]["observation"] == ("singer_in_concert.singer_id = singer.singer_id AND "
                                           "singer_in_concert.concert_id = concert.concert_id")
    assert t["turns"][2]["observation"].startswith("1 row (columns: count): (")
    # The model was shown the table names, not their columns.
    first = mock.requests()[0]["body"]["messages"][1]["content"]
    assert first.startswith("### Tables: concert, singer, singer_in_concert, stadium\n### Task: answer the question below")
    assert "VALUES (" not in first
    # In the history like every call, with its mode.
    assert conn.execute("SELECT mode FROM nl2sql.history WHERE id = %s", (t["history_id"],)).fetchone()[0] == "interactive"
    e = conn.execute("SELECT nl2sql_explain('[agent] How many concerts had a French singer?')").fetchone()[0]
    assert e["settings"]["mode"] == "interactive" and e["settings"]["agent_max_turns"] == 10 and len(e["turns"]) == 4


def test_join_path_is_a_function_of_its_own(connect):
    conn = connect()
    rows = conn.execute("SELECT step, join_condition FROM nl2sql.join_path('singer', 'concert')").fetchall()
    assert rows == [(1, "singer_in_concert.singer_id = singer.singer_id"), (2, "singer_in_concert.concert_id = concert.concert_id")]
    assert conn.execute("SELECT count(*) FROM nl2sql.join_path('stadium', 'stadium')").fetchone()[0] == 0
    conn.execute("DROP TABLE IF EXISTS loner")
    conn.execute("CREATE TABLE loner (id int)")
    try:
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        assert conn.execute("SELECT count(*) FROM nl2sql.join_path('loner', 'singer')").fetchone()[0] == 0
        assert notices == ["no foreign keys join loner and singer"]
        # Only the tables the role may read.
        conn.execute("DROP ROLE IF EXISTS agent_ivy")
        conn.execute("CREATE ROLE agent_ivy")
        conn.execute("GRANT SELECT ON singer, singer_in_concert TO agent_ivy")
        conn.execute("SET ROLE agent_ivy")
        with pytest.raises(errors.UndefinedTable):
            conn.execute("SELECT * FROM nl2sql.join_path('singer', 'concert')")
        conn.execute("RESET ROLE")
    finally:
        conn.execute("RESET ROLE")
        conn.execute("DROP TABLE loner")
        conn.execute("DROP OWNED BY agent_ivy")
        conn.execute("DROP ROLE agent_ivy")
