//! One question in, one checked and executed query out. Two paths:
//!
//! - zero-shot: one generation from the whole schema, corrected in up to R rounds;
//! - full (OpenSearch-SQL): extraction -> value and column retrieval -> per-question schema ->
//!   n candidates with a structured chain of thought, in waves that stop early once candidates
//!   agree -> alignments -> sandboxed execution -> corrections by error type -> vote.
//!
//! Everything outside this crate (PostgreSQL, HTTP) comes in through the traits.

use crate::align::{Rules, ValueLookup};
use crate::prompt::examples::Example;
use crate::safety::guard::GuardError;
use crate::model::llm::{ChatRequest, Completion, LlmError};
use crate::prompt::{Layout, MAX_PREVIOUS_SQL_BYTES};
use crate::prompt::refine::Failure;
use crate::retrieval::instructions::{self, Instruction};
use crate::retrieval::retrieve::ValueHint;
use crate::schema::Schema;
use crate::Execution;
use serde::Serialize;
use std::time::Instant;

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 8_000;
/// Longest hint accepted, in characters.
pub const MAX_HINT_CHARS: usize = 8_000;
/// Completion tokens for the extraction answer (three short lines).
const EXTRACTION_MAX_TOKENS: u32 = 256;
/// Least similarity for a found column to join the extraction's choice: every column of a
/// table the question names scores about 0.55 through the table's name alone.
pub const COLUMN_MATCH_MIN_SCORE: f32 = 0.6;
/// Columns retrieval links to a question on a wide schema, at least (nl2sql.column_matches).
const LINKED_COLUMNS: usize = 8;
/// Most text the instructions chosen for one question add to its prompts, in bytes.
pub const MAX_INSTRUCTION_CHARS: usize = 3_000;
/// Least completion a request is sent with under a token budget (a short query).
pub const MIN_COMPLETION_TOKENS: usize = 64;

