//! Refinement: what went wrong with a candidate, and the prompt that asks the model to fix it.

use crate::error::Report;
use crate::safety::guard::GuardError;
use crate::model::llm::Message;
use serde::Serialize;
use std::collections::HashSet;

pub use super::scrub::without_data;

const CORRECT_ERROR: &str = include_str!("text/correct_error.txt");
const CORRECT_TIMEOUT: &str = include_str!("text/correct_timeout.txt");
const CORRECT_COST: &str = include_str!("text/correct_cost.txt");
const CORRECT_SYNTAX: &str = include_str!("text/correct_syntax.txt");
const CORRECT_UNDEFINED: &str = include_str!("text/correct_undefined.txt");
const CORRECT_TYPE: &str = include_str!("text/correct_type.txt");
const CORRECT_FUNCTION: &str = include_str!("text/correct_function.txt");
const CORRECT_EMPTY: &str = include_str!("text/correct_empty.txt");

/// Why a candidate did not produce an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The answer had no SQL, or SQL that does not parse.
    Syntax(GuardError),
    /// PostgreSQL raised an error while executing it: the error may quote data.
    Execution(Report),
    /// PostgreSQL refused it while reading it (parse, analysis, rewrite, planning): the error
    /// quotes only the query's own text and the catalog, never a row.
    Analysis(Report),
    /// It ran past nl2sql.statement_timeout.
    Timeout { ms: u64 },
    /// It ran and returned no rows (a failure only when no candidate returned any).
    Empty,
    /// The planner estimated it above nl2sql.max_cost: planned, never executed.
    Cost { estimate: f64, max: f64 },
}

/// The error classes of the paper's correction step, mapped from SQLSTATEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Syntax,
    UndefinedColumn,
    UndefinedTable,
    UndefinedFunction,
    TypeMismatch,
    Timeout,
    Empty,
    Cost,
    Other,
}

impl Failure {
    pub fn kind(&self) -> FailureKind {
        match self {
            Failure::Syntax(_) => FailureKind::Syntax,
            Failure::Timeout { .. } => FailureKind::Timeout,
            Failure::Empty => FailureKind::Empty,
            Failure::Cost { .. } => FailureKind::Cost,
            Failure::Execution(r) | Failure::Analysis(r) => match r.sqlstate.code() {
                "42601" => FailureKind::Syntax,
                "42703" => FailureKind::UndefinedColumn,
                "42P01" => FailureKind::UndefinedTable,
                // "operator does not exist: text > integer" is a type mismatch, not a missing function.
                "42883" if r.message.starts_with("operator does not exist") => FailureKind::TypeMismatch,
                "42883" => FailureKind::UndefinedFunction,
                "42804" | "42846" | "22P02" | "22007" | "22008" | "42725" => FailureKind::TypeMismatch,
                _ => FailureKind::Other,
            },
        }
    }

