#!/usr/bin/env python3
"""nl2sql benchmarks: numbers printed, never asserted.

1. Pipeline overhead: a mock model that answers every spider-pg question with its gold query
   after a fixed delay; overhead = wall time of nl2sql() - time waiting for the model (the
   calls are sequential, so their latencies add up on the critical path).
2. The same on a generated schema of 1,000 tables x 20 columns, first call (cold sample cache)
   and warm calls.
3. Prompt tokens per question on the whole spider-pg set: nl2sql's estimate (3.2 characters a
   token) and, when the local model is installed, the Qwen2.5 tokenizer's exact count.
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
import harness  # noqa: E402  (shares the cluster and database set-up)

LLM_HOME = Path(os.environ.get("NL2SQL_LLM_HOME", Path.home() / ".cache" / "nl2sql" / "llm"))


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
    llm = sum(c["latency_ms"] for c in trace["llm_calls"])
    return wall, llm, len(trace["llm_calls"]), trace


def report_overhead(name, samples):
    walls = [s[0] for s in samples]
    over = [s[0] - s[1] for s in samples]
    trips = [s[2] for s in samples]
    share = [100 * (s[0] - s[1]) / s[0] for s in samples]
    print(f"  {name:<34} n={len(samples):<4} wall p50 {statistics.median(walls):8.1f} ms | overhead p50 "
          f"{statistics.median(over):7.1f} ms, p95 {pct(over, 95):7.1f} ms, {statistics.median(share):5.1f}% of wall"
          f" | LLM round trips {statistics.mean(trips):.2f} (max {max(trips)})")


def connect(kw, db, url, settings=()):
    conn = psycopg.connect(dbname=db, autocommit=True, **kw)
    conn.execute("LOAD 'nl2sql'")
    conn.execute("SELECT set_config('nl2sql.llm_url', %s, false)", (url + "/v1",))
    for k, v in settings:
        conn.execute("SELECT set_config(%s, %s, false)", (k, v))
    return conn


def wide_schema(kw, tables, columns, rows):
    db = f"bench_wide_{tables}x{columns}"
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        done = c.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                         (db,)).fetchone()
        if done and done[0] == "complete":
            return db
        c.execute(f'DROP DATABASE IF EXISTS "{db}"')
        c.execute(f'CREATE DATABASE "{db}"')
    with psycopg.connect(dbname=db, autocommit=True, **kw) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        types = ["integer", "text", "numeric(10,2)", "date", "boolean"]
        for t in range(1, tables + 1):
            cols = ", ".join(f"c{i:02d} {types[i % len(types)]}" for i in range(1, columns + 1))
            c.execute(f"CREATE TABLE t{t:04d} (id integer PRIMARY KEY, {cols})")
            vals = ", ".join(
                {"integer": "g", "text": "'v' || (g % 7)", "numeric(10,2)": "g * 1.5",
                 "date": "date '2020-01-01' + g", "boolean": "g % 2 = 0"}[types[i % len(types)]]
                for i in range(1, columns + 1))
            c.execute(f"INSERT INTO t{t:04d} SELECT g, {vals} FROM generate_series(1, {rows}) g")
            if t > 1:
                c.execute(f"ALTER TABLE t{t:04d} ADD FOREIGN KEY (c05) REFERENCES t{t - 1:04d} (id)")
        c.execute("ANALYZE")
        c.execute(f"COMMENT ON DATABASE \"{db}\" IS 'complete'")
    return db


def qwen_tokens(texts):
    """Exact Qwen2.5 token counts with llama.cpp's tokenizer (vocab only), or None."""
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
    ap.add_argument("--port", type=int, default=55460)
    ap.add_argument("--pgdir", default="/tmp/nl2sql-bench")
    args = ap.parse_args()

    items = json.loads((harness.BENCH / "questions.json").read_text())
    kw = harness.start_cluster(argparse.Namespace(pgdir=args.pgdir, port=args.port))
    for db in sorted({q["db"] for q in items}):
        harness.prepare_database(kw, db)

    rules = [{"match": ["### Question: " + q["question"] + "\n"], "content": q["gold"], "delay_ms": args.delay_ms}
             for q in items]
    rules.append({"match": ["### Question: bench question"], "content": "SELECT count(*) FROM t0001",
                  "delay_ms": args.delay_ms})
    mock, url = start_mock(rules, os.path.join(tempfile.mkdtemp(), "port"))
    try:
        print(f"nl2sql bench — mock model answering after {args.delay_ms} ms; release build recommended (make install)")
        print("\n1. Pipeline overhead (wall time minus waiting for the model)")
        sample = random.Random(0).sample(items, min(args.questions, len(items)))
        conns, samples = {}, []
        for q in sample:
            conn = conns.get(q["db"]) or connect(kw, q["db"], url)
            conns[q["db"]] = conn
            ask(conn, q["question"])  # warm this database's caches once
        for q in sample:
            samples.append(ask(conns[q["db"]], q["question"]))
        report_overhead(f"spider-pg ({len(conns)} databases)", samples)

        db = wide_schema(kw, args.tables, args.columns, 20)
        conn = connect(kw, db, url)
        conn.execute("SELECT nl2sql.reset_cache()")
        conn.execute("SET client_min_messages = warning")
        cold = ask(conn, "bench question")
        report_overhead(f"{args.tables} tables x {args.columns} columns, cold", [cold])
        report_overhead(f"{args.tables} tables x {args.columns} columns, warm", [ask(conn, "bench question") for _ in range(5)])
        print(f"    schema shown: {cold[3]['tables_shown']} of {cold[3]['tables_shown'] + cold[3]['tables_omitted']} tables,"
              f" ~{cold[3]['schema_tokens']} tokens (nl2sql.schema_max_tokens)")
        for c in conns.values():
            c.close()
        conn.close()

        print(f"\n2. Prompt tokens per question, all {len(items)} spider-pg questions")
        urllib.request.urlopen(urllib.request.Request(url + "/reset", data=b"{}", method="POST"))
        fast = [dict(r, delay_ms=0) for r in rules]
        mock.kill()
        mock, url = start_mock(fast, os.path.join(tempfile.mkdtemp(), "port"))
        conns, estimates = {}, []
        for q in items:
            conn = conns.get(q["db"]) or connect(kw, q["db"], url)
            conns[q["db"]] = conn
            _, _, _, trace = ask(conn, q["question"])
            estimates.append(trace["llm_calls"][0]["prompt_tokens_estimate"])
        with urllib.request.urlopen(url + "/requests") as r:
            prompts = ["\n".join(m["content"] for m in req["body"]["messages"]) for req in json.load(r)]
        exact = qwen_tokens(prompts)
        print(f"  estimate (3.2 chars/token): mean {statistics.mean(estimates):.0f}, median {statistics.median(estimates):.0f}, max {max(estimates)}")
        if exact:
            print(f"  Qwen2.5 tokenizer:          mean {statistics.mean(exact):.0f}, median {statistics.median(exact):.0f}, max {max(exact)}"
                  f"  (estimate/exact = {sum(estimates) / sum(exact):.2f})")
        else:
            print("  Qwen2.5 tokenizer: not installed (scripts/local-llm.sh install), estimate only")
        for c in conns.values():
            c.close()
    finally:
        mock.kill()


if __name__ == "__main__":
    main()
