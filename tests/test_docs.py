"""The README's settings table and the settings the extension declares agree: a setting added,
renamed or removed in src/gucs/ without the manual (or the other way) fails here."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def declared():
    return set(re.findall(r'c"(nl2sql\.[a-z_]+)"', "".join(p.read_text() for p in (ROOT / "src" / "gucs").glob("*.rs"))))


def documented():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("\n## Settings"):]
    table = table[:table.index("\n## ", 1)]
    names = set()
    for line in table.splitlines():
        if line.startswith("| `nl2sql."):
            names |= set(re.findall(r"`(nl2sql\.[a-z_]+)`", line.split("|")[1]))
    return names


def test_every_declared_setting_is_in_the_readme_table():
    assert sorted(declared() - documented()) == []


def test_the_readme_table_names_only_declared_settings():
    assert sorted(documented() - declared()) == []


def test_both_lists_are_read():
    # a parser that finds nothing would make the two tests above pass vacuously
    assert len(declared()) > 40 and len(documented()) > 40
