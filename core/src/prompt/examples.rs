//! The examples library: masked questions (OpenSearch-SQL's MQs) to find examples by the shape
//! of a question rather than its names, and the few-shot section that shows them to the model.
//! Examples are data another role wrote: they are shown, never run or spliced into SQL.

use crate::text;
use crate::interrupt;
use serde::Serialize;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};
use std::collections::HashSet;

/// Placeholder of a table or column name in a masked question.
pub const NAME: &str = "<name>";
/// Placeholder of a value (a quoted text, a number, a proper noun, a stored value).
pub const VALUE: &str = "<value>";
/// Longest example text (question, SQL, chain of thought) shown in a prompt, in bytes.
const MAX_SHOWN_BYTES: usize = 1_500;

/// One example as retrieval returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub id: i64,
    pub question: String,
    pub sql: String,
    /// The chain of thought written from the SQL (None until it is written).
    #[serde(skip_serializing)]
    pub thought: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// builtin, user, synthetic or feedback.
    pub source: String,
    /// Cosine similarity of the masked questions.
    pub score: f32,
}

/// The words of a name, folded, with a plural's singular: `order_items` gives order, item,
/// items, orders, order items.
fn name_words(name: &str, out: &mut HashSet<String>) {
    let folded = text::fold(name);
    if folded.is_empty() {
        return;
    }
    let words: Vec<&str> = text::words(&folded).collect();
    for w in &words {
        for form in forms(w) {
            out.insert(form);
        }
    }
    if words.len() > 1 {
        out.insert(words.join(" "));
    }
}

/// A word and its likely singular and plural.
fn forms(w: &str) -> Vec<String> {
    let mut v = vec![w.to_string()];
    if let Some(s) = w.strip_suffix("ies") {
        v.push(format!("{s}y"));
    } else if let Some(s) = w.strip_suffix("es").filter(|s| s.ends_with('s') || s.ends_with('x') || s.ends_with("ch")) {
        v.push(s.to_string());
    } else if let Some(s) = w.strip_suffix('s').filter(|s| s.len() > 2 && !s.ends_with('s')) {
        v.push(s.to_string());
    }
    if let Some(s) = w.strip_suffix('y') {
        v.push(format!("{s}ies"));
    } else if !w.ends_with('s') {
        v.push(format!("{w}s"));
    }
    v
}

/// Words that are never masked (they carry the shape of the question), even when a column is
/// called so.
const KEEP: &[&str] = &[
    "a", "an", "the", "of", "in", "on", "for", "and", "or", "not", "with", "by", "to", "from", "at", "as", "is", "are", "was", "were",
    "be", "each", "every", "all", "any", "how", "many", "much", "what", "which", "who", "whose", "when", "where", "list", "show",
    "give", "find", "count", "number", "total", "sum", "average", "avg", "max", "min", "maximum", "minimum", "most", "least",
    "more", "less", "than", "top", "first", "last", "per", "distinct", "different", "name", "names", "id", "ids", "their", "its",
    "that", "those", "these", "have", "has", "do", "does", "did", "no", "never", "both", "either", "between", "order", "ordered",
    "sorted", "ascending", "descending", "year", "month", "day", "date", "time", "percentage", "percent", "ratio",
];

/// Words of SQL itself: never taken for names when read from an example's query (sqlparser
/// knows many more keywords, but "category" or "position" may well name a column).
const SQL_WORDS: &[&str] = &[
    "select", "from", "where", "group", "by", "order", "having", "join", "left", "right", "inner", "outer", "full", "cross", "on",
    "as", "and", "or", "not", "in", "is", "null", "limit", "offset", "distinct", "union", "intersect", "except", "all", "case",
    "when", "then", "else", "end", "exists", "between", "like", "ilike", "asc", "desc", "with", "over", "partition", "filter",
    "interval", "date", "timestamp", "true", "false", "cast", "extract", "nulls", "first", "last", "using", "lateral", "any",
    "some", "count", "sum", "avg", "min", "max", "round", "coalesce", "rank", "row_number", "dense_rank", "date_trunc", "age",
    "current_date", "now", "lower", "upper", "length", "numeric", "integer", "text", "float", "real", "year", "month", "day",
];

