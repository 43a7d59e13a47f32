#!/usr/bin/env bash
# Starts and stops a throwaway PostgreSQL cluster for the demo and the tests.
#   scripts/pg.sh start DIR PORT [postgresql.conf line ...]   init (if needed) and start (if not running); socket in DIR
#   scripts/pg.sh standby DIR PORT PRIMARY_SOCKET_DIR PRIMARY_PORT
#                                    a hot standby streaming from the primary (pg_basebackup -R), started
#   scripts/pg.sh stop DIR
# PostgreSQL refuses to run as root, so as root the server runs as the postgres user. The server's
# environment is clean (no RUST_BACKTRACE, which would put Rust backtraces into error details)
# except NL2SQL_LLM_API_KEY and OPENAI_API_KEY, passed through without showing up in argv.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$($PG_CONFIG --bindir)
cmd=${1:?usage: $0 start|stop DIR [PORT conf...]}
dir=${2:?usage: $0 start|stop DIR [PORT conf...]}

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    sudo --preserve-env=NL2SQL_LLM_API_KEY,OPENAI_API_KEY -u postgres \
      env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE "$@"
  else
    env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE "$@"
  fi
}

case "$cmd" in
  start)
    port=${3:?port required}
    shift 3
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      # Made aside and moved into place once configured: a run stopped half-way leaves no
      # cluster the next run would take for a whole one.
      rm -rf "$dir/data.new"
      as_pg "$BIN/initdb" -D "$dir/data.new" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
      {
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        echo "shared_buffers = 128MB"
        for line in "$@"; do echo "$line"; done
      } | as_pg tee -a "$dir/data.new/postgresql.conf" >/dev/null
      [ ! -e "$dir/data" ] || { echo "$dir/data is there and holds no cluster: move it away" >&2; exit 1; }
      mv "$dir/data.new" "$dir/data"
    fi
    if as_pg "$BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      exit 0   # already running
    fi
    as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
  standby)
    port=${3:?port required}
    primary=${4:?primary socket directory required}
    primary_port=${5:?primary port required}
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      # -R writes primary_conninfo and standby.signal; the primary's settings come along.
      as_pg "$BIN/pg_basebackup" -h "$primary" -p "$primary_port" -U postgres -D "$dir/data" -R -X stream -c fast
      {
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        echo "hot_standby = on"
      } | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
    fi
    if as_pg "$BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      exit 0
    fi
    as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_pg "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    ;;
  *) echo "usage: $0 start|standby|stop DIR [PORT ...]" >&2; exit 2 ;;
esac