/// What the pipeline needs from the database.
pub trait Database: ValueLookup {
    /// Checks one query on the database's own parse tree and runs it in the sandbox: refused
    /// when the database's policy says no, failed when it ran into an error.
    fn execute(&mut self, sql: &str) -> Result<Execution, Rejected>;
    /// Stored values similar to words of `text` (the value index), leaving out phrases made
    /// only of `skip` words (sorted) and the tables of `leave_out` (OIDs: a stranger's, never
    /// searched, so that hers cannot crowd out the others); none by default.
    fn similar_values(&mut self, _text: &str, _skip: &[String], _leave_out: &[u32]) -> Vec<ValueHint> {
        Vec::new()
    }
    /// Indexed columns the value searches so far could not read in time (a lock not granted,
    /// an index being replaced), as `table.column`; the list is emptied. None by default.
    fn skipped_value_columns(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Up to `k` columns whose names or descriptions are similar to `text` (the schema
    /// embeddings), best first, as (table OID, column name, score), none of the tables of
    /// `leave_out` (searched without them); none by default.
    fn similar_columns(&mut self, _text: &str, _k: usize, _leave_out: &[u32]) -> Vec<(u32, String, f32)> {
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
    /// The enabled instructions the caller may see, at most
    /// [`instructions::MAX_CANDIDATES`], nearest `question` in meaning first, each with its
    /// similarity set; none by default.
    fn instructions(&mut self, _question: &str) -> Vec<Instruction> {
        Vec::new()
    }
    /// The relation each of `names` (schema when written, name; as PostgreSQL reads them) is,
    /// as the query would find it (OID; None: no relation of that name); None when the database
    /// cannot tell, by default.
    fn resolve(&mut self, _names: &[(Option<String>, String)]) -> Option<Vec<Option<u32>>> {
        None
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
    /// Whether the endpoint may take a grammar with a request (nl2sql.grammar, and not known to
    /// refuse one): only then is one built.
    fn takes_grammar(&self) -> bool {
        false
    }
}

/// The model at an OpenAI-compatible endpoint, waited on with the registered interrupt check
/// (crate::interrupt): a cancel or statement_timeout ends every wait, in the backend.
pub struct Client {
    pub endpoint: crate::model::http::Endpoint,
    /// Whether the candidates of a wave go in one request (OpenAI's `n`, nl2sql.llm_n).
    pub use_n: bool,
}

impl Llm for Client {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        crate::model::llm::chat(&self.endpoint, req, &mut crate::interrupt::check)
    }

    fn chat_many(&mut self, reqs: Vec<ChatRequest>) -> Vec<Result<Completion, LlmError>> {
        // All requests in flight at once; a cancel interrupts the wait for every one.
        crate::model::llm::chat_many(&self.endpoint, reqs, &mut crate::interrupt::check)
    }

    fn chat_scored(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        crate::model::llm::chat_scored(&self.endpoint, req, &mut crate::interrupt::check)
    }

    fn can_score(&self) -> bool {
        crate::model::llm::can_score(&self.endpoint)
    }

    fn sample(&mut self, req: ChatRequest, n: usize) -> Vec<Result<Completion, LlmError>> {
        crate::model::llm::sample(&self.endpoint, req, n, self.use_n, &mut crate::interrupt::check)
    }

    fn secret(&self) -> Option<&str> {
        self.endpoint.api_key.as_ref().map(|k| k.expose())
    }

    fn takes_grammar(&self) -> bool {
        crate::model::llm::takes_grammar(&self.endpoint)
    }
}

/// Why the database did not return rows for a query; also why a candidate's evaluation did not
/// (stages.rs), whose guard refuses or fails a query before the database sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejected {
    /// Its policy (or the guard) refused the query before it ran (final: never sent back for
    /// correction).
    Refused(GuardError),
    /// It ran, or tried to, and failed (or could not be read as one statement).
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

/// The pipeline's settings, from the nl2sql.* settings; serialized under those settings' names
/// (nl2sql_explain() shows them).
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub mode: Mode,
    /// Correction rounds (R).
    pub max_corrections: u32,
    #[serde(rename = "llm_max_tokens")]
    pub max_tokens: u32,
    pub schema_max_tokens: usize,
    /// Candidates to generate (n).
    pub candidates: usize,
    /// Candidates asked for in the first wave; the rest only when they disagree.
    pub first_wave: usize,
    /// Votes that end sampling early (adaptive n); usize::MAX never ends it (shown as 0, the
    /// setting that asks for it).
    #[serde(serialize_with = "unlimited_as_zero")]
    pub agreement: usize,
    pub temperature: f32,
    #[serde(rename = "use_extraction")]
    pub extraction: bool,
    /// Extraction runs only when the whole schema is larger than this (estimated tokens):
    /// a smaller one goes whole to the candidates, and their prompt starts as every other's.
    pub extraction_min_tokens: usize,
    /// On a schema wider than schema_max_tokens, the extraction still sees it whole when it
    /// fits this (estimated tokens): one prompt for every question, which an endpoint caches.
    pub extraction_max_tokens: usize,
    #[serde(rename = "use_chain_of_thought")]
    pub chain_of_thought: bool,
    #[serde(flatten)]
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
    #[serde(rename = "max_tokens_per_call")]
    pub token_budget: Option<usize>,
    /// Turns of the interactive agent (nl2sql.agent_max_turns).
    pub agent_max_turns: usize,
    /// With several generators, the first is asked alone first, and its answer stands alone
    /// (no other candidate is asked) when it ran, returned rows, and its least likely token
    /// was at least this probable (nl2sql.alone_confidence): 0 lets any answer that runs and
    /// returns rows stand alone (no scores needed), 1 asks the first alone and scores it but
    /// never lets it stand alone (to choose a threshold). None asks the whole first wave at once.
    #[serde(rename = "alone_confidence")]
    pub alone: Option<f32>,
    /// Curators' instructions shown beside the question, at most (nl2sql.instructions).
    pub instructions: usize,
    /// A question none of whose words the schema covers gets no query (nl2sql.refuse_unrelated).
    pub refuse_unrelated: bool,
}

fn unlimited_as_zero<S: serde::Serializer>(n: &usize, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(if *n == usize::MAX { 0 } else { *n as u64 })
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
            alignment: Rules::NONE,
            column_matches: 0,
            generators: vec![Generator::OpenSql],
            examples: 0,
            privacy: false,
            token_budget: None,
            agent_max_turns: 10,
            alone: None,
            instructions: 0,
            refuse_unrelated: false,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Question {
    pub text: String,
    pub hint: Option<String>,
    /// The question this one follows ("and in 2015?"), with the query that answered it.
    pub previous: Option<Previous>,
    /// The curators' instructions chosen for it, as prompt lines (set when the run opens).
    pub instructions: Vec<String>,
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
    /// What prompts show after the question: the hint, then the instructions chosen for it, one
    /// a line; None when there is none of them.
    fn note(&self) -> Option<String> {
        let hint = self.hint.as_deref().map(str::trim).filter(|h| !h.is_empty());
        let lines: Vec<&str> = hint.into_iter().chain(self.instructions.iter().map(String::as_str)).collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// The question and, on the next line, its hint: the text whose words choose instructions
    /// and decide abstention.
    fn asked(&self) -> String {
        match self.hint.as_deref() {
            Some(h) => format!("{}\n{h}", self.text),
            None => self.text.clone(),
        }
    }

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

    /// Whether what is left covers `k` requests of about `prompt` tokens and `max_tokens` each
    /// twice over: room for each to be asked again (an answer that ran to the token limit under
    /// the grammar is asked again without it).
    pub fn room_again(&self, prompt: usize, k: usize, max_tokens: u32) -> bool {
        let twice = 2usize.saturating_mul(k).saturating_mul(prompt.saturating_add(max_tokens as usize));
        self.budget.map_or(true, |limit| limit.saturating_sub(self.total()) >= twice)
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

/// One question's run, as every path opens it: the question, the schema it is answered from,
/// the settings, the model, the database, the trace it writes, and the endpoint's key (to
/// redact what the endpoint sends back).
pub(super) struct Run<'a> {
    pub q: &'a Question,
    pub schema: &'a Schema,
    pub settings: &'a Settings,
    pub llm: &'a mut dyn Llm,
    pub db: &'a mut dyn Database,
    pub trace: &'a mut Trace,
    pub secret: Option<String>,
}

impl<'a> Run<'a> {
    fn new(
        q: &'a Question,
        schema: &'a Schema,
        settings: &'a Settings,
        llm: &'a mut dyn Llm,
        db: &'a mut dyn Database,
        trace: &'a mut Trace,
    ) -> Run<'a> {
        let secret = llm.secret().map(str::to_string);
        Run { q, schema, settings, llm, db, trace, secret }
    }
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
    let instructed;
    let q = if settings.instructions > 0 {
        instructed = instruct(q, settings.instructions, db, &mut trace);
        &instructed
    } else {
        q
    };
    // Privacy: nothing read from rows reaches a prompt, whatever the caller loaded.
    let stripped;
    let schema = if settings.privacy {
        stripped = schema.without_data();
        &stripped
    } else {
        schema
    };
    // A follow-up ("and in Paris?") rests on the earlier question and its query: never refused.
    if settings.refuse_unrelated && q.previous.is_none() {
        if let Some(e) = abstain::unrelated(q, schema, settings, llm, db, &mut trace) {
            trace.wall_ms = ms(started.elapsed());
            return Err((e, trace));
        }
    }
    let result = match settings.mode {
        Mode::ZeroShot => zero_shot(Run::new(q, schema, settings, llm, db, &mut trace)),
        Mode::Full => full(Run::new(q, schema, settings, llm, db, &mut trace)),
        Mode::Interactive => interactive(Run::new(q, schema, settings, llm, db, &mut trace)),
    };
    // Did the last query, or most of the model's first ones, fail on a name the tables lack
    // that the question asked for?
    let result = match result {
        Err(AskError::Failed { sql: Some(sql), failure }) if settings.refuse_unrelated && q.previous.is_none() => {
            let sampled = || (settings.mode != Mode::Interactive).then(|| abstain::asked_for(schema, &trace)).flatten();
            let refusal = abstain::missing(schema, &trace, &sql, &failure).or_else(sampled);
            Err(refusal.unwrap_or(AskError::Failed { sql: Some(sql), failure }))
        }
        // The agent's first turn is one exploring guess, not a sample of the answer.
        Ok(answer) if settings.refuse_unrelated && q.previous.is_none() && settings.mode != Mode::Interactive => {
            abstain::asked_for(schema, &trace).map_or(Ok(answer), Err)
        }
        other => other,
    };
    if let Err(AskError::Missing { names, .. }) = &result {
        trace.missing = names.clone();
    }
    trace.wall_ms = ms(started.elapsed());
    match result {
        Ok((sql, execution)) => Ok(Answer { sql, execution, trace }),
        Err(e) => Err((e, trace)),
    }
}

/// The question with the instructions chosen for it (by its text and hint), recorded in the trace.
fn instruct(q: &Question, k: usize, db: &mut dyn Database, trace: &mut Trace) -> Question {
    let asked = q.asked();
    let mut chosen = instructions::choose(&asked, db.instructions(&asked), k);
    // Best first, as many as fit MAX_INSTRUCTION_CHARS (the first always: it is at most
    // instructions::MAX_TEXT_CHARS and a fragment).
    let mut used = 0;
    chosen.retain(|i| {
        let n = i.line().len();
        let keep = used == 0 || used + n <= MAX_INSTRUCTION_CHARS;
        used += if keep { n } else { 0 };
        keep
    });
    let mut out = q.clone();
    out.instructions = chosen.iter().map(|i| i.line()).collect();
    trace.instructions = chosen;
    out
}

mod abstain;
pub mod agent;
mod candidates;
mod failure;
mod full;
mod interactive;
pub mod results;
pub mod rows;
mod stages;
mod trace;
pub mod vote;
mod zero_shot;

pub use failure::*;
pub use trace::*;
use full::full;
use interactive::interactive;
pub use stages::normal_form;
use zero_shot::zero_shot;

#[cfg(test)]
mod tests;
