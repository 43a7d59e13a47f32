//! The layout every request shares, so that an endpoint's prompt cache serves them all: one
//! system text, then the schema block, then the task, the call's own sections, the question and
//! its hint. Within one question its calls share the longest prefix they can; across questions
//! on one database the system text and the whole-schema block stay the same, byte for byte.

use crate::model::llm::Message;
use std::sync::OnceLock;

/// The system text of every request (extraction, generation, correction), before the server's
/// major version is put in.
/// Longest earlier query a follow-up question carries, in bytes.
pub const MAX_PREVIOUS_SQL_BYTES: usize = 64 * 1024;

const SYSTEM: &str = include_str!("text/system.txt");
/// The heading of the schema block in the Open-SQL layout.
const TABLES: &str = "### Tables, one column a line (name: type, (description), VALUES of categorical columns, e.g. sample values, range, PRIMARY_KEY):\n";
/// The heading of the table names the interactive agent is shown.
const NAMES: &str = "### Tables: ";
/// The heading of the schema block written as CREATE TABLE statements.
const DDL: &str = "### Tables, as PostgreSQL CREATE TABLE statements:\n";

/// The server's major version, set once by the extension when it loads.
static VERSION: OnceLock<String> = OnceLock::new();

/// Tells every prompt which PostgreSQL it writes for (e.g. "15"); the first call wins.
pub fn set_server_version(major: &str) {
    let _ = VERSION.set(major.to_string());
}

/// The system text of every request, with the server's major version.
pub fn system() -> String {
    SYSTEM.trim_end().replace("{version}", VERSION.get().map(String::as_str).unwrap_or("15"))
}

/// The section of a follow-up question: the earlier question and its query, last before the
/// question (everything before it stays the prefix every other question shares).
pub fn follow_up(question: &str, sql: &str) -> String {
    let question = question.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "### Earlier question: {question}\n### Its query:\n```sql\n{}\n```\n### The question below follows the earlier one: keep what it does not change (tables, filters, grouping), change what it asks to change.\n",
        crate::prompt::refine::prefix(sql.trim(), MAX_PREVIOUS_SQL_BYTES)
    )
}

/// How the schema block is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One column a line, with descriptions, categorical values and samples (Open-SQL).
    OpenSql,
    /// CREATE TABLE statements: names, types and keys only.
    CreateTable,
    /// The tables' names on one line (the interactive agent finds the rest with its tools).
    TableNames,
}

/// The messages of one request: `task` says what to answer and how; `sections` (possibly
/// empty, each ending in a newline) are the call's own material between the task and the question.
pub fn messages(schema: &str, task: &str, sections: &str, question: &str, hint: Option<&str>) -> Vec<Message> {
    messages_in(Layout::OpenSql, schema, task, sections, question, hint)
}

/// [`messages`] with the schema block in the given layout.
pub fn messages_in(layout: Layout, schema: &str, task: &str, sections: &str, question: &str, hint: Option<&str>) -> Vec<Message> {
    let heading = match layout {
        Layout::OpenSql => TABLES,
        Layout::CreateTable => DDL,
        Layout::TableNames => NAMES,
    };
    let schema = schema.trim_end();
    let task = task.trim_end();
    let mut user = String::with_capacity(heading.len() + schema.len() + task.len() + sections.len() + question.len() + 64);
    user.push_str(heading);
    user.push_str(schema);
    user.push('\n');
    user.push_str(task);
    user.push('\n');
    user.push_str(sections);
    user.push_str("### Question: ");
    user.push_str(question.trim());
    user.push('\n');
    if let Some(h) = hint.map(str::trim).filter(|h| !h.is_empty()) {
        user.push_str("### Note: ");
        user.push_str(h);
        user.push('\n');
    }
    vec![Message::system(system()), Message::user(user)]
}

/// The bytes two requests share from their start (their messages as an endpoint's chat
/// template lays them out one after another); for tests.
#[cfg(test)]
pub fn shared_prefix(a: &[Message], b: &[Message]) -> usize {
    let mut shared = 0;
    for (x, y) in a.iter().zip(b) {
        if x.role != y.role {
            return shared;
        }
        let common = x.content.bytes().zip(y.content.bytes()).take_while(|(p, q)| p == q).count();
        shared += common;
        if common < x.content.len() || common < y.content.len() {
            return shared;
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_puts_what_calls_share_first() {
        let m = messages("# t (\n#   a: int\n# )\n", "### Task: do it.\n", "### Values: x\n", " Who? ", Some(" be brief "));
        assert_eq!(m[0].role, "system");
        assert_eq!(m[0].content, system());
        assert!(m[0].content.starts_with("You work on a PostgreSQL 15 database"), "{}", m[0].content);
        assert_eq!(m[1].content, format!("{TABLES}# t (\n#   a: int\n# )\n### Task: do it.\n### Values: x\n### Question: Who?\n### Note: be brief\n"));
    }

    #[test]
    fn two_tasks_share_system_and_schema() {
        let a = messages("# t (\n# )", "### Task: one", "", "q1", None);
        let b = messages("# t (\n# )", "### Task: two", "### Values\n", "q2", None);
        let expected = system().len() + TABLES.len() + "# t (\n# )\n### Task: ".len();
        assert_eq!(shared_prefix(&a, &b), expected);
        assert_eq!(shared_prefix(&a, &a), a.iter().map(|m| m.content.len()).sum::<usize>());
    }
}