    /// One line for traces and messages.
    pub fn summary(&self) -> String {
        match self {
            Failure::Syntax(e) => crate::error::Diagnostic::message(e),
            Failure::Execution(r) | Failure::Analysis(r) => r.message.clone(),
            Failure::Timeout { ms } => format!("ran longer than {ms} ms"),
            Failure::Empty => "returned no rows".into(),
            Failure::Cost { estimate, max } => format!("estimated cost {estimate:.0} exceeds nl2sql.max_cost ({max:.0}); not executed"),
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What the model was sent in a conversation (never its own answers): what an error text
/// may repeat.
pub fn seen(messages: &[Message]) -> String {
    messages.iter().filter(|m| m.role != "assistant").map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")
}

/// A PostgreSQL error as the model may be told it. Raised while the query was planned or ran,
/// it may print a row's text in any form, so it is told in nl2sql's words only ([`super::ran`]);
/// under `private` (nl2sql.privacy) its SQLSTATE only. Raised while reading the query, it quotes
/// the query's text and the catalog's names: its wording with the names it repeats kept only
/// where they are whole words of `seen` (what the model was sent) or of the model's `answer` (as
/// written and folded to lower case, as PostgreSQL repeats an unquoted name), as
/// [`super::scrub::read_error`] says. None for failures that are not PostgreSQL errors.
pub fn error_text(failure: &Failure, answer: &str, seen: &str, private: bool) -> Option<String> {
    let r = match failure {
        Failure::Execution(r) | Failure::Analysis(r) => r,
        _ => return None,
    };
    let code = r.sqlstate.code();
    if matches!(failure, Failure::Execution(_)) {
        return Some(if private { super::ran::withheld(code) } else { super::ran::error_text(code, &r.message) });
    }
    let names = written_or_shown(answer, seen);
    let scrub = |text: &str| super::scrub::read_error(text, &names);
    let mut error = format!("ERROR ({code}): {}", scrub(&r.message));
    // Details outside class 42 (names and syntax) describe data ("Failing row contains …").
    if let Some(d) = r.detail.as_ref().filter(|_| code.starts_with("42")) {
        error.push_str(&format!("\nDETAIL: {}", scrub(d)));
    }
    if let Some(h) = &r.hint {
        error.push_str(&format!("\nHINT: {}", scrub(h)));
    }
    Some(error)
}

/// The names an error raised while reading `answer` may repeat: the whole words of `seen` and of
/// `answer`, as written and folded to lower case (PostgreSQL repeats an unquoted `T1` as `t1`).
fn written_or_shown(answer: &str, seen: &str) -> HashSet<String> {
    let text = format!("{seen}\n{answer}\n{}", answer.to_ascii_lowercase());
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_string).collect()
}

/// The message of a failed query's error as a row of the history (which administrators read)
/// may keep it: as [`error_text`] without the SQLSTATE, detail and hint, `seen` being the
/// question and hint. None for failures that are not PostgreSQL errors.
pub fn history_message(failure: &Failure, answer: &str, seen: &str) -> Option<String> {
    match failure {
        Failure::Execution(r) => Some(super::ran::history_text(&r.message)),
        Failure::Analysis(r) => {
            Some(super::scrub::read_error(&r.message, &written_or_shown(answer, seen)))
        }
        _ => None,
    }
}

/// The conversation so far, plus the model's failed answer and a request to fix it that
/// fits the kind of failure (the paper's correction by error type). A PostgreSQL error is
/// described by its SQLSTATE and as [`error_text`] says, never with values quoted from rows or
/// files.
///
/// `private` (nl2sql.privacy): an error raised while the query ran is described by its SQLSTATE
/// only. A plan's estimated cost (read from the column statistics) is never told, only the limit.
pub fn correction(mut messages: Vec<Message>, answer: &str, failure: &Failure, private: bool) -> Vec<Message> {
    let seen = seen(&messages);
    let ask = match failure {
        Failure::Syntax(e) => CORRECT_SYNTAX.replace("{error}", &crate::error::Diagnostic::message(e)),
        Failure::Timeout { ms } => CORRECT_TIMEOUT.replace("{timeout_ms}", &ms.to_string()),
        Failure::Empty => CORRECT_EMPTY.to_string(),
        // Never the estimate: it is read from the column statistics, which cover rows the role
        // may not see (row-level security, a view's filter).
        Failure::Cost { max, .. } => CORRECT_COST.replace("{max}", &format!("{max:.0}")),
        Failure::Execution(_) | Failure::Analysis(_) => {
            let template = match failure.kind() {
                FailureKind::UndefinedColumn | FailureKind::UndefinedTable => CORRECT_UNDEFINED,
                FailureKind::TypeMismatch => CORRECT_TYPE,
                FailureKind::UndefinedFunction => CORRECT_FUNCTION,
                _ => CORRECT_ERROR,
            };
            template.replace("{error}", &error_text(failure, answer, &seen, private).unwrap_or_default())
        }
    };
    messages.push(Message::assistant(prefix(answer.trim(), crate::model::answer::MAX_SQL_BYTES)));
    messages.push(Message::user(ask.trim_end()));
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SqlState;

    #[test]
    fn correction_appends_answer_and_error() {
        let base = vec![Message::system("s"), Message::user("u")];
        let f = Failure::Analysis(
            Report::new(SqlState::from_code("42703"), "column \"nme\" does not exist").hint("Perhaps you meant \"name\"."),
        );
        let m = correction(base, "SELECT nme FROM singer", &f, false);
        assert_eq!(m.len(), 4);
        assert_eq!(m[2], Message::assistant("SELECT nme FROM singer"));
        // An error from reading the query repeats the names the model wrote; the SQLSTATE is given.
        assert!(m[3].content.contains("ERROR (42703): column \"nme\" does not exist\nHINT: Perhaps you meant \"…\"."), "{}", m[3].content);
        assert!(m[3].content.contains("Use only tables and columns listed above"));
        assert_eq!(f.kind(), FailureKind::UndefinedColumn);
    }

    #[test]
    fn correction_prompts_carry_no_data() {
        let base = vec![Message::system("schema: singer(name, age), sample 'Joe Sharp'"), Message::user("which singers?")];
        let sql = "SELECT name FROM singer WHERE age > 'forty'";
        let cases = [
            // A cast error quotes the value it could not read: from a file, or from a row.
            Report::new(SqlState::from_code("22P02"), "invalid input syntax for type integer: \"root:x:0:0:root:/root:/bin/bash\""),
            Report::new(SqlState::from_code("42P01"), "relation \"s3cr3t-token-42\" does not exist"),
            Report::new(SqlState::from_code("22003"), "value \"98765432109\" is out of range for type integer"),
            Report::new(SqlState::from_code("23505"), "duplicate key value violates unique constraint \"u\"")
                .detail("Key (email)=(alice@example.com) already exists."),
            Report::new(SqlState::from_code("22012"), "division by zero at 31337 rows"),
        ];
        for r in cases {
            let m = correction(base.clone(), sql, &Failure::Execution(r.clone()), false);
            let prompt = &m[3].content;
            for secret in ["root:x", "s3cr3t", "98765432109", "alice@example.com", "31337"] {
                assert!(!prompt.contains(secret), "{secret} leaked: {prompt}");
            }
            assert!(prompt.contains(r.sqlstate.code()), "{prompt}");
        }
        // What the model was shown is repeated: it helps, and it is not new to the endpoint.
        // What it only wrote is not: listing guesses in its answer must not tell which is stored.
        // Raised while the query ran, an error may print a row's text in any form: a message
        // of PostgreSQL's known ones is told without its input, any other by its SQLSTATE only,
        // even where it quotes a name the model was shown, or one character of a row that the
        // prompt holds somewhere.
        for (code, message, told) in [
            ("42P01", "relation \"singer\" does not exist", "ERROR (42P01) raised while the query ran (undefined_table"),
            ("42P01", "relation \"q\" does not exist", "ERROR (42P01) raised while the query ran (undefined_table"),
            ("42883", "function zz_secret(\"char\") does not exist", "ERROR (42883) raised while the query ran (undefined_function"),
            ("42P01", "Relation »zz_secret« existiert nicht", "ERROR (42P01) raised while the query ran (undefined_table"),
            ("22P02", "invalid input syntax for type integer: \"\"zz_secret\"\"", "ERROR (22P02): invalid input syntax for type integer: \"…\""),
            ("22012", "division by zero", "ERROR (22012): division by zero"),
        ] {
            let r = Report::new(SqlState::from_code(code), message).hint(format!("hint {message}")).detail(format!("detail {message}"));
            let m = correction(base.clone(), sql, &Failure::Execution(r), false);
            assert!(m[3].content.contains(told) && !m[3].content.contains("zz_secret") && !m[3].content.contains("\"q\""), "{}", m[3].content);
            assert!(!m[3].content.contains("hint") && !m[3].content.contains("detail"), "{}", m[3].content);
        }
        let guess = Report::new(SqlState::from_code("22P02"), "invalid input syntax for type integer: \"1234x\"");
        let m = correction(base, "SELECT CAST(pin || 'x' AS int) FROM t -- 1233x 1234x 1235x", &Failure::Execution(guess), false);
        assert!(!m[3].content.contains("1234x\""), "{}", m[3].content);
        // PostgreSQL prints a value between quotes as it is, its own quotes not doubled.
        assert_eq!(without_data("a \"x\"y\" b", "x\"y"), "a \"x\"y\" b");
        assert_eq!(without_data("a \"x\"\"y\" b", "x\"y"), "a \"…\" b");
        assert_eq!(without_data("unterminated \"abc", ""), "unterminated \"…\"");
        assert_eq!(without_data("int4 and 12", "12"), "… and 12");
        assert_eq!(without_data("invalid byte sequence for encoding \"UTF8\": 0xe2 0x28", "UTF8"), "invalid byte sequence for encoding \"UTF8\": …");
        assert_eq!(without_data("value 'SELECT'", "SELECT x"), "value 'SELECT'");
        assert_eq!(without_data("value 'secret' and 'SELECT'", "SELECT x"), "value '…'");
        assert_eq!(without_data("at 3.14 and 2", "3.14"), "at 3.14 and …");
        // An operator's name read from a row while the query ran: never repeated unless sent.
        assert_eq!(without_data("operator does not exist: zz_secret_nnjh", "SELECT"), "operator does not exist: …");
        assert_eq!(without_data("more than one operator named zz_secret", ""), "more than one operator named …");
        assert_eq!(without_data("operator does not exist: ===", "x === y"), "operator does not exist: ===");
        // Other input printed unquoted: a name of too many parts, a three-part name, an
        // encoding's name, a function looked up by its signature.
        for (error, masked) in [
            ("improper relation name (too many dotted names): a.b.c.zz_secret", "improper relation name (too many dotted names): …"),
            ("cross-database references are not implemented: x.y.zz_secret", "cross-database references are not implemented: …"),
            ("zz_secret is not a valid encoding name", "… is not a valid encoding name"),
            ("function zz_secret() does not exist", "function … does not exist"),
        ] {
            assert_eq!(without_data(error, "SELECT"), masked);
        }
        // A value's own quotes are printed as they are: from the first quote to the last, all
        // may be the value (a row cast to a relation's name, an integer, a name with ": ").
        for (error, masked) in [
            ("invalid input syntax for type integer: \"\"alice\"\"", "invalid input syntax for type integer: …"),
            ("relation \"a\"alice\"b\" does not exist", "relation \"…\" does not exist"),
            ("value \"\"alice\"\" is out of range for type integer", "value \"…\" is out of range for type integer"),
            ("value \"a'b\" zz_secret 'd\" is out of range", "value \"…\" is out of range"),
            ("column \"age\" of \"singer\" is \"forty\" not 40", "column \"…\" not …"),
            ("operator does not exist: \"pg_catalog\".alice", "operator does not exist: …"),
            ("improper relation name (too many dotted names): a.b.c.alice: x", "improper relation name (too many dotted names): …"),
            ("type \"a\" does not exist: alice\" does not exist", "type \"…\" does not exist: …"),
            ("value \"a: alice\" is out of range", "value \"…\""),
        ] {
            assert_eq!(without_data(error, "SELECT singer"), masked, "{error}");
        }
        // One quoted part that was shown whole is PostgreSQL's name for it.
        assert_eq!(without_data("relation \"zz\" does not exist", "zz"), "relation \"zz\" does not exist");
        assert_eq!(without_data("invalid input syntax for type integer: \"abc\"", ""), "invalid input syntax for type integer: …");
        assert_eq!(without_data("division by zero", ""), "division by zero");
    }

    #[test]
    fn an_error_reading_the_query_repeats_its_names_as_postgresql_folds_them() {
        // The prompt lists a table and its columns apart; the model wrote its aliases in capitals.
        let base = vec![Message::system("# singer (\n#   name: text\n#   age: integer\n# )"), Message::user("the youngest?")];
        let sql = "SELECT T1.name FROM singer AS T1 JOIN concert AS T3 ON true WHERE T3.age = 1";
        let f = Failure::Analysis(
            Report::new(SqlState::from_code("42703"), "column t3.age does not exist")
                .hint("Perhaps you meant to reference the column \"t1.age\" or the column \"singer.age\"."),
        );
        let m = correction(base.clone(), sql, &f, false);
        assert!(
            m[3].content.contains("ERROR (42703): column t3.age does not exist\nHINT: Perhaps you meant to reference the column \"t1.age\" or the column \"singer.age\"."),
            "{}",
            m[3].content
        );
        // The analyser's own wording for a missing operator (its operand types) stays.
        let f = Failure::Analysis(Report::new(SqlState::from_code("42883"), "operator does not exist: text > integer"));
        let m = correction(base.clone(), sql, &f, false);
        assert!(m[3].content.contains("ERROR (42883): operator does not exist: text > integer"), "{}", m[3].content);
        // A part neither written nor shown, an empty part: withheld.
        let f = Failure::Analysis(
            Report::new(SqlState::from_code("42703"), "column t3.age does not exist").hint("Perhaps you meant \"singer.salary\", \"singer..age\" or \"age.\"."),
        );
        let m = correction(base.clone(), sql, &f, false);
        assert!(m[3].content.contains("HINT: Perhaps you meant \"…\", \"…\" or \"…\"."), "{}", m[3].content);
        // Only two whole names: not fragments of them, not three parts, not numbers.
        let f = Failure::Analysis(
            Report::new(SqlState::from_code("42703"), "column t3.age does not exist").hint("\"s.i.n\" \"sing.ag\" \"singer.age.name\" \"1.1\" \"t3.1\""),
        );
        let m = correction(base.clone(), "SELECT T1.name FROM singer AS T1 JOIN concert AS T3 ON T3.a = 1", &f, false);
        assert!(m[3].content.contains("HINT: \"…\" \"…\" \"…\" \"…\" \"…\""), "{}", m[3].content);
        // An error raised while the query ran may quote a row: a value that happens to join two
        // shown names with a dot is still withheld, and the answer's names are not repeated.
        let r = Report::new(SqlState::from_code("22P02"), "invalid input syntax for type integer: \"singer.age\"");
        let m = correction(base.clone(), sql, &Failure::Execution(r), false);
        assert!(m[3].content.contains("integer: \"…\"") && !m[3].content.contains("singer.age\""), "{}", m[3].content);
        let r = Report::new(SqlState::from_code("22012"), "division by zero in t3");
        let m = correction(base, sql, &Failure::Execution(r), false);
        assert!(m[3].content.contains("ERROR (22012) raised while the query ran (division_by_zero") && !m[3].content.contains("t3"), "{}", m[3].content);
    }

    #[test]
    fn the_history_keeps_an_errors_words_as_a_correction_would() {
        let ran = Failure::Execution(Report::new(SqlState::from_code("42P01"), "relation \"a\"zz_secret\"b\" does not exist"));
        assert_eq!(history_message(&ran, "SELECT x::regclass FROM t", "q").as_deref(), Some("its message is withheld (raised while it ran, it may quote data)"));
        let cast = Failure::Execution(Report::new(SqlState::from_code("22P02"), "invalid input syntax for type integer: \"zz_secret\""));
        assert_eq!(history_message(&cast, "SELECT x::int FROM t", "q").as_deref(), Some("invalid input syntax for type integer: \"…\""));
        let read = Failure::Analysis(Report::new(SqlState::from_code("42703"), "column \"nme\" of relation \"zz_other\" does not exist"));
        assert_eq!(history_message(&read, "SELECT nme FROM singer", "how many singers?").as_deref(), Some("column \"nme\" of relation \"…\" does not exist"));
        assert_eq!(history_message(&Failure::Empty, "SELECT 1", "q"), None);
    }

    #[test]
    fn timeout_and_syntax_prompts() {
        let t = correction(vec![], "SELECT 1", &Failure::Timeout { ms: 5000 }, false);
        assert!(t[1].content.contains("5000 ms"));
        let s = correction(vec![], "SELEC 1", &Failure::Syntax(GuardError::Syntax("Expected: an SQL statement".into())), false);
        assert!(s[1].content.contains("Expected: an SQL statement"));
        assert_eq!(Failure::Timeout { ms: 1 }.kind(), FailureKind::Timeout);
        let e = correction(vec![], "SELECT 1", &Failure::Empty, false);
        assert!(e[1].content.starts_with("That query returned no rows"));
        let t = Failure::Execution(Report::new(SqlState::from_code("42883"), "function strftime(unknown, date) does not exist"));
        assert!(correction(vec![], "x", &t, false)[1].content.contains("PostgreSQL has no such function"));
        let o = Failure::Execution(Report::new(SqlState::from_code("42883"), "operator does not exist: text > integer"));
        assert_eq!(o.kind(), FailureKind::TypeMismatch);
        assert!(correction(vec![], "x", &o, false)[1].content.contains("cast where the types differ"));
    }

    #[test]
    fn private_corrections_withhold_what_ran_and_the_cost() {
        // A value turned into a word of the error: an operator "name" spelled from a row.
        let r = Report::new(SqlState::from_code("42883"), "operator does not exist: joe_sharp");
        let m = correction(vec![], "SELECT x::regoper FROM t", &Failure::Execution(r.clone()), true);
        assert!(!m[1].content.contains("joe_sharp") && m[1].content.contains("ERROR (42883)"), "{}", m[1].content);
        // Without privacy, too: that message is not one of the known ones.
        let open = correction(vec![], "SELECT x::regoper FROM t", &Failure::Execution(r), false);
        assert!(open[1].content.contains("ERROR (42883) raised while the query ran (undefined_function") && !open[1].content.contains("joe_sharp"), "{}", open[1].content);
        // The estimate reads the statistics of rows the role may not see: never told.
        for private in [true, false] {
            let c = correction(vec![], "SELECT 1", &Failure::Cost { estimate: 12345.0, max: 100.0 }, private);
            assert!(!c[1].content.contains("12345") && c[1].content.contains("cost limit of 100"), "{}", c[1].content);
        }
        // Errors raised while reading the query quote only its text: kept.
        let a = Report::new(SqlState::from_code("42703"), "column \"nme\" does not exist");
        assert!(correction(vec![], "SELECT nme FROM singer", &Failure::Analysis(a), true)[1].content.contains("nme"));
    }
}
