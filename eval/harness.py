#!/usr/bin/env python3
"""Evaluation harness for nl2sql on three benchmarks: spider-pg, spider-train (held out
entirely) and defog-instruct (--bench).

For each question: nl2sql() in the question's database, its trace, and the judgement against
the gold query: nl2sql.compare_results() on Spider's, sql-eval's rule on defog-instruct
(eval/judge.py). Every report gives the tuning and the held-out databases apart
(eval/benchmarks.py: SPLITS); --no-keys asks copies of the databases with no declared key.
Reports execution accuracy (EX: rows as multisets, as lists when the gold
query has ORDER BY, values by text form, columns in the gold query's order; "EX any": in any
column order, as Spider's own evaluation counts it), VES (BIRD: sqrt(gold_ms / predicted_ms) for correct
answers) and R-VES (BIRD's reward buckets), per database and overall; schema-link recall (gold
columns the model was shown); LLM calls, tokens and latency. One JSON line per question is
appended to the result file as soon as it is known, so a run can be stopped and resumed.

Ablations: --configs runs the same questions under several settings (see CONFIGS) and prints
them side by side, first row as the baseline.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql as pgsql

import benchmarks
import data
import judge
from report import print_ablation, print_parts, print_table

ROOT = Path(__file__).resolve().parent.parent
BENCH = benchmarks.bench_dir("spider-pg")

# Named settings for ablations; each names every setting it depends on, over DEFAULTS.
# "zero-shot" is the foundation: one zero-shot generation from the full Open-SQL schema with
# sampled values, and one correction round. "full" is the OpenSearch-SQL pipeline with the
# extension's defaults but the grammar, which DEFAULTS keeps off so that runs compare with those
# before nl2sql.grammar defaulted to auto ("full-grammar" is what ships); the "full-no-*" rows
# switch one stage off.
DEFAULTS = {
    "nl2sql.mode": "full", "nl2sql.max_corrections": "1", "nl2sql.sample_rows": "1000",
    "nl2sql.use_values": "on", "nl2sql.use_extraction": "on", "nl2sql.extraction_min_tokens": "3000",
    "nl2sql.use_chain_of_thought": "off", "nl2sql.llm_n": "on",
    "nl2sql.align_agent": "on", "nl2sql.align_function": "on", "nl2sql.align_style": "on",
    "nl2sql.candidates": "5", "nl2sql.agreement": "2", "nl2sql.temperature": "0.7",
    "nl2sql.generators": "open_sql,create_table", "nl2sql.examples": "0",
    "nl2sql.alone_confidence": "0", "nl2sql.grammar": "off",
}
# Not a setting: whether the database's synthetic examples (nl2sql.generate_examples, made once
# per database and kept in eval/results/synthetic-<db>.json) are in the library for the run.
SYNTHETIC = "synthetic"
# The foundation: one plain answer.
ZERO_SHOT = {"nl2sql.mode": "zero_shot", "nl2sql.use_values": "off"}
NO_ALIGNMENT = {"nl2sql.align_agent": "off", "nl2sql.align_function": "off", "nl2sql.align_style": "off"}
CONFIGS = {name: {**DEFAULTS, **over} for name, over in {
    "zero-shot": ZERO_SHOT,
    "no-correction": {**ZERO_SHOT, "nl2sql.max_corrections": "0"},
    "no-samples": {**ZERO_SHOT, "nl2sql.sample_rows": "0"},
    # the value index: stored values similar to words of the question in the prompt
    "values": {**ZERO_SHOT, "nl2sql.use_values": "on"},
    "full": {},
    # abstention (nl2sql.refuse_unrelated): what it costs answerable questions, read off the
    # P0002 refusals among the answers
    "zero-shot-refuse": {**ZERO_SHOT, "nl2sql.refuse_unrelated": "on"},
    "full-refuse": {"nl2sql.refuse_unrelated": "on"},
    "full-no-extraction": {"nl2sql.use_extraction": "off"},
    # extraction whatever the schema's size (0.1.0 and the first 0.2.0 builds always extracted)
    "full-extraction": {"nl2sql.extraction_min_tokens": "0"},
    "full-cot": {"nl2sql.use_chain_of_thought": "on"},
    # 0.1.0's defaults: extraction always, chain of thought, n = 5 (first wave of 2)
    "full-0.1": {"nl2sql.extraction_min_tokens": "0", "nl2sql.use_chain_of_thought": "on", "nl2sql.candidates": "5"},
    # every candidate in one wave: what smaller n would have chosen is read off its candidates
    "full-n5-one-wave": {"nl2sql.candidates": "5", "nl2sql.agreement": "0"},
    "full-n1": {"nl2sql.candidates": "1"},
    # one greedy candidate per generator, no temperature samples
    "full-n2": {"nl2sql.candidates": "2"},
    "full-no-early-stop": {"nl2sql.agreement": "0"},
    # the first generator asked alone and its confidence traced, but never standing alone:
    # which nl2sql.alone_confidence would have stopped where is read off its candidates
    "full-scored": {"nl2sql.alone_confidence": "1"},
    # the first answer stands alone only when the model was sure of every token (the 0.3 of
    # the first 0.2.0 builds, before any answer with rows stood alone)
    "full-alone-0.3": {"nl2sql.alone_confidence": "0.3"},
    # examples (few-shot), diverse generators, synthetic pairs
    "full-examples": {"nl2sql.examples": "3"},
    "full-synthetic": {SYNTHETIC: "on", "nl2sql.examples": "3"},
    # one generator (the first 0.2.0 builds: samples of the Open-SQL prompt)
    "full-no-diversity": {"nl2sql.generators": "open_sql"},
    "full-examples-no-diversity": {"nl2sql.generators": "open_sql", "nl2sql.examples": "3"},
    "full-create-table": {"nl2sql.generators": "create_table"},
    "full-no-alignment": NO_ALIGNMENT,
    "full-no-values": {"nl2sql.use_values": "off"},
    "full-no-correction": {"nl2sql.max_corrections": "0"},
    # the grammar of the names each prompt shows (nl2sql.grammar; llama.cpp's form)
    "zero-shot-grammar": {**ZERO_SHOT, "nl2sql.grammar": "auto"},
    "full-grammar": {"nl2sql.grammar": "auto"},
    # what ships, with the database's synthetic examples (three nearest) in each prompt
    "full-grammar-synthetic": {"nl2sql.grammar": "auto", SYNTHETIC: "on", "nl2sql.examples": "3"},
    # the extraction and its per-question schema whatever the schema's size, with the grammar
    "full-grammar-extraction": {"nl2sql.grammar": "auto", "nl2sql.extraction_min_tokens": "0"},
    # the Interactive-T2S agent
    "interactive": {"nl2sql.mode": "interactive"},
}.items()}
# The ablation of the full pipeline: the zero-shot row, the full row, and each stage off.
ABLATION = "zero-shot,full,full-examples,full-synthetic,full-no-diversity,full-cot"

GOLD_COLUMNS_SQL = """
SELECT DISTINCT d.refobjid::regclass::text AS tbl, quote_ident(a.attname) AS col
FROM pg_depend d
JOIN pg_rewrite r ON r.oid = d.objid
LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid AND d.refobjsubid > 0
WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
  AND r.ev_class = 'pg_temp.nl2sql_eval_gold'::regclass AND d.refobjid <> r.ev_class
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- the cluster -------------------------------------------------------------------------------

