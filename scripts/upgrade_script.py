#!/usr/bin/env python3
"""Assembles an upgrade script from its template: each line `-- @include sql/<file>.sql` becomes
that install file's body (its opening comment left out), so the upgrade restates what a fresh
install runs from the same files instead of a copy kept by hand. What only an upgrade does
(ALTERs, moving data) is written in the template itself.

Only the upgrade to the version being developed has a template: when that version is released,
its template is deleted and the assembled script stays as released (a released upgrade script
never changes; the install files it took its text from will).

    scripts/upgrade_script.py            writes every sql/nl2sql--A--B.sql from sql/upgrade/*.in
    scripts/upgrade_script.py --check    fails when a written script differs from its template's
                                         (make test runs this)
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIRECTIVE = "-- @include "


def body(path):
    """An install file without its opening comment (and the blank lines after it)."""
    lines = (ROOT / path).read_text().split("\n")
    i = 0
    while i < len(lines) and (lines[i].startswith("--") or not lines[i].strip()):
        i += 1
    return "\n".join(lines[i:]).strip("\n")


def assemble(template):
    out = []
    for line in template.read_text().split("\n"):
        out.append(body(line[len(DIRECTIVE):].strip()) if line.startswith(DIRECTIVE) else line)
    return "\n".join(out)


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for template in sorted((ROOT / "sql" / "upgrade").glob("*.sql.in")):
        target = ROOT / "sql" / template.name[: -len(".in")]
        text = assemble(template)
        if check:
            if not target.exists() or target.read_text() != text:
                stale.append(target.relative_to(ROOT))
        else:
            target.write_text(text)
    if stale:
        sys.exit(f"out of date with their templates: {', '.join(map(str, stale))}; run scripts/upgrade_script.py")


if __name__ == "__main__":
    main()
