"""Load: pgbench runs a custom script (one nl2sql() call a transaction) from many clients
against the fixed-delay mock model; printed: errors, throughput, latency p50/p95, and each
backend's memory after warm-up and at the end (private anonymous memory, RssAnon: what a leak
grows; VmRSS also counts the shared buffers a backend has touched)."""
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg

QUESTION = "[load] How many singers are there?"


def rules(delay_ms):
    """Every candidate of the load question answers the same query after the fixed delay."""
    return [{"match": [QUESTION], "delay_ms": delay_ms, "content": "```sql\nSELECT count(*) FROM singer\n```"}]


def _memory(pid):
    """(RssAnon, VmRSS) of a process in kB, or None once it is gone."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return int(fields["RssAnon"].split()[0]), int(fields["VmRSS"].split()[0])
    except (OSError, KeyError, ValueError):
        return None


class Monitor(threading.Thread):
    """Samples the memory of the pgbench backends every 0.2 s."""

    def __init__(self, kw, db):
        super().__init__(daemon=True)
        self.kw, self.db, self.stop, self.samples = kw, db, threading.Event(), {}

    def run(self):
        with psycopg.connect(dbname=self.db, autocommit=True, **self.kw) as conn:
            while not self.stop.is_set():
                pids = [r[0] for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND backend_type = 'client backend'")]
                now = time.monotonic()
                for pid in pids:
                    m = _memory(pid)
                    if m:
                        self.samples.setdefault(pid, []).append((now, *m))
                self.stop.wait(0.2)


def run(kw, db, url, clients=20, calls=100, pgbench="pgbench"):
    script = Path(tempfile.mkdtemp()) / "nl2sql.sql"
    script.write_text(f"SELECT nl2sql('{QUESTION}');\n")
    logs = Path(tempfile.mkdtemp())
    env = dict(os.environ, PGOPTIONS=f"-c nl2sql.llm_url={url}/v1 -c client_min_messages=warning")
    mon = Monitor(kw, db)
    mon.start()
    started = time.monotonic()
    out = subprocess.run([pgbench, "-n", "-h", str(kw["host"]), "-p", str(kw["port"]), "-U", kw["user"],
                          "-c", str(clients), "-j", str(min(clients, 2)), "-t", str(calls), "-f", str(script),
                          "-l", "--log-prefix", str(logs / "tx"), db],
                         capture_output=True, text=True, env=env)
    ended = time.monotonic()
    mon.stop.set()
    mon.join()
    lat = []
    for f in logs.glob("tx*"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2].isdigit():
                lat.append(int(parts[2]) / 1000.0)
    failed = [line for line in (out.stdout + out.stderr).splitlines() if "failed" in line or "error" in line.lower()]
    done = next((line for line in out.stdout.splitlines() if line.startswith("number of transactions actually processed")), "")
    tps = next((line.split("=")[1].split()[0] for line in out.stdout.splitlines() if line.startswith("tps")), "?")
    print(f"  pgbench {clients} clients x {calls} calls: exit {out.returncode}; {done.split(':')[-1].strip()} calls done;"
          f" {len(lat)} latencies logged")
    for line in failed:
        print(f"    {line.strip()}")
    if lat:
        print(f"  throughput {tps} calls/s; latency p50 {statistics.median(lat):.0f} ms, p95 "
              f"{sorted(lat)[int(0.95 * (len(lat) - 1))]:.0f} ms, max {max(lat):.0f} ms; wall {ended - started:.1f} s")
    warm_at = started + 0.1 * (ended - started)
    growth, anon_w, anon_e, rss_w, rss_e = [], [], [], [], []
    for series in mon.samples.values():
        after = [s for s in series if s[0] >= warm_at]
        if len(after) < 2:
            continue
        (_, aw, rw), (_, ae, re_) = after[0], after[-1]
        anon_w.append(aw), anon_e.append(ae), rss_w.append(rw), rss_e.append(re_)
        growth.append(100.0 * (ae - aw) / aw)
    if growth:
        print(f"  backend memory, {len(growth)} backends, after warm-up (10 % of the run) -> end, median:"
              f" RssAnon {statistics.median(anon_w) / 1024:.1f} -> {statistics.median(anon_e) / 1024:.1f} MiB"
              f" (growth median {statistics.median(growth):+.1f} %, max {max(growth):+.1f} %);"
              f" VmRSS {statistics.median(rss_w) / 1024:.1f} -> {statistics.median(rss_e) / 1024:.1f} MiB")
    else:
        print("  backend memory: not sampled (the run was too short)")
    with psycopg.connect(dbname=db, autocommit=True, **kw) as conn:
        rows, errs = conn.execute("SELECT count(*), count(*) FILTER (WHERE sqlstate IS NOT NULL) FROM nl2sql.history "
                                  "WHERE question = %s", (QUESTION,)).fetchone()
        print(f"  nl2sql.history: {rows} rows for the load question, {errs} with an error")
        conn.execute("DELETE FROM nl2sql.history WHERE question = %s", (QUESTION,))
