# nl2sql: `make demo` runs the main job, `make test` runs every test. Both install what is missing.
# The majors `make test` builds and runs the server tests on (scripts/majors.sh); narrow it by
# hand, e.g. make test PG_VERSIONS=15.
PG_VERSIONS ?= 15 17 18
# The server `make install`, `make eval` and `make bench` build into (default: Debian's 15).
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
SUDO_FLAG := $(shell [ "$$(id -u)" -eq 0 ] || echo --sudo)
PGRX_INSTALL = cargo pgrx install --pg-config $(PG_CONFIG) $(SUDO_FLAG)
# The sentence model's files (scripts/setup.sh), which its unit tests compare with a reference:
# found when the line runs, after setup.sh may have installed them.
MINILM = NL2SQL_MINILM_DIR="$${NL2SQL_MINILM_DIR:-$$($$(scripts/majors.sh pg_config $(firstword $(PG_VERSIONS))) --sharedir)/extension/nl2sql/all-MiniLM-L6-v2}"

.PHONY: demo test setup install install-debug layout unit regress pytest eval bench llm clean

demo:            ## set up, build, start PostgreSQL with the sample database shop, ask it questions
	scripts/demo.sh

test:            ## layout checks and unit tests once, then on each of PG_VERSIONS: build, pg_regress suites, server tests
	PG_VERSIONS="$(PG_VERSIONS)" scripts/setup.sh
	$(MAKE) --no-print-directory layout
	$(MINILM) cargo test -p nl2sql-core
	scripts/test-majors.sh $(PG_VERSIONS)

setup:           ## apt packages, PostgreSQL majors other than 15, pgvector, cargo-pgrx 0.18.1, test venv (skips what is present)
	PG_VERSIONS="$(PG_VERSIONS)" scripts/setup.sh

install:         ## release build into $(PG_CONFIG)'s PostgreSQL (pgvector built for it when missing)
	NL2SQL_PG_CONFIG=$(PG_CONFIG) scripts/setup.sh
	$(PGRX_INSTALL) --release

install-debug:
	$(PGRX_INSTALL)

layout:          ## no import circle, no file or function over its size, upgrade scripts as their templates say, nothing read outside the checkout
	python3 scripts/outside.py
	python3 demo/shop.py --check
	python3 scripts/imports.py
	python3 scripts/layout.py
	python3 scripts/upgrade_script.py --check
	python3 scripts/docs.py

unit:            ## the pure pipeline's unit tests only (no server)
	$(MINILM) cargo test -p nl2sql-core

regress:         ## pg_regress suites against the extension installed in $(PG_CONFIG)'s server
	PG_CONFIG=$(PG_CONFIG) tests/run.sh regress

pytest:          ## server tests against the extension installed in $(PG_CONFIG)'s server
	PG_CONFIG=$(PG_CONFIG) tests/run.sh pytest

eval:            ## execution accuracy on spider-pg, e.g. make eval ARGS="--sample 50 --seed 1 --configs zero-shot,no-correction"
	@python3 eval/data.py --harness $(ARGS)
	NL2SQL_PG_CONFIG=$(PG_CONFIG) scripts/setup.sh
	$(PGRX_INSTALL) --release
	.venv/bin/python eval/harness.py $(ARGS)

bench:           ## performance numbers (printed, never asserted): pipeline overhead, prompt tokens
	@python3 eval/data.py spider-pg defog-instruct
	NL2SQL_PG_CONFIG=$(PG_CONFIG) scripts/setup.sh
	$(PGRX_INSTALL) --release
	.venv/bin/python bench/bench.py $(ARGS)

llm:             ## start the local model (Qwen2.5-Coder-1.5B on llama.cpp) on 127.0.0.1:8080
	scripts/local-llm.sh start

clean:
	cargo clean
	rm -rf pg_test/results .venv
