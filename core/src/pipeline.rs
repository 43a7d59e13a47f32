//! One question in, one checked and executed query out. Two paths:
//!
//! - zero-shot: one generation from the whole schema, corrected in up to R rounds;
//! - full (OpenSearch-SQL): extraction -> value and column retrieval -> per-question schema ->
//!   n candidates with a structured chain of thought, in waves that stop early once candidates
//!   agree -> alignments -> sandboxed execution -> corrections by error type -> vote.
//!
//! Everything outside this crate (PostgreSQL, HTTP) comes in through the traits.

use crate::align::{self, Context, Rules, ValueLookup};
use crate::answer::extract_sql;
use crate::error::{Diagnostic, Report, SqlState};
use crate::examples::{self, Example};
use crate::extract::{self, Extraction};
use crate::guard::{self, GuardError};
use crate::llm::{ChatRequest, Completion, LlmError, Message};
use crate::prompt::Layout;
use crate::refine::{self, Failure, FailureKind};
use crate::results;
use crate::retrieve::{self, ValueHint};
use crate::schema::{Detail, Focus, Linking, Rendered, Schema};
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
/// Longest earlier query a follow-up question carries, in bytes.
pub const MAX_PREVIOUS_SQL_BYTES: usize = 64 * 1024;
/// Least similarity for a found column to join the extraction's choice: every column of a
/// table the question names scores about 0.55 through the table's name alone.
pub const COLUMN_MATCH_MIN_SCORE: f32 = 0.6;
/// Columns retrieval links to a question on a wide schema, at least (nl2sql.column_matches).
const LINKED_COLUMNS: usize = 8;
/// Least completion a request is sent with under a token budget (a short query).
pub const MIN_COMPLETION_TOKENS: usize = 64;

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
    /// Up to `k` columns whose names or descriptions are similar to `text` (the schema
    /// embeddings), best first, as (table OID, column name, score); none by default.
    fn similar_columns(&mut self, _text: &str, _k: usize) -> Vec<(u32, String, f32)> {
        Vec::new()
    }
    /// Attaches sampled statistics to `tables` of `schema` (nl2sql.sample_rows) where the
    /// schema came without them (a wide one); nothing by default.
    fn sample(&mut self, _schema: &mut Schema, _tables: &[usize]) {}
    /// Up to `k` enabled examples whose masked question is nearest `masked`, among those whose
    /// SQL reads only what the caller may read; none by default.
    fn similar_examples(&mut self, _masked: &str, _k: usize) -> Vec<Example> {
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
    /// One answer with its confidence (the probability of its least likely token) where the
    /// endpoint gives one; by default a plain request, whose answer has none.
    fn chat_scored(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        self.chat(req)
    }
    /// Whether [`Llm::chat_scored`] may give a confidence (not known to give none); false by
    /// default.
    fn can_score(&self) -> bool {
        false
    }
    /// `n` answers to one request (the candidates): by default `n` copies of it at once; an
    /// endpoint that takes OpenAI's `n` parameter answers them in one request.
    fn sample(&mut self, req: ChatRequest, n: usize) -> Vec<Result<Completion, LlmError>> {
        self.chat_many(vec![req; n])
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
    /// Interactive-T2S: an agent with four tools, one action a turn.
    Interactive,
}

/// How a candidate was asked for: generators differ in their prompt, not only in temperature,
/// so their mistakes differ too and the vote can collect what each gets right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Generator {
    /// The schema one column a line with values and samples (Open-SQL), the similar stored
    /// values, the examples.
    OpenSql,
    /// The schema as CREATE TABLE statements (names, types, keys); no examples, no values.
    CreateTable,
}