def start_cluster(args):
    """Starts (or reuses) the harness's own cluster; returns connection settings."""
    subprocess.run([str(ROOT / "scripts" / "pg.sh"), "start", args.pgdir, str(args.port)], check=True)
    return {"host": args.pgdir, "port": args.port, "user": "postgres"}


def prepare_database(conn_kw, bench, db, no_keys=False, instructions=False):
    """Loads `db` when missing (benchmarks.load); (re)creates the extension so it matches the
    build; does what a DBA deploying nl2sql does: indexes the values of every table's text
    columns and profiles the relationships nobody declared; with `instructions`, stores the
    database's definitions (benchmarks.definitions) as instructions, about the tables their
    text names (the whole database when they name none). Returns the database's name."""
    name = benchmarks.load(conn_kw, bench, db, no_keys)
    with psycopg.connect(dbname=name, autocommit=True, **conn_kw) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("DROP EXTENSION IF EXISTS nl2sql CASCADE")
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        schemas = [r[0] for r in c.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'nl2sql')")]
        c.execute("SELECT count(*) FROM nl2sql.create_value_indexes(%s)", (schemas,))
        c.execute("SELECT count(*) FROM nl2sql.profile_relationships()")
        if instructions:
            c.execute(pgsql.SQL("SET search_path = {}").format(pgsql.SQL(", ").join(map(pgsql.Identifier, schemas))))
            stored = benchmarks.definitions(bench, db)
            for text in stored:
                try:
                    c.execute("SELECT nl2sql.add_instruction(%s)", (text,))
                except psycopg.errors.InvalidParameterValue:
                    # names no table: a definition about the whole database, as a DBA would say
                    c.execute("SELECT nl2sql.add_instruction(%s, '{}')", (text,))
            log(f"{name}: {len(stored)} instructions stored")
    return name


