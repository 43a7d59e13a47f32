#!/usr/bin/env bash
# The main job: install what is missing, build and install nl2sql, start PostgreSQL (Debian's 15,
# or the server of PG_CONFIG) with the sample database `shop` (demo/shop.sql, written by
# demo/shop.py), and ask it questions in plain English.
#
# Run it again at any time: every step skips what is done, and a run stopped anywhere (Ctrl-C in
# the set-up, the builds, the model's download, the load) is finished by the next one. The sample
# database is loaded under another name and renamed to shop only once it is complete.
#
# The model endpoint comes from the environment; without one, the bundled local model is built
# (the first time) and started on 127.0.0.1 (scripts/local-llm.sh):
#   NL2SQL_LLM_URL     base URL of an OpenAI-compatible API (e.g. http://127.0.0.1:8080/v1)
#   NL2SQL_LLM_MODEL   model name (optional for llama.cpp)
#   NL2SQL_LLM_API_KEY or OPENAI_API_KEY   bearer token, if the endpoint needs one
#   NL2SQL_DEMO_DIR, NL2SQL_DEMO_PORT      the cluster's directory and port (a second demo beside
#                                          a running one)
# The server keeps running afterwards; `scripts/pg.sh stop /tmp/nl2sql-demo` stops it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}   # scripts/pg.sh reads it too
PORT=${NL2SQL_DEMO_PORT:-55432}
DB=shop
SAMPLE=$ROOT/demo/shop.sql
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

NL2SQL_PG_CONFIG=$PG_CONFIG scripts/setup.sh   # only what this one server needs
# One cluster directory per major (a cluster made by one major's initdb is not another's).
major=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
DIR=$(realpath -m -- "${NL2SQL_DEMO_DIR:-/tmp/nl2sql-demo$([ "$major" = 15 ] || echo "-$major")}")
# Both go into postgresql.conf and libpq's host: a number, and a path with nothing to escape.
[[ $PORT =~ ^[0-9]+$ ]] || { echo "NL2SQL_DEMO_PORT must be a port number, not '$PORT'" >&2; exit 2; }
[[ $DIR =~ ^[-A-Za-z0-9_./+@]+$ ]] || { echo "NL2SQL_DEMO_DIR may hold letters, digits and - _ . / + @ only: '$DIR'" >&2; exit 2; }
say "building and installing nl2sql (release build)"
sudo_flag=""; [ "$(id -u)" -eq 0 ] || sudo_flag=--sudo
cargo pgrx install --release --pg-config "$PG_CONFIG" $sudo_flag

say "starting $($PG_CONFIG --version) in $DIR (port $PORT)"
scripts/pg.sh stop "$DIR"          # restart, so the server sees this shell's API key variables
scripts/pg.sh start "$DIR" "$PORT"
psql() { "$($PG_CONFIG --bindir)/psql" -X -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }

exists() { psql -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$1'" | grep -q 1; }
# Which demo/shop.sql a database was loaded from: its hash, in the database's comment.
STAMP="nl2sql demo sample $(sha256sum "$SAMPLE" | cut -c1-16)"
if exists "$DB" && [ "$(psql -d postgres -Atc "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '$DB'")" != "$STAMP" ]; then
  # Loaded from another demo/shop.sql (or made by hand): kept under another name, never dropped.
  kept="${DB}_$(date +%Y%m%d%H%M%S)"
  say "$DB was not loaded from this demo/shop.sql: renaming it to $kept and loading it again"
  psql -q -d postgres -c "ALTER DATABASE $DB RENAME TO $kept"
fi
if ! exists "$DB"; then
  # Loaded whole or not at all: into a scratch database (what a stopped run left of one is
  # dropped first), in one transaction, profiled, and renamed to $DB only when all is done.
  say "loading the sample database $DB (demo/shop.sql) and profiling it"
  psql -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ${DB}_loading" -c "CREATE DATABASE ${DB}_loading"
  psql -q -d "${DB}_loading" -1 -f "$SAMPLE" >/dev/null
  psql -q -d "${DB}_loading" -c "SET client_min_messages = warning" -c "CREATE EXTENSION nl2sql CASCADE"
  # Two relationships are not declared (order_lines.product_id, reviews.product_id): profiling
  # finds them in the data.
  psql -d "${DB}_loading" -c "SELECT from_relation, from_columns, to_relation, to_columns, score FROM nl2sql.profile_relationships()"
  psql -q -d postgres -c "COMMENT ON DATABASE ${DB}_loading IS '$STAMP'" \
    -c "ALTER DATABASE ${DB}_loading RENAME TO $DB"
fi
# An older nl2sql in a database loaded before is brought up to the version just installed.
psql -q -d "$DB" -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE" \
  -c "ALTER EXTENSION nl2sql UPDATE"

if [ -z "${NL2SQL_LLM_URL:-}" ]; then
  # No endpoint given: the bundled local model (Qwen2.5-Coder-1.5B on llama.cpp's server, on
  # 127.0.0.1 only). The first time it is built and downloaded (about 7 minutes on 2 cores);
  # a server already running is used as it is.
  if scripts/local-llm.sh status >/dev/null 2>&1 && curl -sf "$(scripts/local-llm.sh url | sed 's#/v1$##')/health" >/dev/null 2>&1; then
    say "using the local model already running"
  else
    say "starting the local model (no NL2SQL_LLM_URL set; the first start builds it, about 7 minutes)"
    scripts/local-llm.sh start
  fi
  NL2SQL_LLM_URL=$(scripts/local-llm.sh url)
  NL2SQL_LLM_MODEL=${NL2SQL_LLM_MODEL:-}
  local_model=1
fi

say "configuring the endpoint for database $DB: $NL2SQL_LLM_URL"
# psql variables quote the values (:'var'), so nothing from the environment is spliced into SQL.
psql -q -d "$DB" -v url="$NL2SQL_LLM_URL" -v model="${NL2SQL_LLM_MODEL:-}" <<'SQL'
LOAD 'nl2sql';
ALTER DATABASE shop SET nl2sql.llm_url = :'url';
ALTER DATABASE shop SET nl2sql.llm_model = :'model';
SQL

say "asking questions (a small local model takes several seconds each)"
psql -d "$DB" <<'SQL'
\set ECHO queries
SELECT nl2sql('How many customers do we have?');
SELECT * FROM nl2sql_run('Which customers live in lyon?');
SELECT * FROM nl2sql_run('How many orders has each customer from Portugal placed?');
SELECT nl2sql('Which 3 products sold the most units?') \gexec
SQL

cat <<MSG

The server keeps running. Connect:  psql -h $DIR -p $PORT -U postgres $DB
Stop it:                             scripts/pg.sh stop $DIR
MSG
if [ -n "${local_model:-}" ]; then
  cat <<MSG
The local model keeps running too:   scripts/local-llm.sh stop
Another endpoint:                    NL2SQL_LLM_URL=https://api.openai.com/v1 NL2SQL_LLM_MODEL=gpt-4o-mini OPENAI_API_KEY=sk-... make demo
MSG
fi
