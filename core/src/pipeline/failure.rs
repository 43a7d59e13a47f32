//! How a question fails: the error, its SQLSTATE, message, detail and hint, and abstention.

use super::trace::{cand_sql, Trace};
use super::{Answer, MAX_HINT_CHARS, MAX_QUESTION_CHARS, MIN_COMPLETION_TOKENS};
use crate::error::{Diagnostic, Report, SqlState};
use crate::safety::guard::GuardError;
use crate::prompt::refine::Failure;

#[derive(Debug, Clone, PartialEq)]
pub enum AskError {
    EmptyQuestion,
    QuestionTooLong { chars: usize },
    HintTooLong { chars: usize },
    NoTables,
    /// The model could not be asked; already scrubbed of secrets.
    Llm(Report),
    /// The model wrote something unsafe; never executed.
    Refused { sql: String, error: GuardError },
    /// No candidate survived the correction rounds.
    Failed { sql: Option<String>, failure: Failure },
    /// Not one candidate fits nl2sql.max_tokens_per_call.
    OverBudget { needed: usize, budget: usize, spent: usize },
    /// The earlier question or query of a follow-up is empty or too long.
    BadPrevious(String),
    /// The candidates agreed less than nl2sql.min_confidence and nl2sql.on_low_confidence is
    /// error: no answer. Each group's votes, rows and query, best first.
    Abstained { confidence: f64, min: f64, samples: usize, groups: Vec<(usize, usize, String)> },
    /// No word of the question names anything the role's tables hold (nl2sql.refuse_unrelated):
    /// the question's words, and the tables (as written in SQL).
    /// A question about nothing the tables hold: `words` are those nothing matched; `confirmed`
    /// when the model, shown the tables, said they do not hold it.
    Unrelated { words: Vec<String>, tables: Vec<String>, confirmed: bool },
    /// A query failed on `names` the tables lack, which spell the question's unmatched `words`
    /// (nl2sql.refuse_unrelated): the question asks for what is not there. Either no query ran
    /// and the last one failed so (`sampled` None), or `sampled` = (failed, of) of the model's
    /// first answers did, more than half, whatever their corrections did.
    Missing { words: Vec<String>, names: Vec<String>, sql: String, tables: Vec<String>, sampled: Option<(usize, usize)> },
}

/// SQLSTATE of an abstention: no_data_found (P0002), "no answer", as a PL/pgSQL SELECT INTO
/// STRICT without rows raises it. (A code of nl2sql's own cannot be raised through pgrx 0.18,
/// which maps every SQLSTATE it does not know to XX000.)
pub const ABSTAINED: SqlState = SqlState::Other(*b"P0002");

/// The answer, or an abstention when its confidence is below `min` (nl2sql.on_low_confidence =
/// error). An answer without a confidence (zero-shot: one candidate, nothing to agree with) is
/// never withheld.
#[allow(clippy::result_large_err)]
pub fn abstain_below(a: Answer, min: f64) -> Result<Answer, (AskError, Trace)> {
    let (Some(confidence), Some(vote)) = (a.trace.confidence, a.trace.vote.as_ref()) else { return Ok(a) };
    if confidence >= min {
        return Ok(a);
    }
    let groups = vote
        .groups
        .iter()
        .map(|g| (g.votes, g.rows, g.candidates.first().and_then(|&i| cand_sql(a.trace.candidates.get(i))).unwrap_or_default()))
        .collect();
    let samples = a.trace.samples;
    Err((AskError::Abstained { confidence, min, samples, groups }, a.trace))
}

impl Diagnostic for AskError {
    fn sqlstate(&self) -> SqlState {
        match self {
            AskError::EmptyQuestion => SqlState::InvalidParameterValue,
            AskError::QuestionTooLong { .. } | AskError::HintTooLong { .. } => SqlState::ProgramLimitExceeded,
            AskError::NoTables => SqlState::UndefinedTable,
            AskError::OverBudget { .. } => SqlState::ConfigurationLimitExceeded,
            AskError::BadPrevious(_) => SqlState::InvalidParameterValue,
            AskError::Abstained { .. } | AskError::Unrelated { .. } | AskError::Missing { .. } => ABSTAINED,
            AskError::Llm(r) => r.sqlstate,
            AskError::Refused { error, .. } => error.sqlstate(),
            AskError::Failed { failure, .. } => match failure {
                Failure::Syntax(e) => e.sqlstate(),
                Failure::Execution(r) | Failure::Analysis(r) => r.sqlstate,
                Failure::Timeout { .. } => SqlState::QueryCanceled,
                Failure::Empty => SqlState::InternalError,
                Failure::Cost { .. } => SqlState::ConfigurationLimitExceeded,
            },
        }
    }

