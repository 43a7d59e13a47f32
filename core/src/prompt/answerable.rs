//! Answerability: whether the tables hold what a question asks about, asked of the model before
//! a question is refused (nl2sql.refuse_unrelated). The prompt starts as a generation's does
//! (system text and schema), so the model server's cache serves the generation after it.

use crate::model::llm::Message;
use crate::prompt;

const TASK: &str = include_str!("text/answerable_task.txt");

/// Most completion tokens the answer needs: one word, room for a stray quote or period.
pub const MAX_TOKENS: u32 = 8;

/// The messages asking whether the tables in `schema` hold what `question` asks about.
pub fn messages(schema: &str, question: &str, note: Option<&str>) -> Vec<Message> {
    prompt::messages(schema, TASK, "", question, note)
}

/// The model's yes or no (its first word, any case, quotes, fences and punctuation around
/// it ignored); None when it answered something else.
pub fn parse(reply: &str) -> Option<bool> {
    let first = reply.split(|c: char| !c.is_alphabetic()).find(|w| !w.is_empty() && !w.eq_ignore_ascii_case("sql"))?;
    match first.to_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_and_no_in_their_usual_dresses() {
        for (reply, want) in [
            ("yes", Some(true)),
            ("Yes.", Some(true)),
            (" YES", Some(true)),
            ("\"no\"", Some(false)),
            ("No, the tables hold nothing about planets.", Some(false)),
            ("```\nno\n```", Some(false)),
            ("**No**", Some(false)),
            ("", None),
            ("SELECT 1", None),
            ("Nope", None),
            ("maybe", None),
        ] {
            assert_eq!(parse(reply), want, "{reply:?}");
        }
    }

    #[test]
    fn prompt_shares_the_generations_start() {
        let a = messages("# t (\n# )", "Who?", None);
        let g = crate::prompt::generate::zero_shot("# t (\n# )", "", "Who?", None);
        assert_eq!(a[0], g[0]);
        let tasks = a[1].content.find("### Task:").unwrap_or(0);
        assert!(tasks > 0 && a[1].content[..tasks] == g[1].content[..tasks]);
        assert!(a[1].content.ends_with("yes or no.\n### Question: Who?\n"), "{}", a[1].content);
    }
}
