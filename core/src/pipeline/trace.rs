//! What a question's run leaves behind: the trace `nl2sql_explain` shows, each model call and
//! each candidate.

use super::{Mode, Previous, Tokens};
use crate::Execution;
use crate::error::Report;
use crate::prompt::examples::Example;
use crate::prompt::extract::Extraction;
use crate::model::llm::{Completion, LlmError, Message};
use crate::prompt::refine::FailureKind;
use crate::retrieval::retrieve::ValueHint;
use crate::schema::{Detail, Focus};
use crate::pipeline::vote::Outcome;
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Trace {
    pub mode: Option<Mode>,
    /// The grammar built for the generation prompts (nl2sql.grammar): its size and the names it
    /// allows, or why none was built; absent where the endpoint takes none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar: Option<GrammarTrace>,
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
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "crate::render::serialize_visible_list")]
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
    /// Curators' instructions shown beside the question (nl2sql.instructions), best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<crate::retrieval::instructions::Instruction>,
    /// Which words of the question the schema covers (nl2sql.refuse_unrelated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::retrieval::coverage::Coverage>,
    /// The model's word on whether the tables hold what the question asks about, when none of
    /// its words is matched (nl2sql.refuse_unrelated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answerable: Option<bool>,
    /// The names the tables lack that the failed queries read and the question asked for, when
    /// nl2sql abstained on them (nl2sql.refuse_unrelated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The interactive agent's turns: thought, action, observation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<crate::pipeline::agent::Turn>,
    pub llm_calls: Vec<LlmCall>,
    /// LLM round trips one after another (concurrent requests count once).
    pub round_trips: usize,
    /// Time spent waiting for the model on the critical path (the rest is nl2sql's own work).
    pub llm_wait_ms: f64,
    pub candidates: Vec<CandidateTrace>,
    /// Failed candidates left uncorrected: a round corrects as many at once as the first wave
    /// asked, the first of each distinct failure first.
    #[serde(skip_serializing_if = "is_zero")]
    pub corrections_skipped: usize,
    /// Waves of generation requests sent (adaptive n: the second only when the first disagrees).
    pub waves: usize,
    /// Sampling stopped before n candidates because enough agreed.
    pub stopped_early: bool,
    /// Two or more sampled answers ran and none returned rows: no empty result was sent back
    /// for correction (failed candidates still were, and one that returns rows wins the vote).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub empty_agreed: bool,
    /// The first generator's answer stood alone: its confidence (nl2sql.alone_confidence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alone: Option<f32>,
    pub vote: Option<Outcome>,
    /// Candidates sampled (round 0): what the confidence is a share of.
    pub samples: usize,
    pub confidence: Option<f64>,
    /// The last request's answer came with the endpoint's usage (its other answers add none).
    #[serde(skip)]
    pub(super) request_usage: bool,
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

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GrammarTrace {
    pub bytes: usize,
    pub relations: usize,
    pub columns: usize,
    /// Relations with rules of their own (a `SELECT` reading one of them reads its columns);
    /// 0 when the shared rules only were sent (more relations shown than that allows).
    pub scoped: usize,
    /// Why no grammar was built (then the prompts go without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_built: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LlmCall {
    pub stage: &'static str,
    /// As reported by the endpoint (None when it reports no usage); an answer asked again
    /// without the grammar after it ran to the token limit has both requests' here and in
    /// `completion_tokens` (our estimate for a request that reported none).
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
    /// Bytes of the grammar the answer was written under (nl2sql.grammar); absent where none was
    /// sent, the endpoint refused it, or the answer was asked again without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar_bytes: Option<usize>,
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


impl CandidateTrace {
    /// Notes that the candidate ran: its rows and how long it took.
    pub(super) fn ran(&mut self, execution: &Execution) {
        self.ok = true;
        self.rows = Some(execution.rows.len());
        self.exec_ms = Some(ms(execution.elapsed));
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

pub(super) fn detail_name(d: Detail) -> String {
    match d {
        Detail::Full => "full",
        Detail::Core => "core",
        Detail::Bare => "bare",
        Detail::Names => "names",
    }
    .into()
}

pub(super) fn record(trace: &mut Trace, stage: &'static str, messages: &[Message], r: &Result<Completion, LlmError>, secret: Option<&str>) {
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
            grammar_bytes: c.grammar,
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
            grammar_bytes: None,
        },
    });
}


/// Estimated tokens of a prompt, as the trace counts them (the model layer's estimate).
pub(super) use crate::model::llm::estimate;

/// A model's answer as the trace keeps it: at most 64 kB.
pub(super) fn traced(content: &str) -> String {
    let cut = crate::prompt::refine::prefix(content, crate::model::answer::MAX_SQL_BYTES);
    if cut.len() == content.len() {
        content.to_string()
    } else {
        format!("{cut}… ({} bytes in all)", content.len())
    }
}

pub(super) fn cand_sql(c: Option<&CandidateTrace>) -> Option<String> {
    c.and_then(|c| c.aligned.clone().or_else(|| c.sql.clone()))
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
