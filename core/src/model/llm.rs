//! OpenAI-compatible chat completions, over the transport in [`crate::model::http`].

use crate::grammar::Mode;
use crate::model::http::{self, Endpoint, EndpointError, ErrorKind, Service};
use crate::schema::estimate_tokens;
use serde::Serialize;
use once_cell::sync::Lazy;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::model::http::{block_signals, spawn_without_signals};

/// Errors of the model endpoint.
pub type LlmError = EndpointError;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

// Every message's content passes render::lines: no character that is not plain text (besides
// its line breaks) reaches a model, whichever section put it in. Names and values were rendered
// on one line where they were put in (render's functions), so a line break is the prompt's own.
impl Message {
    pub fn system(c: impl Into<String>) -> Message {
        Message { role: "system".into(), content: crate::render::lines(&c.into()) }
    }
    pub fn user(c: impl Into<String>) -> Message {
        Message { role: "user".into(), content: crate::render::lines(&c.into()) }
    }
    pub fn assistant(c: impl Into<String>) -> Message {
        Message { role: "assistant".into(), content: crate::render::lines(&c.into()) }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: u32,
    /// The grammar the answer must follow (crate::grammar), sent where the endpoint takes one.
    pub grammar: Option<Arc<String>>,
    /// Whether an answer that ran to the token limit under the grammar is asked again without
    /// it; false where nl2sql.max_tokens_per_call has no room for a second request.
    pub reask: bool,
}

/// One answer of the model and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub content: String,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the endpoint served from its cache (`prompt_tokens_details.cached_tokens`).
    pub cached_tokens: Option<u64>,
    /// Answers the request returned (OpenAI's `n`); 1 for most.
    pub choices: u32,
    /// A later answer of a request with several: the usage above is the first answer's.
    pub same_request: bool,
    pub latency: Duration,
    pub attempts: u32,
    /// The probability of the answer's least likely token, its code fence left out, where the
    /// request asked for log probabilities and the endpoint returned them.
    pub confidence: Option<f32>,
    /// Bytes of the grammar the answer was written under; None where none was sent (or the
    /// endpoint refused it, or its answer ran to the token limit and was asked again without).
    pub grammar: Option<usize>,
}

/// Estimated tokens of a prompt (schema::estimate_tokens over its messages), for an endpoint
/// that reports no usage.
pub fn estimate(messages: &[Message]) -> usize {
    messages.iter().map(|m| estimate_tokens(&m.content)).sum()
}

/// Sends one request and waits for it, calling `poll` every few milliseconds.
pub fn chat(ep: &Endpoint, req: ChatRequest, poll: &mut dyn FnMut()) -> Result<Completion, LlmError> {
    chat_many(ep, vec![req], poll)
        .pop()
        .unwrap_or_else(|| Err(ep.error(ErrorKind::EmptyAnswer { finish_reason: None })))
}

/// Sends all requests concurrently and waits for all, calling `poll` every few milliseconds.
/// `poll` may unwind (a PostgreSQL error on cancel); the helper threads then finish on their own.
pub fn chat_many(ep: &Endpoint, reqs: Vec<ChatRequest>, poll: &mut dyn FnMut()) -> Vec<Result<Completion, LlmError>> {
    chat_many_until(ep, reqs, None, poll)
}

/// [`chat_many`], each request within `deadline` where one is given (what is left of a call
/// that began earlier), else within the endpoint's timeout from now.
fn chat_many_until(ep: &Endpoint, reqs: Vec<ChatRequest>, deadline: Option<Instant>, poll: &mut dyn FnMut()) -> Vec<Result<Completion, LlmError>> {
    debug_assert_eq!(ep.service, Service::Llm);
    let jobs: Vec<Box<dyn FnOnce() -> Result<Completion, LlmError> + Send>> = reqs
        .into_iter()
        .map(|req| {
            let ep = ep.clone();
            let job: Box<dyn FnOnce() -> Result<Completion, LlmError> + Send> = Box::new(move || {
                let deadline = deadline.unwrap_or_else(|| Instant::now() + ep.timeout);
                with_grammar(&ep, &req, deadline, |ep, grammar| {
                    let reply = http::post_json_until(ep, &request_body(ep, &req, None, false, grammar), deadline)?;
                    parse_completion(ep, &reply.text, reply.latency, reply.attempts)
                })
            });
            job
        })
        .collect();
    let lost = || Err(ep.bad_response("the worker thread could not run", ""));
    http::run_concurrently(jobs, poll, lost)
}

