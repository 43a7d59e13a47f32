#!/usr/bin/env python3
"""How a local llama-server serves nl2sql's pattern of requests: n candidates sent at once with
the same prompt, then a request whose prompt shares only a prefix with them. Prints the wall
time of the n answers, and the server's own prompt and decode counts and rates (its `timings`).
Numbers are printed, never asserted; run it against scripts/local-llm.sh started with the slot
settings to compare (NL2SQL_LLM_SLOTS, NL2SQL_LLM_KV_UNIFIED).

    .venv/bin/python bench/local_llm.py --url http://127.0.0.1:8080/v1 --n 5 --schema-lines 60
    .venv/bin/python bench/local_llm.py --two-prompts --rounds 4 --schema-lines 200
"""
import argparse
import concurrent.futures
import json
import statistics
import time
import urllib.request

SYSTEM = "You write one PostgreSQL query that answers the question."
# The structured chain of thought makes answers of a few hundred tokens; --reason asks for that.
REASON = " First explain, step by step, which columns and conditions the question needs, then give the query."


def schema(lines):
    """A made-up schema of about 8 tokens a line, the shape nl2sql's prompts have."""
    out = []
    for i in range(lines):
        out.append(f"  column_{i} integer, -- measure {i} of table_{i // 10}, e.g. {i * 7}, {i * 11}")
    return "CREATE TABLE facts (\n" + "\n".join(out) + "\n);"


def ask(url, messages, max_tokens, temperature, seed):
    body = json.dumps({"model": "local", "messages": messages, "max_tokens": max_tokens,
                       "temperature": temperature, "seed": seed, "cache_prompt": True}).encode()
    req = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=900) as r:
        answer = json.load(r)
    return time.perf_counter() - t0, answer.get("timings", {}), answer.get("usage", {})


def wave(url, messages, n, max_tokens, temperature):
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda i: ask(url, messages, max_tokens, temperature, i), range(n)))
    wall = time.perf_counter() - t0
    prompt = sum(t.get("prompt_n", 0) for _, t, _ in results)
    decoded = sum(t.get("predicted_n", 0) for _, t, _ in results)
    rates = [t["predicted_per_second"] for _, t, _ in results if t.get("predicted_per_second")]
    return wall, prompt, decoded, rates, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--n", type=int, default=5, help="candidates sent at once")
    ap.add_argument("--schema-lines", type=int, default=60, help="schema size (~8 tokens a line)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reason", action="store_true", help="long answers, as the structured chain of thought makes")
    ap.add_argument("--two-prompts", action="store_true",
                    help="nl2sql's two generators: per round a first answer alone on the long prompt, then the "
                         "long and a short prompt (sharing only the system text) at once; prints what each read")
    args = ap.parse_args()
    if args.two_prompts:
        return two_prompts(args)
    for r in range(args.rounds):
        # A new question each round: the system text and the schema are shared with the last round.
        question = f"Question {r}: what is the total of column_{r} per table for rows where column_{r + 1} > {r}?"
        messages = [{"role": "system", "content": SYSTEM + (REASON if args.reason else " Answer with the query only.")},
                    {"role": "user", "content": schema(args.schema_lines) + "\n" + question}]
        wall, prompt, decoded, rates, results = wave(args.url, messages, args.n, args.max_tokens, 0.7)
        usage = results[0][2]
        print(f"round {r}: {args.n} answers in {wall:6.1f} s; prompt {usage.get('prompt_tokens', '?')} tokens, "
              f"processed {prompt} in all (cache hits skip); decoded {decoded} tokens, "
              f"{statistics.median(rates) if rates else 0:.1f} tokens/s per sequence, {decoded / wall:.1f} tokens/s together")


def two_prompts(args):
    """Whether each of two prompts keeps its own slot's cache: per round, a first answer on the
    long prompt alone, then a wave of the long and the short prompt at once (a new question
    each round). Tokens read per request: a kept cache reads only the question."""
    # nl2sql's instructions are about a quarter of its shorter prompt: the share that decides
    # whether the short prompt is taken for the long one's cache.
    rules = " ".join(f"Rule {i}: qualify column_{i} with its table and never invent a name." for i in range(args.schema_lines // 5))
    system = {"role": "system", "content": SYSTEM + " Answer with the query only. " + rules}
    for r in range(args.rounds):
        question = f"Question {r}: what is the total of column_{r} per table for rows where column_{r + 1} > {r}?"
        long_prompt = [system, {"role": "user", "content": schema(args.schema_lines) + "\n" + question}]
        short_prompt = [system, {"role": "user", "content": schema(args.schema_lines // 3).replace("facts", "facts_short")
                                 + "\n" + question}]
        _, first, _ = ask(args.url, long_prompt, args.max_tokens, 0.0, 0)
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            # The short prompt first: as likely as the long one to reach the server first.
            both = list(pool.map(lambda m: ask(args.url, m, args.max_tokens, 0.7, r), [short_prompt, long_prompt]))[::-1]
        wall = time.perf_counter() - t0
        print(f"round {r}: first answer read {first.get('prompt_n', '?')} tokens; then at once: long prompt read "
              f"{both[0][1].get('prompt_n', '?')} of {both[0][2].get('prompt_tokens', '?')}, short read "
              f"{both[1][1].get('prompt_n', '?')} of {both[1][2].get('prompt_tokens', '?')}, in {wall:.1f} s")


if __name__ == "__main__":
    main()
