//! Finds the SQL in a model's answer: code fences, prose around it, trailing chatter.

use crate::interrupt;
use sqlparser::ast::{SetExpr, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// Words that start a SQL statement; used to find SQL inside prose. Non-query statements are
/// included so that an answer such as `DROP TABLE t` is found and refused by the guard rather
/// than reported as "no SQL".
const STATEMENT_STARTS: &[&str] = &[
    "SELECT", "WITH", "VALUES", "TABLE", "INSERT", "UPDATE", "DELETE", "MERGE", "DROP", "CREATE", "ALTER",
    "TRUNCATE", "GRANT", "REVOKE", "COPY", "SET", "RESET", "EXPLAIN", "CALL", "DO", "BEGIN", "COMMIT",
    "VACUUM", "ANALYZE", "LOCK", "SHOW", "PREPARE", "EXECUTE", "DECLARE", "LISTEN", "NOTIFY", "REINDEX",
    "CLUSTER", "DISCARD", "REFRESH", "SECURITY", "COMMENT",
];

/// The window of lines (and bytes) after the first line that opens a statement within which
/// prose is trimmed from the end: parsing is tried at most this many times, on this much text,
/// so a huge answer of many short lines costs linear time.
const STATEMENT_WINDOW_LINES: usize = 200;
const STATEMENT_WINDOW_BYTES: usize = 16 * 1024;
/// Longest text handed to the SQL parser whole: a question's query is far shorter, and the
/// parser cannot be interrupted, so longer text is only read through the window above.
pub const MAX_SQL_BYTES: usize = 64 * 1024;

/// Languages of a fenced block that count as SQL.
const SQL_FENCES: &[&str] = &["sql", "postgresql", "postgres", "pgsql", "psql", "plpgsql"];

/// Whether `word` names a code fence's language that counts as SQL.
pub fn is_sql_fence(word: &str) -> bool {
    SQL_FENCES.iter().any(|l| l.eq_ignore_ascii_case(word))
}

/// The SQL text found in `answer`, or None when the answer holds no SQL at all.
pub fn extract_sql(answer: &str) -> Option<String> {
    let answer = strip_think(answer);
    let body = match marked_section(&answer).or_else(|| inline_section(&answer)) {
        Some(s) => s,
        None => match fenced_block(&answer) {
            Some(b) => b,
            None => answer.clone(),
        },
    };
    let body = unquote(body.trim());
    if body.is_empty() {
        return None;
    }
    if body.len() <= MAX_SQL_BYTES && parses(body) {
        return Some(clean(body));
    }
    // Prose around the SQL: start at the first line that opens a statement, then drop
    // trailing lines until what is left parses.
    let lines: Vec<&str> = body.lines().collect();
    let mut start = None;
    for (i, l) in lines.iter().enumerate() {
        interrupt::every(i, 4096);
        if starts_statement(l) {
            start = Some(i);
            break;
        }
    }
    let Some(start) = start else {
        return select_section(&answer);
    };
    let first = strip_before_keyword(lines[start]);
    let mut kept: Vec<&str> = vec![first];
    let mut bytes = first.len();
    for l in &lines[start + 1..] {
        if kept.len() >= STATEMENT_WINDOW_LINES || bytes + l.len() > STATEMENT_WINDOW_BYTES {
            break;
        }
        bytes += l.len() + 1;
        kept.push(l);
    }
    let whole = kept.join("\n");
    while !kept.is_empty() {
        interrupt::check();
        let text = kept.join("\n");
        if parses(&text) {
            return Some(clean(&text));
        }
        kept.pop();
    }
    // Nothing parses: hand back the statement as written (its window) so the caller can report why.
    Some(clean(&whole))
}

/// The query wrapped whole in double quotes or backticks, unwrapped.
fn unquote(text: &str) -> &str {
    if text.len() > MAX_SQL_BYTES {
        return text;
    }
    for q in ['"', '`'] {
        if let Some(inner) = text.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            if !inner.contains(q) && parses(inner.trim()) {
                return inner.trim();
            }
        }
    }
    text
}

