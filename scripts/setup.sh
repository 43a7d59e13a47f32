#!/usr/bin/env bash
# Installs everything nl2sql needs on a fresh Debian 12 machine; idempotent, skips what is present.
set -euo pipefail

PG_MAJOR=${PG_MAJOR:-15}
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
PGRX_VERSION=0.18.1
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# 1. Debian packages: server, headers, clang for bindgen, sudo to run postgres as non-root.
need_pkgs=()
for p in postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-contrib libclang-dev clang sudo make gcc \
         dpkg-dev python3 python3-venv curl unzip ca-certificates; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# 2. pgvector, built from Debian trixie's source package (bookworm has no binary for it).
sharedir=$($PG_CONFIG --sharedir)
if [ ! -f "$sharedir/extension/vector.control" ]; then
  say "building pgvector from Debian's source package"
  src_list=/etc/apt/sources.list.d/nl2sql-trixie-src.sources
  work=$(mktemp -d)
  trap '$SUDO rm -f "$src_list"; rm -rf "$work"' EXIT
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    | $SUDO tee "$src_list" >/dev/null
  $SUDO apt-get update -qq
  (cd "$work" && apt-get source -qq pgvector >/dev/null)
  $SUDO rm -f "$src_list"
  $SUDO apt-get update -qq
  dir=$(find "$work" -maxdepth 1 -type d -name 'pgvector-*' | head -n1)
  make -s -C "$dir" PG_CONFIG="$PG_CONFIG" >/dev/null
  $SUDO make -s -C "$dir" PG_CONFIG="$PG_CONFIG" install >/dev/null
fi

# 3. cargo-pgrx, pinned.
if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  say "installing cargo-pgrx $PGRX_VERSION (takes ~9 minutes)"
  cargo install cargo-pgrx --locked --version "$PGRX_VERSION"
fi

# 4. pgrx init against the system PostgreSQL, only when not done yet (re-running forces a rebuild).
if ! grep -qs "^pg$PG_MAJOR = \"$PG_CONFIG\"" "$HOME/.pgrx/config.toml"; then
  say "initialising pgrx for PostgreSQL $PG_MAJOR"
  cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG"
fi
# 5. Python for the server-side tests and the evaluation harness, in .venv.
root=$(cd "$(dirname "$0")/.." && pwd)
if ! "$root/.venv/bin/python" -c 'import pytest, psycopg' 2>/dev/null; then
  say "creating .venv for the tests"
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/pip" install -q --upgrade pip
  "$root/.venv/bin/pip" install -q -r "$root/tests/requirements.txt"
fi
say "setup complete"
