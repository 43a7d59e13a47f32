"""The README's settings table and the settings the extension declares agree: a setting added,
renamed or removed in src/gucs/ without the manual (or the other way) fails here. And the
documents pass scripts/docs.py (every path they name exists; no issue numbers or reviews),
whose rules are checked here on small texts."""
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_spec = importlib.util.spec_from_file_location("docs_check", ROOT / "scripts" / "docs.py")
docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs)


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


def test_the_documents_pass_scripts_docs_py():
    assert docs.problems() == []


TREE = docs.Tree({"core/src/safety/policy.rs", "core/src/align/windows.rs", "docs/security.md"},
                 ["eval/results/"])


def paths(text, doc="docs/page.md"):
    return [p.split(": ", 1)[1] for p in docs.check_paths(doc, text, TREE)]


def test_a_path_that_moved_is_reported_with_its_line():
    text = "One.\n\nThe policy (`core/src/policy.rs`) and `core/src/safety/policy.rs`.\n"
    assert docs.check_paths("docs/page.md", text, TREE) == ["docs/page.md:3: core/src/policy.rs"]


def test_links_fenced_blocks_and_relative_names_are_read():
    text = ("[a](security.md) [b](gone.md) `align/windows.rs` `align/gone.rs`\n"
            "```\nscripts/gone.sh start\n```\n")
    assert sorted(paths(text)) == ["align/gone.rs", "gone.md", "scripts/gone.sh"]


def test_what_a_clone_cannot_hold_is_not_a_missing_path():
    text = ("`/opt/nl2sql/postgresql/<major>` `$PGDATA/postgresql.conf` `sql/*.sql` "
            "`pg_test/results/<suite>.out` `eval/samples/ids-seed{1,2}.jsonl` `src/pg/...` "
            "`eval/results/w2.jsonl` [site](https://example.org/a.md) `data/questions.csv`\n")
    assert paths(text) == []


def test_only_the_benchmark_pages_name_the_folder_beside_the_checkout():
    text = f"Beside it, in `{docs.SHARED}`: `bench/spider-pg/`.\n"  # the folder beside the checkout
    assert paths(text, "bench/README.md") == []
    assert paths(text, "docs/page.md") == [
        f"{docs.SHARED}: beside the checkout, not in it (only bench/README.md and eval/RESULTS.md name it)",
        "bench/spider-pg/"]


def test_inline_code_showing_a_fence_is_not_a_block():
    assert paths("Its ```` ```sql ```` block, then `tests/nope.py`.\n") == ["tests/nope.py"]


def wording(text, doc="docs/page.md"):
    return [p.split(": ", 1)[1].split(" (")[0] for p in docs.check_wording(doc, text)]


def test_issue_numbers_reviews_and_the_brief_are_reported():
    text = ("As issue 12 asked (#47), after an independent review\nthe brief says; the issue's target\n"
            "see [the section](#part-2) and a preview\n")
    assert wording(text) == ["'issue 12'", "'review'", "'#47'", "'the issue'", "'the brief'"]


def test_markdown_is_read_outside_its_code():
    text = "The `reviews` table:\n```sql\nSELECT * FROM reviews;\n```\nafter review.\n"
    assert docs.check_wording("docs/page.md", text) == [
        "docs/page.md:5: 'review' (a review: state the fact instead)"]


def test_sql_is_read_in_its_comments_only():
    text = "SELECT 'issue 12';  -- found in review\n/* the brief\n */ SELECT '#3';\n"
    assert wording(text, "sql/x.sql") == ["'review'", "'the brief'"]


def test_the_results_page_numbers_its_questions():
    assert wording("question #25 failed", "eval/RESULTS.md") == []