/// The answers of one request for several, or why there are none.
pub type Choices = Result<Vec<Result<Completion, LlmError>>, LlmError>;

/// Endpoints (URL and model) this process has learnt something of, for the rest of its life.
struct Endpoints(Lazy<Mutex<HashSet<String>>>);

impl Endpoints {
    const fn new() -> Endpoints {
        Endpoints(Lazy::new(|| Mutex::new(HashSet::new())))
    }

    /// Whether `ep` is one of them; yes when the memory cannot be read (the cautious answer).
    fn has(&self, ep: &Endpoint) -> bool {
        self.0.lock().map(|s| s.contains(&endpoint_key(ep))).unwrap_or(true)
    }

    fn add(&self, ep: &Endpoint) {
        if let Ok(mut s) = self.0.lock() {
            s.insert(endpoint_key(ep));
        }
    }
}

/// Endpoints that refused or ignored the `n` parameter.
static SINGLE_CHOICE: Endpoints = Endpoints::new();

fn endpoint_key(ep: &Endpoint) -> String {
    format!("{}\n{}", ep.url(), ep.model.as_deref().unwrap_or(""))
}

/// `n` answers to one request: one request with OpenAI's `n` parameter (vLLM and OpenAI take
/// it: the prompt is read once), else `n` requests at once. That request is tried once, with no
/// retries and room for `n` answers of the usual size; when it fails (llama.cpp's server refuses
/// `n` with HTTP 400, older builds with 500) the `n` requests are sent separately, and when
/// those work, or when it returned fewer answers (the endpoint ignored `n`), the endpoint gets no
/// `n` again from this process. Authentication, rate-limit, timeout and connection failures are
/// the endpoint's own: they are returned as they are. `use_n` false never sends `n`.
pub fn sample(ep: &Endpoint, req: ChatRequest, n: usize, use_n: bool, poll: &mut dyn FnMut()) -> Vec<Result<Completion, LlmError>> {
    if n <= 1 || !use_n || SINGLE_CHOICE.has(ep) {
        return chat_many(ep, vec![req; n], poll);
    }
    // A grammar goes with the single request; when the endpoint refuses the request, the n
    // requests below learn on their own whether it refused the grammar.
    let grammar = grammar_of(ep, &req);
    let bytes = grammar.map(|g| g.1.len());
    let deadline = Instant::now() + ep.timeout;
    let job: Box<dyn FnOnce() -> Choices + Send> = {
        let mut once = ep.clone();
        once.max_retries = 0;
        once.max_body = ep.max_body.saturating_mul(n);
        let limit = ep.max_body;
        let body = request_body(ep, &req, Some(n), false, grammar);
        Box::new(move || {
            let reply = http::post_json_until(&once, &body, deadline)?;
            parse_choices(&once, &reply.text, reply.latency, reply.attempts, n, limit)
                .map(|answers| answers.into_iter().map(|a| a.map(|c| Completion { grammar: bytes, ..c })).collect())
        })
    };
    let lost = || Err(ep.bad_response("the worker thread could not run", ""));
    let answer = http::run_concurrently(vec![job], poll, lost).pop().unwrap_or_else(lost);
    match answer {
        Ok(mut answers) => {
            // An answer that ran to the token limit under the grammar is asked again without,
            // within what is left of the request's time (with none left, the answers stand).
            let reask = req.reask && Instant::now() < deadline;
            let looped: Vec<usize> = (0..answers.len()).filter(|&i| reask && answers[i].as_ref().is_ok_and(ran_out)).collect();
            if !looped.is_empty() {
                let plain = ChatRequest { grammar: None, ..req.clone() };
                let again = chat_many_until(ep, vec![plain; looped.len()], Some(deadline), poll);
                for (i, a) in looped.into_iter().zip(again) {
                    // (Every looped answer is an Ok one.)
                    if let Ok(first) = answers[i].clone() {
                        answers[i] = spent_too(first, &req, a);
                    }
                }
            }
            if answers.len() < n {
                SINGLE_CHOICE.add(ep);
                let rest = n - answers.len();
                answers.extend(chat_many_until(ep, vec![req; rest], Some(deadline), poll));
            }
            answers
        }
        Err(e) if e.is_the_endpoints() || matches!(e.kind, ErrorKind::Timeout { .. }) => {
            vec![Err(e); n]
        }
        Err(_) => {
            // The requests alone have what is left of the call's time.
            let answers = chat_many_until(ep, vec![req; n], Some(deadline), poll);
            // A question too long for the model fails the same way alone: n stays on. So does
            // an endpoint that refused the grammar (the requests alone learnt it), not n.
            let grammar_refused = bytes.is_some() && !takes_grammar(ep);
            if answers.iter().any(|a| a.is_ok()) && !grammar_refused {
                SINGLE_CHOICE.add(ep);
            }
            answers
        }
    }
}

