//! One question in, one checked and executed query out. Two paths:
//!
//! - zero-shot: one generation from the whole schema, corrected in up to R rounds;
//! - full (OpenSearch-SQL): extraction -> value and column retrieval -> per-question schema ->
//!   n candidates with a structured chain of thought, in waves that stop early once candidates
//!   agree -> alignments -> sandboxed execution -> corrections by error type -> vote.
//!
//! Everything outside this crate (PostgreSQL, HTTP) comes in through the traits.

use crate::align::{self, Rules, ValueLookup};
use crate::answer::extract_sql;
use crate::error::{Diagnostic, Report, SqlState};
use crate::extract::{self, Extraction};
use crate::guard::{self, GuardError};
use crate::llm::{ChatRequest, Completion, LlmError, Message};
use crate::refine::{self, Failure, FailureKind};
use crate::results;
use crate::retrieve::{self, ValueHint};
use crate::schema::{Detail, Focus, Rendered, Schema};
use crate::vote::{self, Ballot, Outcome};
use crate::{generate, Execution};
use serde::Serialize;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 8_000;
/// Longest hint accepted, in characters.
pub const MAX_HINT_CHARS: usize = 8_000;
/// Completion tokens for the extraction answer (three short lines).
const EXTRACTION_MAX_TOKENS: u32 = 256;

/// What the pipeline needs from the database.
pub trait Database: ValueLookup {
    /// Checks one query on the database's own parse tree and runs it in the sandbox: refused
    /// when the database's policy says no, failed when it ran into an error.
    fn execute(&mut self, sql: &str) -> Result<Execution, Rejected>;
    /// Stored values similar to words of `text` (the value index), leaving out phrases made
    /// only of `skip` words (sorted); none by default.
    fn similar_values(&mut self, _text: &str, _skip: &[String]) -> Vec<ValueHint> {
        Vec::new()
    }
    /// Indexed columns the value searches so far could not read in time (a lock not granted,
    /// an index being replaced), as `table.column`; the list is emptied. None by default.
    fn skipped_value_columns(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Columns whose names are similar to words of `text` (the schema embeddings), as
    /// (table OID, column name); none by default.
    fn similar_columns(&mut self, _text: &str) -> Vec<(u32, String)> {
        Vec::new()
    }
}

/// What the pipeline needs from the model.
pub trait Llm {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError>;
    /// Several requests at once; one answer (or error) each, in order.
    fn chat_many(&mut self, reqs: Vec<ChatRequest>) -> Vec<Result<Completion, LlmError>> {
        reqs.into_iter().map(|r| self.chat(r)).collect()
    }
    /// The API key, so that errors can be scrubbed of it.
    fn secret(&self) -> Option<&str> {
        None
    }
}

/// Why the database did not return rows for a query.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejected {
    /// Its policy refused the query before it ran (final: never sent back for correction).
    Refused(GuardError),
    /// It ran, or tried to, and failed.
    Failed(Failure),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    ZeroShot,
    Full,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    /// Correction rounds (R).
    pub max_corrections: u32,
    pub max_tokens: u32,
    pub schema_max_tokens: usize,
    /// Candidates to generate (n).
    pub candidates: usize,
    /// Candidates asked for in the first wave; the rest only when they disagree.
    pub first_wave: usize,
    /// Votes that end sampling early (adaptive n).
    pub agreement: usize,
    pub temperature: f32,
    pub extraction: bool,
    pub chain_of_thought: bool,
    pub alignment: Rules,
    /// Columns from the schema embeddings added to the per-question schema.
    pub column_matches: usize,
}