impl Generator {
    pub fn name(self) -> &'static str {
        match self {
            Generator::OpenSql => "open_sql",
            Generator::CreateTable => "create_table",
        }
    }

    pub fn parse(name: &str) -> Option<Generator> {
        match name.trim() {
            "open_sql" => Some(Generator::OpenSql),
            "create_table" => Some(Generator::CreateTable),
            _ => None,
        }
    }

    fn layout(self) -> Layout {
        match self {
            Generator::OpenSql => Layout::OpenSql,
            Generator::CreateTable => Layout::CreateTable,
        }
    }
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
    /// Extraction runs only when the whole schema is larger than this (estimated tokens):
    /// a smaller one goes whole to the candidates, and their prompt starts as every other's.
    pub extraction_min_tokens: usize,
    /// On a schema wider than schema_max_tokens, the extraction still sees it whole when it
    /// fits this (estimated tokens): one prompt for every question, which an endpoint caches.
    pub extraction_max_tokens: usize,
    pub chain_of_thought: bool,
    pub alignment: Rules,
    /// Columns from the schema embeddings added to the per-question schema.
    pub column_matches: usize,
    /// The prompts candidates are asked with (full path). With more than one, the first wave
    /// asks each once at temperature 0; later candidates take turns at `temperature`.
    pub generators: Vec<Generator>,
    /// Examples shown as few-shot (k); 0 shows none.
    pub examples: usize,
    /// No row data in any prompt: no samples, categorical values or retrieved values; examples
    /// with their literals masked (nl2sql.privacy).
    pub privacy: bool,
    /// Most tokens (prompt and completion) the question may use (nl2sql.max_tokens_per_call).
    pub token_budget: Option<usize>,
    /// Turns of the interactive agent (nl2sql.agent_max_turns).
    pub agent_max_turns: usize,
    /// With several generators, the first is asked alone first, and its answer stands alone
    /// (no other candidate is asked) when it ran, returned rows, and its least likely token
    /// was at least this probable (nl2sql.alone_confidence); 0 asks the whole first wave, 1
    /// asks the first alone and scores it but never lets it stand alone (to choose a threshold).
    pub alone: f32,
}

