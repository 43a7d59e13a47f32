"""Only names that exist: with nl2sql.grammar, each request for SQL carries a grammar of the names
its prompt shows (core/src/grammar), built from what the asking role may read, in the endpoint's
form; an endpoint that refuses it is asked again without, and not sent one again."""
import re

from helpers import hostile_owner, scratch_role

RULE = re.compile(r"^[a-z0-9-]+ ::= ")


def chat_requests(mock):
    return [r for r in mock.requests() if r["path"].endswith("/chat/completions")]


def grammar_of(request):
    body = request["body"]
    return body.get("grammar") or (body.get("structured_outputs") or {}).get("grammar")


def well_formed(grammar):
    """Every line a rule of nl2sql's own naming, in printable ASCII: no name made a line."""
    lines = grammar.split("\n")
    assert lines[-1] == "" and all(RULE.match(l) for l in lines[:-1]), grammar
    assert all(" " <= c <= "~" for c in grammar.replace("\n", "")), grammar
    return lines


def test_the_grammar_holds_only_what_the_role_may_read(connect, mock):
    admin = connect()
    admin.execute("DROP TABLE IF EXISTS gr_items, gr_secret")
    admin.execute("CREATE TABLE gr_items (id int PRIMARY KEY, label text, colour text)")
    admin.execute("CREATE TABLE gr_secret (id int PRIMARY KEY, pin text)")
    admin.execute("INSERT INTO gr_items VALUES (1, 'a', 'red'), (2, 'b', 'blue')")
    try:
        with scratch_role(admin, "gr_colin", "GRANT USAGE ON SCHEMA public TO gr_colin", "GRANT SELECT (id, colour) ON gr_items TO gr_colin"):
            db = connect()
            db.execute("SET ROLE gr_colin")
            db.execute("SET nl2sql.mode = zero_shot")
            db.execute("SET nl2sql.grammar = auto")
            assert db.execute("SELECT nl2sql('[grammar] How many items are there?')").fetchone()[0].startswith("SELECT count(*) FROM gr_items")
            sent = [grammar_of(r) for r in chat_requests(mock)]
            assert sent and all(sent), sent
            g = sent[0]
            well_formed(g)
            assert "items" in g and "colour" in g
            # neither the table the role may not read nor the column it was not granted
            assert "secret" not in g and "pin" not in g and "label" not in g, g
            trace = db.execute("SELECT nl2sql.last_trace()").fetchone()[0]
            assert trace["grammar"]["bytes"] == len(g) and trace["grammar"]["relations"] >= 1
            assert trace["llm_calls"][0]["grammar_bytes"] == len(g)

            # the full path too: candidates and the extraction's prompt
            mock.reset()
            db.execute("SET nl2sql.mode = full")
            db.execute("SELECT nl2sql('[grammar] How many items are there?')")
            sent = [grammar_of(r) for r in chat_requests(mock)]
            assert any(sent), sent
            for g in filter(None, sent):
                well_formed(g)
                assert "secret" not in g and "label" not in g
    finally:
        admin.execute("DROP TABLE IF EXISTS gr_items, gr_secret")


def test_on_by_default_in_llama_cpps_form(connect, mock):
    db = connect()
    db.execute("CREATE TEMP TABLE gr_items (id int)")
    db.execute("SET nl2sql.mode = zero_shot")
    db.execute("SELECT nl2sql('[grammar] How many items?')")
    assert db.execute("SHOW nl2sql.grammar").fetchone()[0] == "auto"
    body = chat_requests(mock)[0]["body"]
    assert well_formed(body["grammar"]) and "structured_outputs" not in body


def test_the_endpoints_form_and_off(connect, mock):
    db = connect()
    db.execute("CREATE TEMP TABLE gr_items (id int)")
    db.execute("SET nl2sql.mode = zero_shot")
    db.execute("SET nl2sql.grammar = vllm")
    db.execute("SELECT nl2sql('[grammar] How many items?')")
    body = chat_requests(mock)[0]["body"]
    assert "grammar" not in body and well_formed(body["structured_outputs"]["grammar"])
    mock.reset()
    db.execute("SET nl2sql.grammar = off")
    db.execute("SELECT nl2sql('[grammar] How many items?')")
    body = chat_requests(mock)[0]["body"]
    assert "grammar" not in body and "structured_outputs" not in body
    assert "### Names:" not in body["messages"][-1]["content"]
    assert "grammar" not in db.execute("SELECT nl2sql.last_trace()").fetchone()[0]


def test_an_endpoint_that_refuses_a_grammar_is_asked_without_and_not_sent_one_again(connect, mock):
    db = connect()
    db.execute("CREATE TEMP TABLE gr_items (id int)")
    db.execute("SET nl2sql.mode = zero_shot")
    db.execute("SET nl2sql.grammar = auto")
    assert db.execute("SELECT nl2sql('[grammar-refused] How many items?')").fetchone()[0].startswith("SELECT count(*) FROM gr_items")
    seen = chat_requests(mock)
    assert [bool(grammar_of(r)) for r in seen] == [True, False] and seen[0]["status"] == 400
    trace = db.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    assert "grammar_bytes" not in trace["llm_calls"][0]
    mock.reset()
    db.execute("SELECT nl2sql('[grammar] How many items?')")
    assert [bool(grammar_of(r)) for r in chat_requests(mock)] == [False]


HOSTILE = [
    # names built to close a GBNF string, start a rule, open a class, or break the line
    'CREATE TABLE "gr_x"" | [^""]* | ""y" (id int, "a\\""b" text)',
    'CREATE TABLE "gr_new\nroot ::= [^x]*" (id int, "]) | sql | ([" text)',
    'GRANT SELECT ON "gr_x"" | [^""]* | ""y", "gr_new\nroot ::= [^x]*" TO PUBLIC',
    # a carriage return, DEL, a line separator and an emoji in a table's name; a column named by
    # one double quote, another by a backslash before a control character
    'CREATE TABLE U&"gr_ctl\\000Dx\\007F\\2028\\+01F600" (id int, """" text, U&"bs\\\\\\0001" text)',
    'GRANT SELECT ON U&"gr_ctl\\000Dx\\007F\\2028\\+01F600" TO PUBLIC',
]


def test_hostile_names_stay_inside_the_grammars_literals(connect, mock):
    conn = connect()
    with hostile_owner(conn, "gr_hana", *HOSTILE):
        conn.execute("CREATE TEMP TABLE gr_items (id int)")
        conn.execute("SET nl2sql.grammar = auto")
        conn.execute("SELECT nl2sql('[grammar] How many items?')")
        g = grammar_of(chat_requests(mock)[0])
        lines = well_formed(g)
        # one root, one relation rule, one column rule: her names made no rule of their own
        heads = [l.split(" ::= ")[0] for l in lines[:-1]]
        assert all(heads.count(h) == 1 for h in ("root", "relation", "column", "qualifier", "colref")), heads
        # her line break, as the prompt writes it (U&"gr_new\000Aroot ..."), a backslash escaped
        assert "new\\\\000Aroot" in g, g
        # the second table is there too, its control characters written as escapes
        assert "gr_ctl" in g and "\r" not in g and "\u2028" not in g and "\x7f" not in g, g
