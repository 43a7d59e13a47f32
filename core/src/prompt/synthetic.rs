//! Synthetic examples (QA-SQL): the model writes question/SQL pairs over one table or one pair
//! of joined tables, in four kinds (aggregation, comparison, ranking, complex); the extension
//! keeps those that execute and return rows. And the chain of thought of an example, written
//! from its SQL (Query-CoT-SQL), once, when the example is added.

use crate::model::answer;
use crate::interrupt;
use crate::model::llm::Message;
use crate::prompt;

const TASK: &str = include_str!("text/synthetic_task.txt");
const THOUGHT_TASK: &str = include_str!("text/thought_task.txt");
/// Pairs read from one answer at most, whatever it holds.
pub const MAX_PAIRS: usize = 50;
/// Longest question kept, in characters.
const MAX_QUESTION_CHARS: usize = 500;

/// The request for `n` pairs over `schema` (the tables of one scope, rendered).
pub fn messages(schema: &str, n: usize) -> Vec<Message> {
    prompt::messages(schema, &TASK.replace("{n}", &n.to_string()), "", "(write the pairs)", None)
}

/// The question/SQL pairs of an answer, in order: a `Question:` line (numbering allowed) and
/// the first ```sql block or `SQL:` line after it. Linear in the answer's length.
pub fn parse(content: &str) -> Vec<(String, String)> {
    let content = crate::prompt::refine::prefix(content, 256 * 1024);
    let mut pairs = Vec::new();
    let mut question: Option<String> = None;
    let mut block: Option<String> = None;
    for (i, line) in content.lines().enumerate() {
        interrupt::every(i, 1024);
        let t = line.trim();
        if let Some(b) = block.as_mut() {
            if t.starts_with("```") {
                if let (Some(q), Some(sql)) = (question.take(), answer::extract_sql(b)) {
                    pairs.push((q, sql));
                }
                block = None;
                if pairs.len() >= MAX_PAIRS {
                    break;
                }
            } else {
                b.push_str(line);
                b.push('\n');
            }
            continue;
        }
        if let Some(q) = question_line(t) {
            question = Some(q);
        } else if t.starts_with("```") {
            block = Some(String::new());
        } else if let Some(rest) = strip_label(t, "sql:") {
            if let (Some(q), Some(sql)) = (question.take(), answer::extract_sql(rest)) {
                pairs.push((q, sql));
                if pairs.len() >= MAX_PAIRS {
                    break;
                }
            }
        }
    }
    pairs
}

/// "Question: …", "1. Question: …", "Q1: …", "**Question:** …".
fn question_line(t: &str) -> Option<String> {
    let t = t.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | ')' | '*' | '-' | '#' | ' '));
    let rest = strip_label(t, "question:").or_else(|| {
        let lower = t.get(..1)?.to_ascii_lowercase();
        let colon = t.find(':')?;
        (lower == "q" && t[1..colon].chars().all(|c| c.is_ascii_digit())).then(|| &t[colon + 1..])
    })?;
    let q = rest.trim_start_matches('*').trim();
    (!q.is_empty()).then(|| q.chars().take(MAX_QUESTION_CHARS).collect())
}

fn strip_label<'a>(t: &'a str, label: &str) -> Option<&'a str> {
    let t = t.trim_start_matches('*');
    let head = t.get(..label.len())?;
    head.eq_ignore_ascii_case(label).then(|| t[label.len()..].trim_start_matches('*').trim())
}

/// The request for an example's chain of thought: the schema, the question, its SQL.
pub fn thought_messages(schema: &str, question: &str, sql: &str) -> Vec<Message> {
    let sections = format!("### Query:\n```sql\n{}\n```\n", sql.trim());
    let mut m = prompt::messages(schema, THOUGHT_TASK, "", question, None);
    // The query goes after the question it answers.
    if let Some(user) = m.last_mut() {
        user.content.push_str(&crate::render::lines(&sections));
    }
    m
}

/// The chain-of-thought lines of an answer (#reason … #SQL-like), without any SQL; None when
/// the answer has none.
pub fn parse_thought(content: &str) -> Option<String> {
    let mut lines = Vec::new();
    for (i, line) in crate::prompt::refine::prefix(content, 16 * 1024).lines().enumerate() {
        interrupt::every(i, 1024);
        let t = line.trim();
        let lower = t.to_ascii_lowercase();
        if ["#reason:", "#columns:", "#values:", "#select:", "#sql-like:"].iter().any(|p| lower.starts_with(p)) {
            lines.push(t.to_string());
        }
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pairs_in_both_forms() {
        let answer = "Here are some pairs.\n\
            1. Question: How many rooms are there?\n```sql\nSELECT count(*) FROM room;\n```\n\
            **Question:** Which room is the largest?\n```sql\nSELECT name FROM room ORDER BY size DESC LIMIT 1\n```\n\
            Q3: Rooms above 20 square metres?\nSQL: SELECT name FROM room WHERE size > 20\n\
            Question: A question without a query\n\
            Question: Rooms by floor\n```sql\nSELECT floor, count(*) FROM room GROUP BY floor\n```\n";
        let pairs = parse(answer);
        let qs: Vec<&str> = pairs.iter().map(|(q, _)| q.as_str()).collect();
        assert_eq!(qs, vec!["How many rooms are there?", "Which room is the largest?", "Rooms above 20 square metres?", "Rooms by floor"]);
        assert_eq!(pairs[0].1, "SELECT count(*) FROM room");
        assert_eq!(pairs[2].1, "SELECT name FROM room WHERE size > 20");
    }

    #[test]
    fn a_block_without_a_question_is_skipped_and_pairs_are_capped() {
        assert!(parse("```sql\nSELECT 1\n```\n").is_empty());
        let many = "Question: q\n```sql\nSELECT 1\n```\n".repeat(MAX_PAIRS + 10);
        assert_eq!(parse(&many).len(), MAX_PAIRS);
        let long = "x\n".repeat(2_000_000);
        assert!(parse(&long).is_empty());
    }

    #[test]
    fn prompt_asks_for_n_pairs_of_four_kinds_after_the_schema() {
        let m = messages("# room (\n#   name: text\n# )\n", 4);
        assert_eq!(m[0].content, crate::prompt::system());
        let u = &m[1].content;
        assert!(u.contains("# room (") && u.contains("write 4 questions") && u.contains("ranking:"), "{u}");
    }

    #[test]
    fn thought_lines_are_kept_without_sql() {
        let t = parse_thought("#reason: count rooms\n#columns: room.id\n#SELECT: count\n#SQL: SELECT count(*) FROM room").unwrap();
        assert_eq!(t, "#reason: count rooms\n#columns: room.id\n#SELECT: count");
        assert_eq!(parse_thought("no thoughts"), None);
        let m = thought_messages("# room (\n# )", "How many rooms?", "SELECT count(*) FROM room");
        assert!(m[1].content.ends_with("### Question: How many rooms?\n### Query:\n```sql\nSELECT count(*) FROM room\n```\n"));
    }
}