impl Settings {
    /// The zero-shot path with one correction round (the foundation's defaults).
    pub fn zero_shot() -> Settings {
        Settings {
            mode: Mode::ZeroShot,
            max_corrections: 1,
            max_tokens: 1024,
            schema_max_tokens: 3000,
            candidates: 1,
            first_wave: 1,
            agreement: 1,
            temperature: 0.0,
            extraction: false,
            extraction_min_tokens: 0,
            extraction_max_tokens: 0,
            chain_of_thought: false,
            alignment: Rules { agent: false, function: false, style: false },
            column_matches: 0,
            generators: vec![Generator::OpenSql],
            examples: 0,
            privacy: false,
            token_budget: None,
            agent_max_turns: 10,
            alone: 0.0,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Question {
    pub text: String,
    pub hint: Option<String>,
    /// The question this one follows ("and in 2015?"), with the query that answered it.
    pub previous: Option<Previous>,
}

/// An earlier question and its query, for a follow-up.
#[derive(Debug, Clone, Serialize)]
pub struct Previous {
    pub question: String,
    pub sql: String,
    /// Its row in nl2sql.history, when it was given by id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_id: Option<i64>,
}

impl Question {
    /// The section a follow-up adds before the question (empty otherwise).
    fn follow_up(&self) -> String {
        self.previous.as_ref().map(|p| crate::prompt::follow_up(&p.question, &p.sql)).unwrap_or_default()
    }

    /// Everything the user said for this question, for the alignment rules that read its words:
    /// the question, the hint, and for a follow-up the earlier question and its query (whose
    /// tables the follow-up keeps).
    fn said(&self) -> String {
        let mut out = self.text.clone();
        for part in [self.hint.as_deref(), self.previous.as_ref().map(|p| p.question.as_str()), self.previous.as_ref().map(|p| p.sql.as_str())].into_iter().flatten() {
            out.push('\n');
            out.push_str(part);
        }
        out
    }
}

/// Tokens one question used: the endpoint's usage where it reports one, else our estimate.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tokens {
    pub prompt: usize,
    pub completion: usize,
    /// nl2sql.max_tokens_per_call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<usize>,
    /// What the budget left out (a candidate, a correction round, the extraction).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<String>,
}

impl Tokens {
    pub fn total(&self) -> usize {
        self.prompt + self.completion
    }

    /// How many of `wanted` requests of about `prompt` tokens each fit what is left, and the
    /// completion tokens each may use (at most `max_tokens`); (0, 0) when not one fits.
    pub fn plan(&self, prompt: usize, wanted: usize, max_tokens: u32) -> (usize, u32) {
        let Some(limit) = self.budget else { return (wanted, max_tokens) };
        let left = limit.saturating_sub(self.total());
        let need = prompt + MIN_COMPLETION_TOKENS;
        let k = wanted.min(left / need.max(1));
        if k == 0 {
            return (0, 0);
        }
        (k, (max_tokens as usize).min(left / k - prompt) as u32)
    }

    /// The error when not one request of about `prompt` tokens fits what is left.
    fn over_budget(&self, prompt: usize) -> AskError {
        AskError::OverBudget { needed: prompt + MIN_COMPLETION_TOKENS, budget: self.budget.unwrap_or(0), spent: self.total() }
    }
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
    /// Every column the generator was shown, in any form, as `table.column` written in SQL.
    pub schema_columns: Vec<String>,
    /// On a schema too wide to show whole: the columns retrieval linked to the question before
    /// any model call (they keep their detail in the prompts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub linked: Vec<String>,
    /// Stored values similar to words of the question, shown to the model.
    pub values: Vec<ValueHint>,
    /// Indexed columns the value search left out (their index could not be read in time).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values_skipped: Vec<String>,
    pub extraction: Option<ExtractionTrace>,
    /// Why the full path did without its extraction round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extraction_skipped: Option<String>,
    /// The extraction call failed: the candidates were shown the whole schema instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extraction_failed: Option<String>,
    /// The question as examples are searched by: names and values replaced by placeholders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masked_question: Option<String>,
    /// Examples shown to the candidates (few-shot), nearest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
    /// The interactive agent's turns: thought, action, observation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<crate::agent::Turn>,
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
    /// The first generator's answer stood alone: its confidence (nl2sql.alone_confidence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alone: Option<f32>,
    pub vote: Option<Outcome>,
    /// Candidates sampled (round 0): what the confidence is a share of.
    pub samples: usize,
    pub confidence: Option<f64>,
    /// The last request's answer came with the endpoint's usage (its other answers add none).
    #[serde(skip)]
    request_usage: bool,
    /// Tokens used, against nl2sql.max_tokens_per_call.
    pub tokens: Tokens,
    /// The earlier question this one follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows: Option<Previous>,
    /// Row data was kept out of every prompt (nl2sql.privacy).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub privacy: bool,
    /// This call's row in nl2sql.history (set after the pipeline, by the database layer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_id: Option<i64>,
    /// Why the call was not recorded in nl2sql.history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_skipped: Option<String>,
    pub wall_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ExtractionTrace {
    pub parsed: Extraction,
    /// Columns the extraction named that exist.
    pub columns: Vec<String>,
    /// Columns the schema embeddings matched.
    pub column_matches: Vec<String>,
    /// Found columns and stored values of units of the database the extraction chose nothing
    /// from, left out of the per-question schema and the prompts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<String>,
    pub focus: Focus,
    /// Tokens of the whole schema shown to the extraction.
    pub full_schema_tokens: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct LlmCall {
    pub stage: &'static str,
    /// As reported by the endpoint (None when it reports no usage).
    pub prompt_tokens: Option<u64>,
    /// Our estimate of the whole prompt (schema::estimate_tokens), reported whatever the endpoint
    /// says; 0 on the later answers of one request (the prompt was sent once).
    pub prompt_tokens_estimate: usize,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the endpoint took from its cache (as reported; llama.cpp, vLLM, OpenAI).
    pub cached_tokens: Option<u64>,
    /// Answers this one request returned (OpenAI's `n`), on its first answer; the usage
    /// above is the whole request's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choices: Option<u32>,
    /// This answer came in the same response as the call before it: its usage is counted there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub same_request: bool,
    pub latency_ms: f64,
    pub attempts: u32,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CandidateTrace {
    /// 0: generated; 1..: correction rounds.
    pub round: u32,
    /// The prompt it was asked with (full path); a correction keeps its parent's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator: Option<&'static str>,
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
    /// The probability of the answer's least likely token, where it was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
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
    /// Not one candidate fits nl2sql.max_tokens_per_call.
    OverBudget { needed: usize, budget: usize, spent: usize },
    /// The earlier question or query of a follow-up is empty or too long.
    BadPrevious(String),
    /// The candidates agreed less than nl2sql.min_confidence and nl2sql.on_low_confidence is
    /// error: no answer. Each group's votes, rows and query, best first.
    Abstained { confidence: f64, min: f64, samples: usize, groups: Vec<(usize, usize, String)> },
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
            AskError::Abstained { .. } => ABSTAINED,
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
            AskError::Llm(r) => r.hint.clone(),
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
    if let Some(p) = &q.previous {
        if p.question.trim().is_empty() || p.sql.trim().is_empty() {
            return Err(AskError::BadPrevious("a follow-up needs the earlier question and its query".into()));
        }
        if p.question.chars().take(MAX_QUESTION_CHARS + 1).count() > MAX_QUESTION_CHARS {
            return Err(AskError::BadPrevious(format!("earlier question is too long (at most {MAX_QUESTION_CHARS} characters)")));
        }
        if p.sql.len() > MAX_PREVIOUS_SQL_BYTES {
            return Err(AskError::BadPrevious(format!("earlier query is too long (at most {MAX_PREVIOUS_SQL_BYTES} bytes)")));
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
        Detail::Names => "names",
    }
    .into()
}

fn record(trace: &mut Trace, stage: &'static str, messages: &[Message], r: &Result<Completion, LlmError>, secret: Option<&str>) {
    let prompt_tokens_estimate = estimate(messages);
    // The budget's count: the endpoint's usage where it reports one (once per request), else
    // our estimate (a failed request counts its prompt: it may have been read).
    match r {
        Ok(c) if c.same_request => {
            if c.completion_tokens.is_none() && !trace.request_usage {
                trace.tokens.completion += crate::schema::estimate_tokens(&c.content);
            }
        }
        Ok(c) => {
            trace.request_usage = c.completion_tokens.is_some();
            trace.tokens.prompt += c.prompt_tokens.map_or(prompt_tokens_estimate, |p| p as usize);
            trace.tokens.completion +=
                c.completion_tokens.map_or_else(|| crate::schema::estimate_tokens(&c.content), |t| t as usize);
        }
        Err(_) => trace.tokens.prompt += prompt_tokens_estimate,
    }
    trace.llm_calls.push(match r {
        Ok(c) => LlmCall {
            stage,
            prompt_tokens: c.prompt_tokens,
            // The prompt was sent once for all the answers of one request.
            prompt_tokens_estimate: if c.same_request { 0 } else { prompt_tokens_estimate },
            completion_tokens: c.completion_tokens,
            cached_tokens: c.cached_tokens,
            choices: (c.choices > 1 && !c.same_request).then_some(c.choices),
            same_request: c.same_request,
            latency_ms: ms(c.latency),
            attempts: c.attempts,
            error: None,
        },
        Err(e) => LlmCall {
            stage,
            prompt_tokens: None,
            prompt_tokens_estimate,
            completion_tokens: None,
            cached_tokens: None,
            choices: None,
            same_request: false,
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
    let mut trace = Trace {
        mode: Some(settings.mode),
        tokens: Tokens { budget: settings.token_budget, ..Default::default() },
        follows: q.previous.clone(),
        privacy: settings.privacy,
        ..Default::default()
    };
    if let Err(e) = validate(q) {
        return Err((e, trace));
    }
    if schema.is_empty() {
        return Err((AskError::NoTables, trace));
    }
    // Privacy: nothing read from rows reaches a prompt, whatever the caller loaded.
    let stripped;
    let schema = if settings.privacy {
        stripped = schema.without_data();
        &stripped
    } else {
        schema
    };
    let result = match settings.mode {
        Mode::ZeroShot => zero_shot(q, schema, settings, llm, db, &mut trace),
        Mode::Full => full(q, schema, settings, llm, db, &mut trace),
        Mode::Interactive => interactive(q, schema, settings, llm, db, &mut trace),
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
    let mut rendered = show_schema(trace, schema, settings);
    let wide = rendered.detail < Detail::Full || rendered.tables_omitted > 0;
    if wide {
        // Linking looks the question's values up already.
        let linking = link(q, schema, settings, db, trace);
        rendered = show_linked(trace, &sampled(schema, &linking.columns, settings, db), &linking, settings);
    }
    let secret = llm.secret().map(str::to_string);
    if !settings.privacy {
        if !wide {
            trace.values = similar_values(q, &[], schema, db);
        }
        trace.values_skipped = db.skipped_value_columns();
    }
    let sections = retrieve::render_values(&trace.values) + &q.follow_up();
    let mut messages = generate::zero_shot(&rendered.text, &sections, &q.text, q.hint.as_deref());
    let mut round = 0u32;
    let mut last_failure: Option<AskError> = None;
    loop {
        let stage = if round == 0 { "generate" } else { "correct" };
        let prompt = estimate(&messages);
        let (fits, max_tokens) = trace.tokens.plan(prompt, 1, settings.max_tokens);
        if fits == 0 {
            return Err(match last_failure {
                // A correction that does not fit: the failure stands.
                Some(failed) => {
                    trace.tokens.cut.push("correction round".into());
                    failed
                }
                None => trace.tokens.over_budget(prompt),
            });
        }
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens };
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
        let (sql, outcome) = evaluate(&completion.content, &plain, db, schema, Context::default(), &mut cand);
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
                messages = refine::correction(messages, &completion.content, &failure, settings.privacy);
                last_failure = Some(AskError::Failed { sql, failure });
                round += 1;
            }
        }
    }
}

/// Renders the schema the generator sees and records it in the trace.
fn show_schema(trace: &mut Trace, schema: &Schema, settings: &Settings) -> Rendered {
    shown(trace, schema.render(settings.schema_max_tokens))
}

/// Like show_schema, for Open-SQL's variable-length rendering of `schema` around `linking`.
fn show_linked(trace: &mut Trace, schema: &Schema, linking: &Linking, settings: &Settings) -> Rendered {
    shown(trace, schema.render_linked(settings.schema_max_tokens, linking))
}

/// Records the schema the generator sees in the trace.
fn shown(trace: &mut Trace, rendered: Rendered) -> Rendered {
    trace.schema = rendered.text.clone();
    trace.schema_tokens = rendered.tokens;
    trace.schema_detail = detail_name(rendered.detail);
    trace.tables_shown = rendered.tables_shown;
    trace.tables_omitted = rendered.tables_omitted;
    trace.schema_columns = rendered.columns.clone();
    rendered
}

/// `schema` with the tables of `columns` sampled (see sampled_tables).
fn sampled(schema: &Schema, columns: &[(usize, usize)], settings: &Settings, db: &mut dyn Database) -> Schema {
    sampled_tables(schema, columns.iter().map(|c| c.0).collect(), settings, db)
}

/// `schema` with `tables` sampled (a wide schema comes without samples; the database caches
/// them); as it is under nl2sql.privacy, which reads no rows for a prompt.
fn sampled_tables(schema: &Schema, mut tables: Vec<usize>, settings: &Settings, db: &mut dyn Database) -> Schema {
    if settings.privacy {
        return schema.clone();
    }
    tables.sort_unstable();
    tables.dedup();
    let mut s = schema.clone();
    if !tables.is_empty() {
        db.sample(&mut s, &tables);
    }
    s
}

/// The (table, column) of `schema` that a column search found as (table OID, column name).
fn column_at(schema: &Schema, oid: u32, column: &str) -> Option<(usize, usize)> {
    let t = schema.tables.iter().position(|t| t.oid == oid)?;
    schema.tables[t].columns.iter().position(|c| c.name == column).map(|c| (t, c))
}

/// Schema linking before any model call, for a schema too wide to show whole: the columns whose
/// descriptions match the question (the schema embeddings) and those holding values it names
/// (the value index), tables ranked by their best match.
fn link(q: &Question, schema: &Schema, settings: &Settings, db: &mut dyn Database, trace: &mut Trace) -> Linking {
    let mut linking = Linking::default();
    let add = |linking: &mut Linking, t: usize, c: usize| {
        if !linking.columns.contains(&(t, c)) {
            linking.columns.push((t, c));
        }
        if !linking.rank.contains(&t) {
            linking.rank.push(t);
        }
    };
    let columns = db.similar_columns(&q.text, 2 * settings.column_matches.max(LINKED_COLUMNS));
    for (n, (oid, column, _)) in columns.iter().enumerate() {
        let Some((t, c)) = column_at(schema, *oid, column) else { continue };
        // The best matches are linked; the rest only rank their tables.
        if n < settings.column_matches.max(LINKED_COLUMNS) {
            add(&mut linking, t, c);
        } else if !linking.rank.contains(&t) {
            linking.rank.push(t);
        }
    }
    // The question's values (none under nl2sql.privacy), kept in the trace: zero-shot shows them.
    if !settings.privacy {
        trace.values = similar_values(q, &[], schema, db);
        for (t, c) in value_columns(schema, &trace.values) {
            add(&mut linking, t, c);
        }
    }
    let name = |&(t, c): &(usize, usize)| format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident);
    trace.linked = linking.columns.iter().map(name).collect();
    linking
}

/// The columns that hold `values`, as (table, column) of `schema`.
fn value_columns(schema: &Schema, values: &[ValueHint]) -> Vec<(usize, usize)> {
    if values.is_empty() {
        return Vec::new();
    }
    let by_name: HashMap<String, (usize, usize)> = schema
        .tables
        .iter()
        .enumerate()
        .flat_map(|(t, table)| table.columns.iter().enumerate().map(move |(c, col)| (format!("{}.{}", table.ident, col.ident), (t, c))))
        .collect();
    values.iter().filter_map(|v| by_name.get(&v.column).copied()).collect()
}

/// Stored values similar to the question, its hint and `extra` texts, leaving out the words
/// that name the schema's tables and columns.
fn similar_values(q: &Question, extra: &[String], schema: &Schema, db: &mut dyn Database) -> Vec<ValueHint> {
    let mut lookup = q.text.clone();
    let earlier = q.previous.as_ref().map(|p| &p.question);
    for text in q.hint.iter().chain(extra).chain(earlier) {
        lookup.push(' ');
        lookup.push_str(text);
    }
    db.similar_values(&lookup, &retrieve::schema_words(schema.names()))
}

/// Estimated tokens of a prompt (schema::estimate_tokens), as the trace counts them.
fn estimate(messages: &[Message]) -> usize {
    messages.iter().map(|m| crate::schema::estimate_tokens(&m.content)).sum()
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

/// A value lookup that finds nothing (nl2sql.privacy).
struct NoValues;

impl ValueLookup for NoValues {
    fn closest_value(&mut self, _table: u32, _column: &str, _literal: &str) -> Option<String> {
        None
    }
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
    cx: Context,
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
        // Under nl2sql.privacy no stored value goes into a query: the query is kept (history)
        // and shown to the model again (a follow-up).
        let aligned = if settings.privacy { align::align(&run.sql, schema, cx, &mut NoValues, rules) } else { align::align(&run.sql, schema, cx, db, rules) };
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
pub fn normal_form(sql: &str) -> String {
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

mod full;
use full::full;
mod interactive;
use interactive::interactive;

#[cfg(test)]
mod tests;