def prepare_judge(conn_kw, bench, db):
    """The database with its keys, where --no-keys answers are judged (evaluate): loaded when
    missing, with the extension for nl2sql.compare_results."""
    name = benchmarks.load(conn_kw, bench, db, False)
    with psycopg.connect(dbname=name, autocommit=True, **conn_kw) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")


WIDE_DB = "spider_wide"


def prepare_wide(conn_kw):
    """The ten spider-pg databases in one (WIDE_DB), each in a schema named after it, public
    left empty; made once, the extension recreated so that it matches the build, every schema's
    values indexed."""
    with psycopg.connect(dbname="postgres", autocommit=True, **conn_kw) as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (WIDE_DB,)).fetchone()
        if not exists:
            c.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(WIDE_DB)))
    names = sorted(p.stem for p in (BENCH / "dumps").glob("*.sql"))
    with psycopg.connect(dbname=WIDE_DB, autocommit=True, **conn_kw) as c:
        c.execute("SET client_min_messages = warning")
        have = {r[0] for r in c.execute("SELECT nspname FROM pg_namespace")}
        for db in names:
            if db in have:
                continue
            log(f"loading {db} into {WIDE_DB}.{db}")
            # The dumps write public.<table>: load each into a fresh public, then rename it.
            c.execute("DROP SCHEMA IF EXISTS public CASCADE")
            c.execute("CREATE SCHEMA public")
            subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(conn_kw["host"]),
                            "-p", str(conn_kw["port"]), "-U", conn_kw["user"], "-d", WIDE_DB,
                            "-f", str(BENCH / "dumps" / f"{db}.sql")], check=True, stdout=subprocess.DEVNULL)
            c.execute(pgsql.SQL("ALTER SCHEMA public RENAME TO {}").format(pgsql.Identifier(db)))
        c.execute("CREATE SCHEMA IF NOT EXISTS public")
        c.execute("DROP EXTENSION IF EXISTS nl2sql CASCADE")
        c.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        c.execute("SELECT count(*) FROM nl2sql.create_value_indexes(%s)", (names,))


def configure(conn, settings):
    conn.execute("LOAD 'nl2sql'")
    if os.environ.get("NL2SQL_LLM_URL"):
        conn.execute("SELECT set_config('nl2sql.llm_url', %s, false)", (os.environ["NL2SQL_LLM_URL"],))
    if os.environ.get("NL2SQL_LLM_MODEL"):
        conn.execute("SELECT set_config('nl2sql.llm_model', %s, false)", (os.environ["NL2SQL_LLM_MODEL"],))
    for name, value in settings.items():
        if name != SYNTHETIC:
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    url = conn.execute("SELECT current_setting('nl2sql.llm_url')").fetchone()[0]
    if not url:
        sys.exit("no model endpoint: set NL2SQL_LLM_URL (e.g. http://127.0.0.1:8080/v1 after "
                 "scripts/local-llm.sh start) or nl2sql.llm_url in the server")
    return url


# --- one question ------------------------------------------------------------------------------

def gold_columns(conn, gold, schema=None):
    """The tables and columns the gold query reads, as PostgreSQL resolves them (in the merged
    database: resolved in the question's schema, named as the prompt names them)."""
    tables, columns = set(), set()
    try:
        with conn.transaction(force_rollback=True):
            if schema:
                conn.execute("SELECT set_config('search_path', %s, true)", (schema,))
            # The gold query is trusted benchmark data; a view makes PostgreSQL record exactly
            # which columns it reads.
            conn.execute("CREATE TEMP VIEW nl2sql_eval_gold AS " + gold)
            if schema:
                conn.execute("SELECT set_config('search_path', 'public', true)")
            for tbl, col in conn.execute(GOLD_COLUMNS_SQL).fetchall():
                tables.add(tbl)
                if col:
                    columns.add(f"{tbl}.{col}")
    except psycopg.Error:
        return None, None
    return tables, columns


