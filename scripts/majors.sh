#!/usr/bin/env bash
# The PostgreSQL majors nl2sql supports and where each one's server is: sourced by setup.sh and
# test-majors.sh; run as `scripts/majors.sh pg_config MAJOR` it prints that major's pg_config.
#
# 15 is Debian 12's own package. 17 and 18 are built by setup.sh from Debian's source packages
# (17 from trixie, 18 from unstable) into $NL2SQL_PG_PREFIX/<major>. All three are tested (the
# Makefile's PG_VERSIONS).
SUPPORTED_MAJORS="15 17 18"
PG_PREFIX=${NL2SQL_PG_PREFIX:-/opt/nl2sql/postgresql}

# The Debian suite whose PostgreSQL source package is built for <major> (15 is a binary
# package; pgvector comes from trixie for every major).
suite_of() {
  case $1 in
    15 | 17) echo trixie ;;
    18) echo sid ;;
    *) echo "PostgreSQL $1 is not supported (supported: $SUPPORTED_MAJORS)" >&2; return 2 ;;
  esac
}

# The exact source package versions built (pinned: the same server and pgvector on every
# machine, and the pgvector patch made for this version).
version_of() {
  case $1 in
    postgresql-17) echo 17.11-0+deb13u1 ;;
    postgresql-18) echo 18.6-3 ;;
    pgvector) echo 0.8.0-1 ;;
    *) echo "no pinned version of $1" >&2; return 2 ;;
  esac
}

# The SHA-256 of each pinned version's .dsc (as the suite's signed index gave it), for when the
# suite's index no longer lists that version but the archive's pool still holds it (trixie
# lists 17.12, whose files the archive does not serve): setup.sh then fetches it from the pool
# and checks every file against this .dsc.
dsc_sha256_of() {
  case $1 in
    postgresql-17_17.11-0+deb13u1) echo bf148ae423a982707c3f60672c3a072ef62b701bd9f5df847d9f4b8c9b3e3b18 ;;
    postgresql-18_18.6-3) echo a4254c4548ebeea683832de193460ee8a9f1271418e884803b44ded1aead1776 ;;
    pgvector_0.8.0-1) echo a71780bf7ab9901094a3d9869c489b6e2bcb858a8c14a5fa52d159933e016308 ;;
    *) echo "" ;;
  esac
}

pg_config_of() {
  if [ "$1" = 15 ]; then echo /usr/lib/postgresql/15/bin/pg_config; else echo "$PG_PREFIX/$1/bin/pg_config"; fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    pg_config) suite_of "$2" >/dev/null && pg_config_of "$2" ;;
    *) echo "usage: $0 pg_config MAJOR" >&2; exit 2 ;;
  esac
fi
