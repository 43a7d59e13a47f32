"""Fixtures for the server-side tests; tests/run.sh starts the cluster and the mock LLM."""
import json
import os
import urllib.request

import psycopg
import pytest


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.exit("run these tests through tests/run.sh (missing %s)" % name, returncode=2)
    return value


@pytest.fixture(scope="session")
def conninfo():
    return {"host": _env("NL2SQL_TEST_PGHOST"), "port": _env("NL2SQL_TEST_PGPORT"),
            "user": "postgres", "dbname": "concert_singer"}


@pytest.fixture
def connect(conninfo):
    """Opens autocommit connections to concert_singer, closed after the test."""
    opened = []

    def _connect(**kw):
        # The scripted model's answers are the same for every candidate and carry no scores:
        # at the default nl2sql.alone_confidence (0) the first one would always stand alone, and
        # the tests of waves, votes, examples and confidence would see one candidate. They run
        # with the earlier threshold (0.3); tests of the default set it themselves.
        kw.setdefault("options", "-c nl2sql.alone_confidence=0.3")
        c = psycopg.connect(autocommit=True, **{**conninfo, **kw})
        opened.append(c)
        return c

    yield _connect
    for c in opened:
        c.close()


class Mock:
    def __init__(self, url):
        self.url = url

    def reset(self):
        urllib.request.urlopen(urllib.request.Request(self.url + "/reset", data=b"{}", method="POST"), timeout=5)

    def requests(self, probes=False):
        """The requests received; without probes: the requests for several answers at once
        (OpenAI's n) that the mock refused as llama.cpp's server does, after which nl2sql sends
        one request per candidate."""
        with urllib.request.urlopen(self.url + "/requests", timeout=5) as r:
            seen = json.load(r)
        return seen if probes else [r for r in seen if not is_probe(r)]


def is_probe(request):
    return (request["body"].get("n") or 1) > 1 and request.get("status") == 400


@pytest.fixture
def mock():
    m = Mock(_env("NL2SQL_TEST_MOCK_URL"))
    m.reset()
    return m


@pytest.fixture(scope="session")
def server_log():
    return _env("NL2SQL_TEST_SERVER_LOG")
