#!/usr/bin/env python3
"""The documents a user reads name only what a clone of the repository holds, and state facts
rather than how they were found. Exits 1 and prints one line per problem, `file:line: what`
(make layout runs it, and tests/test_docs.py).

- Paths: every repository path a document names exists in the checkout (a tracked file, or a
  new one git does not ignore): in `inline code` or a fenced block when it starts with a
  top-level folder of the tree (`core/`, `src/`, `sql/`, ...) or is a top-level file, or when
  it is a path relative to some folder ending in a file name (`align/windows.rs`: some file of
  the tree ends with it); and every markdown link to a file of the tree, with its #anchor.
  Not checked: paths on the DBA's machine (`/opt/...`, `$PGDATA`), globs and placeholders
  (`*.sql`, `<suite>.out`, `{1,2}`, `...`), bare file names, and files under the folders runs
  write that .gitignore names from the root (`/eval/results`). `../shared/`, beside the
  checkout, holds the benchmarks' data: only the pages about benchmarks and their results may
  name it (and folders of it, in the paragraph that names it).
- Wording: no user-facing file speaks of issue numbers ("issue 12", "#47"), of reviews or
  reviewers, or of "the brief". Markdown is read outside its code (a table named `reviews` is
  a name), SQL files in their comments only; the released update
  script and the released install scripts in pg_test/fixtures/ never change and are not read;
  eval/RESULTS.md numbers benchmark questions `#25`, so "#47" is not looked for there.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PATH_DOCS = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/*.md", "bench/README.md",
             "eval/RESULTS.md"]
WORDING_DOCS = PATH_DOCS + ["eval/*.py", "bench/*.py", "sql/**/*.sql"]
FROZEN = ["sql/nl2sql--0.1.0--0.2.0.sql", "pg_test/fixtures/*"]

ROOTS = {"core", "src", "sql", "scripts", "tests", "docs", "eval", "bench", "pg_test", ".ci", "demo"}
TOP_FILES = {"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "Makefile", "Cargo.toml",
             "Cargo.lock", "LICENSE", "nl2sql.control", ".gitignore"}
# A path not starting at the root is checked when it ends in a file name of the tree's own kinds
# (a data file of another project, `data/questions.csv`, is not ours).
EXTENSIONS = {".rs", ".py", ".sql", ".sh", ".in", ".patch", ".out", ".txt"}
PLACEHOLDER = re.compile(r"[*?<>{}$~…=|`]|\.\.\.")

SHARED = "../shared/"
SHARED_ALLOWED = ["bench/README.md", "eval/RESULTS.md"]
# Mentions of ../shared/ elsewhere that wait for their text's rewrite: (file, heading of the
# section they are in). Each must still be there, so that a section rewritten leaves the list.
SHARED_PENDING = []

WORDING = [
    (re.compile(r"\bissues?[ -]#?\d+", re.I), "an issue number"),
    (re.compile(r"\b(?:this|the|that|local-speed) issue\b|\bissue's\b", re.I), "an issue"),
    (re.compile(r"\breview(?:s|ed|er|ers|'s)?\b", re.I), "a review"),
    (re.compile(r"\bthe brief\b", re.I), "the brief"),
]
HASH_NUMBER = re.compile(r"(?<![\w&/])#\d+\b")
HASH_NUMBER_ALLOWED = {"eval/RESULTS.md"}

# A fence opens or closes a block at a line's start; a backtick fence's info string holds no
# backtick (```` ```sql ```` in a sentence is inline code).
FENCE = re.compile(r"\s{0,3}(`{3,}(?=[^`]*$)|~{3,})")
HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")


def expand(patterns, exclude=()):
    files = []
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and rel not in files and not any(Path(rel).match(x) for x in exclude):
                files.append(rel)
    return files


def checkout_files():
    """The files of the checkout (tracked, or new and not ignored)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout.decode()
        return {f for f in out.split("\0") if f and (ROOT / f).exists()}
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        files = set()
        for dirpath, dirnames, names in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if d not in {".git", "target", ".venv", ".run"}]
            files |= {(Path(dirpath) / n).relative_to(ROOT).as_posix() for n in names}
        return files


