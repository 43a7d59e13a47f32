#!/usr/bin/env python3
"""Fails when the build or the tests read a path outside the checkout.

`make demo` and `make test` must work from a clone with nothing beside it, so the Makefile,
scripts/, tests/, pg_test/ and .ci/ never name a place above the repository's root: no `../`
out of the root, no `$ROOT/..`, no `ROOT.parent`, no `Path(__file__)` climbing past the root,
and no sibling `shared/` folder (the benchmarks live there; only `make eval` and `make bench`
read them, through NL2SQL_BENCH, from eval/ and bench/). Paths on the machine (/usr, /opt, /tmp)
are the system's, not the checkout's neighbours, and are not judged here.

    python3 scripts/outside.py        one line per finding (file:line: text), exit 1 if any
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHERE = ["Makefile", "scripts", "tests", "pg_test", ".ci", "demo", "Cargo.toml", "core/Cargo.toml", ".cargo"]
# The checks that look for such paths in the tree name them, and read nothing there.
CHECKERS = {"scripts/outside.py", "scripts/docs.py"}

# A folder named by a variable, then a step up from it (`$ROOT/..`, `"$here"/../x`,
# `$(CURDIR)/..`, `ROOT / ".."`), and Python's ways up from the root.
ROOT_UP = re.compile(r"""(\$\{?\w+\}?|\$\(\w+\)|\bROOT)["']?\s*(/\s*)?["']?\.\.(?![.\w])|\bROOT\.(parent|parents)\b"""
                     r"""|\bos\.path\.dirname\(\s*ROOT\b|\bjoin(path)?\([^)]*["']\.\.["']""")
# Going up by other means: `cd ..`, `make -C ..`, `chdir("..")`, `Path("..")`, `parents[2]`,
# `${0%/*}/..`, `$(dirname "${BASH_SOURCE[0]}")/../..`.
OTHER_UP = re.compile(r"""\bcd\s+["']?\.\.(/|\s|$|["'])|-C\s+["']?\.\.(/|\s|$)|chdir\(\s*["']\.\.|Path\(\s*["']\.\.["']"""
                      r"""|\.parents\[\s*[2-9]|\$\{0%/\*\}/\.\.|BASH_SOURCE[^)]*\)"?/\.\./\.\.""")
# The sibling folder the benchmarks are kept in.
SIBLING = re.compile(r"(\.\./|\bparent\W+)shared\b|\bshared/bench\b")
# `$(dirname "$0")/..` steps, and `Path(__file__)`'s parents: how far up each climbs.
DIRNAME_UP = re.compile(r"""\$\(dirname\s+["']?\$0["']?\)((?:/\.\.)+)""")
FILE_UP = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?((?:\.parent)+)")
# A relative path that starts by going up (`../x`, `"../x"`), not an ellipsis ("... from").
BARE_UP = re.compile(r"""(?:^|[\s"'=:(,\[])\.\./""")


def depth(rel):
    """How many folders a file lies below the root (Makefile: 0, scripts/x.sh: 1)."""
    return len(Path(rel).parts) - 1


def findings(rel, text):
    """(line number, line) of every place in `text` (the file `rel`) that reaches outside."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        bad = ROOT_UP.search(line) or SIBLING.search(line) or OTHER_UP.search(line)
        for m in DIRNAME_UP.finditer(line):
            # $(dirname "$0") is the file's own folder: one step up per level is the root.
            bad = bad or m.group(1).count("..") > depth(rel)
        for m in FILE_UP.finditer(line):
            # Path(__file__).parent is the file's folder: the root is depth + 1 parents up.
            bad = bad or m.group(1).count("parent") > depth(rel) + 1
        if BARE_UP.search(DIRNAME_UP.sub("", line)):
            bad = True
        if bad:
            out.append((n, line.strip()))
    return out


def files():
    for where in WHERE:
        p = ROOT / where
        if p.is_file():
            yield p
        elif p.is_dir():
            yield from (f for f in sorted(p.rglob("*")) if f.is_file() and "__pycache__" not in f.parts
                        and not f.relative_to(ROOT).parts[:2] == ("pg_test", "results"))


def self_test():
    """The rules themselves, on lines they must and must not flag."""
    flagged = [("scripts/demo.sh", 'DUMP=$ROOT/../shared/bench/x.sql'), ("tests/run.sh", 'D=${ROOT}/../data'),
               ("tests/t.py", 'ROOT.parent / "shared"'), ("tests/t.py", 'Path(__file__).resolve().parent.parent.parent'),
               ("scripts/x.sh", 'cd "$(dirname "$0")/../.."'), ("Makefile", "\tpython3 ../tools/x.py"),
               ("tests/t.py", 'open("../data.json")'), ("tests/t.py", 'os.environ.get("X", "/srv/shared/bench")'),
               ("scripts/x.sh", "cd .."), ("Makefile", "\t$(MAKE) -C .. all"), ("scripts/x.sh", 'cat "$here"/../x'),
               ("scripts/x.sh", 'cat "$ROOT_DIR/../x"'), ("Makefile", "\tpython3 $(CURDIR)/../x.py"),
               ("tests/t.py", "os.path.join(ROOT, '..', 'x')"), ("tests/t.py", "Path('..') / 'x'"),
               ("tests/t.py", "Path(__file__).parents[2]"), ("tests/t.py", "os.chdir('..')"),
               ("tests/t.py", "os.path.dirname(ROOT)"), ("scripts/x.sh", 'cd "$(dirname "$0")/.." && cat ../data/x'),
               ("scripts/x.sh", 'x="${0%/*}/../../y"')]
    kept = [("scripts/x.sh", 'ROOT=$(cd "$(dirname "$0")/.." && pwd)'), ("tests/t.py", 'Path(__file__).resolve().parent.parent'),
            ("pg_test/sql/x.sql", "-- ... and even then it cannot write"), ("Makefile", "\tscripts/setup.sh"),
            ("scripts/x.sh", 'echo "shared_buffers = 128MB"'), ("scripts/x.sh", "x=$(pg_config --sharedir)/extension")]
    for rel, line in flagged:
        assert findings(rel, line), f"outside.py misses {line!r} in {rel}"
    for rel, line in kept:
        assert not findings(rel, line), f"outside.py flags {line!r} in {rel}"


def main():
    self_test()
    bad = 0
    for f in files():
        rel = f.relative_to(ROOT).as_posix()
        if rel in CHECKERS:
            continue
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in findings(rel, text):
            print(f"{rel}:{n}: reads outside the checkout: {line}")
            bad += 1
    if bad:
        print(f"{bad} place(s) read outside the checkout: make demo and make test must work from a clone alone "
              "(benchmarks belong to make eval and make bench, through NL2SQL_BENCH)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