    fn message(&self) -> String {
        match self {
            AskError::EmptyQuestion => "question must not be empty".into(),
            AskError::QuestionTooLong { chars } => {
                format!("question is too long ({chars} characters, at most {MAX_QUESTION_CHARS})")
            }
            AskError::HintTooLong { chars } => format!("hint is too long ({chars} characters, at most {MAX_HINT_CHARS})"),
            AskError::NoTables => "no tables to query".into(),
            AskError::OverBudget { .. } => "question does not fit nl2sql.max_tokens_per_call".into(),
            AskError::BadPrevious(why) => why.clone(),
            AskError::Abstained { confidence, min, .. } => {
                format!("nl2sql abstains: confidence {confidence:.2} is below nl2sql.min_confidence ({min:.2})")
            }
            AskError::Unrelated { confirmed: false, .. } => "nl2sql abstains: the question is about nothing this database holds".into(),
            AskError::Unrelated { confirmed: true, .. } | AskError::Missing { .. } => {
                "nl2sql abstains: the tables do not hold what the question asks about".into()
            }
            AskError::Llm(r) => r.message.clone(),
            AskError::Refused { error, .. } => error.message(),
            AskError::Failed { failure, .. } => match failure {
                Failure::Syntax(e) => e.message(),
                Failure::Execution(r) | Failure::Analysis(r) => format!("generated query failed: {}", r.message),
                Failure::Timeout { ms } => format!("generated query exceeded nl2sql.statement_timeout ({ms} ms)"),
                Failure::Empty => "no generated query could be run".into(),
                Failure::Cost { estimate, max } => {
                    format!("generated query's estimated cost {estimate:.0} exceeds nl2sql.max_cost ({max:.0})")
                }
            },
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            AskError::NoTables => Some("The current role can SELECT from no table or view outside system schemas.".into()),
            AskError::Abstained { samples, groups, .. } => {
                let mut d = format!("{samples} candidates sampled; the queries they agreed on, most votes first:");
                let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
                for (votes, rows, sql) in groups.iter().take(5) {
                    let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
                    d.push_str(&format!("\n{}, {}: {sql}", plural(*votes, "vote", "votes"), plural(*rows, "row", "rows")));
                }
                Some(d)
            }
            AskError::Unrelated { words, confirmed, .. } => {
                let words = words.iter().take(10).map(|w| format!("\"{}\"", crate::render::message(w))).collect::<Vec<_>>().join(", ");
                Some(if *confirmed {
                    format!("The model, shown the tables the role may read, said they do not hold what the question asks about; no table, column, description or stored value matches {words}.")
                } else {
                    format!("No table, column, description or stored value the role may read matches a word of the question ({words}).")
                })
            }
            AskError::Missing { words, names, sql, sampled, .. } => {
                // a word or a name the model wrote, on one line (the SQL below keeps its own)
                let quoted = |v: &[String]| v.iter().take(10).map(|w| format!("\"{}\"", crate::render::message(w))).collect::<Vec<_>>().join(", ");
                let why = match sampled {
                    None => format!("no query could be written without {}", quoted(names)),
                    Some((failed, of)) => format!("{failed} of the model's {of} first queries read {}", quoted(names)),
                };
                let why = format!(
                    "No table, column or description the role may read matches {} of the question, and {why}, which no table the role may read has.",
                    quoted(words)
                );
                // The names are those of every failing first query; the SQL shown is one of them.
                Some(match sampled {
                    Some((failed, _)) if *failed > 1 => format!("{why}\nThe first of them: {sql}"),
                    _ => join_detail(Some(why), sql),
                })
            }
            AskError::OverBudget { needed, budget, spent } => Some(format!(
                "One candidate needs about {needed} tokens (its prompt and {MIN_COMPLETION_TOKENS} for the answer); the budget is {budget} and {spent} are spent."
            )),
            AskError::Llm(r) => r.detail.clone(),
            AskError::Refused { sql, error } => Some(join_detail(error.detail(), sql)),
            AskError::Failed { sql: Some(sql), failure } => {
                let inner = match failure {
                    Failure::Execution(r) | Failure::Analysis(r) => r.detail.clone(),
                    _ => None,
                };
                Some(join_detail(inner, sql))
            }
            _ => None,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            AskError::EmptyQuestion => Some("Ask a question in natural language, e.g. SELECT nl2sql('how many orders are there?').".into()),
            AskError::NoTables => Some("Create tables, or GRANT SELECT on them to this role.".into()),
            AskError::OverBudget { .. } => Some("Raise nl2sql.max_tokens_per_call, or lower nl2sql.schema_max_tokens.".into()),
            AskError::Abstained { .. } => Some(
                "Add a hint naming tables, columns or values, run one of the queries above yourself, or SET nl2sql.on_low_confidence = notice.".into(),
            ),
            AskError::Unrelated { tables, .. } | AskError::Missing { tables, .. } => {
                let shown: Vec<&str> = tables.iter().take(12).map(String::as_str).collect();
                let more = if tables.len() > shown.len() { format!(" and {} more", tables.len() - shown.len()) } else { String::new() };
                Some(format!(
                    "The role may read {}{more}; ask about what they hold, name a table in a hint, or SET nl2sql.refuse_unrelated = off.",
                    shown.join(", ")
                ))
            }
            AskError::Llm(r) => r.hint.clone(),
            // Nothing the model wrote was wrong: the catalog changed under it, or holds a shell.
            AskError::Refused { error: error @ (GuardError::CatalogChanged { .. } | GuardError::ShellOperator(_)), .. } => {
                error.hint()
            }
            AskError::Refused { .. } => Some("nl2sql only runs single read-only queries; rephrase the question.".into()),
            AskError::Failed { failure: Failure::Timeout { .. }, .. } => {
                Some("Raise nl2sql.statement_timeout, or ask a narrower question.".into())
            }
            AskError::Failed { failure: Failure::Cost { .. }, .. } => {
                Some("Raise nl2sql.max_cost (0 turns the check off), or ask a narrower question.".into())
            }
            AskError::Failed { .. } => {
                Some("Rephrase the question, or pass a hint (the second argument) naming tables, columns or values.".into())
            }
            _ => None,
        }
    }
}

fn join_detail(first: Option<String>, sql: &str) -> String {
    match first {
        Some(d) => format!("{d}\nGenerated SQL: {sql}"),
        None => format!("Generated SQL: {sql}"),
    }
}