def run_outputs():
    """Folders .gitignore names from the root that runs write into (`/eval/results`): a file
    there is named as what a run leaves, which a clone has once it ran."""
    gitignore = ROOT / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    return [l.strip().strip("/") + "/" for l in lines if re.fullmatch(r"/[\w/.-]*/results/?", l.strip())]


class Tree:
    def __init__(self, files, outputs=()):
        self.files = set(files)
        self.dirs = {p.as_posix() for f in self.files for p in Path(f).parents} - {"."}
        self.outputs = list(outputs)
        self.anchors = {}

    def has(self, path):
        path = path.rstrip("/")
        return path in self.files or path in self.dirs or any(path.startswith(o) for o in self.outputs)

    def ends_with(self, suffix):
        return any(("/" + f).endswith(suffix) or ("/" + f + "/").endswith(suffix) for f in self.files | self.dirs)

    def anchors_of(self, doc):
        if doc not in self.anchors:
            self.anchors[doc] = slugs((ROOT / doc).read_text())
        return self.anchors[doc]


def fenced(lines):
    """Whether each line is inside a fenced block (its fences included)."""
    inside, marks, fence = False, [], None
    for line in lines:
        m = FENCE.match(line)
        if m and (not inside or m.group(1)[0] == fence):
            marks.append(True)
            inside, fence = not inside, m.group(1)[0]
        else:
            marks.append(inside)
    return marks