/// Endpoints that give no log probabilities: they refused the `logprobs` parameter, or
/// answered without them.
static UNSCORED: Endpoints = Endpoints::new();

/// Whether the endpoint may give an answer's log probabilities: not known to give none.
pub fn can_score(ep: &Endpoint) -> bool {
    !UNSCORED.has(ep)
}

/// One request whose answer carries its confidence (OpenAI's `logprobs`; llama.cpp's server,
/// vLLM and OpenAI return them). An endpoint that refuses the parameter (HTTP 400 or 422, or
/// 500 as older servers do) is asked again without it; when that works, or when it answered
/// without log probabilities, it is not asked for them again by this process ([`can_score`]).
pub fn chat_scored(ep: &Endpoint, req: ChatRequest, poll: &mut dyn FnMut()) -> Result<Completion, LlmError> {
    if !can_score(ep) {
        return chat(ep, req, poll);
    }
    let deadline = Instant::now() + ep.timeout;
    let job: Box<dyn FnOnce() -> Result<Completion, LlmError> + Send> = {
        // Each token comes with its alternatives (some hundred bytes of JSON): room for them,
        // while the answer itself keeps the usual limit.
        let mut scored = ep.clone();
        scored.max_body = ep.max_body.saturating_mul(SCORED_BODY_FACTOR).max((req.max_tokens as usize).saturating_mul(SCORED_TOKEN_BYTES));
        let limit = ep.max_body;
        let req = req.clone();
        Box::new(move || {
            with_grammar(&scored, &req, deadline, |ep, grammar| {
                let reply = http::post_json_until(ep, &request_body(ep, &req, None, true, grammar), deadline)?;
                first_choice(ep, &reply.text, reply.latency, reply.attempts, limit)
            })
        })
    };
    let lost = || Err(ep.bad_response("the worker thread could not run", ""));
    match http::run_concurrently(vec![job], poll, lost).pop().unwrap_or_else(lost) {
        Err(e) if refused_parameter(&e) => {
            // Within what is left of the call's time.
            let again = chat_many_until(&once_more(ep, &e), vec![req], Some(deadline), poll).pop().unwrap_or_else(|| Err(e.clone()));
            // A prompt too long for the model fails the same way without it: scoring stays on.
            if again.is_ok() {
                UNSCORED.add(ep);
            }
            counting(again, &e)
        }
        Ok(c) if c.confidence.is_none() => {
            UNSCORED.add(ep);
            Ok(c)
        }
        answer => answer,
    }
}

/// Alternatives read per token: OpenAI allows up to 20.
const TOP_LOGPROBS: usize = 5;
/// How much larger than nl2sql.max_answer_bytes a response with log probabilities may be, and
/// at least how many bytes per completion token it may take (a token and its alternatives).
const SCORED_BODY_FACTOR: usize = 16;
const SCORED_TOKEN_BYTES: usize = 2048;
/// Names after AS that are a type (`CAST(x AS integer)`), not an alias: they change the rows.
const TYPE_WORDS: &[&str] = &[
    "int", "integer", "bigint", "smallint", "numeric", "decimal", "real", "float", "double", "text", "varchar",
    "char", "character", "date", "time", "timestamp", "timestamptz", "interval", "boolean", "bool", "money",
];