/// The names a question may mention: tables, columns, and the tables and columns of an SQL
/// text (an example's own names).
pub struct Names {
    words: HashSet<String>,
    /// The longest name phrase, in words.
    longest: usize,
}

impl Names {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Names {
        let mut words = HashSet::new();
        for (i, n) in names.into_iter().enumerate() {
            interrupt::every(i, 1024);
            name_words(n, &mut words);
        }
        for k in KEEP {
            words.remove(*k);
        }
        let longest = words.iter().map(|w| w.split(' ').count()).max().unwrap_or(1).min(4);
        Names { words, longest }
    }

    /// The names of an SQL text: its unquoted and quoted words that are not keywords, and its
    /// string literals and numbers as values.
    pub fn from_sql(sql: &str) -> (Names, Vec<String>) {
        let mut names = Vec::new();
        let mut values = Vec::new();
        if let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() {
            for (i, t) in tokens.iter().enumerate() {
                interrupt::every(i, 4096);
                match t {
                    Token::Word(w) if w.quote_style.is_some() || !SQL_WORDS.contains(&w.value.to_ascii_lowercase().as_str()) => {
                        names.push(w.value.clone())
                    }
                    Token::SingleQuotedString(s) | Token::EscapedStringLiteral(s) | Token::NationalStringLiteral(s) => {
                        values.push(s.trim_matches('%').to_string())
                    }
                    Token::Number(n, _) => values.push(n.clone()),
                    _ => {}
                }
            }
        }
        (Names::new(names.iter().map(String::as_str)), values)
    }
}

/// The question with its names and values replaced by placeholders, so that "How many singers
/// are from France?" and "How many ships are from Norway?" read alike: `names` are the schema's
/// (or the example's) names, `values` texts known to be values (stored values that matched the
/// question, an example's literals). Numbers, quoted texts and capitalised words inside a
/// sentence are values too. Linear in the question's length.
pub fn mask(question: &str, names: &Names, values: &[String]) -> String {
    let values: HashSet<String> = values.iter().map(|v| text::fold(v)).filter(|v| !v.is_empty()).collect();
    let value_words: HashSet<&str> = values.iter().flat_map(|v| text::words(v)).collect();
    // Words as written, with whether each starts a sentence.
    let mut tokens: Vec<(String, bool)> = Vec::new();
    let mut quoted = false;
    let mut sentence_start = true;
    let mut current = String::new();
    let flush = |current: &mut String, tokens: &mut Vec<(String, bool)>, start: &mut bool, quoted: bool| {
        if !current.is_empty() {
            tokens.push((if quoted { VALUE.to_string() } else { std::mem::take(current) }, *start));
            current.clear();
            *start = false;
        }
    };
    let chars: Vec<char> = question.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        interrupt::every(i, 4096);
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let word_char = |x: Option<char>| x.is_some_and(|x| x.is_alphanumeric());
        if c.is_alphanumeric() || c == '_' || (c == '.' && prev.is_some_and(|p| p.is_ascii_digit()) && word_char(next)) {
            current.push(c);
            continue;
        }
        // An apostrophe inside a word (singer's, don't) is not a quote.
        if (c == '\'' || c == '\u{2019}') && word_char(prev) && word_char(next) {
            continue;
        }
        flush(&mut current, &mut tokens, &mut sentence_start, quoted);
        if matches!(c, '"' | '\'' | '\u{201c}' | '\u{201d}' | '\u{2018}' | '\u{2019}') {
            // Opens after a space or the start, closes otherwise.
            quoted = if quoted { false } else { !word_char(prev) };
        } else if matches!(c, '.' | '?' | '!') {
            sentence_start = true;
        }
    }
    flush(&mut current, &mut tokens, &mut sentence_start, quoted);
    let folded: Vec<String> = tokens.iter().map(|(w, _)| text::fold(w)).collect();
    let mut out: Vec<&str> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        interrupt::every(i, 4096);
        // The longest name phrase that starts here.
        let mut taken = 0;
        for len in (1..=names.longest.min(tokens.len() - i)).rev() {
            let phrase = folded[i..i + len].join(" ");
            if names.words.contains(&phrase) {
                taken = len;
                break;
            }
        }
        if taken > 0 {
            out.push(NAME);
            i += taken;
            continue;
        }
        let (word, starts) = &tokens[i];
        let f = &folded[i];
        let is_value = word == VALUE
            || word.chars().next().is_some_and(|c| c.is_ascii_digit())
            || (value_words.contains(f.as_str()) && !KEEP.contains(&f.as_str()))
            || (!starts && word.chars().next().is_some_and(char::is_uppercase) && !KEEP.contains(&f.as_str()));
        if is_value {
            if out.last() != Some(&VALUE) {
                out.push(VALUE);
            }
        } else {
            out.push(word);
        }
        i += 1;
    }
    out.join(" ")
}

