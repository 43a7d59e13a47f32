#!/usr/bin/env bash
# The server-side suites (pg_regress and the Python tests, tests/run.sh) on each PostgreSQL major
# named: nl2sql is built and installed into that major's server first. Every major is tried; the
# run fails if any failed, and the last lines say which.
#   scripts/test-majors.sh 15 17 18
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/majors.sh
sudo_flag=""; [ "$(id -u)" -eq 0 ] || sudo_flag=--sudo

[ $# -gt 0 ] || { echo "usage: $0 MAJOR... (no major named: nothing would be tested)" >&2; exit 2; }
results=() status=0
for v in "$@"; do
  suite_of "$v" >/dev/null || exit 2
  pgc=$(pg_config_of "$v")
  printf '\n\033[1m==> PostgreSQL %s: building nl2sql and running the server tests\033[0m\n' "$v"
  if cargo pgrx install --pg-config "$pgc" $sudo_flag && PG_CONFIG="$pgc" tests/run.sh; then
    results+=("PostgreSQL $v: passed")
  else
    results+=("PostgreSQL $v: FAILED")
    status=1
  fi
done
printf '%s\n' "${results[@]}"
exit $status
