//! One question in, one checked and executed query out: the zero-shot path with a correction
//! round. Everything outside this crate (PostgreSQL, HTTP) comes in through the two traits.

use crate::answer::extract_sql;
use crate::error::{Diagnostic, Report, SqlState};
use crate::guard::{self, FunctionRef, GuardError};
use crate::llm::{ChatRequest, Completion, LlmError};
use crate::refine::{self, Failure, FailureKind};
use crate::retrieve::{self, ValueHint};
use crate::schema::{Detail, Schema};
use crate::{generate, Execution};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 8_000;
/// Longest hint accepted, in characters.
pub const MAX_HINT_CHARS: usize = 8_000;

/// What the pipeline needs from the database.
pub trait Database {
    /// The calls among `functions` that may resolve to a volatile function.
    fn volatile_functions(&mut self, functions: &[FunctionRef]) -> Result<Vec<FunctionRef>, Report>;
    /// Runs one guarded query in the sandbox.
    fn execute(&mut self, sql: &str) -> Result<Execution, Failure>;
    /// Stored values similar to words of `text` (the value index); none by default.
    fn similar_values(&mut self, _text: &str) -> Vec<ValueHint> {
        Vec::new()
    }
}

/// What the pipeline needs from the model.
pub trait Llm {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError>;
    /// The API key, so that errors can be scrubbed of it.
    fn secret(&self) -> Option<&str> {
        None
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub max_corrections: u32,
    pub max_tokens: u32,
    pub schema_max_tokens: usize,
    pub allowed_functions: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Question {
    pub text: String,
    pub hint: Option<String>,
}

/// The winning query, its rows, and how we got there.
#[derive(Debug, Clone)]
pub struct Answer {
    pub sql: String,
    pub execution: Execution,
    pub trace: Trace,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Trace {
    pub schema_tokens: usize,
    pub schema_detail: String,
    pub tables_shown: usize,
    pub tables_omitted: usize,
    /// Every column the model was shown, as `table.column` written in SQL.
    pub schema_columns: Vec<String>,
    /// Stored values similar to words of the question, shown to the model.
    pub values: Vec<ValueHint>,
    pub llm_calls: Vec<LlmCall>,
    pub candidates: Vec<CandidateTrace>,
    pub wall_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LlmCall {
    pub stage: &'static str,
    /// As reported by the endpoint (None when it reports no usage).
    pub prompt_tokens: Option<u64>,
    /// Our estimate of the whole prompt (schema::estimate_tokens), reported whatever the endpoint says.
    pub prompt_tokens_estimate: usize,
    pub completion_tokens: Option<u64>,
    pub latency_ms: f64,
    pub attempts: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct CandidateTrace {
    pub round: u32,
    pub sql: Option<String>,
    pub ok: bool,
    pub rows: Option<usize>,
    pub exec_ms: Option<f64>,
    pub error: Option<String>,
    pub error_kind: Option<FailureKind>,
}

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
    /// The database could not tell what a function is.
    Catalog(Report),
}

impl Diagnostic for AskError {
    fn sqlstate(&self) -> SqlState {
        match self {
            AskError::EmptyQuestion => SqlState::InvalidParameterValue,
            AskError::QuestionTooLong { .. } | AskError::HintTooLong { .. } => SqlState::ProgramLimitExceeded,
            AskError::NoTables => SqlState::UndefinedTable,
            AskError::Llm(r) | AskError::Catalog(r) => r.sqlstate,
            AskError::Refused { error, .. } => error.sqlstate(),
            AskError::Failed { failure, .. } => match failure {
                Failure::Syntax(e) => e.sqlstate(),
                Failure::Execution(r) => r.sqlstate,
                Failure::Timeout { .. } => SqlState::QueryCanceled,
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
            AskError::Llm(r) | AskError::Catalog(r) => r.message.clone(),
            AskError::Refused { error, .. } => error.message(),
            AskError::Failed { failure, .. } => match failure {
                Failure::Syntax(e) => e.message(),
                Failure::Execution(r) => format!("generated query failed: {}", r.message),
                Failure::Timeout { ms } => format!("generated query exceeded nl2sql.statement_timeout ({ms} ms)"),
            },
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            AskError::NoTables => Some("The current role can SELECT from no table or view outside system schemas.".into()),
            AskError::Llm(r) | AskError::Catalog(r) => r.detail.clone(),
            AskError::Refused { sql, error } => Some(join_detail(error.detail(), sql)),
            AskError::Failed { sql: Some(sql), failure } => {
                let inner = match failure {
                    Failure::Execution(r) => r.detail.clone(),
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
            AskError::Llm(r) | AskError::Catalog(r) => r.hint.clone(),
            AskError::Refused { .. } => Some("nl2sql only runs single read-only queries; rephrase the question.".into()),
            AskError::Failed { failure: Failure::Timeout { .. }, .. } => {
                Some("Raise nl2sql.statement_timeout, or ask a narrower question.".into())
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

/// Checks the question and hint before anything else runs.
pub fn validate(q: &Question) -> Result<(), AskError> {
    if q.text.trim().is_empty() {
        return Err(AskError::EmptyQuestion);
    }
    // Count characters only up to just past the limit: a 1 GB question costs nothing more.
    let chars = q.text.chars().take(MAX_QUESTION_CHARS + 1).count();
    if chars > MAX_QUESTION_CHARS {
        return Err(AskError::QuestionTooLong { chars: q.text.chars().count() });
    }
    if let Some(h) = &q.hint {
        if h.chars().take(MAX_HINT_CHARS + 1).count() > MAX_HINT_CHARS {
            return Err(AskError::HintTooLong { chars: h.chars().count() });
        }
    }
    Ok(())
}

/// Asks the model for a query, checks it, runs it, and corrects it when it fails.
pub fn ask(
    q: &Question,
    schema: &Schema,
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
) -> Result<Answer, (AskError, Trace)> {
    let started = Instant::now();
    let mut trace = Trace::default();
    if let Err(e) = validate(q) {
        return Err((e, trace));
    }
    if schema.is_empty() {
        return Err((AskError::NoTables, trace));
    }
    let rendered = schema.render(settings.schema_max_tokens);
    trace.schema_tokens = rendered.tokens;
    trace.schema_detail = match rendered.detail {
        Detail::Full => "full",
        Detail::Core => "core",
        Detail::Bare => "bare",
    }
    .into();
    trace.tables_shown = rendered.tables_shown;
    trace.tables_omitted = rendered.tables_omitted;
    trace.schema_columns = schema.tables[..rendered.tables_shown]
        .iter()
        .flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.ident, c.ident)))
        .collect();

    let lookup = match q.hint.as_deref() {
        Some(h) => format!("{} {h}", q.text),
        None => q.text.clone(),
    };
    trace.values = db.similar_values(&lookup);
    let values = retrieve::render_values(&trace.values);
    let mut messages = generate::zero_shot(&rendered.text, &values, &q.text, q.hint.as_deref());
    let mut round = 0u32;
    loop {
        let stage = if round == 0 { "generate" } else { "correct" };
        let prompt_tokens_estimate = messages.iter().map(|m| crate::schema::estimate_tokens(&m.content)).sum();
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens: settings.max_tokens };
        let completion = match llm.chat(req) {
            Ok(c) => c,
            Err(e) => {
                let report = Report::from_diagnostic(&e).redact(llm.secret());
                trace.wall_ms = ms(started.elapsed());
                return Err((AskError::Llm(report), trace));
            }
        };
        trace.llm_calls.push(LlmCall {
            stage,
            prompt_tokens: completion.prompt_tokens,
            prompt_tokens_estimate,
            completion_tokens: completion.completion_tokens,
            latency_ms: ms(completion.latency),
            attempts: completion.attempts,
        });
        let (sql, outcome) = evaluate(&completion.content, settings, db);
        let mut cand = CandidateTrace {
            round,
            sql: sql.clone(),
            ok: false,
            rows: None,
            exec_ms: None,
            error: None,
            error_kind: None,
        };
        match outcome {
            Ok(execution) => {
                cand.ok = true;
                cand.rows = Some(execution.rows.len());
                cand.exec_ms = Some(ms(execution.elapsed));
                trace.candidates.push(cand);
                trace.wall_ms = ms(started.elapsed());
                let sql = sql.unwrap_or_default();
                return Ok(Answer { sql, execution, trace });
            }
            Err(Outcome::Refused(error)) => {
                cand.error = Some(error.message());
                trace.candidates.push(cand);
                trace.wall_ms = ms(started.elapsed());
                return Err((AskError::Refused { sql: sql.unwrap_or_default(), error }, trace));
            }
            Err(Outcome::Catalog(r)) => {
                trace.wall_ms = ms(started.elapsed());
                return Err((AskError::Catalog(r), trace));
            }
            Err(Outcome::Failed(failure)) => {
                cand.error = Some(failure.summary());
                cand.error_kind = Some(failure.kind());
                trace.candidates.push(cand);
                if round >= settings.max_corrections {
                    trace.wall_ms = ms(started.elapsed());
                    return Err((AskError::Failed { sql, failure }, trace));
                }
                messages = refine::correction(messages, &completion.content, &failure);
                round += 1;
            }
        }
    }
}

enum Outcome {
    Refused(GuardError),
    Failed(Failure),
    Catalog(Report),
}

/// Extracts, guards and executes one answer of the model.
fn evaluate(content: &str, settings: &Settings, db: &mut dyn Database) -> (Option<String>, Result<Execution, Outcome>) {
    let Some(text) = extract_sql(content) else {
        return (None, Err(Outcome::Failed(Failure::Syntax(GuardError::NoStatement))));
    };
    let guarded = match guard::check(&text) {
        Ok(g) => g,
        Err(e) if e.is_correctable() => return (Some(text), Err(Outcome::Failed(Failure::Syntax(e)))),
        Err(e) => return (Some(text), Err(Outcome::Refused(e))),
    };
    let sql = guarded.sql.clone();
    let volatile = match db.volatile_functions(&guarded.functions) {
        Ok(v) => v,
        Err(r) => return (Some(sql), Err(Outcome::Catalog(r))),
    };
    if let Err(e) = guard::check_volatile(&volatile, &settings.allowed_functions) {
        return (Some(sql), Err(Outcome::Refused(e)));
    }
    let result = db.execute(&sql).map_err(Outcome::Failed);
    (Some(sql), result)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;
    use crate::schema::tests::sample_schema;
    use crate::ColumnInfo;

    /// A scripted model: answers in order, records what it was asked.
    struct Script {
        answers: Vec<Result<String, LlmError>>,
        seen: Vec<Vec<Message>>,
    }

    impl Llm for Script {
        fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
            self.seen.push(req.messages);
            let a = self.answers.remove(0)?;
            Ok(Completion {
                content: a,
                finish_reason: Some("stop".into()),
                prompt_tokens: Some(100),
                completion_tokens: Some(10),
                latency: Duration::from_millis(5),
                attempts: 1,
            })
        }
        fn secret(&self) -> Option<&str> {
            Some("sk-secret-key")
        }
    }

    /// A database where queries mentioning "nme" fail and "slow" times out.
    #[derive(Default)]
    struct FakeDb {
        executed: Vec<String>,
        volatile: Vec<String>,
        values: Vec<ValueHint>,
    }

    impl Database for FakeDb {
        fn volatile_functions(&mut self, f: &[FunctionRef]) -> Result<Vec<FunctionRef>, Report> {
            Ok(f.iter().filter(|f| self.volatile.contains(&f.name)).cloned().collect())
        }
        fn execute(&mut self, sql: &str) -> Result<Execution, Failure> {
            self.executed.push(sql.to_string());
            if sql.contains("nme") {
                return Err(Failure::Execution(Report::new(SqlState::from_code("42703"), "column \"nme\" does not exist")));
            }
            if sql.contains("slow") {
                return Err(Failure::Timeout { ms: 5000 });
            }
            Ok(Execution {
                columns: vec![ColumnInfo { name: "count".into(), type_oid: 20 }],
                rows: vec![vec![Some("6".into())]],
                truncated: false,
                elapsed: Duration::from_millis(1),
            })
        }
        fn similar_values(&mut self, _text: &str) -> Vec<ValueHint> {
            self.values.clone()
        }
    }

    fn settings() -> Settings {
        Settings { max_corrections: 1, max_tokens: 256, schema_max_tokens: 4000, allowed_functions: vec![] }
    }

    fn q(text: &str) -> Question {
        Question { text: text.into(), hint: None }
    }

    fn script(answers: &[&str]) -> Script {
        Script { answers: answers.iter().map(|a| Ok(a.to_string())).collect(), seen: vec![] }
    }

    #[test]
    fn happy_path() {
        let mut llm = script(&["```sql\nSELECT count(*) FROM singer;\n```"]);
        let mut db = FakeDb::default();
        let a = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut llm, &mut db).expect("answer");
        assert_eq!(a.sql, "SELECT count(*) FROM singer");
        assert_eq!(a.execution.rows, vec![vec![Some("6".to_string())]]);
        assert_eq!(a.trace.llm_calls.len(), 1);
        assert!(a.trace.schema_columns.contains(&"singer.name".to_string()));
        assert!(a.trace.schema_columns.contains(&"\"Order Items\".\"select\"".to_string()));
        assert!(llm.seen[0][1].content.contains("### Question: How many singers?"));
    }

    #[test]
    fn similar_values_reach_the_prompt() {
        let mut llm = script(&["SELECT count(*) FROM singer WHERE country = 'France'"]);
        let mut db = FakeDb {
            values: vec![ValueHint { column: "singer.country".into(), value: "France".into(), score: 0.9 }],
            ..Default::default()
        };
        let a = ask(&q("How many singers are from frnace?"), &sample_schema(), &settings(), &mut llm, &mut db).expect("answer");
        let prompt = &llm.seen[0][1].content;
        assert!(prompt.contains("# singer.country: 'France'\n### Question: How many singers are from frnace?"), "{prompt}");
        assert_eq!(a.trace.values.len(), 1);
    }

    #[test]
    fn correction_round_fixes_failed_candidate() {
        let mut llm = script(&["SELECT nme FROM singer", "SELECT name FROM singer"]);
        let mut db = FakeDb::default();
        let a = ask(&q("names"), &sample_schema(), &settings(), &mut llm, &mut db).expect("answer");
        assert_eq!(a.sql, "SELECT name FROM singer");
        assert_eq!(db.executed, vec!["SELECT nme FROM singer", "SELECT name FROM singer"]);
        let second = &llm.seen[1];
        assert_eq!(second.len(), 4);
        assert!(second[3].content.contains("column \"nme\" does not exist"));
        assert_eq!(a.trace.candidates[0].error_kind, Some(FailureKind::UndefinedColumn));
        assert_eq!(a.trace.llm_calls[1].stage, "correct");
    }

    #[test]
    fn gives_up_after_the_last_round() {
        let mut llm = script(&["SELECT nme FROM singer", "SELECT nme FROM singer"]);
        let (e, t) = ask(&q("names"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect_err("fails");
        assert_eq!(e.sqlstate().code(), "42703");
        assert!(e.message().starts_with("generated query failed: column"));
        assert!(e.detail().unwrap_or_default().contains("Generated SQL: SELECT nme FROM singer"));
        assert_eq!(t.candidates.len(), 2);
    }

    #[test]
    fn syntax_error_is_corrected() {
        let mut llm = script(&["I think you want the singers.", "SELECT name FROM singer"]);
        let a = ask(&q("names"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect("answer");
        assert_eq!(a.sql, "SELECT name FROM singer");
    }

    #[test]
    fn timeout_reported_as_query_canceled() {
        let mut s = settings();
        s.max_corrections = 0;
        let mut llm = script(&["SELECT slow FROM singer"]);
        let (e, _) = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("timeout");
        assert_eq!(e.sqlstate(), SqlState::QueryCanceled);
        assert!(e.message().contains("nl2sql.statement_timeout (5000 ms)"));
    }

    #[test]
    fn unsafe_answers_are_refused_without_execution_or_correction() {
        for a in ["DROP TABLE singer", "WITH d AS (DELETE FROM singer RETURNING *) SELECT * FROM d", "SELECT pg_sleep(60)"] {
            let mut llm = script(&[a, "SELECT 1"]);
            let mut db = FakeDb::default();
            let (e, _) = ask(&q("x"), &sample_schema(), &settings(), &mut llm, &mut db).expect_err("refused");
            assert!(matches!(e, AskError::Refused { .. }), "{a}: {e:?}");
            assert!(db.executed.is_empty());
            assert_eq!(llm.seen.len(), 1);
        }
    }

    #[test]
    fn volatile_functions_are_refused_unless_allowed() {
        let mut db = FakeDb { volatile: vec!["my_udf".into()], ..Default::default() };
        let mut llm = script(&["SELECT my_udf()"]);
        let (e, _) = ask(&q("x"), &sample_schema(), &settings(), &mut llm, &mut db).expect_err("refused");
        assert_eq!(e.sqlstate().code(), "42501");
        let mut s = settings();
        s.allowed_functions = vec!["my_udf".into()];
        let mut llm = script(&["SELECT my_udf()"]);
        assert!(ask(&q("x"), &sample_schema(), &s, &mut llm, &mut db).is_ok());
    }

    #[test]
    fn llm_errors_are_scrubbed() {
        let mut llm = Script {
            answers: vec![Err(crate::http::EndpointError {
                service: crate::http::Service::Llm,
                kind: crate::http::ErrorKind::Auth { url: "u".into(), status: 401, body: "key sk-secret-key".into() },
            })],
            seen: vec![],
        };
        let (e, _) = ask(&q("x"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect_err("auth");
        assert_eq!(e.sqlstate().code(), "28000");
        assert!(!format!("{e:?}").contains("sk-secret-key"));
    }

    #[test]
    fn bad_input() {
        let s = sample_schema();
        let run = |text: &str, schema: &Schema| {
            let mut llm = script(&[]);
            ask(&q(text), schema, &settings(), &mut llm, &mut FakeDb::default()).map(|_| ()).map_err(|(e, _)| e)
        };
        assert_eq!(run("  \n\t", &s), Err(AskError::EmptyQuestion));
        let big = "x".repeat(1 << 20);
        assert!(matches!(run(&big, &s), Err(AskError::QuestionTooLong { chars }) if chars == 1 << 20));
        assert_eq!(run("anything", &Schema::default()), Err(AskError::NoTables));
    }
}