/// An example's own masked question: its names and literals taken from its SQL.
pub fn mask_example(question: &str, sql: &str) -> String {
    let (names, values) = Names::from_sql(sql);
    mask(question, &names, &values)
}

/// An example as nl2sql.privacy shows it: its masked question, its query with every literal
/// replaced by a placeholder (small integers, as in LIMIT 3, stay), no hint and no chain of
/// thought (both may quote values). None when its query does not tokenize.
pub fn without_data(e: &Example) -> Option<Example> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, &e.sql).tokenize().ok()?;
    let mut sql = String::with_capacity(e.sql.len());
    for (i, t) in tokens.into_iter().enumerate() {
        interrupt::every(i, 4096);
        let masked = match t {
            Token::SingleQuotedString(_)
            | Token::EscapedStringLiteral(_)
            | Token::NationalStringLiteral(_)
            | Token::DollarQuotedString(_)
            | Token::UnicodeStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::TripleSingleQuotedString(_)
            | Token::TripleDoubleQuotedString(_) => Token::SingleQuotedString(VALUE.into()),
            Token::Number(n, _) if n.parse::<u8>().map_or(true, |v| v > 10) => Token::Word(sqlparser::tokenizer::Word {
                value: "<number>".into(),
                quote_style: None,
                keyword: sqlparser::keywords::Keyword::NoKeyword,
            }),
            other => other,
        };
        sql.push_str(&masked.to_string());
    }
    Some(Example { question: mask_example(&e.question, &e.sql), sql, thought: None, hint: None, ..e.clone() })
}

/// Keeps the `k` best examples: the most similar first, one per distinct SQL, user-written and
/// feedback examples ahead of built-in ones that score the same within 0.02.
pub fn pick(mut found: Vec<Example>, k: usize) -> Vec<Example> {
    let rank = |e: &Example| match e.source.as_str() {
        "user" | "feedback" => 0.02,
        "synthetic" => 0.01,
        _ => 0.0,
    };
    found.sort_by(|a, b| (b.score + rank(b)).total_cmp(&(a.score + rank(a))));
    let mut seen = HashSet::new();
    found.retain(|e| seen.insert(e.sql.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()));
    found.truncate(k);
    found
}

/// The few-shot section of a prompt: each example's question (with its hint), its chain of
/// thought when `thoughts` and the example has one, and its query, in the one answer format.
/// Empty when there are none.
pub fn render(examples: &[Example], thoughts: bool) -> String {
    if examples.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "### Examples: questions on other tables and the queries that answer them (follow their PostgreSQL patterns; use only the tables above):\n",
    );
    for e in examples {
        out.push_str("Question: ");
        out.push_str(&one_line(&e.question));
        out.push('\n');
        if let Some(h) = e.hint.as_deref().filter(|h| !h.trim().is_empty()) {
            out.push_str("Note: ");
            out.push_str(&one_line(h));
            out.push('\n');
        }
        if thoughts {
            if let Some(t) = e.thought.as_deref().filter(|t| !t.trim().is_empty()) {
                out.push_str(crate::prompt::refine::prefix(t.trim(), MAX_SHOWN_BYTES));
                out.push('\n');
            }
        }
        out.push_str("```sql\n");
        out.push_str(crate::prompt::refine::prefix(e.sql.trim(), MAX_SHOWN_BYTES));
        out.push_str("\n```\n");
    }
    out
}

