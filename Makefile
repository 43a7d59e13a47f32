# nl2sql: `make demo` runs the main job, `make test` runs every test. Both install what is missing.
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
SUDO_FLAG := $(shell [ "$$(id -u)" -eq 0 ] || echo --sudo)
PGRX_INSTALL = cargo pgrx install --pg-config $(PG_CONFIG) $(SUDO_FLAG)
# The sentence model's files (scripts/setup.sh): its unit tests compare it with a reference.
export NL2SQL_MINILM_DIR ?= $(shell $(PG_CONFIG) --sharedir)/extension/nl2sql/all-MiniLM-L6-v2

.PHONY: demo test setup install install-debug layout unit regress pytest eval bench llm clean

demo:            ## set up, build, start PostgreSQL with concert_singer, ask it questions
	scripts/demo.sh

test: setup      ## layout checks, unit tests, then pg_regress suites and server tests against the installed extension
	$(MAKE) --no-print-directory layout
	cargo test -p nl2sql-core
	$(PGRX_INSTALL)
	tests/run.sh

setup:           ## apt packages, pgvector, cargo-pgrx 0.18.1, test venv (skips what is present)
	scripts/setup.sh

install: setup   ## release build into $(PG_CONFIG)'s PostgreSQL
	$(PGRX_INSTALL) --release

install-debug:
	$(PGRX_INSTALL)

layout:          ## no import circle, no file or function over its size, upgrade scripts as their templates say
	python3 scripts/imports.py
	python3 scripts/layout.py
	python3 scripts/upgrade_script.py --check

unit:            ## the pure pipeline's unit tests only (no server)
	cargo test -p nl2sql-core

regress:         ## pg_regress suites against the installed extension
	tests/run.sh regress

pytest:          ## server tests against the installed extension
	tests/run.sh pytest

eval: setup      ## execution accuracy on spider-pg, e.g. make eval ARGS="--sample 50 --seed 1 --configs zero-shot,no-correction"
	$(PGRX_INSTALL) --release
	.venv/bin/python eval/harness.py $(ARGS)

bench: setup     ## performance numbers (printed, never asserted): pipeline overhead, prompt tokens
	$(PGRX_INSTALL) --release
	.venv/bin/python bench/bench.py $(ARGS)

llm:             ## start the local model (Qwen2.5-Coder-1.5B on llama.cpp) on 127.0.0.1:8080
	scripts/local-llm.sh start

clean:
	cargo clean
	rm -rf pg_test/results .venv
