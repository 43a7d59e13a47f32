"""Column search by meaning (make bench part 8): recall@k of nl2sql.search_columns against the
gold columns of spider-pg questions, the built-in (hashing) embedder beside the in-database
sentence model (nl2sql.column_embedder = minilm); the model's speed per column description
when a refresh embeds a schema, and a backend's memory after loading it.
"""
import random
import time

import psycopg

import harness


def rss(pid):
    """RssAnon and RssFile of a backend, in MiB (read from /proc: the bench runs on the server)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("RssAnon", "RssFile"):
                    out[k] = int(v.split()[0]) / 1024
    except OSError:
        pass
    return out


def embed_all(conn, embedder):
    """Switches the column embedder and embeds every description; returns (columns, seconds)."""
    conn.execute(f"SET nl2sql.column_embedder = {embedder}")
    t0 = time.monotonic()
    conn.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
    took = time.monotonic() - t0
    n = conn.execute("SELECT count(*) FROM nl2sql.column_embeddings").fetchone()[0]
    return n, took


def recall(conn, items, k):
    """Gold columns among the top k found for each question: (found, total, questions)."""
    found = total = 0
    for item in items:
        _, columns = harness.gold_columns(conn, item["gold"])
        if not columns:
            continue
        got = {f"{t}.{c}" for t, c in conn.execute(
            "SELECT relation::text, quote_ident(column_name) FROM nl2sql.search_columns(%s, %s)", (item["question"], k))}
        found += len(columns & got)
        total += len(columns)
    return found, total


def run(kw, items, k=5, per_db=20, seed=1):
    rng = random.Random(seed)
    by_db = {}
    for item in items:
        by_db.setdefault(item["db"], []).append(item)
    print(f"{'database':<26}{'columns':>8}{'questions':>10}{'gold':>6}{'builtin':>9}{'minilm':>8}{'embed s':>9}{'ms/col':>8}")
    sums = {"builtin": [0, 0], "minilm": [0, 0]}
    embedded = [0, 0.0]
    memory = None
    for db in sorted(by_db):
        sample = rng.sample(by_db[db], min(per_db, len(by_db[db])))
        with psycopg.connect(dbname=db, autocommit=True, **kw) as conn:
            conn.execute("SET client_min_messages = warning")
            row = {}
            for name, setting in (("builtin", "values"), ("minilm", "minilm")):
                n, took = embed_all(conn, setting)
                if name == "builtin":
                    base = took
                else:
                    # The model's share: the refresh around it is timed with the built-in embedder.
                    took = max(took - base, 0.0)
                    embedded[0] += n
                    embedded[1] += took
                    row["n"], row["took"] = n, took
                    if memory is None:
                        memory = rss(conn.info.backend_pid)
                f, t = recall(conn, sample, k)
                sums[name][0] += f
                sums[name][1] += t
                row[name] = (f, t)
            conn.execute("RESET nl2sql.column_embedder")
            conn.execute("SELECT count(*) FROM nl2sql.refresh_value_indexes()")
        b, m = row["builtin"], row["minilm"]
        print(f"{db:<26}{row['n']:>8}{len(sample):>10}{b[1]:>6}{b[0] / max(b[1], 1):>9.2f}{m[0] / max(m[1], 1):>8.2f}"
              f"{row['took']:>9.2f}{1000 * row['took'] / max(row['n'], 1):>8.1f}")
    b, m = sums["builtin"], sums["minilm"]
    print("-" * 84)
    print(f"{'all':<26}{embedded[0]:>8}{'':>10}{b[1]:>6}{b[0] / max(b[1], 1):>9.2f}{m[0] / max(m[1], 1):>8.2f}"
          f"{embedded[1]:>9.2f}{1000 * embedded[1] / max(embedded[0], 1):>8.1f}")
    print(f"   recall@{k} of gold columns (spider-pg, {per_db} questions a database, seed {seed}); "
          f"embedding time: a refresh with the model minus the same refresh with the built-in embedder")
    if memory:
        print(f"   a backend after loading the model: RssAnon {memory.get('RssAnon', 0):.1f} MiB, "
              f"RssFile {memory.get('RssFile', 0):.1f} MiB (the weights are mapped: shared by every backend)")