/// How sure the model was of its answer, from OpenAI's `logprobs.content` (each token with its
/// `logprob` and `top_logprobs`): the probability of its least sure token, where a token's
/// probability includes the alternatives that differ from it only in case and surrounding
/// whitespace (`count` and ` COUNT` are one choice in SQL), except within quotes (`'Paris'`
/// and `'paris'` are different values). Tokens of form are left out: the code fence (backticks,
/// the language word after them), whitespace, semicolons and the name after AS unless it is a
/// type (an alias names a column; it changes no row; a cast's type does). None when no token
/// has a log probability.
pub fn confidence(tokens: &[Value]) -> Option<f32> {
    fn text(t: &Value) -> &str {
        t.get("token").and_then(Value::as_str).unwrap_or("")
    }
    let logprob = |t: &Value| t.get("logprob").and_then(Value::as_f64).filter(|lp| lp.is_finite());
    #[derive(PartialEq)]
    enum Alias {
        No,
        Before,
        In,
    }
    let mut lowest: Option<f64> = None;
    let mut after_fence = false;
    let mut alias = Alias::No;
    let mut in_quote = false;
    for (i, t) in tokens.iter().enumerate() {
        crate::interrupt::every(i, 4096);
        let own = text(t);
        let word = own.trim().to_lowercase();
        let fence = own.contains('`');
        let language = after_fence && !own.contains('\n') && crate::model::answer::is_sql_fence(&word);
        after_fence = fence;
        // An alias's name, after AS: its first token, and those that go on the same word.
        let name = !word.is_empty()
            && word.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '"')
            && !TYPE_WORDS.contains(&word.as_str());
        // Within a string or quoted name, case is the value's: no alternatives merge.
        let quoted = in_quote || own.contains(['\'', '"']);
        if own.matches('\'').count() % 2 == 1 {
            in_quote = !in_quote;
        }
        alias = match alias {
            Alias::Before if name => Alias::In,
            Alias::In if name && !own.starts_with(char::is_whitespace) => Alias::In,
            _ if word == "as" => Alias::Before,
            _ => Alias::No,
        };
        if fence || language || alias == Alias::In || word.chars().all(|c| c == ';') {
            continue;
        }
        let Some(lp) = logprob(t) else { continue };
        let alike: f64 = if quoted { None } else { t.get("top_logprobs") }
            .and_then(Value::as_array)
            .map(|alts| {
                alts.iter()
                    .take(20)
                    .filter(|a| text(a) != own && text(a).trim().to_lowercase() == word)
                    .filter_map(logprob)
                    .map(f64::exp)
                    .sum()
            })
            .unwrap_or(0.0);
        // Within 0 and 1: a finite log probability's exp is not negative.
        let p = (lp.exp() + alike).min(1.0);
        lowest = Some(lowest.map_or(p, |l: f64| l.min(p)));
    }
    lowest.map(|p| p as f32)
}

/// Endpoints that refused a grammar: asked without one from then on.
static NO_GRAMMAR: Endpoints = Endpoints::new();

/// Whether a grammar is worth building for `ep`: its setting sends one and it has not refused one.
pub fn takes_grammar(ep: &Endpoint) -> bool {
    ep.grammar != Mode::Off && !NO_GRAMMAR.has(ep)
}

/// The grammar to send with `req` to `ep`, with the endpoint's form of it.
fn grammar_of<'a>(ep: &Endpoint, req: &'a ChatRequest) -> Option<(Mode, &'a str)> {
    let g = req.grammar.as_deref()?;
    takes_grammar(ep).then_some((ep.grammar, g.as_str()))
}

/// Whether an answer written under a grammar ran to the token limit: a grammar can hold the
/// model in a loop (a select list that never ends); such an answer is asked again without.
fn ran_out(c: &Completion) -> bool {
    c.grammar.is_some() && c.finish_reason.as_deref() == Some("length")
}