def run_read_only(conn, sql, timeout="10s"):
    """(rows, width, ms) of one query, read-only, within `timeout`; rolled back."""
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL transaction_read_only = on")
        conn.execute(f"SET LOCAL statement_timeout = '{timeout}'")
        t0 = time.monotonic()
        cur = conn.execute(sql)
        rows = cur.fetchall() if cur.description else []
        return rows, len(cur.description or []), (time.monotonic() - t0) * 1000


def sql_eval_judgement(conn, gold, rec):
    """Judges rec["predicted"] by sql-eval's rule (eval/judge.py) against every acceptable
    gold query; records the answer's error, if it fails, as spider-pg's judgement does."""
    golds, gold_ms = [], None
    for q in judge.acceptable_queries(gold):
        try:
            rows, width, ms = run_read_only(conn, q)
            golds.append((rows, width))
            gold_ms = ms if gold_ms is None else gold_ms
        except psycopg.Error as e:
            rec["gold_error"] = e.diag.message_primary
    try:
        rows, width, ms = run_read_only(conn, rec["predicted"])
    except psycopg.Error as e:
        rec["error"], rec["sqlstate"] = e.diag.message_primary, e.sqlstate
        return
    rec["correct"] = rec["correct_any_column_order"] = judge.judge(golds, (rows, width))
    rec["gold_ms"], rec["predicted_ms"] = gold_ms, ms


def rves_reward(ratio):
    """BIRD's R-VES reward for time ratio gold/predicted of a correct answer."""
    if ratio >= 2:
        return 1.25
    if ratio >= 1:
        return 1.0
    if ratio >= 0.5:
        return 0.75
    if ratio >= 0.25:
        return 0.5
    return 0.25


