//! Generation: the zero-shot prompt that turns a question and a schema into one PostgreSQL query.

use crate::llm::Message;

const SYSTEM: &str = include_str!("prompts/generate_system.txt");
const USER: &str = include_str!("prompts/generate_user.txt");

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
    fn blank_hint_is_left_out() {
        let m = zero_shot("# t (\n# )", "", "q", Some("  "));
        assert!(!m[1].content.contains("### Note"));
    }
}
