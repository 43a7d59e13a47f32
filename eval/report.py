"""What the harness prints: per database, per part of the split (tuning, held-out), per suite
and category of defog-instruct, and the ablation of several configs side by side."""
import statistics


def summarize(records):
    n = len(records)
    if n == 0:
        return None
    pct = lambda xs: 100.0 * sum(xs) / n  # noqa: E731
    lat = sorted(r["latency_ms"] for r in records)
    col_recall = [r["schema_recall_columns"] for r in records if r.get("schema_recall_columns") is not None]
    prompt = [r["prompt_tokens"] if r.get("prompt_tokens") is not None else r.get("prompt_tokens_estimate", 0)
              for r in records]
    completion = [r["completion_tokens"] for r in records if r.get("completion_tokens") is not None]
    gen_prompt = [r["generation_prompt_tokens"] for r in records if r.get("generation_prompt_tokens") is not None]
    trips = [r["round_trips"] for r in records if r.get("round_trips") is not None]
    return {
        "latency_mean_s": statistics.mean(r["latency_ms"] for r in records) / 1000,
        "generation_prompt_tokens": statistics.mean(gen_prompt) if gen_prompt else None,
        "round_trips": statistics.mean(trips) if trips else None,
        "stopped_early": sum(1 for r in records if r.get("stopped_early")),
        "alone": sum(1 for r in records if r.get("alone") is not None),
        "n": n,
        "ex": pct([1 if r["correct"] else 0 for r in records]),
        # Spider's execution accuracy: the same rows with the columns in any order.
        "ex_any": pct([1 if r.get("correct_any_column_order", r["correct"]) else 0 for r in records]),
        "oracle": pct([1 if r.get("oracle", r["correct"]) else 0 for r in records]),
        "ves": pct([r["ves"] or 0 for r in records]),
        "rves": pct([r["rves"] or 0 for r in records]),
        "errors": sum(1 for r in records if r.get("predicted") is None),
        "latency_p50_s": lat[len(lat) // 2] / 1000,
        "latency_p90_s": lat[min(len(lat) - 1, (9 * len(lat)) // 10)] / 1000,
        "llm_calls": statistics.mean(r["llm_calls"] for r in records),
        "prompt_tokens": statistics.mean(prompt),
        "completion_tokens": statistics.mean(completion) if completion else None,
        "schema_recall": 100.0 * statistics.mean(col_recall) if col_recall else None,
        "largest_prompt": max((t for r in records for t in r.get("call_prompt_tokens", [])), default=None),
        "largest_generation_prompt": max((r["generation_prompt_tokens"] for r in records if r.get("generation_prompt_tokens")), default=None),
        "calls_within_4k": (100.0 * statistics.mean(1 if t <= 4096 else 0 for r in records for t in r.get("call_prompt_tokens", []))
                            if any(r.get("call_prompt_tokens") for r in records) else None),
    }


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def groups(records, key):
    """(name, records) for each value of `key`, in order, then all of them."""
    names = sorted({str(r.get(key)) for r in records})
    return [(n, [r for r in records if str(r.get(key)) == n]) for n in names]


def print_table(title, records, key="db", label="database"):
    print(f"\n{title}")
    print(f"{label:<34}{'n':>5}{'EX':>7}{'VES':>7}{'R-VES':>7}{'failed':>8}{'p50 s':>7}{'p90 s':>7}"
          f"{'calls':>7}{'trips':>7}{'prompt tok':>11}{'compl tok':>10}{'schema rec':>11}")
    for name, rs in groups(records, key) + [("all", records)]:
        s = summarize(rs)
        if name == "all":
            print("-" * 121)
        print(f"{name:<34}{s['n']:>5}{s['ex']:>7.1f}{s['ves']:>7.1f}{s['rves']:>7.1f}{s['errors']:>8}"
              f"{s['latency_p50_s']:>7.2f}{s['latency_p90_s']:>7.2f}{s['llm_calls']:>7.2f}{fmt(s['round_trips'], '7.2f'):>7}"
              f"{s['prompt_tokens']:>11.0f}{fmt(s['completion_tokens'], '10.1f'):>10}{fmt(s['schema_recall'], '10.1f'):>11}")


def print_parts(title, records):
    """The tuning and held-out parts of the split, and defog-instruct's suites and categories."""
    print_table(f"{title}: by part of the split", records, key="part", label="part")
    if any(r.get("category") for r in records):
        for r in records:
            r["suite_category"] = f"{r.get('suite')}/{r.get('category')}"
        print_table(f"{title}: by suite", records, key="suite", label="suite")
        print_table(f"{title}: by category", records, key="suite_category", label="suite/category")


def print_ablation(results):
    print("\nAblation (same questions; Δ against the first row)")
    print(f"{'config':<20}{'EX':>7}{'ΔEX':>7}{'EX any':>7}{'oracle':>7}{'VES':>7}{'R-VES':>7}{'p50 s':>7}{'p90 s':>7}{'mean s':>8}{'calls':>7}"
          f"{'trips':>7}{'prompt tok':>11}{'gen prompt':>11}{'compl tok':>10}")
    base = None
    for name, recs in results:
        s = summarize(recs)
        if s is None:
            continue
        base = s["ex"] if base is None else base
        delta = "—" if name == results[0][0] else f"{s['ex'] - base:+.1f}"
        print(f"{name:<20}{s['ex']:>7.1f}{delta:>7}{s['ex_any']:>7.1f}{s['oracle']:>7.1f}{s['ves']:>7.1f}{s['rves']:>7.1f}{s['latency_p50_s']:>7.2f}"
              f"{s['latency_p90_s']:>7.2f}"
              f"{s['latency_mean_s']:>8.2f}{s['llm_calls']:>7.2f}{fmt(s['round_trips'], '7.2f'):>7}"
              f"{s['prompt_tokens']:>11.0f}{fmt(s['generation_prompt_tokens'], '11.0f'):>11}"
              f"{fmt(s['completion_tokens'], '10.1f'):>10}")
    for name, recs in results:
        s = summarize(recs)
        if s is not None and s["largest_prompt"] is not None:
            print(f"  {name}: schema-link recall {fmt(s['schema_recall'], '.1f')} %, largest prompt {s['largest_prompt']:,} tokens "
                  f"(generation: {fmt(s['largest_generation_prompt'], ',')}), "
                  f"{fmt(s['calls_within_4k'], '.1f')} % of calls within 4k")
    for name, recs in results:
        gens = sorted({g for r in recs for g in r.get("generators_right", {})})
        if len(gens) > 1:
            shares = ", ".join(f"{g} {100.0 * sum(1 for r in recs if r.get('generators_right', {}).get(g)) / len(recs):.1f}"
                               for g in gens)
            print(f"  {name}: some candidate right, by generator: {shares}")
    for name, recs in results:
        s = summarize(recs)
        if s is not None and s["stopped_early"]:
            print(f"  {name}: stopped after the first wave on {s['stopped_early']} of {s['n']}, "
                  f"{s['alone']} of them on a first answer that stood alone")
    # each part of the split apart: a change that helps only the tuning part is not a win
    parts = sorted({r.get("part") for _, recs in results for r in recs} - {None})
    for part in parts:
        cells = []
        for name, recs in results:
            s = summarize([r for r in recs if r.get("part") == part])
            if s is not None:
                cells.append(f"{name} {s['ex']:.1f} % EX, p50 {s['latency_p50_s']:.2f} s")
        print(f"  {part} databases: " + "; ".join(cells))
