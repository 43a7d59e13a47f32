#!/usr/bin/env python3
"""Writes core/src/prompt/wording.txt: every word of PostgreSQL's own messages, the words an
error raised while PostgreSQL read a generated query may repeat to the model outside quotes
besides the names the model wrote or was shown (core/src/prompt/scrub.rs). The words are read
from a compiled message catalog of the server (any language's: each entry's key is the English
message, hint or detail as the source writes it), placeholders (`%s`, `%u`) left out.

  python3 scripts/wording.py [--catalog /usr/share/locale/de/LC_MESSAGES/postgres-15.mo]
  python3 scripts/wording.py --check     # exits 1 when wording.txt differs from what it would write
"""
import argparse
import gettext
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "src" / "prompt" / "wording.txt"
PLACEHOLDER = re.compile(r"%[-+ #0-9.*]*(?:ll|l|z|h)?[a-zA-Z]")
WIDTH = 100


def words(catalog):
    with open(catalog, "rb") as f:
        keys = gettext.GNUTranslations(f)._catalog.keys()
    found = set()
    for key in keys:
        text = key if isinstance(key, str) else key[0]
        found.update(re.findall(r"[A-Za-z_]+", PLACEHOLDER.sub(" ", text)))
    return sorted(found)


def render(found):
    lines, line = [], ""
    for w in found:
        if line and len(line) + 1 + len(w) > WIDTH:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return "\n".join(lines + [line]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--catalog", default="/usr/share/locale/de/LC_MESSAGES/postgres-15.mo")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = render(words(args.catalog))
    if args.check:
        sys.exit(0 if OUT.read_text() == text else 1)
    OUT.write_text(text)
    print(f"{OUT.relative_to(ROOT)}: {text.count(chr(10))} lines")


if __name__ == "__main__":
    main()
