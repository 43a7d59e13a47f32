#!/usr/bin/env bash
# Server-side tests: pg_regress suites (pg_test/) and the Python tests (tests/test_*.py), against a
# throwaway cluster with the installed extension and the scripted mock LLM on 127.0.0.1.
#   tests/run.sh              everything
#   tests/run.sh regress      pg_regress only (results copied to pg_test/results/)
#   tests/run.sh pytest [-k expr]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$($PG_CONFIG --bindir)
PG_REGRESS=$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress
# Fixed ports: the endpoint URL shows up in the expected output of the error tests.
PG_PORT=${NL2SQL_TEST_PG_PORT:-57410}
MOCK_PORT=57411
what=${1:-all}
[ $# -gt 0 ] && shift

RUN=$(mktemp -d /tmp/nl2sql-test.XXXXXX)
chmod 755 "$RUN"
# A fake key: the tests check that it reaches the endpoint and never any message or log.
export NL2SQL_LLM_API_KEY=sk-nl2sql-test-4f1c2e9a7b
mock_pid=""
cleanup() {
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null || true
  "$ROOT/scripts/pg.sh" stop "$RUN/pg" || true
  rm -rf "$RUN"
}
trap cleanup EXIT

python3 tests/mock_llm.py --scenarios tests/mock/scenarios.json --scenarios tests/mock/security.json --scenarios tests/mock/operations.json --port "$MOCK_PORT" 2>"$RUN/mock.log" &
mock_pid=$!
for _ in $(seq 1 50); do
  curl -sf "http://127.0.0.1:$MOCK_PORT/health" >/dev/null 2>&1 && break
  kill -0 "$mock_pid" 2>/dev/null || { cat "$RUN/mock.log" >&2; echo "mock LLM did not start (port $MOCK_PORT busy?)" >&2; exit 1; }
  sleep 0.1
done

"$ROOT/scripts/pg.sh" start "$RUN/pg" "$PG_PORT" \
  "nl2sql.llm_url = 'http://127.0.0.1:$MOCK_PORT/v1'" \
  "nl2sql.llm_model = 'mock-model'" \
  "nl2sql.llm_timeout = '20s'"
export PGHOST=$RUN/pg PGPORT=$PG_PORT PGUSER=postgres
psql() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
# The server running is the major PG_CONFIG names (a test of one major never runs on another).
want=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
got=$(psql -d postgres -Atc "SELECT current_setting('server_version_num')::int / 10000")
[ "$want" = "$got" ] || { echo "the test server is PostgreSQL $got, not $want" >&2; exit 1; }
echo "== PostgreSQL $got"

# The regression database: the project's fixture (tests/fixtures/concert_singer.sql), with the
# extension. Everything the tests load lives in this checkout.
psql -d postgres -c "CREATE DATABASE concert_singer"
psql -d concert_singer -f tests/fixtures/concert_singer.sql >/dev/null
psql -d concert_singer -c "SET client_min_messages = warning" -c "CREATE EXTENSION nl2sql CASCADE"

status=0
if [ "$what" = all ] || [ "$what" = regress ]; then
  echo "== pg_regress"
  if ! "$PG_REGRESS" --use-existing --dbname=concert_singer --bindir="$BIN" \
      --inputdir=pg_test --outputdir="$RUN/regress" --schedule=pg_test/schedule "$@"; then
    status=1
    cat "$RUN/regress/regression.diffs" >&2 || true
  fi
  rm -rf pg_test/results && cp -r "$RUN/regress/results" pg_test/results 2>/dev/null || true
fi
if [ "$what" = all ] || [ "$what" = pytest ]; then
  echo "== pytest"
  NL2SQL_TEST_PGHOST=$PGHOST NL2SQL_TEST_PGPORT=$PGPORT NL2SQL_TEST_SERVER_LOG=$RUN/pg/server.log \
  NL2SQL_TEST_MOCK_URL="http://127.0.0.1:$MOCK_PORT" \
    "$ROOT/.venv/bin/python" -m pytest -q -rs tests "$@" || status=1
fi
exit $status