def evaluate(conn, item, repeat, wide=False, judge_conn=None):
    """One question; `wide`: asked in the merged database, where the question's tables are in
    the schema named after its database (search_path public: every table is qualified) and the
    gold query is run with that schema on the path. `judge_conn`: where the answer is judged,
    when not where it was asked (--no-keys: the database with its keys, same data; some gold
    queries group by a primary key and select its table's other columns, which PostgreSQL
    accepts only while the key is declared; a query that runs without the keys gives the same
    rows with them)."""
    judge_conn = judge_conn or conn
    rec = {k: item.get(k) for k in ("id", "db", "question", "gold", "hint", "suite", "category", "bench", "part", "no_keys")}
    if wide:
        conn.execute("SET search_path = public")
    t0 = time.monotonic()
    try:
        rec["predicted"] = conn.execute("SELECT nl2sql(%s, %s)", (item["question"], item.get("hint"))).fetchone()[0]
        rec["error"], rec["sqlstate"] = None, None
    except psycopg.Error as e:
        rec["predicted"] = None
        rec["error"], rec["sqlstate"] = e.diag.message_primary, e.sqlstate
    rec["latency_ms"] = round((time.monotonic() - t0) * 1000, 1)
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0] or {}
    calls = trace.get("llm_calls", [])
    rec["llm_calls"] = len(calls)
    rec["llm_ms"] = round(sum(c.get("latency_ms", 0) for c in calls), 1)
    reported = [c.get("prompt_tokens") for c in calls]
    rec["prompt_tokens"] = sum(reported) if calls and all(r is not None for r in reported) else None
    rec["prompt_tokens_estimate"] = sum(c.get("prompt_tokens_estimate", 0) for c in calls)
    done = [c.get("completion_tokens") for c in calls]
    rec["completion_tokens"] = sum(done) if calls and all(d is not None for d in done) else None
    rec["schema_tokens"] = trace.get("schema_tokens")
    gen = [c for c in calls if c.get("stage") == "generate"]
    rec["generation_prompt_tokens"] = max((c.get("prompt_tokens") or c.get("prompt_tokens_estimate", 0) for c in gen), default=None)
    # Every call's prompt (the endpoint's count, else the estimate): the budget's target is per call.
    rec["call_prompt_tokens"] = [c.get("prompt_tokens") or c.get("prompt_tokens_estimate", 0) for c in calls]
    rec["round_trips"] = trace.get("round_trips")
    rec["waves"] = trace.get("waves")
    rec["stopped_early"] = trace.get("stopped_early")
    # The first generator's answer stood alone (nl2sql.alone_confidence): how sure the model was.
    rec["alone"] = trace.get("alone")
    rec["confidence"] = trace.get("confidence")
    # abstention (nl2sql.refuse_unrelated): the words covered, the names missing, and what each
    # candidate ran or failed on, for reading other decisions off the run
    rec["coverage"] = trace.get("coverage")
    rec["missing"] = trace.get("missing")
    rec["candidates"] = [{"sql": c.get("aligned") or c.get("sql"), "ok": c.get("ok"), "error_kind": c.get("error_kind")}
                         for c in trace.get("candidates", [])]

    rec["correct"] = rec["correct_any_column_order"] = False
    rec["gold_ms"] = rec["predicted_ms"] = rec["ves"] = rec["rves"] = None
    if wide:
        # The prediction ran with search_path public: its tables are qualified, and resolve the
        # same with the question's schema on the path, where the gold query's resolve.
        conn.execute(pgsql.SQL("SET search_path = {}, public").format(pgsql.Identifier(item["db"])))
    if rec["predicted"] is not None and item.get("bench") == "defog-instruct":
        sql_eval_judgement(judge_conn, item["gold"], rec)
    elif rec["predicted"] is not None:
        cmp = judge_conn.execute("SELECT nl2sql.compare_results(%s, %s, %s)",
                           (item["gold"], rec["predicted"], repeat)).fetchone()[0]
        rec["correct"] = cmp["match"] is True
        rec["correct_any_column_order"] = cmp.get("match_any_column_order") is True
        rec["gold_ms"] = cmp["reference"].get("ms")
        rec["predicted_ms"] = cmp["predicted"].get("ms")
        if cmp["predicted"].get("error"):
            rec["error"], rec["sqlstate"] = cmp["predicted"]["error"], cmp["predicted"]["sqlstate"]
        if cmp["match"] is None:
            rec["gold_error"] = cmp["reference"].get("error")
    if rec["correct"] and rec["gold_ms"] and rec["predicted_ms"]:
        ratio = rec["gold_ms"] / max(rec["predicted_ms"], 1e-6)
        rec["ves"] = math.sqrt(ratio)
        rec["rves"] = rves_reward(ratio)
    elif rec["correct"]:
        rec["ves"] = rec["rves"] = 1.0

    gold = judge.acceptable_queries(item["gold"])[0] if item.get("bench") == "defog-instruct" else item["gold"]
    tables, columns = gold_columns(judge_conn, gold, item["db"] if wide else None)
    shown = set(trace.get("schema_columns", []))
    shown_tables = {c.rsplit(".", 1)[0] for c in shown}
    rec["schema_recall_columns"] = (len(columns & shown) / len(columns)) if columns else None
    rec["schema_recall_tables"] = (len(tables & shown_tables) / len(tables)) if tables else None
    rec["candidates"] = trace.get("candidates", [])
    rec["calls"] = calls
    # The oracle bound: whether some executed candidate was right (what a perfect selector
    # would get), and which generators had a right one.
    right_by_sql = {}
    rec["oracle"] = rec["correct"]
    rec["generators_right"] = {}
    cands = rec["candidates"]
    for c in cands:
        # A duplicate is the query it repeats.
        ran = cands[c["duplicate_of"]] if c.get("duplicate_of") is not None and c["duplicate_of"] < len(cands) else c
        q = ran.get("aligned") or ran.get("sql")
        if not q or not ran.get("ok") or ran.get("rows") is None:
            continue
        if q not in right_by_sql:
            right_by_sql[q] = candidate_right(judge_conn, item, q)
        if right_by_sql[q]:
            rec["oracle"] = True
        g = c.get("generator")
        if g:
            rec["generators_right"][g] = rec["generators_right"].get(g, False) or right_by_sql[q]
    rec["examples"] = [e.get("id") for e in trace.get("examples", [])]
    ex = trace.get("extraction") or {}
    # What the extraction chose, what column search added, what was set aside (another unit's).
    rec["extraction"] = {k: ex.get(k) for k in ("parsed", "columns", "column_matches", "set_aside") if k in ex} or None
    return rec


def candidate_right(conn, item, sql):
    """Whether one candidate's query is right by the benchmark's rule."""
    if item.get("bench") == "defog-instruct":
        probe = {"predicted": sql, "correct": False}
        sql_eval_judgement(conn, item["gold"], probe)
        return probe["correct"]
    try:
        m = conn.execute("SELECT nl2sql.compare_results(%s, %s, 1)", (item["gold"], sql)).fetchone()[0]
        return m["match"] is True
    except psycopg.Error:
        return False


# --- value recall (no LLM) -------------------------------------------------------------------

# The tables holding the entries of the indexed columns of a name (each column's generation serving).
ENTRY_TABLES_SQL = """
SELECT format('nl2sql.value_entries_%%s_%%s', i.id, i.generation)
FROM nl2sql.value_index i JOIN pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
WHERE a.attname = %s
"""