/// Sends `req` through `send` (to the endpoint it is given) with its grammar where `ep` takes
/// one: an endpoint that refuses the request (HTTP 400 or 422, or 500 as older servers do) is
/// asked again without the grammar, and when that works after a 400 or 422 it is not sent one
/// again by this process; an answer that ran to the token limit under the grammar is asked
/// again without it (for this request only, where `req.reask`). Both requests share `deadline`
/// (`send` keeps it): one call takes no longer than nl2sql.llm_timeout. After a 500, which the
/// first request already retried, the second is sent once; its error counts both requests' attempts.
fn with_grammar(
    ep: &Endpoint,
    req: &ChatRequest,
    deadline: Instant,
    send: impl Fn(&Endpoint, Option<(Mode, &str)>) -> Result<Completion, LlmError>,
) -> Result<Completion, LlmError> {
    let Some(grammar) = grammar_of(ep, req) else { return send(ep, None) };
    let answer = send(ep, Some(grammar)).map(|c| Completion { grammar: Some(grammar.1.len()), ..c });
    match answer {
        Err(e) if refused_parameter(&e) => {
            let again = send(&once_more(ep, &e), None);
            // Remembered for a refusal (400, 422) only: a 500 may have been a passing failure.
            if again.is_ok() && matches!(e.kind, ErrorKind::Http { .. }) {
                NO_GRAMMAR.add(ep);
            }
            counting(again, &e)
        }
        // With no time left, the answer at the limit stands.
        Ok(first) if req.reask && ran_out(&first) && Instant::now() < deadline => spent_too(first, req, send(ep, None)),
        a => a,
    }
}

/// Whether the endpoint may have refused a parameter of the request (the grammar, log
/// probabilities): HTTP 400 or 422, or 500 as older servers answer.
fn refused_parameter(e: &LlmError) -> bool {
    matches!(e.kind, ErrorKind::Http { status: 400 | 422, .. } | ErrorKind::Server { status: 500, .. })
}

/// The endpoint for the request sent again without the parameter after `e`: after a 500, which
/// the first request already retried, it is sent once.
fn once_more(ep: &Endpoint, e: &LlmError) -> Endpoint {
    let retries = if matches!(e.kind, ErrorKind::Server { .. }) { 0 } else { ep.max_retries };
    Endpoint { max_retries: retries, ..ep.clone() }
}

/// `again`, the request sent after `first` failed, counting `first`'s attempts too (its retries;
/// 1 for an error that is not retried).
fn counting(again: Result<Completion, LlmError>, first: &LlmError) -> Result<Completion, LlmError> {
    let earlier = match first.kind {
        ErrorKind::Server { attempts, .. } | ErrorKind::RateLimited { attempts, .. } => attempts,
        _ => 1,
    };
    match again {
        Ok(c) => Ok(Completion { attempts: c.attempts.saturating_add(earlier), ..c }),
        Err(mut e) => {
            if let ErrorKind::Server { attempts, .. } | ErrorKind::RateLimited { attempts, .. } = &mut e.kind {
                *attempts = attempts.saturating_add(earlier);
            }
            Err(e)
        }
    }
}

/// `then`, the answer asked again without the grammar after `first` ran to the token limit
/// under it, carrying what `first` spent (its tokens, estimated where the endpoint reports none,
/// its time and attempts): the trace and nl2sql.max_tokens_per_call count both requests. A
/// later answer of a request with several (`same_request`) spent nothing of its own. When the
/// request again fails, `first` stands (as an answer at the limit without a grammar would), its
/// spending counted with the failed request's prompt.
fn spent_too(first: Completion, req: &ChatRequest, then: Result<Completion, LlmError>) -> Result<Completion, LlmError> {
    let prompt = |p: Option<u64>| p.unwrap_or_else(|| estimate(&req.messages) as u64);
    let completion = |c: &Completion| c.completion_tokens.unwrap_or_else(|| estimate_tokens(&c.content) as u64);
    match then {
        Ok(c) if first.same_request => Ok(c),
        Ok(c) => Ok(Completion {
            prompt_tokens: Some(prompt(first.prompt_tokens).saturating_add(prompt(c.prompt_tokens))),
            completion_tokens: Some(completion(&first).saturating_add(completion(&c))),
            latency: first.latency.saturating_add(c.latency),
            attempts: first.attempts.saturating_add(c.attempts),
            ..c
        }),
        Err(_) if first.same_request => Ok(first),
        Err(_) => Ok(Completion {
            prompt_tokens: Some(prompt(first.prompt_tokens).saturating_add(prompt(None))),
            completion_tokens: Some(completion(&first)),
            ..first
        }),
    }
}

