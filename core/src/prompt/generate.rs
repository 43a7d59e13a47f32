//! Generation: the prompts that turn a question and a schema into a PostgreSQL query, laid out
//! by [`crate::prompt`] so that they share their start with every other call on the database.

use crate::model::llm::Message;
use crate::prompt::{self, Layout};

const TASK: &str = include_str!("text/generate_task.txt");
const COT_TASK: &str = include_str!("text/generate_cot_task.txt");

/// What a prompt sent with a grammar (crate::grammar) adds after its sections: the name to write
/// where no column fits, which the grammar allows and no table has.
pub const GRAMMAR_NOTHING_FITS: &str =
    "### If no column holds something the question asks for, write unknown_ and what it asks for in that column's place (unknown_salary), never another column.\n";

/// The messages of a generation request that answers with the query alone; `values` is the
/// similar-values section (possibly empty), placed after the task.
pub fn zero_shot(schema: &str, values: &str, question: &str, hint: Option<&str>) -> Vec<Message> {
    prompt::messages(schema, TASK, values, question, hint)
}

/// The sections a generation shows between its task and the question, in one order for every
/// prompt: the examples (few-shot), the similar stored values, what the answer returns (the
/// extraction's SELECT phrases). Each part may be empty.
pub fn sections(examples: &str, values: &str, returns: &[String]) -> String {
    let mut s = String::with_capacity(examples.len() + values.len() + 64);
    s.push_str(examples);
    s.push_str(values);
    if !returns.is_empty() {
        s.push_str(&format!("### The answer returns: {}\n", returns.join("; ")));
    }
    s
}

/// The messages of a generation request: the schema in `layout`, the task (the query alone, or
/// the structured chain of thought #reason, #columns, #values, #SELECT, #SQL-like, #SQL when
/// `thought`), the `sections`, the question and its hint.
pub fn query(layout: Layout, schema: &str, thought: bool, sections: &str, question: &str, hint: Option<&str>) -> Vec<Message> {
    prompt::messages_in(layout, schema, if thought { COT_TASK } else { TASK }, sections, question, hint)
}

/// The Open-SQL generation with the structured chain of thought.
pub fn structured(schema: &str, values: &str, returns: &[String], question: &str, hint: Option<&str>) -> Vec<Message> {
    query(Layout::OpenSql, schema, true, &sections("", values, returns), question, hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_holds_schema_question_and_hint() {
        let m = zero_shot("# singer (\n#   name: text\n# )\n", "", "How many singers?", Some("singer = person"));
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].role, "system");
        assert!(m[0].content.contains("PostgreSQL"));
        let u = &m[1].content;
        assert!(u.contains("# singer (\n#   name: text\n# )\n### Task: "), "{u}");
        assert!(u.ends_with("nothing else.\n### Question: How many singers?\n### Note: singer = person\n"), "{u}");
    }

    #[test]
    fn structured_prompt() {
        let m = structured("# t (\n# )", "### Stored values ...\n", &["name".into(), "age".into()], "Who?", None);
        assert!(m[1].content.contains("#SQL-like:") && m[0].content.contains("NULLs first"));
        assert!(m[1].content.ends_with("### Stored values ...\n### The answer returns: name; age\n### Question: Who?\n"), "{}", m[1].content);
    }

    #[test]
    fn both_generations_share_the_system_text_and_schema() {
        let a = zero_shot("# t (\n# )", "", "q", None);
        let b = structured("# t (\n# )", "### Stored values ...\n", &[], "q", None);
        assert_eq!(a[0], b[0]);
        let schema_end = b[1].content.find("### Task:").unwrap_or(0);
        assert!(schema_end > 0 && a[1].content[..schema_end] == b[1].content[..schema_end]);
    }

    #[test]
    fn blank_hint_is_left_out() {
        let m = zero_shot("# t (\n# )", "", "q", Some("  "));
        assert!(!m[1].content.contains("### Note"));
    }
}
