#!/usr/bin/env python3
"""The import graph of the two crates, from their `use` lines and `crate::` paths: prints the
circles between modules and fails (exit 1) when there is one. A module is a file (`a/b.rs` or
`a/b/mod.rs` is `a::b`); a child using its parent's items (`super::`) is not an arrow.

    scripts/imports.py            both crates
    scripts/imports.py --graph    also every arrow
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = {"src": ROOT / "src", "core": ROOT / "core" / "src"}
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)")
SUPER = re.compile(r"\bsuper::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)")
SUPER_GROUP = re.compile(r"\buse\s+super::\{([^}]*)\}", re.S)
USE_GROUP = re.compile(r"\buse\s+crate::(?:([a-z_][a-z0-9_:]*)::)?\{([^}]*)\}", re.S)


def module_of(path, root):
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def strip_tests(text):
    """Drops `#[cfg(test)]` items (test-only arrows are not the layout's)."""
    out, skip, depth = [], False, 0
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("#[cfg(test)]"):
            # skip the next item: until its braces close (or a `mod x;` line)
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            if i < len(lines) and lines[i].rstrip().endswith(";"):
                i += 1
                continue
            depth = 0
            while i < len(lines):
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
                if depth <= 0 and "{" in "".join(lines[:i]):
                    break
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def graph(root):
    modules = {module_of(p, root): p for p in root.rglob("*.rs") if "tests" not in p.relative_to(root).parts
               and p.name != "tests.rs"}
    names = set(modules)
    edges = {}
    for mod, path in modules.items():
        text = strip_tests(path.read_text())
        targets = set()
        for m in PATH.finditer(text):
            targets.add(m.group(1))
        # `super::x` names x in the module's parent: a sibling module, or the parent's own item
        parent = mod.rsplit("::", 1)[0] if "::" in mod else ""
        for m in SUPER.finditer(text):
            targets.add(f"{parent}::{m.group(1)}" if parent else m.group(1))
        for m in SUPER_GROUP.finditer(text):
            for item in m.group(1).split(","):
                item = item.strip().split(" as ")[0]
                if item and item != "self":
                    targets.add(f"{parent}::{item}" if parent else item)
        for m in USE_GROUP.finditer(text):
            base = m.group(1) or ""
            for item in m.group(2).split(","):
                item = item.strip().split(" as ")[0].split("::{")[0]
                if item and item != "self":
                    targets.add(f"{base}::{item}" if base else item)
                elif item == "self" and base:
                    targets.add(base)
        for t in targets:
            # the longest module prefix of the path
            parts = t.split("::")
            for k in range(len(parts), 0, -1):
                cand = "::".join(parts[:k])
                if cand in names:
                    if cand != mod and not mod.startswith(cand + "::") and cand != "":
                        edges.setdefault(mod, set()).add(cand)
                    break
    return names, edges


def circles(names, edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(names):
        if v not in index:
            visit(v)
    return out


def main():
    show = "--graph" in sys.argv
    failed = False
    for crate, root in CRATES.items():
        names, edges = graph(root)
        if show:
            for a in sorted(edges):
                print(f"{crate}: {a} -> {', '.join(sorted(edges[a]))}")
        found = circles(names, edges)
        for c in found:
            failed = True
            print(f"{crate}: import circle: {' <-> '.join(c)}")
        if not found:
            print(f"{crate}: {len(names)} modules, {sum(len(e) for e in edges.values())} arrows, no import circle")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
