#!/usr/bin/env python3
"""The size rules of CONTRIBUTING.md, checked: no Rust file outside tests over MAX_FILE_LINES
lines, no function over MAX_FN_LINES. Exits 1 and lists what breaks them (make test runs it)."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 650   # "no file much over ~600 lines"
MAX_FN_LINES = 120
# pgrx's message macros send text as it is; src/ sends NOTICEs and WARNINGs through its own note!
# and alert! (src/lib.rs), which put them on one line with no unsafe character.
RAW_MESSAGE = re.compile(r'(?<![\w])(?:::)?(?:pgrx::)?(?:notice|warning|info)!\(')
FN = re.compile(r'^(\s*)(?:pub(?:\([^)]*\))? )?(?:const )?(?:unsafe )?(?:extern "[^"]*" )?fn (\w+)')


def is_test(path):
    return "tests" in path.parts or path.stem == "tests"


def long_functions(lines):
    """(name, first line, length) of each function longer than MAX_FN_LINES: from its `fn` line
    to the closing brace at its indentation."""
    out, i = [], 0
    while i < len(lines):
        m = FN.match(lines[i])
        if m and not lines[i].rstrip().endswith(";"):
            close = re.compile(r"^%s\}\s*$" % re.escape(m.group(1)))
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            if j - i + 1 > MAX_FN_LINES:
                out.append((m.group(2), i + 1, j - i + 1))
            i = j
        i += 1
    return out


def main():
    problems = []
    for crate in ("src", "core/src"):
        for path in sorted((ROOT / crate).rglob("*.rs")):
            rel = path.relative_to(ROOT)
            if is_test(rel):
                continue
            lines = path.read_text().split("\n")
            if len(lines) > MAX_FILE_LINES:
                problems.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE_LINES})")
            if crate == "src":
                for i, text in enumerate(lines, 1):
                    if RAW_MESSAGE.search(text) and not text.lstrip().startswith("//"):
                        problems.append(f"{rel}:{i}: pgrx's message macro; use note! or alert! (src/lib.rs)")
            for name, line, n in long_functions(lines):
                problems.append(f"{rel}:{line}: fn {name} is {n} lines (at most {MAX_FN_LINES})")
    for p in problems:
        print(p)
    print(f"layout: {len(problems)} problem(s): files or functions over the limits, raw message macros")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
