#!/usr/bin/env python3
"""Writes core/src/prompt/wording.txt: every word of PostgreSQL's own messages, the words an
error raised while PostgreSQL read a generated query may repeat to the model outside quotes
besides the names the model wrote or was shown (core/src/prompt/scrub.rs); and
core/src/prompt/after_type.txt: the words those messages print where a type's name may stand
(right after `type` or `types`, and after the `to`, `and` or `or` that follows such a name:
`cannot cast type %s to %s`), the only wording kept there. The words are read from a compiled
message catalog of the server (any language's: each entry's key is the English message, hint or
detail as the source writes it), placeholders (`%s`, `%u`) left out.

  python3 scripts/wording.py [--catalog /usr/share/locale/de/LC_MESSAGES/postgres-15.mo]
  python3 scripts/wording.py --check     # exits 1 when either file differs from what it would write
"""
import argparse
import gettext
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "src" / "prompt" / "wording.txt"
AFTER_TYPE = ROOT / "core" / "src" / "prompt" / "after_type.txt"
PLACEHOLDER = re.compile(r"%[-+ #0-9.*]*(?:ll|l|z|h)?[a-zA-Z]")
WIDTH = 100


# A type's place: the token after `type`/`types`, or after a name's `to`/`and`/`or` there.
TYPE_PLACE = re.compile(r"\btypes?\s+(\S+)(?:\s+(?:to|and|or)\s+(\S+))?")


def texts(catalog):
    with open(catalog, "rb") as f:
        keys = gettext.GNUTranslations(f)._catalog.keys()
    return [key if isinstance(key, str) else key[0] for key in keys]


def words(keys):
    found = set()
    for text in keys:
        found.update(re.findall(r"[A-Za-z_]+", PLACEHOLDER.sub(" ", text)))
    return sorted(found)


def after_type(keys):
    found = set()
    for text in keys:
        for m in TYPE_PLACE.finditer(text):
            for place in filter(None, m.groups()):
                found.update(re.findall(r"[A-Za-z_]+", PLACEHOLDER.sub(" ", place)))
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
    keys = texts(args.catalog)
    files = {OUT: render(words(keys)), AFTER_TYPE: render(after_type(keys))}
    if args.check:
        sys.exit(0 if all(path.read_text() == text for path, text in files.items()) else 1)
    for path, text in files.items():
        path.write_text(text)
        print(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")


if __name__ == "__main__":
    main()