/// The request's JSON; `n`: several answers at once (OpenAI's parameter); `logprobs`: each
/// answer token's log probability and its likeliest alternatives; `grammar`: the grammar the
/// answer follows, in the endpoint's form.
fn request_body(ep: &Endpoint, req: &ChatRequest, n: Option<usize>, logprobs: bool, grammar: Option<(Mode, &str)>) -> String {
    let mut body = serde_json::json!({
        "messages": req.messages,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "stream": false,
    });
    if let Some(m) = ep.model.as_deref().filter(|m| !m.is_empty()) {
        body["model"] = Value::String(m.to_string());
    }
    if let Some(n) = n {
        body["n"] = Value::from(n as u64);
    }
    if logprobs {
        body["logprobs"] = Value::Bool(true);
        body["top_logprobs"] = Value::from(TOP_LOGPROBS as u64);
    }
    match grammar {
        Some((Mode::Vllm, g)) => body["structured_outputs"] = serde_json::json!({ "grammar": g }),
        Some((_, g)) => body["grammar"] = Value::String(g.to_string()),
        None => {}
    }
    body.to_string()
}

/// Reads an OpenAI chat completion response: its first answer.
pub fn parse_completion(ep: &Endpoint, text: &str, latency: Duration, attempts: u32) -> Result<Completion, LlmError> {
    first_choice(ep, text, latency, attempts, usize::MAX)
}

/// The first answer of a response, at most `limit` bytes.
fn first_choice(ep: &Endpoint, text: &str, latency: Duration, attempts: u32, limit: usize) -> Result<Completion, LlmError> {
    parse_choices(ep, text, latency, attempts, 1, limit)?
        .into_iter()
        .next()
        .unwrap_or_else(|| Err(ep.bad_response("no choices in the response", text)))
}

/// Reads an OpenAI chat completion response: one answer (or empty-answer error) per choice, in
/// the order of their `index`, at most `take` of them (a hostile body may hold millions), each
/// at most `limit` bytes (the size one answer may have alone); an error when the response itself
/// is unreadable. The request's usage goes on its first answer that has content; the others
/// report zero.
pub fn parse_choices(ep: &Endpoint, text: &str, latency: Duration, attempts: u32, take: usize, limit: usize) -> Choices {
    let v: Value = ep.parse_json(text)?;
    let mut choices: Vec<&Value> = v.get("choices").and_then(Value::as_array).map(|c| c.iter().collect()).unwrap_or_default();
    if choices.is_empty() {
        return Err(ep.bad_response("no choices in the response", text));
    }
    choices.sort_by_key(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0));
    choices.truncate(take);
    let usage = v.get("usage");
    let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
    let cached = usage.and_then(|u| u.get("prompt_tokens_details")).and_then(|d| d.get("cached_tokens")).and_then(Value::as_u64);
    let count = choices.len() as u32;
    let mut usage_given = false;
    Ok(choices
        .into_iter()
        .map(|choice| {
            let finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_string);
            let content = choice
                .get("message")
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
                .or_else(|| choice.get("text").and_then(Value::as_str))
                .unwrap_or("")
                .to_string();
            if content.trim().is_empty() {
                return Err(ep.error(ErrorKind::EmptyAnswer { finish_reason }));
            }
            if content.len() > limit {
                return Err(ep.error(ErrorKind::TooLarge { url: ep.display_url(), limit }));
            }
            let first = !usage_given;
            usage_given = true;
            Ok(Completion {
                content,
                finish_reason,
                // The later answers' share is in the first's usage; with no usage reported,
                // each answer's tokens are left to be estimated.
                prompt_tokens: if first { tokens("prompt_tokens") } else { tokens("prompt_tokens").map(|_| 0) },
                completion_tokens: if first { tokens("completion_tokens") } else { tokens("completion_tokens").map(|_| 0) },
                cached_tokens: if first { cached } else { cached.map(|_| 0) },
                choices: count,
                same_request: !first,
                latency,
                attempts,
                confidence: choice
                    .get("logprobs")
                    .and_then(|l| l.get("content"))
                    .and_then(Value::as_array)
                    .and_then(|t| confidence(t)),
                grammar: None,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests;
