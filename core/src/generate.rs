//! Generation: the zero-shot prompt that turns a question and a schema into one PostgreSQL query.

use crate::llm::Message;

const SYSTEM: &str = include_str!("prompts/generate_system.txt");
const USER: &str = include_str!("prompts/generate_user.txt");
const COT_SYSTEM: &str = include_str!("prompts/generate_cot_system.txt");
const COT_USER: &str = include_str!("prompts/generate_cot_user.txt");

/// The messages of a zero-shot generation request; `values` is the similar-values section
/// (possibly empty), placed between the schema and the question.
pub fn zero_shot(schema: &str, values: &str, question: &str, hint: Option<&str>) -> Vec<Message> {
    let mut user = USER
        .replace("{schema}", schema.trim_end())
        .replace("{values}", values)
        .replace("{question}", question.trim());
    if let Some(h) = hint.map(str::trim).filter(|h| !h.is_empty()) {
        user.push_str("### Note: ");
        user.push_str(h);
        user.push('\n');
    }
    vec![Message::system(SYSTEM.trim_end()), Message::user(user)]
}

/// The messages of a generation request with the structured chain of thought (#reason,
/// #columns, #values, #SELECT, #SQL-like, #SQL): the per-question schema, the similar values,
/// what the answer returns (the extraction's SELECT phrases), the question and its hint.
pub fn structured(schema: &str, values: &str, returns: &[String], question: &str, hint: Option<&str>) -> Vec<Message> {
    let returns = if returns.is_empty() { String::new() } else { format!("### The answer returns: {}\n", returns.join("; ")) };
    let mut user = COT_USER
        .replace("{schema}", schema.trim_end())
        .replace("{values}", values)
        .replace("{returns}", &returns)
        .replace("{question}", question.trim());
    if let Some(h) = hint.map(str::trim).filter(|h| !h.is_empty()) {
        user.push_str("### Note: ");
        user.push_str(h);
        user.push('\n');
    }
    vec![Message::system(COT_SYSTEM.trim_end()), Message::user(user)]
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
        assert!(u.contains("# singer (\n#   name: text\n# )\n### Question: How many singers?\n### Note: singer = person\n"), "{u}");
    }

    #[test]
    fn structured_prompt() {
        let m = structured("# t (\n# )", "### Stored values ...\n", &["name".into(), "age".into()], "Who?", None);
        assert!(m[0].content.contains("#SQL-like:") && m[0].content.contains("NULLs first"));
        assert!(m[1].content.ends_with("### Stored values ...\n### The answer returns: name; age\n### Question: Who?\n"), "{}", m[1].content);
    }

    #[test]
    fn blank_hint_is_left_out() {
        let m = zero_shot("# t (\n# )", "", "q", Some("  "));
        assert!(!m[1].content.contains("### Note"));
    }
}