def slugs(text):
    """The anchors of a markdown page's headings, as GitHub makes them."""
    lines = text.splitlines()
    seen, out = {}, set()
    for line, inside in zip(lines, fenced(lines)):
        m = None if inside else HEADING.match(line)
        if m:
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2)).lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def named(text):
    """(line, token, kind) for what a markdown page names: `link` a link's target, `code` a
    word of inline code, `block` a word of a fenced block."""
    lines = text.splitlines()
    marks = fenced(lines)
    prose = "\n".join("" if m else l for l, m in zip(lines, marks))
    found = []

    def line_of(offset):
        return prose.count("\n", 0, offset) + 1

    for m in re.finditer(r"(`+)(.+?)\1", prose, re.S):
        for w in re.finditer(r"\S+", m.group(2)):
            found.append((line_of(m.start(2) + w.start()), w.group(0), "code"))
    blanked = re.sub(r"(`+).+?\1", lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", blanked):
        found.append((line_of(m.start(1)), m.group(1), "link"))
    for number, (line, inside) in enumerate(zip(lines, marks), 1):
        if inside and not FENCE.match(line):
            found += [(number, w, "block") for w in line.split()]
    return sorted(found)


def sections(lines):
    """For each line (from 1): the heading of its section, and whether its paragraph names
    ../shared/ (then `bench/spider-pg/` there is a folder of ../shared/, not of the checkout)."""
    result, heading, paragraph = [None] * (len(lines) + 2), "", []
    for i, line in enumerate(lines + [""], 1):
        if line.startswith("#"):
            heading = line.strip()
        if line.strip():
            paragraph.append(i)
        else:
            shared = any(SHARED in lines[j - 1] for j in paragraph)
            for j in paragraph:
                result[j] = (result[j][0], shared)
            paragraph = []
        result[i] = (heading, False)
    return result


def check_paths(doc, text, tree, pending_seen=None):
    problems = []
    where = sections(text.splitlines())
    base = Path(doc).parent

    def may_name_shared(number):
        if doc in SHARED_ALLOWED:
            return True
        if (doc, where[number][0]) in SHARED_PENDING:
            if pending_seen is not None:
                pending_seen.add((doc, where[number][0]))
            return True
        return False

    def outside(number, token):
        if not may_name_shared(number):
            problems.append(f"{doc}:{number}: {token}: beside the checkout, not in it (only "
                            f"{' and '.join(SHARED_ALLOWED)} name it)")

    for number, token, kind in named(text):
        if kind == "link":
            if re.match(r"[a-z][a-z+.-]*:", token):
                continue  # a URL
            target, _, anchor = token.partition("#")
            path = os.path.normpath((base / target).as_posix()) if target else doc
            if (path + "/").startswith(SHARED):
                outside(number, token)
            elif not tree.has(path):
                problems.append(f"{doc}:{number}: {token}")
            elif anchor and path.endswith(".md") and anchor not in tree.anchors_of(path):
                problems.append(f"{doc}:{number}: {token}: no such heading")
            continue
        if PLACEHOLDER.search(token):
            continue  # globs, placeholders, variables, assignments
        token = re.sub(r"[.,:;]+$", "", token.strip("\"'()[],;"))
        if token.startswith(SHARED):
            outside(number, token)
            continue
        if not token or token.startswith(("/", "-")):
            continue  # paths on the DBA's machine, options
        if "/" in token and token.split("/")[0] in ROOTS or token in TOP_FILES:
            if tree.has(os.path.normpath(token)):
                continue
            if not (where[number][1] and may_name_shared(number)):
                problems.append(f"{doc}:{number}: {token}")
        elif "/" in token and not re.match(r"[a-z]+:", token) and Path(token).suffix in EXTENSIONS:
            if not tree.ends_with("/" + token.lstrip("./")):
                problems.append(f"{doc}:{number}: {token}")
    return problems


def comments(text):
    """The comments of SQL text, line by line (the rest blanked): `--` outside quotes, `/* */`."""
    out, state = [], None
    for line in text.splitlines():
        kept, i = [], 0
        while i < len(line):
            c = line[i]
            if state == "block":
                kept.append(c)
                if line.startswith("*/", i):
                    state, i = None, i + 1
            elif state in ("'", '"'):
                if c == state:
                    state = None
            elif line.startswith("--", i):
                kept.append(line[i:])
                break
            elif line.startswith("/*", i):
                state = "block"
            elif c in "'\"":
                state = c
            i += 1
        if state in ("'", '"'):
            state = None  # a string over several lines: its next lines are read as code
        out.append("".join(kept))
    return "\n".join(out)


def prose(text):
    """A markdown page with its code (inline and fenced) blanked, lines kept: a table called
    `reviews` is a name, not wording."""
    lines = text.splitlines()
    text = "\n".join("" if m else l for l, m in zip(lines, fenced(lines)))
    return re.sub(r"(`+).+?\1", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def check_wording(doc, text):
    problems = []
    if doc.endswith(".sql"):
        text = comments(text)
    elif doc.endswith(".md"):
        text = prose(text)
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in WORDING:
            m = pattern.search(line)
            if m:
                problems.append(f"{doc}:{number}: {m.group(0)!r} ({what}: state the fact instead)")
        if doc not in HASH_NUMBER_ALLOWED:
            m = HASH_NUMBER.search(re.sub(r"\]\([^)]*\)", "", line))  # not a link's #anchor
            if m:
                problems.append(f"{doc}:{number}: {m.group(0)!r} (an issue number: state the fact instead)")
    return problems


def problems():
    tree = Tree(checkout_files(), run_outputs())
    found, pending_seen = [], set()
    for doc in expand(PATH_DOCS):
        found += check_paths(doc, (ROOT / doc).read_text(), tree, pending_seen)
    for doc, heading in SHARED_PENDING:
        if (doc, heading) not in pending_seen:
            found.append(f"scripts/docs.py: SHARED_PENDING: {doc}'s section {heading!r} no longer "
                         f"names {SHARED}: take it off the list")
    for doc in expand(WORDING_DOCS, FROZEN):
        found += check_wording(doc, (ROOT / doc).read_text())
    return found



def main():
    found = problems()
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