/// A structured answer that stopped at `#SELECT:` with the whole query there (small models
/// do): the query, when that line with its keyword back is a SELECT with a FROM clause.
fn select_section(answer: &str) -> Option<String> {
    let lower = answer.to_ascii_lowercase();
    let idx = lower.rfind("#select:")?;
    let rest = answer[idx + "#select:".len()..].trim();
    let end = rest.find("\n#").unwrap_or(rest.len());
    if end > MAX_SQL_BYTES {
        return None;
    }
    let sql = format!("SELECT {}", rest[..end].trim());
    let reads_a_table = match Parser::parse_sql(&PostgreSqlDialect {}, &sql) {
        Ok(v) => matches!(v.as_slice(), [Statement::Query(q)] if matches!(&*q.body, SetExpr::Select(s) if !s.from.is_empty())),
        Err(_) => false,
    };
    reads_a_table.then(|| clean(&sql))
}

fn clean(sql: &str) -> String {
    let mut s = sql.trim();
    while let Some(t) = s.strip_suffix(';') {
        s = t.trim_end();
    }
    s.to_string()
}

fn parses(sql: &str) -> bool {
    // Unicode-escaped names (`FROM U&"line\000Abreak"`) read as PostgreSQL reads them, as the
    // guard reads them: else a query holding one is cut to the lines before it.
    let plain = crate::safety::unicode::reading(sql).plain;
    matches!(Parser::parse_sql(&PostgreSqlDialect {}, plain.as_deref().unwrap_or(sql)), Ok(v) if !v.is_empty())
}

