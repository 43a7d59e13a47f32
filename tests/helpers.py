"""Helpers the server tests share."""
import contextlib


def prompts(mock):
    """The text of every chat request the mock model received, one string per request: its
    messages and the grammar it carried (llama.cpp's or vLLM's field), which names what the
    prompt shows and so must hide what the prompt hides."""
    def text(body):
        grammar = body.get("grammar") or (body.get("structured_outputs") or {}).get("grammar") or ""
        return "\n".join([m["content"] for m in body["messages"]] + [grammar])
    return [text(r["body"]) for r in mock.requests() if r["path"].endswith("/chat/completions")]


@contextlib.contextmanager
def scratch_role(admin, name, *grants):
    """A role for one test, with these GRANT statements; dropped with what it owns after."""
    admin.execute(f"DROP ROLE IF EXISTS {name}")
    admin.execute(f"CREATE ROLE {name}")
    for g in grants:
        admin.execute(g)
    try:
        yield
    finally:
        admin.execute(f"DROP OWNED BY {name}")
        admin.execute(f"DROP ROLE {name}")


@contextlib.contextmanager
def hostile_owner(conn, role, *statements, schema=None):
    """A table owner for one test: a fresh role that may create in public (or owns a schema of
    its own, `schema`) runs `statements`, then the session goes back to its own role, asks
    zero-shot with no correction, and collects the NOTICEs it receives (the list yielded). The
    role and what it owns are dropped after."""
    ran = []
    conn.add_notice_handler(lambda n: ran.append(n.message_primary))
    conn.execute("SET nl2sql.mode = zero_shot")
    conn.execute("SET nl2sql.max_corrections = 0")
    grant = f"CREATE SCHEMA {schema} AUTHORIZATION {role}" if schema else f"GRANT CREATE ON SCHEMA public TO {role}"
    with scratch_role(conn, role, grant):
        conn.execute(f"SET ROLE {role}")
        try:
            for statement in statements:
                conn.execute(statement)
        finally:
            conn.execute("RESET ROLE")
        ran.clear()
        yield ran


def her_function(admin, role, function, body):
    """`role`'s PL/pgSQL `function`: `body`, then RETURN true."""
    admin.execute(f"CREATE FUNCTION {function}() RETURNS bool LANGUAGE plpgsql AS $$ BEGIN {body} RETURN true; END $$")
    admin.execute(f"ALTER FUNCTION {function}() OWNER TO {role}")


def police(admin, role, function, table):
    """`table` given to `role`, who forces on herself a policy calling her `function`."""
    admin.execute(f"CREATE POLICY hers ON {table} USING ({function}())")
    admin.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    admin.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    admin.execute(f"ALTER TABLE {table} OWNER TO {role}")
