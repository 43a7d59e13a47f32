"""Where the benchmarks' data is, and one clear line when it is not there.

The benchmarks are third-party data and never part of the checkout: NL2SQL_BENCH names the
folder that holds them (default ../shared/bench, beside the checkout); bench/README.md says how
to get and convert them. Standard library only, so that `make eval` and `make bench` can check
before they set anything up:

    python3 eval/data.py spider-pg defog-instruct     exit 2 with one line when one is missing
    python3 eval/data.py --harness ARGS...            the benchmark harness.py's ARGS ask for
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_ROOT = Path(os.environ.get("NL2SQL_BENCH", ROOT.parent / "shared" / "bench"))
# What each benchmark cannot do without, and where its data comes from.
NEEDS = {
    "spider-pg": (["questions.json", "dumps/"], "Spider (Yu et al., 2018), converted to PostgreSQL"),
    "spider-train": (["questions.json", "dumps/"], "Spider's training set (Yu et al., 2018), converted to PostgreSQL"),
    "defog-instruct": (["instruct_basic_postgres.csv", "instruct_advanced_postgres.csv", "dumps/", "meta/"],
                       "Defog's sql-eval (defog-ai/sql-eval on GitHub)"),
}


def bench_dir(bench):
    return BENCH_ROOT / bench


def missing(bench, questions_only=False):
    """One line saying why `bench` cannot be read, or None when its data is there
    (`questions_only`: its questions, for a run on databases loaded before)."""
    needs, source = NEEDS[bench]
    if questions_only:
        needs = [n for n in needs if not n.endswith("/")]
    absent = [n for n in needs if not (bench_dir(bench) / n).is_dir() if n.endswith("/")] + \
        [n for n in needs if not n.endswith("/") and not (bench_dir(bench) / n).is_file()]
    if not absent:
        return None
    return (f"nl2sql: no {bench} benchmark in {bench_dir(bench)} (no {', '.join(absent)}): set NL2SQL_BENCH to "
            f"the folder that holds {bench}/ (it comes from {source}; bench/README.md says how to get and convert it)")


def require(*benches, questions_only=False):
    """Stops the program with that line (exit 2) when a benchmark's data is not there."""
    for bench in benches:
        line = missing(bench, questions_only)
        if line:
            print(line, file=sys.stderr)
            raise SystemExit(2)


def harness_bench(args):
    """The benchmark eval/harness.py's command line asks for (its --bench, default spider-pg);
    None when it only asks for help."""
    if "-h" in args or "--help" in args:
        return None
    for i, a in enumerate(args):
        if a == "--bench" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--bench="):
            return a.split("=", 1)[1]
    return "spider-pg"


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["--harness"]:
        bench = harness_bench(argv[1:])
        # help needs no data, and an unknown --bench is the harness's to refuse
        require(*([bench] if bench in NEEDS else []))
    else:
        require(*(argv or ["spider-pg"]))