/// Removes `<think>…</think>` reasoning that some models emit before answering, in one pass.
fn strip_think(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    let mut n = 0usize;
    while let Some(start) = rest.find("<think>") {
        n += 1;
        interrupt::every(n, 1024);
        out.push_str(&rest[..start]);
        match rest[start..].find("</think>") {
            Some(end) => rest = &rest[start + end + "</think>".len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The text after the last `#SQL:` marker of a structured answer (any case), if any.
fn marked_section(answer: &str) -> Option<String> {
    // ASCII lowercasing keeps byte offsets, so an index in the copy is one in the answer.
    let idx = answer.to_ascii_lowercase().rfind("#sql:")?;
    let rest = &answer[idx + "#sql:".len()..];
    if rest.trim_start().starts_with("```") {
        return Some(fenced_block(rest).unwrap_or_else(|| rest.to_string()));
    }
    // The marker inside a fence ("```sql … #SQL: SELECT …;\n```"): the query ends at the fence.
    Some(rest.split("```").next().unwrap_or(rest).to_string())
}

/// A structured answer whose sections ran together on one line ("#SELECT: …; SQL-like: …;
/// SQL: SELECT …"): the text after the last `SQL:` label that stands as a word of its own
/// (not "PostgreSQL:") and is followed by a statement or a fence.
fn inline_section(answer: &str) -> Option<String> {
    let lower = answer.to_ascii_lowercase();
    let mut end = lower.len();
    let mut n = 0usize;
    while let Some(idx) = lower[..end].rfind("sql:") {
        n += 1;
        interrupt::every(n, 1024);
        end = idx;
        let before = lower[..idx].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let rest = &answer[idx + "sql:".len()..];
        if keyword_at(rest.trim_start()) || rest.trim_start().starts_with("```") {
            return Some(fenced_block(rest).unwrap_or_else(|| rest.to_string()));
        }
    }
    None
}

/// The first fenced block labelled as SQL, else the first unlabelled one.
fn fenced_block(answer: &str) -> Option<String> {
    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut rest = answer;
    while let Some(open) = rest.find("```") {
        interrupt::every(blocks.len() + 1, 1024);
        let after = &rest[open + 3..];
        let (lang, body_start) = match after.find('\n') {
            Some(nl) => (after[..nl].trim().to_ascii_lowercase(), nl + 1),
            None => (String::new(), 0),
        };
        let body = &after[body_start..];
        match body.find("```") {
            Some(close) => {
                blocks.push((lang, body[..close].to_string()));
                rest = &body[close + 3..];
            }
            None => {
                // An unterminated fence (truncated answer): take what is there.
                blocks.push((lang, body.to_string()));
                break;
            }
        }
    }
    let sql = blocks.iter().find(|(l, _)| SQL_FENCES.contains(&l.as_str()));
    let plain = blocks.iter().find(|(l, _)| l.is_empty());
    sql.or(plain).map(|(_, b)| b.clone())
}

fn starts_statement(line: &str) -> bool {
    keyword_at(strip_before_keyword(line))
}

/// Drops a leading label such as `SQL:` or `Query:` in front of a statement on the same line.
fn strip_before_keyword(line: &str) -> &str {
    let t = line.trim_start();
    if keyword_at(t) {
        return t;
    }
    if let Some(colon) = t.find(':') {
        let after = t[colon + 1..].trim_start();
        if t[..colon].split_whitespace().count() <= 2 && keyword_at(after) {
            return after;
        }
    }
    t
}

fn keyword_at(text: &str) -> bool {
    let word: String = text.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let next = text[word.len()..].chars().next();
    !word.is_empty()
        && STATEMENT_STARTS.iter().any(|k| k.eq_ignore_ascii_case(&word))
        && next.is_none_or(|c| c.is_whitespace() || c == '(' || c == ';' || c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_sql() {
        assert_eq!(extract_sql("SELECT count(*) FROM singer;").as_deref(), Some("SELECT count(*) FROM singer"));
    }

    #[test]
    fn fenced_with_prose() {
        let a = "Sure! Here is the query:\n\n```sql\nSELECT name\nFROM singer\nWHERE age > 30;\n```\n\nIt lists singers.";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT name\nFROM singer\nWHERE age > 30"));
    }

    #[test]
    fn a_query_writing_unicode_escaped_names_is_kept_whole() {
        let sql = "SELECT count(*)\nFROM orders o\nJOIN U&\"line\\000Abreak\" b ON b.U&\"\\FEFFid\" = o.id\nWHERE b.label = 'zzz'";
        assert_eq!(extract_sql(&format!("```sql\n{sql}\n```")).as_deref(), Some(sql));
        assert_eq!(extract_sql(&format!("Here it is:\n{sql};\nDone.")).as_deref(), Some(sql));
    }

    #[test]
    fn prose_without_fence() {
        let a = "The answer is:\nSELECT count(*) FROM singer;\n\nThis counts all singers in the table.";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT count(*) FROM singer"));
    }

    #[test]
    fn label_on_same_line() {
        assert_eq!(extract_sql("SQL: SELECT 1").as_deref(), Some("SELECT 1"));
    }

    #[test]
    fn structured_answer_takes_last_sql_section() {
        let a = "#reason: count rows\n#SQL-like: Show COUNT(*)\n#SQL: SELECT count(*) FROM singer";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT count(*) FROM singer"));
    }

    #[test]
    fn structured_answer_in_any_case_and_with_a_fence() {
        let a = "#reason: count\n#SQL-like: Show count\n#sql:\n```sql\nSELECT count(*) FROM t\n```";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT count(*) FROM t"));
    }

    #[test]
    fn structured_answer_that_stopped_at_select() {
        let a = "#reason: list\n#columns: singer.name\n#SELECT: singer.name, count(*) FROM singer GROUP BY singer.name";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT singer.name, count(*) FROM singer GROUP BY singer.name"));
        // Without a FROM it is a description, not a query.
        assert_eq!(extract_sql("#reason: x\n#SELECT: name, age"), None);
    }

    #[test]
    fn structured_answer_run_together_on_one_line() {
        let a = "#columns: singer.*\n#SELECT: count(*) FROM singer; SQL-like: select count(*) from singer; SQL: SELECT count(*) FROM singer";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT count(*) FROM singer"));
        // "PostgreSQL:" is not a label, and a label followed by prose is not the query.
        assert_eq!(inline_section("Written for PostgreSQL: SELECT name FROM singer"), None);
        assert_eq!(inline_section("The SQL: see below\nSELECT name FROM singer"), None);
        assert_eq!(extract_sql("The SQL: see below\nSELECT name FROM singer").as_deref(), Some("SELECT name FROM singer"));
    }

    #[test]
    fn marker_inside_a_fence() {
        let a = "```sql\nSELECT name\nFROM pets;\n#SQL: SELECT pet_name FROM pets;\n```";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT pet_name FROM pets"));
    }

    #[test]
    fn quoted_query() {
        let a = "#SQL-like: x\n#SQL: \"SELECT name FROM singer ORDER BY age DESC LIMIT 1\"";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT name FROM singer ORDER BY age DESC LIMIT 1"));
        assert_eq!(extract_sql("`SELECT 1`").as_deref(), Some("SELECT 1"));
    }

    #[test]
    fn think_blocks_are_ignored() {
        let a = "<think>maybe SELECT * FROM x</think>```sql\nSELECT 2\n```";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT 2"));
    }

    #[test]
    fn prefers_sql_fence() {
        let a = "```text\nnot sql\n```\n```sql\nSELECT 3\n```";
        assert_eq!(extract_sql(a).as_deref(), Some("SELECT 3"));
    }

    #[test]
    fn unterminated_fence() {
        assert_eq!(extract_sql("```sql\nSELECT 4 FROM t").as_deref(), Some("SELECT 4 FROM t"));
    }

    #[test]
    fn two_statements_are_kept_for_the_guard() {
        assert_eq!(extract_sql("SELECT 1; DROP TABLE singer;").as_deref(), Some("SELECT 1; DROP TABLE singer"));
    }

    #[test]
    fn destructive_answer_is_found() {
        assert_eq!(extract_sql("DROP TABLE singer").as_deref(), Some("DROP TABLE singer"));
    }

    #[test]
    fn no_sql() {
        assert_eq!(extract_sql("I cannot answer that."), None);
        assert_eq!(extract_sql("   "), None);
    }

    #[test]
    fn huge_answers_take_linear_time() {
        use std::time::{Duration, Instant};
        // Many short lines of prose after a statement, many think blocks, many fences, many labels.
        let cases = [
            format!("SELECT 1 FROM t\n{}", "word\n".repeat(200_000)),
            format!("{}```sql\nSELECT 2\n```", "<think></think>".repeat(100_000)),
            "```\nx\n```\n".repeat(50_000),
            "no SQL: here\n".repeat(100_000),
            format!("SELECT\n{}", "a,\n".repeat(200_000)),
        ];
        for (i, a) in cases.iter().enumerate() {
            let t = Instant::now();
            let _ = extract_sql(a);
            assert!(t.elapsed() < Duration::from_secs(5), "case {i} took {:?}", t.elapsed());
        }
        assert_eq!(extract_sql(&cases[1]).as_deref(), Some("SELECT 2"));
    }

    #[test]
    fn loops_check_for_interrupts() {
        thread_local! { static CALLS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) }; }
        crate::interrupt::register(|| CALLS.set(CALLS.get() + 1));
        let _ = extract_sql(&format!("SELECT 1 FROM t\n{}", "word\n".repeat(10_000)));
        let _ = extract_sql(&"<think></think>".repeat(5_000));
        assert!(CALLS.get() > 3, "{}", CALLS.get());
    }

    #[test]
    fn unparsable_statement_is_returned_as_written() {
        assert_eq!(extract_sql("SELECT FROM WHERE").as_deref(), Some("SELECT FROM WHERE"));
    }
}
