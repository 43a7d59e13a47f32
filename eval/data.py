"""Where the benchmarks' data is, and one clear line when it is not there.

The benchmarks are third-party data and never part of the checkout: NL2SQL_BENCH names the
folder that holds them (default ../shared/bench, beside the checkout); bench/README.md says how
to get and convert them. Standard library only, so that `make eval` and `make bench` can check
before they set anything up:

    python3 eval/data.py spider-pg defog-instruct     exit 2 with one line when one is missing
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_ROOT = Path(os.environ.get("NL2SQL_BENCH", ROOT.parent / "shared" / "bench"))
# The file each benchmark cannot do without, and where its data comes from.
NEEDS = {
    "spider-pg": ("questions.json", "Spider (Yu et al., 2018), converted to PostgreSQL"),
    "defog-instruct": ("instruct_basic_postgres.csv", "Defog's sql-eval (defog-ai/sql-eval on GitHub)"),
}


def bench_dir(bench):
    return BENCH_ROOT / bench


def missing(bench):
    """One line saying why `bench` cannot be read, or None when its data is there."""
    need, source = NEEDS[bench]
    if (bench_dir(bench) / need).is_file():
        return None
    return (f"nl2sql: no {bench} benchmark in {bench_dir(bench)}: set NL2SQL_BENCH to the folder that holds "
            f"{bench}/ (it comes from {source}; bench/README.md says how to get and convert it)")


def require(*benches):
    """Stops the program with that line (exit 2) when a benchmark's data is not there."""
    for bench in benches:
        line = missing(bench)
        if line:
            print(line, file=sys.stderr)
            raise SystemExit(2)


if __name__ == "__main__":
    require(*(sys.argv[1:] or ["spider-pg"]))