impl Settings {
    /// The zero-shot path with one correction round (the foundation's defaults).
    pub fn zero_shot() -> Settings {
        Settings {
            mode: Mode::ZeroShot,
            max_corrections: 1,
            max_tokens: 1024,
            schema_max_tokens: 8000,
            candidates: 1,
            first_wave: 1,
            agreement: 1,
            temperature: 0.0,
            extraction: false,
            chain_of_thought: false,
            alignment: Rules { agent: false, function: false, style: false },
            column_matches: 0,
        }
    }
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
    pub mode: Option<Mode>,
    /// The schema as the generator was shown it (per question in the full path).
    pub schema: String,
    pub schema_tokens: usize,
    pub schema_detail: String,
    pub tables_shown: usize,
    pub tables_omitted: usize,
    /// Every column the generator was shown, as `table.column` written in SQL.
    pub schema_columns: Vec<String>,
    /// Stored values similar to words of the question, shown to the model.
    pub values: Vec<ValueHint>,
    /// Indexed columns the value search left out (their index could not be read in time).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values_skipped: Vec<String>,
    pub extraction: Option<ExtractionTrace>,
    pub llm_calls: Vec<LlmCall>,
    /// LLM round trips one after another (concurrent requests count once).
    pub round_trips: usize,
    /// Time spent waiting for the model on the critical path (the rest is nl2sql's own work).
    pub llm_wait_ms: f64,
    pub candidates: Vec<CandidateTrace>,
    /// Waves of generation requests sent (adaptive n: the second only when the first disagrees).
    pub waves: usize,
    /// Sampling stopped before n candidates because enough agreed.
    pub stopped_early: bool,
    pub vote: Option<Outcome>,
    /// Candidates sampled (round 0): what the confidence is a share of.
    pub samples: usize,
    pub confidence: Option<f64>,
    pub wall_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ExtractionTrace {
    pub parsed: Extraction,
    /// Columns the extraction named that exist.
    pub columns: Vec<String>,
    /// Columns the schema embeddings matched.
    pub column_matches: Vec<String>,
    pub focus: Focus,
    /// Tokens of the whole schema shown to the extraction.
    pub full_schema_tokens: usize,
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
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CandidateTrace {
    /// 0: generated; 1..: correction rounds.
    pub round: u32,
    pub raw: String,
    /// The SQL the model wrote.
    pub sql: Option<String>,
    /// After the alignment rules, when any fired.
    pub aligned: Option<String>,
    pub rules: Vec<String>,
    /// The earlier candidate this one duplicates (same query after normalisation).
    pub duplicate_of: Option<usize>,
    /// The failed (or empty) candidate this correction answers.
    pub corrects: Option<usize>,
    pub ok: bool,
    pub rows: Option<usize>,
    pub exec_ms: Option<f64>,
    pub error: Option<String>,
    pub error_kind: Option<FailureKind>,
    /// PostgreSQL's SQLSTATE of an execution error.
    pub sqlstate: Option<String>,
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
}

impl Diagnostic for AskError {
    fn sqlstate(&self) -> SqlState {
        match self {
            AskError::EmptyQuestion => SqlState::InvalidParameterValue,
            AskError::QuestionTooLong { .. } | AskError::HintTooLong { .. } => SqlState::ProgramLimitExceeded,
            AskError::NoTables => SqlState::UndefinedTable,
            AskError::Llm(r) => r.sqlstate,
            AskError::Refused { error, .. } => error.sqlstate(),
            AskError::Failed { failure, .. } => match failure {
                Failure::Syntax(e) => e.sqlstate(),
                Failure::Execution(r) | Failure::Analysis(r) => r.sqlstate,
                Failure::Timeout { .. } => SqlState::QueryCanceled,
                Failure::Empty => SqlState::InternalError,
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
            AskError::Llm(r) => r.message.clone(),
            AskError::Refused { error, .. } => error.message(),
            AskError::Failed { failure, .. } => match failure {
                Failure::Syntax(e) => e.message(),
                Failure::Execution(r) | Failure::Analysis(r) => format!("generated query failed: {}", r.message),
                Failure::Timeout { ms } => format!("generated query exceeded nl2sql.statement_timeout ({ms} ms)"),
                Failure::Empty => "no generated query could be run".into(),
            },
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            AskError::NoTables => Some("The current role can SELECT from no table or view outside system schemas.".into()),
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
            AskError::Llm(r) => r.hint.clone(),
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

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

fn detail_name(d: Detail) -> String {
    match d {
        Detail::Full => "full",
        Detail::Core => "core",
        Detail::Bare => "bare",
    }
    .into()
}

fn shown_columns(schema: &Schema, rendered: &Rendered) -> Vec<String> {
    schema.tables[..rendered.tables_shown]
        .iter()
        .flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.ident, c.ident)))
        .collect()
}

fn record(trace: &mut Trace, stage: &'static str, messages: &[Message], r: &Result<Completion, LlmError>, secret: Option<&str>) {
    let prompt_tokens_estimate = messages.iter().map(|m| crate::schema::estimate_tokens(&m.content)).sum();
    trace.llm_calls.push(match r {
        Ok(c) => LlmCall {
            stage,
            prompt_tokens: c.prompt_tokens,
            prompt_tokens_estimate,
            completion_tokens: c.completion_tokens,
            latency_ms: ms(c.latency),
            attempts: c.attempts,
            error: None,
        },
        Err(e) => LlmCall {
            stage,
            prompt_tokens: None,
            prompt_tokens_estimate,
            completion_tokens: None,
            latency_ms: 0.0,
            attempts: 0,
            error: Some(Report::from_diagnostic(e).redact(secret).message),
        },
    });
}

/// Asks the model for a query, checks it, runs it, and corrects it when it fails.
// One call a question: the size of the error (it carries the trace) does not matter.
#[allow(clippy::result_large_err)]
pub fn ask(
    q: &Question,
    schema: &Schema,
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
) -> Result<Answer, (AskError, Trace)> {
    let started = Instant::now();
    let mut trace = Trace { mode: Some(settings.mode), ..Default::default() };
    if let Err(e) = validate(q) {
        return Err((e, trace));
    }
    if schema.is_empty() {
        return Err((AskError::NoTables, trace));
    }
    let result = match settings.mode {
        Mode::ZeroShot => zero_shot(q, schema, settings, llm, db, &mut trace),
        Mode::Full => full(q, schema, settings, llm, db, &mut trace),
    };
    trace.wall_ms = ms(started.elapsed());
    match result {
        Ok((sql, execution)) => Ok(Answer { sql, execution, trace }),
        Err(e) => Err((e, trace)),
    }
}

/// The foundation's path: one generation from the whole schema, corrected in up to R rounds.
fn zero_shot(
    q: &Question,
    schema: &Schema,
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> Result<(String, Execution), AskError> {
    let rendered = show_schema(trace, schema, settings);
    let secret = llm.secret().map(str::to_string);
    trace.values = similar_values(q, &[], schema, db);
    trace.values_skipped = db.skipped_value_columns();
    let values = retrieve::render_values(&trace.values);
    let mut messages = generate::zero_shot(&rendered.text, &values, &q.text, q.hint.as_deref());
    let mut round = 0u32;
    loop {
        let stage = if round == 0 { "generate" } else { "correct" };
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens: settings.max_tokens };
        let waited = Instant::now();
        let reply = llm.chat(req);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        record(trace, stage, &messages, &reply, secret.as_deref());
        let completion = reply.map_err(|e| AskError::Llm(Report::from_diagnostic(&e).redact(secret.as_deref())))?;
        let corrects = (round > 0).then(|| trace.candidates.len().saturating_sub(1));
        let mut cand = CandidateTrace { round, corrects, raw: traced(&completion.content), ..Default::default() };
        // The foundation's path: no alignment rules.
        let plain = Settings { alignment: Rules { agent: false, function: false, style: false }, ..settings.clone() };
        let (sql, outcome) = evaluate(&completion.content, &plain, db, schema, &[], &mut cand);
        cand.sql = sql.clone();
        match outcome {
            Ok(execution) => {
                cand.ok = true;
                cand.rows = Some(execution.rows.len());
                cand.exec_ms = Some(ms(execution.elapsed));
                trace.candidates.push(cand);
                let sql = cand_sql(trace.candidates.last()).unwrap_or_default();
                return Ok((sql, execution));
            }
            Err(Outcome_::Refused(error)) => {
                cand.error = Some(error.message());
                trace.candidates.push(cand);
                return Err(AskError::Refused { sql: sql.unwrap_or_default(), error });
            }
            Err(Outcome_::Failed(failure)) => {
                cand.error = Some(failure.summary());
                cand.error_kind = Some(failure.kind());
                trace.candidates.push(cand);
                if round >= settings.max_corrections {
                    return Err(AskError::Failed { sql, failure });
                }
                messages = refine::correction(messages, &completion.content, &failure);
                round += 1;
            }
        }
    }
}

/// The SQL a candidate runs: aligned when rules fired, else as written.
/// Renders the schema the generator sees and records it in the trace.
fn show_schema(trace: &mut Trace, schema: &Schema, settings: &Settings) -> Rendered {
    let rendered = schema.render(settings.schema_max_tokens);
    trace.schema = rendered.text.clone();
    trace.schema_tokens = rendered.tokens;
    trace.schema_detail = detail_name(rendered.detail);
    trace.tables_shown = rendered.tables_shown;
    trace.tables_omitted = rendered.tables_omitted;
    trace.schema_columns = shown_columns(schema, &rendered);
    rendered
}

/// Stored values similar to the question, its hint and `extra` texts, leaving out the words
/// that name the schema's tables and columns.
fn similar_values(q: &Question, extra: &[String], schema: &Schema, db: &mut dyn Database) -> Vec<ValueHint> {
    let mut lookup = q.text.clone();
    for text in q.hint.iter().chain(extra) {
        lookup.push(' ');
        lookup.push_str(text);
    }
    let names = schema.tables.iter().flat_map(|t| std::iter::once(t.name.as_str()).chain(t.columns.iter().map(|c| c.name.as_str())));
    db.similar_values(&lookup, &retrieve::schema_words(names))
}

/// A model's answer as the trace keeps it: at most 64 kB.
fn traced(content: &str) -> String {
    let cut = crate::refine::prefix(content, crate::answer::MAX_SQL_BYTES);
    if cut.len() == content.len() {
        content.to_string()
    } else {
        format!("{cut}… ({} bytes in all)", content.len())
    }
}

fn cand_sql(c: Option<&CandidateTrace>) -> Option<String> {
    c.and_then(|c| c.aligned.clone().or_else(|| c.sql.clone()))
}

enum Outcome_ {
    Refused(GuardError),
    Failed(Failure),
}

/// Extracts, guards, aligns and executes one answer of the model.
fn evaluate(
    content: &str,
    settings: &Settings,
    db: &mut dyn Database,
    schema: &Schema,
    select: &[String],
    cand: &mut CandidateTrace,
) -> (Option<String>, Result<Execution, Outcome_>) {
    let Some(text) = extract_sql(content) else {
        return (None, Err(Outcome_::Failed(Failure::Syntax(GuardError::NoStatement))));
    };
    let guarded = match guard::check(&text) {
        Ok(g) => g,
        Err(e) if e.is_correctable() => return (Some(text), Err(Outcome_::Failed(Failure::Syntax(e)))),
        Err(e) => return (Some(text), Err(Outcome_::Refused(e))),
    };
    let written = guarded.sql.clone();
    let mut run = guarded;
    let rules = settings.alignment;
    if rules.agent || rules.function || rules.style {
        let aligned = align::align(&run.sql, schema, select, db, rules);
        if !aligned.fired.is_empty() {
            // Alignment must not turn a safe query into an unsafe one: check it again.
            match guard::check(&aligned.sql) {
                Ok(g) => {
                    cand.aligned = Some(g.sql.clone());
                    cand.rules = aligned.fired;
                    run = g;
                }
                Err(_) => cand.rules = vec!["alignment dropped: its result did not pass the guard".into()],
            }
        }
    }
    let result = db.execute(&run.sql).map_err(|r| match r {
        Rejected::Refused(e) => Outcome_::Refused(e),
        Rejected::Failed(f) => Outcome_::Failed(f),
    });
    (Some(written), result)
}

/// A query's normal form, to find candidates that wrote the same thing.
/// Parsed and printed again (one layout), then tokenized: unquoted words (keywords and names,
/// which PostgreSQL folds) lowercased; string literals and quoted names kept as written.
fn normal_form(sql: &str) -> String {
    let printed = match Parser::parse_sql(&PostgreSqlDialect {}, sql) {
        Ok(s) => s.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("; "),
        Err(_) => sql.to_string(),
    };
    match Tokenizer::new(&PostgreSqlDialect {}, &printed).tokenize() {
        Ok(tokens) => tokens
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .map(|t| match t {
                Token::Word(w) if w.quote_style.is_none() => w.value.to_lowercase(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => printed.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// A candidate of the full path and its result.
struct Pool {
    /// Executed candidates, by trace index: (normal form, execution).
    executed: Vec<(usize, String, Execution)>,
    /// Failed candidates, by trace index, with their conversation for the correction round.
    failed: Vec<(usize, Vec<Message>, String, Failure)>,
    /// Normal forms of failed and refused candidates, by trace index: the same query again is
    /// neither run nor corrected twice.
    failed_forms: Vec<(usize, String)>,
    refused: Option<(String, GuardError)>,
    /// The last failure, with the SQL that failed, for the error when nothing succeeds.
    last: Option<(Option<String>, Failure)>,
    /// The conversation that produced each executed candidate, by trace index (for the
    /// correction of an empty result).
    conversations: HashMap<usize, Vec<Message>>,
    /// Candidates already sent back for correction.
    corrected: HashSet<usize>,
}

/// The OpenSearch-SQL path.
fn full(
    q: &Question,
    schema: &Schema,
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> Result<(String, Execution), AskError> {
    let secret = llm.secret().map(str::to_string);
    let llm_error = |e: &LlmError| AskError::Llm(Report::from_diagnostic(e).redact(secret.as_deref()));
    let whole = schema.render(settings.schema_max_tokens);

    // Extraction: columns, entities, and what the answer returns.
    let mut ex = Extraction::default();
    if settings.extraction {
        let messages = extract::messages(&whole.text, &q.text, q.hint.as_deref());
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens: EXTRACTION_MAX_TOKENS };
        let waited = Instant::now();
        let reply = llm.chat(req);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        record(trace, "extract", &messages, &reply, secret.as_deref());
        ex = extract::parse(&reply.map_err(|e| llm_error(&e))?.content);
    }
    // Value retrieval for the question and the entities (split retrieval), column retrieval.
    trace.values = similar_values(q, &ex.entities, schema, db);
    trace.values_skipped = db.skipped_value_columns();
    let mut chosen = extract::resolve(schema, &ex.columns);
    for c in extract::resolve(schema, &ex.value_columns) {
        if !chosen.contains(&c) {
            chosen.push(c);
        }
    }
    let mut matched: Vec<(usize, usize)> = Vec::new();
    if settings.extraction && settings.column_matches > 0 {
        for (oid, column) in db.similar_columns(&q.text).into_iter().take(settings.column_matches) {
            if let Some(t) = schema.tables.iter().position(|t| t.oid == oid) {
                if let Some(c) = schema.tables[t].columns.iter().position(|c| c.name == column) {
                    matched.push((t, c));
                }
            }
        }
    }
    // Columns the retrieved values live in belong to the question too.
    let mut from_values: Vec<(usize, usize)> = Vec::new();
    for v in &trace.values {
        for (t, table) in schema.tables.iter().enumerate() {
            if let Some(c) = table.columns.iter().position(|c| v.column == format!("{}.{}", table.ident, c.ident)) {
                from_values.push((t, c));
            }
        }
    }
    let focus = if settings.extraction && !chosen.is_empty() {
        let mut all = chosen.clone();
        all.extend(matched.iter().copied());
        all.extend(from_values.iter().copied());
        all.sort_unstable();
        all.dedup();
        schema.focus(&all)
    } else {
        Focus { schema: schema.clone(), ..Default::default() }
    };
    if settings.extraction {
        let name = |&(t, c): &(usize, usize)| format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident);
        trace.extraction = Some(ExtractionTrace {
            parsed: ex.clone(),
            columns: chosen.iter().map(name).collect(),
            column_matches: matched.iter().map(name).collect(),
            focus: focus.clone(),
            full_schema_tokens: whole.tokens,
        });
    }
    let rendered = show_schema(trace, &focus.schema, settings);

    // Generation in waves, alignment, execution, vote.
    let values = retrieve::render_values(&trace.values);
    let messages = if settings.chain_of_thought {
        generate::structured(&rendered.text, &values, &ex.select, &q.text, q.hint.as_deref())
    } else {
        generate::zero_shot(&rendered.text, &values, &q.text, q.hint.as_deref())
    };
    let n = settings.candidates.max(1);
    let temperature = if n == 1 { 0.0 } else { settings.temperature };
    let mut pool = Pool {
        executed: vec![],
        failed: vec![],
        failed_forms: vec![],
        refused: None,
        last: None,
        conversations: HashMap::new(),
        corrected: HashSet::new(),
    };
    let waves = [settings.first_wave.clamp(1, n), n - settings.first_wave.clamp(1, n)];
    for (w, size) in waves.into_iter().enumerate() {
        if size == 0 {
            continue;
        }
        if w > 0 && agreed(&pool, trace, settings) {
            trace.stopped_early = true;
            break;
        }
        trace.waves += 1;
        let reqs = vec![ChatRequest { messages: messages.clone(), temperature, max_tokens: settings.max_tokens }; size];
        let waited = Instant::now();
        let replies = llm.chat_many(reqs);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        let mut errors = Vec::new();
        for reply in replies {
            record(trace, "generate", &messages, &reply, secret.as_deref());
            match reply {
                Ok(c) => consider(&c.content, 0, None, messages.clone(), settings, db, schema, &ex.select, &mut pool, trace),
                Err(e) => errors.push(e),
            }
        }
        // Every request of the first wave failed: the endpoint is down, say so.
        if w == 0 && errors.len() == size {
            return Err(llm_error(&errors[0]));
        }
    }

    // Corrections by error type, concurrently, while no group of candidates agrees.
    for round in 1..=settings.max_corrections {
        let non_empty = pool.executed.iter().any(|(_, _, e)| !e.rows.is_empty());
        if agreed(&pool, trace, settings) && non_empty {
            break;
        }
        // Nothing returned rows: the empty ones are worth another look too, once each.
        if !non_empty {
            for (i, _, e) in &pool.executed {
                if e.rows.is_empty() && !pool.corrected.contains(i) {
                    let conv = pool.conversations.get(i).cloned().unwrap_or_else(|| messages.clone());
                    let raw = trace.candidates.get(*i).map(|c| c.raw.clone()).unwrap_or_default();
                    pool.failed.push((*i, conv, raw, Failure::Empty));
                }
            }
        }
        let failed = std::mem::take(&mut pool.failed);
        if failed.is_empty() {
            break;
        }
        pool.corrected.extend(failed.iter().map(|(i, ..)| *i));
        let convs: Vec<Vec<Message>> = failed.iter().map(|(_, conv, raw, f)| refine::correction(conv.clone(), raw, f)).collect();
        let reqs = convs
            .iter()
            .map(|m| ChatRequest { messages: m.clone(), temperature: 0.0, max_tokens: settings.max_tokens })
            .collect();
        let waited = Instant::now();
        let replies = llm.chat_many(reqs);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        for ((reply, conv), (parent, ..)) in replies.into_iter().zip(convs).zip(failed) {
            record(trace, "correct", &conv, &reply, secret.as_deref());
            if let Ok(c) = reply {
                consider(&c.content, round, Some(parent), conv, settings, db, schema, &ex.select, &mut pool, trace);
            }
        }
    }

    // The vote.
    let ballots: Vec<Ballot> = ballots(&pool, trace);
    trace.samples = samples(trace);
    if let Some(outcome) = vote::vote(&ballots, samples(trace)) {
        let winner = outcome.winner;
        trace.confidence = Some(outcome.confidence);
        trace.vote = Some(outcome);
        if let Some((_, _, exec)) = pool.executed.iter().find(|(i, _, _)| *i == winner) {
            let sql = cand_sql(trace.candidates.get(winner)).unwrap_or_default();
            return Ok((sql, exec.clone()));
        }
    }
    // Nothing ran: the last failure (the most corrected attempt), a refusal only when every
    // candidate was refused.
    match (pool.last, pool.refused) {
        (Some((sql, failure)), _) => Err(AskError::Failed { sql, failure }),
        (None, Some((sql, error))) => Err(AskError::Refused { sql, error }),
        (None, None) => Err(AskError::Failed { sql: None, failure: Failure::Syntax(GuardError::NoStatement) }),
    }
}

/// Whether the executed candidates already agree enough to stop sampling.
fn agreed(pool: &Pool, trace: &Trace, settings: &Settings) -> bool {
    let ballots = ballots(pool, trace);
    vote::vote(&ballots, samples(trace))
        .and_then(|o| o.groups.first().map(|g| g.votes >= settings.agreement && g.rows > 0))
        .unwrap_or(false)
}

/// Candidates sampled from the model (round 0): what confidence is a share of.
fn samples(trace: &Trace) -> usize {
    trace.candidates.iter().filter(|c| c.round == 0).count()
}

/// Where a sample's answer ended up: a duplicate goes to the candidate it duplicates, a
/// failed or empty one to its correction, until an executed candidate (or a dead end).
fn final_answer(trace: &Trace, start: usize) -> Option<usize> {
    let mut at = start;
    for _ in 0..=trace.candidates.len() {
        let c = trace.candidates.get(at)?;
        if let Some(d) = c.duplicate_of {
            at = d;
            continue;
        }
        let settled = c.ok && c.rows.is_some_and(|r| r > 0);
        match trace.candidates.iter().position(|x| x.corrects == Some(at)) {
            Some(fix) if !settled => at = fix,
            _ => return c.rows.is_some().then_some(at),
        }
    }
    None
}

/// One ballot an executed candidate; its weight is the samples whose answer it is.
fn ballots(pool: &Pool, trace: &Trace) -> Vec<Ballot> {
    let finals: Vec<Option<usize>> =
        (0..trace.candidates.len()).filter(|&i| trace.candidates[i].round == 0).map(|i| final_answer(trace, i)).collect();
    pool.executed
        .iter()
        .map(|(i, _, e)| Ballot {
            candidate: *i,
            rows: e.rows.clone(),
            ordered: cand_sql(trace.candidates.get(*i)).and_then(|s| results::orders_rows(&s)).unwrap_or(false),
            elapsed: e.elapsed,
            weight: finals.iter().filter(|f| **f == Some(*i)).count(),
        })
        .collect()
}

/// Evaluates one answer into the pool: duplicates of an executed candidate add its weight
/// without running again.
#[allow(clippy::too_many_arguments)]
fn consider(
    content: &str,
    round: u32,
    corrects: Option<usize>,
    conversation: Vec<Message>,
    settings: &Settings,
    db: &mut dyn Database,
    schema: &Schema,
    select: &[String],
    pool: &mut Pool,
    trace: &mut Trace,
) {
    let index = trace.candidates.len();
    let mut cand = CandidateTrace { round, corrects, raw: traced(content), ..Default::default() };
    // Same query as an executed candidate: a vote for it, no second run.
    if let Some(text) = extract_sql(content) {
        if guard::check(&text).is_ok() {
            let form = normal_form(&text);
            if let Some((first, _, _)) = pool.executed.iter().find(|(i, f, _)| {
                *f == form || trace.candidates.get(*i).and_then(|c| c.sql.as_deref()).is_some_and(|s| normal_form(s) == form)
            }) {
                cand.sql = Some(text);
                cand.duplicate_of = Some(*first);
                cand.ok = true;
                trace.candidates.push(cand);
                return;
            }
            if let Some((first, _)) = pool.failed_forms.iter().find(|(_, f)| *f == form) {
                cand.sql = Some(text);
                cand.duplicate_of = Some(*first);
                cand.error = trace.candidates.get(*first).and_then(|c| c.error.clone());
                cand.error_kind = trace.candidates.get(*first).and_then(|c| c.error_kind);
                trace.candidates.push(cand);
                return;
            }
        }
    }
    let (sql, outcome) = evaluate(content, settings, db, schema, select, &mut cand);
    cand.sql = sql.clone();
    match outcome {
        Ok(execution) => {
            cand.ok = true;
            cand.rows = Some(execution.rows.len());
            cand.exec_ms = Some(ms(execution.elapsed));
            let form = normal_form(&cand_sql(Some(&cand)).unwrap_or_default());
            trace.candidates.push(cand);
            pool.executed.push((index, form, execution));
            pool.conversations.insert(index, conversation);
        }
        Err(Outcome_::Refused(error)) => {
            cand.error = Some(error.message());
            if let Some(s) = &sql {
                pool.failed_forms.push((index, normal_form(s)));
            }
            trace.candidates.push(cand);
            if pool.refused.is_none() {
                pool.refused = Some((sql.unwrap_or_default(), error));
            }
        }
        Err(Outcome_::Failed(failure)) => {
            cand.error = Some(failure.summary());
            cand.error_kind = Some(failure.kind());
            if let Failure::Execution(r) | Failure::Analysis(r) = &failure {
                cand.sqlstate = Some(r.sqlstate.code().to_string());
            }
            let failed_sql = cand_sql(Some(&cand));
            if let Some(s) = &cand.sql {
                pool.failed_forms.push((index, normal_form(s)));
            }
            trace.candidates.push(cand);
            pool.last = Some((failed_sql, failure.clone()));
            pool.failed.push((index, conversation, content.to_string(), failure));
        }
    }
}

#[cfg(test)]
mod tests;
