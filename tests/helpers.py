"""Helpers the server tests share."""
import contextlib


def prompts(mock):
    """The text of every chat request the mock model received, one string per request."""
    return ["\n".join(m["content"] for m in r["body"]["messages"]) for r in mock.requests()
            if r["path"].endswith("/chat/completions")]


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