fn one_line(s: &str) -> String {
    crate::prompt::refine::prefix(s, MAX_SHOWN_BYTES).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new(["singer", "country", "concert", "singer_in_concert", "stadium", "capacity"])
    }

    #[test]
    fn masks_names_values_and_numbers() {
        let m = mask("How many singers are from France?", &names(), &[]);
        assert_eq!(m, "How many <name> are from <value>");
        let m = mask("Show the stadiums with capacity above 5000 in 'north'.", &names(), &[]);
        assert_eq!(m, "Show the <name> with <name> above <value> in <value>");
    }

    #[test]
    fn privacy_shows_no_literal_hint_or_thought() {
        let e = Example {
            id: 1,
            question: "Which customers in Oslo spent more than 48213.77?".into(),
            sql: "SELECT name FROM customer WHERE city = 'Oslo' AND spent > 48213.77 AND code = E'x\\'y' AND note = $t$Zq$t$ ORDER BY spent DESC LIMIT 3".into(),
            thought: Some("The city is 'Oslo'.".into()),
            hint: Some("Oslo is a city".into()),
            source: "user".into(),
            score: 0.9,
        };
        let p = without_data(&e).expect("tokenizes");
        for secret in ["Oslo", "48213", "Zq", "x\\'y"] {
            assert!(!p.sql.contains(secret) && !p.question.contains(secret), "{secret} in {p:?}");
        }
        assert!(p.sql.contains("LIMIT 3") && p.sql.contains("city = '<value>'"), "{}", p.sql);
        assert!(p.thought.is_none() && p.hint.is_none());
    }

    #[test]
    fn two_questions_of_one_shape_mask_alike() {
        let a = mask("How many singers are from France?", &names(), &[]);
        let b = mask("How many ships are from Norway?", &Names::new(["ship", "flag"]), &[]);
        assert_eq!(a, b);
    }

    #[test]
    fn stored_values_and_phrases_are_masked() {
        let m = mask("which concerts took place in summer festival", &names(), &["Summer Festival".into()]);
        assert_eq!(m, "which <name> took place in <value>");
        let n = Names::new(["order_items"]);
        assert_eq!(mask("count order items", &n, &[]), "count <name>");
    }

    #[test]
    fn shape_words_stay() {
        let n = Names::new(["name", "count", "year"]);
        assert_eq!(mask("What is the name and count per year?", &n, &[]), "What is the name and count per year");
    }

    #[test]
    fn an_examples_names_come_from_its_sql() {
        let m = mask_example(
            "Which employees earn more than 3000 in Sales?",
            "SELECT e.full_name FROM employees e JOIN departments d ON d.id = e.dept_id WHERE e.salary > 3000 AND d.title = 'Sales'",
        );
        assert_eq!(m, "Which <name> earn more than <value> in <value>");
    }

    #[test]
    fn long_input_is_linear() {
        let q = "word ".repeat(200_000);
        let started = std::time::Instant::now();
        let m = mask(&q, &names(), &[]);
        assert!(m.len() >= q.len() - 1);
        assert!(started.elapsed().as_secs() < 5);
    }

    fn ex(id: i64, sql: &str, source: &str, score: f32) -> Example {
        Example { id, question: format!("q{id}"), sql: sql.into(), thought: None, hint: None, source: source.into(), score }
    }

    #[test]
    fn pick_prefers_close_and_own_examples_and_drops_repeats() {
        let got = pick(
            vec![
                ex(1, "SELECT 1", "builtin", 0.80),
                ex(2, "SELECT  1", "user", 0.70),
                ex(3, "SELECT 2", "user", 0.79),
                ex(4, "SELECT 3", "builtin", 0.5),
            ],
            2,
        );
        assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), vec![3, 1]);
    }

    #[test]
    fn render_shows_question_hint_thought_and_sql() {
        let mut e = ex(1, "SELECT count(*) FROM t", "user", 0.9);
        e.hint = Some("t is the table".into());
        e.thought = Some("#reason: count rows".into());
        let plain = render(std::slice::from_ref(&e), false);
        assert!(plain.starts_with("### Examples:"), "{plain}");
        assert!(plain.contains("Question: q1\nNote: t is the table\n```sql\nSELECT count(*) FROM t\n```\n"), "{plain}");
        assert!(!plain.contains("#reason"));
        assert!(render(std::slice::from_ref(&e), true).contains("#reason: count rows\n```sql"));
        assert_eq!(render(&[], true), "");
    }
}
