//! Refinement: what went wrong with a candidate, and the prompt that asks the model to fix it.

use crate::error::Report;
use crate::guard::GuardError;
use crate::llm::Message;
use serde::Serialize;

const CORRECT_ERROR: &str = include_str!("prompts/correct_error.txt");
const CORRECT_TIMEOUT: &str = include_str!("prompts/correct_timeout.txt");
const CORRECT_SYNTAX: &str = include_str!("prompts/correct_syntax.txt");
const CORRECT_UNDEFINED: &str = include_str!("prompts/correct_undefined.txt");
const CORRECT_TYPE: &str = include_str!("prompts/correct_type.txt");
const CORRECT_FUNCTION: &str = include_str!("prompts/correct_function.txt");
const CORRECT_EMPTY: &str = include_str!("prompts/correct_empty.txt");

/// Why a candidate did not produce an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The answer had no SQL, or SQL that does not parse.
    Syntax(GuardError),
    /// PostgreSQL raised an error while executing it.
    Execution(Report),
    /// It ran past nl2sql.statement_timeout.
    Timeout { ms: u64 },
    /// It ran and returned no rows (a failure only when no candidate returned any).
    Empty,
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
    Other,
}

impl Failure {
    pub fn kind(&self) -> FailureKind {
        match self {
            Failure::Syntax(_) => FailureKind::Syntax,
            Failure::Timeout { .. } => FailureKind::Timeout,
            Failure::Empty => FailureKind::Empty,
            Failure::Execution(r) => match r.sqlstate.code() {
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
            Failure::Execution(r) => r.message.clone(),
            Failure::Timeout { ms } => format!("ran longer than {ms} ms"),
            Failure::Empty => "returned no rows".into(),
        }
    }
}

/// The conversation so far, plus the model's failed answer and a request to fix it that
/// fits the kind of failure (the paper's correction by error type).
pub fn correction(mut messages: Vec<Message>, answer: &str, failure: &Failure) -> Vec<Message> {
    let ask = match failure {
        Failure::Syntax(e) => CORRECT_SYNTAX.replace("{error}", &crate::error::Diagnostic::message(e)),
        Failure::Timeout { ms } => CORRECT_TIMEOUT.replace("{timeout_ms}", &ms.to_string()),
        Failure::Empty => CORRECT_EMPTY.to_string(),
        Failure::Execution(r) => {
            let mut error = format!("ERROR: {}", r.message);
            if let Some(d) = &r.detail {
                error.push_str(&format!("\nDETAIL: {d}"));
            }
            if let Some(h) = &r.hint {
                error.push_str(&format!("\nHINT: {h}"));
            }
            let template = match failure.kind() {
                FailureKind::UndefinedColumn | FailureKind::UndefinedTable => CORRECT_UNDEFINED,
                FailureKind::TypeMismatch => CORRECT_TYPE,
                FailureKind::UndefinedFunction => CORRECT_FUNCTION,
                _ => CORRECT_ERROR,
            };
            template.replace("{error}", &error)
        }
    };
    messages.push(Message::assistant(answer.trim()));
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
        let f = Failure::Execution(
            Report::new(SqlState::from_code("42703"), "column \"nme\" does not exist").hint("Perhaps you meant \"name\"."),
        );
        let m = correction(base, "SELECT nme FROM singer", &f);
        assert_eq!(m.len(), 4);
        assert_eq!(m[2], Message::assistant("SELECT nme FROM singer"));
        assert!(m[3].content.contains("ERROR: column \"nme\" does not exist\nHINT: Perhaps you meant \"name\"."));
        assert!(m[3].content.contains("Use only tables and columns listed above"));
        assert_eq!(f.kind(), FailureKind::UndefinedColumn);
    }

    #[test]
    fn timeout_and_syntax_prompts() {
        let t = correction(vec![], "SELECT 1", &Failure::Timeout { ms: 5000 });
        assert!(t[1].content.contains("5000 ms"));
        let s = correction(vec![], "SELEC 1", &Failure::Syntax(GuardError::Syntax("Expected: an SQL statement".into())));
        assert!(s[1].content.contains("Expected: an SQL statement"));
        assert_eq!(Failure::Timeout { ms: 1 }.kind(), FailureKind::Timeout);
        let e = correction(vec![], "SELECT 1", &Failure::Empty);
        assert!(e[1].content.starts_with("That query returned no rows"));
        let t = Failure::Execution(Report::new(SqlState::from_code("42883"), "function strftime(unknown, date) does not exist"));
        assert!(correction(vec![], "x", &t)[1].content.contains("PostgreSQL has no such function"));
        let o = Failure::Execution(Report::new(SqlState::from_code("42883"), "operator does not exist: text > integer"));
        assert_eq!(o.kind(), FailureKind::TypeMismatch);
        assert!(correction(vec![], "x", &o)[1].content.contains("cast where the types differ"));
    }
}