def stored(conn, column, literal):
    """Whether `literal` is a stored value of an indexed column named `column`."""
    for (table,) in conn.execute(ENTRY_TABLES_SQL, (column,)).fetchall():
        if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE key = nl2sql.fold(%s) AND value = %s)",
                        (literal, literal)).fetchone()[0]:
            return True
    return False


def value_recall(conn, item, k):
    """For each string literal the gold query compares a column with, and that is a stored value
    of that column, whether search_values(question, k) returns it: (found, total, misses), each
    a pair (all literals, literals longer than two characters)."""
    found, total, misses = [0, 0], [0, 0], []
    pairs = conn.execute("SELECT column_name, literal FROM nl2sql.sql_literals(%s)", (item["gold"],)).fetchall()
    for col, lit in pairs:
        if not stored(conn, col, lit):
            continue
        long = len(lit) > 2
        total[0] += 1
        total[1] += long
        got = conn.execute("SELECT value, column_name::text FROM nl2sql.search_values(%s, %s)",
                           (item["question"], k)).fetchall()
        if any(v == lit and c == col for v, c in got):
            found[0] += 1
            found[1] += long
        else:
            misses.append({"column": col, "literal": lit, "retrieved": [v for v, _ in got]})
    return found, total, misses


def run_value_recall(conn_kw, items, k):
    """Value recall@k over the selected questions, per database and overall, for all literals and
    for those longer than two characters; returns (found, total) of the latter."""
    by_db = {}
    conns = {}
    for item in items:
        conn = conns.get(item["db"]) or psycopg.connect(dbname=item.get("dbname", item["db"]), autocommit=True, **conn_kw)
        conns[item["db"]] = conn
        f, t, misses = value_recall(conn, item, k)
        agg = by_db.setdefault(item["db"], [[0, 0], [0, 0], []])
        for i in range(2):
            agg[0][i] += f[i]
            agg[1][i] += t[i]
        agg[2].extend({"id": item["id"], **m} for m in misses)
    for c in conns.values():
        c.close()
    print(f"\nValue recall@{k}: gold string literals that are stored values, found by nl2sql.search_values(question, {k})")
    print(f"{'database':<26}{'literals':>9}{'found':>7}{'recall':>8}{'  >2 chars':>11}{'found':>7}{'recall':>8}")
    found, total = [0, 0], [0, 0]
    for db in sorted(by_db):
        f, t, _ = by_db[db]
        for i in range(2):
            found[i] += f[i]
            total[i] += t[i]
        if t[0]:
            long = f"{t[1]:>11}{f[1]:>7}{(f[1] / t[1] if t[1] else 0):>8.3f}"
            print(f"{db:<26}{t[0]:>9}{f[0]:>7}{f[0] / t[0]:>8.3f}{long}")
    print("-" * 76)
    ratio = [(found[i] / total[i] if total[i] else 0) for i in range(2)]
    print(f"{'all':<26}{total[0]:>9}{found[0]:>7}{ratio[0]:>8.3f}{total[1]:>11}{found[1]:>7}{ratio[1]:>8.3f}")
    misses = [m for v in by_db.values() for m in v[2]]
    for m in misses[:10]:
        print(f"  missed #{m['id']}: {m['column']} = {m['literal']!r}; got {m['retrieved']}")
    return found[1], total[1]


# --- synthetic examples ------------------------------------------------------------------------

def synthetic_cache(db):
    return ROOT / "eval" / "results" / f"synthetic-{db}.json"


def ensure_synthetic(conn_kw, db, per_table):
    """Generates the database's synthetic examples once (the model's time), keeps them in a file."""
    path = synthetic_cache(db)
    if path.exists():
        return
    with psycopg.connect(dbname=db, autocommit=True, **conn_kw) as c:
        configure(c, CONFIGS["full"])
        log(f"generating synthetic examples for {db} ({per_table} per table)")
        t0 = time.monotonic()
        rows = c.execute("SELECT * FROM nl2sql.generate_examples(%s)", (per_table,)).fetchall()
        pairs = c.execute("SELECT question, sql, relations::text[] FROM nl2sql.example_store "
                          "WHERE source = 'synthetic' ORDER BY id").fetchall()
        c.execute("DELETE FROM nl2sql.example_store WHERE source = 'synthetic'")
    stats = {"seconds": round(time.monotonic() - t0, 1), "scopes": len(rows),
             "written": sum(r[1] for r in rows), "kept": sum(r[3] for r in rows),
             "prompt_tokens": sum(r[4] for r in rows), "completion_tokens": sum(r[5] for r in rows)}
    log(f"  {db}: {stats}")
    path.write_text(json.dumps({"stats": stats, "pairs": pairs}))


