#!/usr/bin/env python3
"""nl2sql benchmarks: numbers printed, never asserted.

1. Pipeline overhead: a mock model that answers every spider-pg question after a fixed delay:
   the extraction with the gold query's columns, every candidate with the gold query (or, in
   the "disagreeing" row, every other one with another query). Overhead = wall time of
   nl2sql() - time waiting for the model on the critical path (trace.llm_wait_ms); LLM round
   trips = sequential waits (concurrent candidates count once). Zero-shot and full pipeline.
2. The same on a generated schema of 1,000 tables x 20-50 columns with realistic names and
   comments (bench/wide.py: ten business areas, foreign keys within each), first call (cold
   sample cache) and warm calls.
3. Prompt tokens per question on the whole spider-pg set: the zero-shot prompt, and the full
   pipeline's extraction and generation prompts (per-question schema); nl2sql's estimate (3.2
   characters a token) and, when the local model is installed, the Qwen2.5 tokenizer's count.
4. The value index on 1M distinct values with the built-in embedder: build time, next to a
   gin_trgm_ops index on the same column in the same run, and lookup p50/p95 for exact,
   misspelled and partial mentions.
5. Value recall@5: on a generated set of tables and mentions of our own (bench/recall.py: case,
   accents, typos, plurals, demonyms, word order, abbreviations, partial names), and on the dev
   slice's gold string literals (the harness metric), all and longer than two characters.
6. Cancel latency while nl2sql reads and parses a hostile 60 MB answer (many <think> blocks):
   pg_cancel_backend sent right after the answer arrives and at 40 % and 70 % of the time the
   answer takes to process, the time until the call ends with 57014 (goal < 200 ms).
7. Load (bench/load.py): pgbench, 20 clients x 100 nl2sql() calls against the fixed-delay mock:
   errors, throughput, latency p50/p95, backend memory after warm-up and at the end.
8. Column search: the built-in embedder beside the in-database sentence model (bench/columns.py).
9. Relationships nobody declared (bench/relationships.py): inferred against declared foreign
   keys on both benchmarks with the keys dropped, profiling the 1,000-table schema, and one
   pair check on tables of 1M rows.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "eval"))
import data  # noqa: E402  (eval/data.py: where the benchmarks are)
import harness  # noqa: E402  (shares the cluster and database set-up)
import load  # noqa: E402  (bench/load.py, beside this file)
import wide  # noqa: E402  (bench/wide.py, beside this file)
import recall  # noqa: E402  (bench/recall.py, beside this file)
import columns  # noqa: E402  (bench/columns.py, beside this file)
import relationships  # noqa: E402  (bench/relationships.py, beside this file)

LLM_HOME = Path(os.environ.get("NL2SQL_LLM_HOME", Path.home() / ".cache" / "nl2sql" / "llm"))
LLM_URL = "http://127.0.0.1:%s" % os.environ.get("NL2SQL_LLM_PORT", "8080")  # scripts/local-llm.sh


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def start_mock(rules, port_file):
    scen = Path(tempfile.mkdtemp()) / "scenarios.json"
    scen.write_text(json.dumps({"rules": rules}))
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "mock_llm.py"), "--scenarios", str(scen),
                             "--port-file", port_file], stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(port_file):
            return proc, f"http://127.0.0.1:{Path(port_file).read_text()}"
        time.sleep(0.05)
    proc.kill()
    sys.exit("mock LLM did not start")


def ask(conn, question):
    t0 = time.perf_counter()
    conn.execute("SELECT nl2sql(%s)", (question,)).fetchone()
    wall = (time.perf_counter() - t0) * 1000
    trace = conn.execute("SELECT nl2sql.last_trace()").fetchone()[0]
    return wall, trace["llm_wait_ms"], trace["round_trips"], trace


def report_overhead(name, samples):
    walls = [s[0] for s in samples]
    over = [s[0] - s[1] for s in samples]
    trips = [s[2] for s in samples]
    share = [100 * (s[0] - s[1]) / s[0] for s in samples]
    print(f"  {name:<34} n={len(samples):<4} wall p50 {statistics.median(walls):8.1f} ms | overhead p50 "
          f"{statistics.median(over):7.1f} ms, p95 {pct(over, 95):7.1f} ms, {statistics.median(share):5.1f}% of wall"
          f" | LLM round trips {statistics.mean(trips):.2f} (max {max(trips)})")


ZERO_SHOT = (("nl2sql.mode", "zero_shot"),)
FULL = (("nl2sql.mode", "full"),)
# The full path with its extraction whatever the schema's size (spider-pg's are all below
# nl2sql.extraction_min_tokens): what a larger schema's questions send.
FULL_EXTRACTING = (("nl2sql.mode", "full"), ("nl2sql.extraction_min_tokens", "0"))


def connect(kw, db, url, settings=()):
    conn = psycopg.connect(dbname=db, autocommit=True, **kw)
    conn.execute("LOAD 'nl2sql'")
    conn.execute("SELECT set_config('nl2sql.llm_url', %s, false)", (url + "/v1",))
    for k, v in settings:
        conn.execute("SELECT set_config(%s, %s, false)", (k, v))
    return conn


def value_index_bench(kw, n_values, lookups):
    """Builds the value index over n_values distinct 'First Last' names; prints times."""
    db = "bench_values"
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}"')
        c.execute(f'CREATE DATABASE "{db}"')
    side = int(n_values ** 0.5) + 1
    with psycopg.connect(dbname=db, autocommit=True, **kw) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        # Pseudo-words from md5 digits mapped to letters: "Fbdjkg Heiacn", all distinct.
        c.execute("CREATE TABLE people (id serial, name text)")
        c.execute(f"""INSERT INTO people (name)
                      SELECT initcap(translate(substr(md5('f' || f), 1, 7), '0123456789', 'aeiouybrst')) || ' ' ||
                             initcap(translate(substr(md5('l' || l), 1, 8), '0123456789', 'aeiouybrst'))
                      FROM generate_series(1, {side}) f, generate_series(1, {side}) l
                      LIMIT {n_values}""")
        c.execute("VACUUM ANALYZE people")
        distinct = c.execute("SELECT count(DISTINCT name) FROM people").fetchone()[0]
        c.execute("SET max_parallel_maintenance_workers = 1")
        split = []
        c.add_notice_handler(lambda d: split.append(d.message_primary) if " indexed in " in d.message_primary else None)
        c.execute("SET client_min_messages = notice")
        t0 = time.perf_counter()
        c.execute("SELECT * FROM nl2sql.create_value_index('people', 'name')")
        build = time.perf_counter() - t0
        c.execute("SET client_min_messages = warning")
        t0 = time.perf_counter()
        c.execute("SET maintenance_work_mem = '1GB'")
        c.execute("CREATE INDEX people_name_trgm ON people USING gin (name gin_trgm_ops)")
        gin = time.perf_counter() - t0
        size = c.execute("SELECT pg_size_pretty(size_bytes) FROM nl2sql.value_indexes").fetchone()[0]
        gin_size = c.execute("SELECT pg_size_pretty(pg_relation_size('people_name_trgm'))").fetchone()[0]
        print(f"  {distinct} distinct values: nl2sql.create_value_index {build:6.1f} s ({size}); "
              f"gin_trgm_ops index {gin:6.1f} s ({gin_size})")
        for line in split:
            print(f"  {line.removeprefix('nl2sql: ')}")
        names = [r[0] for r in c.execute(f"SELECT name FROM people ORDER BY random() LIMIT {lookups}").fetchall()]
        rnd = random.Random(1)

        def typo(s):
            i = rnd.randrange(1, len(s) - 2)
            return s[:i] + s[i + 1] + s[i] + s[i + 2:] if s[i] != " " and s[i + 1] != " " else s[:i] + s[i + 1:]

        kinds = {"exact": lambda s: s.lower(), "misspelled": typo}
        c.execute("SELECT * FROM nl2sql.search_values('warm up', 5)")
        for kind, make in kinds.items():
            times, hits = [], 0
            for name in names:
                q = make(name)
                t0 = time.perf_counter()
                got = [r[0] for r in c.execute("SELECT value FROM nl2sql.search_values(%s, 5)", (q,)).fetchall()]
                times.append((time.perf_counter() - t0) * 1000)
                hits += name in got
            gin_times = []
            for name in names[:50]:
                q = make(name)
                t0 = time.perf_counter()
                c.execute("SELECT name FROM people WHERE name %% %s ORDER BY similarity(name, %s) DESC LIMIT 5", (q, q)).fetchall()
                gin_times.append((time.perf_counter() - t0) * 1000)
            print(f"  lookup {kind:<10} nl2sql.search_values p50 {statistics.median(times):6.2f} ms, p95 {pct(times, 95):6.2f} ms,"
                  f" target in top 5: {hits}/{len(names)} | pg_trgm % query p50 {statistics.median(gin_times):6.2f} ms")
        # A last name alone names about a thousand values: the top 5 should all hold it.
        held = 0
        for name in names[:50]:
            word = name.split()[-1]
            got = [r[0] for r in c.execute("SELECT value FROM nl2sql.search_values(%s, 5)", (word,)).fetchall()]
            held += bool(got) and all(word.lower() in g.lower() for g in got)
        print(f"  lookup partial    (one word of ~1000 values): top 5 all hold the word for {held}/50 queries")
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        c.execute(f'DROP DATABASE "{db}"')


def qwen_tokens(texts):
    """Exact Qwen2.5 token counts from the local model's server (scripts/local-llm.sh start;
    its /tokenize endpoint), else with llama-cpp-python's tokenizer where installed, or None."""
    try:
        counts = []
        for t in texts:
            req = urllib.request.Request(LLM_URL + "/tokenize", data=json.dumps({"content": t}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                counts.append(len(json.load(r)["tokens"]))
        return counts
    except (OSError, ValueError, KeyError):
        pass
    py = LLM_HOME / "venv" / "bin" / "python"
    gguf = next(LLM_HOME.glob("*.gguf"), None)
    if not py.exists() or gguf is None:
        return None
    code = ("import json,sys\nfrom llama_cpp import Llama\n"
            "m = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)\n"
            "print(json.dumps([len(m.tokenize(t.encode(), add_bos=False, special=True)) for t in json.load(sys.stdin)]))")
    out = subprocess.run([str(py), "-c", code, str(gguf)], input=json.dumps(texts), capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay-ms", type=int, default=300, help="fixed model latency of the mock")
    ap.add_argument("--questions", type=int, default=40, help="spider-pg questions for the overhead run")
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--columns", type=int, default=20)
    ap.add_argument("--values", type=int, default=1_000_000, help="distinct values for the value index bench")
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: overhead,wide,load,tokens,values,recall,cancel,columns,relationships")
    ap.add_argument("--load-clients", type=int, default=20)
    ap.add_argument("--load-calls", type=int, default=100, help="nl2sql() calls per pgbench client")
    ap.add_argument("--port", type=int, default=55460)
    ap.add_argument("--pgdir", default="/tmp/nl2sql-bench")
    args = ap.parse_args()
    data.require("spider-pg", "defog-instruct")   # part 9 asks defog-instruct's databases too

    items = json.loads((harness.BENCH / "questions.json").read_text())
    kw = harness.start_cluster(argparse.Namespace(pgdir=args.pgdir, port=args.port))
    for db in sorted({q["db"] for q in items}):
        harness.prepare_database(kw, "spider-pg", db)

    rules = mock_rules(kw, items, args.delay_ms) + load.rules(args.delay_ms)
    mock, url = start_mock(rules, os.path.join(tempfile.mkdtemp(), "port"))
    skip = set(args.skip.split(","))
    try:
        print(f"nl2sql bench — mock model answering after {args.delay_ms} ms; release build recommended (make install)")
        if "overhead" not in skip:
            overhead_bench(kw, items, url, args)
        if "load" not in skip:
            print(f"\n7. Load: pgbench, {args.load_clients} clients x {args.load_calls} calls, full pipeline, mock answering after {args.delay_ms} ms")
            load.run(kw, "concert_singer", url, args.load_clients, args.load_calls)
        if "tokens" not in skip:
            mock.kill()
            mock, url = start_mock([dict(r, delay_ms=0) for r in rules], os.path.join(tempfile.mkdtemp(), "port"))
            tokens_bench(kw, items, url)
        if "values" not in skip:
            print(f"\n4. Value index, built-in embedder, {args.values} distinct values (2 cores)")
            value_index_bench(kw, args.values, args.lookups)
        if "recall" not in skip:
            print("\n5. Value recall@5 on a generated set (bench/recall.py, seed 1)")
            recall.run(kw, seed=1)
            print("\n   Value recall@5 on the spider-pg gold string literals")
            harness.run_value_recall(kw, items, 5)
        if "cancel" not in skip:
            print("\n6. Cancel latency while parsing a 60 MB answer")
            cancel_bench(kw, url)
        if "columns" not in skip:
            print("\n8. Column search: the built-in embedder beside the in-database sentence model (bench/columns.py)")
            columns.run(kw, items)
        if "relationships" not in skip:
            print("\n9. Relationships nobody declared (bench/relationships.py)")
            relationships.run(kw, args.tables)
    finally:
        mock.kill()


EXTRACTION = "list what a query answering it needs"


def mock_rules(kw, items, delay_ms):
    """Extraction answers with the gold query's columns, candidates with the gold query; for
    questions tagged "[disagree]" every other candidate returns other rows."""
    rules = []
    by_db = {}
    for q in items:
        by_db.setdefault(q["db"], []).append(q)
    for db, qs in by_db.items():
        with psycopg.connect(dbname=db, autocommit=True, **kw) as conn:
            for q in qs:
                try:
                    _, columns = harness.gold_columns(conn, q["gold"])
                except psycopg.Error:
                    columns = set()
                asked = "### Question: " + q["question"] + "\n"
                rules.append({"match": [asked, EXTRACTION], "delay_ms": delay_ms,
                              "content": "#columns: " + ", ".join(sorted(columns)) + "\n#values: none\n#select: the answer"})
                rules.append({"match": ["### Question: [disagree] " + q["question"] + "\n"], "delay_ms": delay_ms,
                              "sequence": ["#SQL: " + q["gold"], "#SQL: SELECT 'something else' AS x"]})
                rules.append({"match": [asked], "content": "#SQL: " + q["gold"], "delay_ms": delay_ms})
    rules.append({"match": ["[parse-flood]"], "content": "#SQL: SELECT 1\n",
                  "repeat": {"text": "<think>x</think>\n", "times": 3_500_000}})
    area, first, *_ = wide.plan()[0]
    rules.append({"match": ["### Question: bench question", EXTRACTION], "content": f"#columns: {area}.{first}.name\n#values: none\n#select: count",
                  "delay_ms": delay_ms})
    rules.append({"match": ["### Question: bench question"], "content": f"#SQL: SELECT count(*) FROM {area}.{first}",
                  "delay_ms": delay_ms})
    return rules


def overhead_bench(kw, items, url, args):
    print("\n1. Pipeline overhead (wall time minus waiting for the model)")
    sample = random.Random(0).sample(items, min(args.questions, len(items)))
    for name, settings, prefix in [("zero-shot", ZERO_SHOT, ""), ("full, candidates agree", FULL, ""),
                                   ("full, candidates disagree", FULL, "[disagree] ")]:
        conns, samples = {}, []
        for q in sample:
            conn = conns.get(q["db"]) or connect(kw, q["db"], url, settings)
            conns[q["db"]] = conn
            ask(conn, prefix + q["question"])  # warm this database's caches once
        for q in sample:
            samples.append(ask(conns[q["db"]], prefix + q["question"]))
        report_overhead(f"{name} ({len(conns)} dbs)", samples)
        for c in conns.values():
            c.close()
    if "wide" in set(args.skip.split(",")):
        return
    print(f"\n2. The same on {args.tables} tables x {args.columns}-50 columns (bench/wide.py)")
    db = f"bench_wide_{args.tables}"
    wide.create(kw, db, args.tables, args.columns, 50, 20)
    with psycopg.connect(dbname=db, autocommit=True, **kw) as d:
        d.execute("SET client_min_messages = warning")
        d.execute("DROP EXTENSION IF EXISTS nl2sql CASCADE")
        d.execute("CREATE EXTENSION nl2sql CASCADE")
    for name, settings in [("zero-shot", ZERO_SHOT), ("full", FULL)]:
        conn = connect(kw, db, url, settings)
        conn.execute("SELECT nl2sql.reset_cache()")
        conn.execute("SET client_min_messages = warning")
        cold = ask(conn, "bench question")
        report_overhead(f"{name}, cold (first call of the session)", [cold])
        report_overhead(f"{name}, warm", [ask(conn, "bench question") for _ in range(5)])
        print(f"    schema shown to the generator: {cold[3]['tables_shown']} of {cold[3]['tables_shown'] + cold[3]['tables_omitted']}"
              f" tables, ~{cold[3]['schema_tokens']} tokens")
        conn.close()


def tokens_bench(kw, items, url):
    print(f"\n3. Prompt tokens per question, all {len(items)} spider-pg questions")
    estimates = {"zero-shot prompt": [], "full: extraction prompt": [], "full: generation prompt": []}
    prompts = {k: [] for k in estimates}
    for name, settings in [("zero-shot", ZERO_SHOT), ("full", FULL_EXTRACTING)]:
        urllib.request.urlopen(urllib.request.Request(url + "/reset", data=b"{}", method="POST"))
        conns = {}
        for q in items:
            conn = conns.get(q["db"]) or connect(kw, q["db"], url, settings)
            conns[q["db"]] = conn
            _, _, _, trace = ask(conn, q["question"])
            first = {}  # the n candidates share one prompt: count it once
            for call in trace["llm_calls"]:
                first.setdefault(call["stage"], call["prompt_tokens_estimate"])
            if name == "zero-shot":
                estimates["zero-shot prompt"].append(first["generate"])
            else:
                estimates["full: extraction prompt"].append(first["extract"])
                estimates["full: generation prompt"].append(first["generate"])
        with urllib.request.urlopen(url + "/requests") as r:
            seen = [req["body"]["messages"] for req in json.load(r) if req.get("status") == 200]
        for messages in seen:
            text = "\n".join(m["content"] for m in messages)
            if name == "zero-shot":
                prompts["zero-shot prompt"].append(text)
            elif EXTRACTION in text:
                prompts["full: extraction prompt"].append(text)
            elif not prompts["full: generation prompt"] or prompts["full: generation prompt"][-1] != text:
                prompts["full: generation prompt"].append(text)
        for c in conns.values():
            c.close()
    for key, est in estimates.items():
        exact = qwen_tokens(prompts[key])
        line = f"  {key:<26} estimate mean {statistics.mean(est):5.0f}, median {statistics.median(est):5.0f}, max {max(est):5}"
        if exact:
            line += (f" | Qwen2.5 tokenizer mean {statistics.mean(exact):5.0f}, max {max(exact):5}"
                     f" (estimate/exact {sum(est) / sum(exact):.2f})")
        print(line)
    if not qwen_tokens(["x"]):
        print("  Qwen2.5 tokenizer: not installed (scripts/local-llm.sh install), estimates only")


def cancel_bench(kw, url, rounds=5):
    """Times pg_cancel_backend against a call busy with a huge answer."""
    import threading

    conn = connect(kw, "concert_singer", url, (("nl2sql.mode", "zero_shot"), ("nl2sql.max_answer_bytes", "64MB")))
    other = psycopg.connect(dbname="concert_singer", autocommit=True, **kw)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def answered():
        while True:
            with urllib.request.urlopen(url + "/requests") as r:
                done = [x["answered"] for x in json.load(r) if "answered" in x]
            if done:
                return done[-1]
            time.sleep(0.01)

    urllib.request.urlopen(urllib.request.Request(url + "/reset", data=b"{}", method="POST"))
    conn.execute("SELECT nl2sql('[parse-flood] count')")
    work = time.time() - answered()
    latencies = {}
    for share in (0.0, 0.4, 0.7):
        for _ in range(rounds):
            urllib.request.urlopen(urllib.request.Request(url + "/reset", data=b"{}", method="POST"))
            ended = {}

            def run():
                try:
                    conn.execute("SELECT nl2sql('[parse-flood] count')")
                    ended["how"] = "finished"
                except psycopg.errors.QueryCanceled:
                    ended["how"] = "cancelled"
                ended["at"] = time.time()

            t = threading.Thread(target=run)
            t.start()
            at = answered()
            time.sleep(max(0.0, at + share * work - time.time()))
            sent = time.time()
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))
            t.join()
            if ended["how"] == "cancelled":
                latencies.setdefault(share, []).append((ended["at"] - sent) * 1000)
    print(f"  answer read and parsed in {work * 1000:.0f} ms undisturbed")
    for share, xs in latencies.items():
        print(f"  cancel at {share * 100:3.0f} % of it: n={len(xs)}, p50 {statistics.median(xs):6.1f} ms, max {max(xs):6.1f} ms")
    conn.close()
    other.close()


if __name__ == "__main__":
    main()