def load_synthetic(conn, db, wanted):
    """Puts the database's synthetic examples in the library (or takes them out)."""
    conn.execute("DELETE FROM nl2sql.example_store WHERE source = 'synthetic'")
    if not wanted:
        return
    data = json.loads(synthetic_cache(db).read_text())
    for question, sql, relations in data["pairs"]:
        conn.execute("INSERT INTO nl2sql.example_store (question, question_masked, sql, source, executed, relations, "
                     "added_by, embedding) SELECT %s, k.masked, %s, 'synthetic', true, %s::regclass[], "
                     "'postgres'::regrole, k.embedding::vector FROM nl2sql._example_key(%s, %s) k",
                     (question, sql, relations, question, sql))


# --- main --------------------------------------------------------------------------------------

def select_questions(args):
    items = benchmarks.questions(args.bench)
    for q in items:
        q.update(bench=args.bench, part=benchmarks.part_of(args.bench, q["db"]), no_keys=args.no_keys,
                 dbname=q["db"] + (benchmarks.NO_KEYS_SUFFIX if args.no_keys else ""))
    if args.definitions != "hint":
        for q in items:
            q["hint"] = None
    if args.suite:
        items = [q for q in items if q["suite"] == args.suite]
    if args.part:
        items = [q for q in items if q["part"] == args.part]
    if args.db:
        items = [q for q in items if q["db"] in args.db]
    if args.ids:
        wanted = {int(i) for i in args.ids.split(",")}
        items = [q for q in items if q["id"] in wanted]
    if args.not_in:
        # Held out: none of the questions a result file answered (rules were written after
        # reading that run's failures; these questions were not read).
        seen = {json.loads(line)["id"] for f in args.not_in for line in open(f) if line.strip()}
        items = [q for q in items if q["id"] not in seen]
    if args.sample and args.sample < len(items):
        items = random.Random(args.seed).sample(items, args.sample)
        # The first N of the sample's random order: a smaller random subset of the same questions.
        if args.first:
            items = items[:args.first]
        items.sort(key=lambda q: q["id"])
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="spider-pg", choices=sorted(benchmarks.SPLITS),
                    help="which benchmark's questions (default spider-pg)")
    ap.add_argument("--part", choices=["tuning", "held-out"],
                    help="only the databases of this part of the split (default: both, reported apart)")
    ap.add_argument("--definitions", choices=["hint", "instructions", "none"], default="hint",
                    help="defog-instruct's definitions: as each question's hint (default), stored once "
                         "per database as instructions (no hint), or not at all")
    ap.add_argument("--suite", choices=["basic", "advanced"], help="only this suite of defog-instruct")
    ap.add_argument("--no-keys", action="store_true",
                    help="ask copies of the databases with every primary key, unique and foreign key constraint dropped")
    ap.add_argument("--sample", type=int, help="a random subset of N questions")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    ap.add_argument("--first", type=int, help="only the first N questions of the sample (its random order)")
    ap.add_argument("--synthetic-per-table", type=int, default=3,
                    help="pairs asked per table when a config needs synthetic examples (default 3)")
    ap.add_argument("--db", action="append", help="only this database (repeatable)")
    ap.add_argument("--ids", help="only these question ids, comma-separated")
    ap.add_argument("--not-in", metavar="RESULTS", action="append",
                    help="leave out the questions of this result file (a held-out sample); repeatable")
    ap.add_argument("--configs", default=ABLATION,
                    help="comma-separated settings to compare (default: the ablation of the full "
                         "pipeline): " + ", ".join(CONFIGS))
    ap.add_argument("--repeat", type=int, default=3, help="executions per query for VES timing")
    ap.add_argument("--out-dir", default=str(ROOT / "eval" / "results"))
    ap.add_argument("--tag", default="", help="extra word in the result file names")
    ap.add_argument("--fresh", action="store_true", help="discard earlier results instead of resuming")
    ap.add_argument("--wide", action="store_true",
                    help=f"ask every question in {WIDE_DB}: the ten databases in one, a schema each (35 tables)")
    ap.add_argument("--host", help="use this running server (socket dir or host) instead of starting one")
    ap.add_argument("--port", type=int, default=55440)
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--pgdir", default="/tmp/nl2sql-eval", help="the harness's own cluster (default)")
    ap.add_argument("--no-setup", action="store_true", help="databases and extension are ready")
    ap.add_argument("--quiet", action="store_true", help="no line per question")
    ap.add_argument("--value-recall", type=int, metavar="K",
                    help="only measure value recall@K of the value index (no LLM calls)")
    args = ap.parse_args()
    data.require(args.bench, questions_only=args.no_setup)

    configs = args.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"unknown config {c!r}; known: {', '.join(CONFIGS)}")
    if args.wide and (args.bench != "spider-pg" or args.no_keys):
        sys.exit("--wide merges the spider-pg databases with their keys")
    items = select_questions(args)
    if not items:
        sys.exit("no questions selected")
    conn_kw = ({"host": args.host, "port": args.port, "user": args.user} if args.host else start_cluster(args))
    dbs = sorted({q["db"] for q in items})
    if not args.no_setup:
        if args.wide:
            prepare_wide(conn_kw)
        else:
            for db in dbs:
                prepare_database(conn_kw, args.bench, db, args.no_keys, args.definitions == "instructions")
                if args.no_keys:
                    prepare_judge(conn_kw, args.bench, db)

    if args.value_recall:
        run_value_recall(conn_kw, items, args.value_recall)
        return

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # --first reads and extends the results of the whole sample (records are kept by question).
    selection = ("" if args.bench == "spider-pg" else f"{args.bench}-") + (f"s{args.sample}-seed{args.seed}" if args.sample else "all") \
        + ("-wide" if args.wide else "") + ("-nokeys" if args.no_keys else "") + (f"-{args.part}" if args.part else "") \
        + (f"-{args.suite}" if args.suite else "") + ("" if args.definitions == "hint" else f"-defs-{args.definitions}") \
        + (f"-{args.tag}" if args.tag else "")
    if any(CONFIGS[c].get(SYNTHETIC) for c in configs):
        for db in sorted({q["dbname"] for q in items}):
            ensure_synthetic(conn_kw, db, args.synthetic_per_table)
    results = []
    for cfg in configs:
        path = out_dir / f"{cfg}-{selection}.jsonl"
        if args.fresh and path.exists():
            path.unlink()
        done = {}
        if path.exists():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                done[r["id"]] = r
        todo = [q for q in items if q["id"] not in done]
        log(f"[{cfg}] {len(items)} questions, {len(items) - len(todo)} already in {path}")
        conns, judges = {}, {}
        url = None
        with path.open("a") as out:
            for i, item in enumerate(todo, 1):
                db = WIDE_DB if args.wide else item["dbname"]
                conn = conns.get(db)
                if conn is None:
                    conn = psycopg.connect(dbname=db, autocommit=True, **conn_kw)
                    url = configure(conn, CONFIGS[cfg])
                    if args.definitions != "instructions":
                        # whatever a database holds (a run with --no-setup after one that stored
                        # them), only --definitions instructions shows instructions
                        conn.execute("SET nl2sql.instructions = 0")
                    if not args.wide:
                        load_synthetic(conn, item["dbname"], bool(CONFIGS[cfg].get(SYNTHETIC)))
                    conns[db] = conn
                judge_conn = None
                if args.no_keys:
                    judge_conn = judges.get(item["db"]) or psycopg.connect(dbname=item["db"], autocommit=True, **conn_kw)
                    judges[item["db"]] = judge_conn
                rec = evaluate(conn, item, args.repeat, args.wide, judge_conn)
                rec["config"] = cfg
                done[item["id"]] = rec
                out.write(json.dumps(rec) + "\n")
                out.flush()
                if not args.quiet:
                    mark = "ok " if rec["correct"] else ("ERR" if rec["predicted"] is None else "no ")
                    log(f"  {i}/{len(todo)} {mark} #{item['id']} {rec['latency_ms'] / 1000:.1f}s "
                        f"{(rec['predicted'] or rec['error'] or '')[:90]!r}")
        for c in [*conns.values(), *judges.values()]:
            c.close()
        recs = [done[q["id"]] for q in items]
        results.append((cfg, recs))
        print_table(f"config {cfg}: {len(recs)} questions ({selection}); endpoint {url or 'as before'}; "
                    f"results in {path}", recs)
        print_parts(f"config {cfg}", recs)
    if len(results) > 1:
        print_ablation(results)


if __name__ == "__main__":
    main()
