//! OpenAI-compatible chat completions, over the transport in [`crate::model::http`].

use crate::model::http::{self, Endpoint, EndpointError, ErrorKind, Service};
use serde::Serialize;
use once_cell::sync::Lazy;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

pub use crate::model::http::block_signals;

/// Errors of the model endpoint.
pub type LlmError = EndpointError;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn system(c: impl Into<String>) -> Message {
        Message { role: "system".into(), content: c.into() }
    }
    pub fn user(c: impl Into<String>) -> Message {
        Message { role: "user".into(), content: c.into() }
    }
    pub fn assistant(c: impl Into<String>) -> Message {
        Message { role: "assistant".into(), content: c.into() }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: u32,
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
    debug_assert_eq!(ep.service, Service::Llm);
    let jobs: Vec<Box<dyn FnOnce() -> Result<Completion, LlmError> + Send>> = reqs
        .into_iter()
        .map(|req| {
            let ep = ep.clone();
            let job: Box<dyn FnOnce() -> Result<Completion, LlmError> + Send> = Box::new(move || {
                let reply = http::post_json(&ep, &request_body(&ep, &req, None, false))?;
                parse_completion(&ep, &reply.text, reply.latency, reply.attempts)
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
    let job: Box<dyn FnOnce() -> Choices + Send> = {
        let mut once = ep.clone();
        once.max_retries = 0;
        once.max_body = ep.max_body.saturating_mul(n);
        let limit = ep.max_body;
        let body = request_body(ep, &req, Some(n), false);
        Box::new(move || {
            let reply = http::post_json(&once, &body)?;
            parse_choices(&once, &reply.text, reply.latency, reply.attempts, n, limit)
        })
    };
    let lost = || Err(ep.bad_response("the worker thread could not run", ""));
    let answer = http::run_concurrently(vec![job], poll, lost).pop().unwrap_or_else(lost);
    match answer {
        Ok(mut answers) => {
            if answers.len() < n {
                SINGLE_CHOICE.add(ep);
                let rest = n - answers.len();
                answers.extend(chat_many(ep, vec![req; rest], poll));
            }
            answers
        }
        Err(e) if e.is_the_endpoints() || matches!(e.kind, ErrorKind::Timeout { .. }) => {
            vec![Err(e); n]
        }
        Err(_) => {
            let answers = chat_many(ep, vec![req; n], poll);
            // A question too long for the model fails the same way alone: n stays on.
            if answers.iter().any(|a| a.is_ok()) {
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
    let job: Box<dyn FnOnce() -> Result<Completion, LlmError> + Send> = {
        // Each token comes with its alternatives (some hundred bytes of JSON): room for them,
        // while the answer itself keeps the usual limit.
        let mut scored = ep.clone();
        scored.max_body = ep.max_body.saturating_mul(SCORED_BODY_FACTOR).max((req.max_tokens as usize).saturating_mul(SCORED_TOKEN_BYTES));
        let limit = ep.max_body;
        let body = request_body(ep, &req, None, true);
        Box::new(move || {
            let reply = http::post_json(&scored, &body)?;
            first_choice(&scored, &reply.text, reply.latency, reply.attempts, limit)
        })
    };
    let lost = || Err(ep.bad_response("the worker thread could not run", ""));
    match http::run_concurrently(vec![job], poll, lost).pop().unwrap_or_else(lost) {
        Err(e) if matches!(e.kind, ErrorKind::Http { status: 400 | 422, .. } | ErrorKind::Server { status: 500, .. }) => {
            let again = chat(ep, req, poll);
            // A prompt too long for the model fails the same way without it: scoring stays on.
            if again.is_ok() {
                UNSCORED.add(ep);
            }
            again
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

/// The request's JSON; `n`: several answers at once (OpenAI's parameter); `logprobs`: each
/// answer token's log probability and its likeliest alternatives.
fn request_body(ep: &Endpoint, req: &ChatRequest, n: Option<usize>, logprobs: bool) -> String {
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
    let v: Value = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            ep.bad_response("the JSON is truncated", text)
        } else {
            ep.bad_response(format!("the body is not JSON ({e})"), text)
        }
    })?;
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
                prompt_tokens: if first { tokens("prompt_tokens") } else { Some(0) },
                completion_tokens: if first { tokens("completion_tokens") } else { Some(0) },
                cached_tokens: if first { cached } else { Some(0) },
                choices: count,
                same_request: !first,
                latency,
                attempts,
                confidence: choice
                    .get("logprobs")
                    .and_then(|l| l.get("content"))
                    .and_then(Value::as_array)
                    .and_then(|t| confidence(t)),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Diagnostic, SqlState};
    use crate::model::http::tests::{endpoint, serve};

    fn request() -> ChatRequest {
        ChatRequest { messages: vec![Message::user("hi")], temperature: 0.0, max_tokens: 16 }
    }

    fn ok_body(content: &str) -> String {
        serde_json::json!({"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
        .to_string()
    }

    #[test]
    fn happy_path_sends_key_and_model() {
        let (url, h) = serve(vec![(200, ok_body("SELECT 1"), 0)]);
        let c = chat(&endpoint(Service::Llm, url), request(), &mut || {}).expect("completion");
        assert_eq!(c.content, "SELECT 1");
        assert_eq!((c.prompt_tokens, c.completion_tokens, c.attempts), (Some(12), Some(3), 1));
        let seen = h.join().expect("server");
        assert!(seen[0].starts_with("POST /v1/chat/completions"));
        assert!(seen[0].to_ascii_lowercase().contains("authorization: bearer sk-test-secret"));
        assert!(seen[0].contains("\"model\":\"m\""));
    }

    #[test]
    fn garbage_and_truncated_json() {
        let (url, h) = serve(vec![(200, "<html>oops</html>".into(), 0), (200, "{\"choices\": [".into(), 0)]);
        let ep = endpoint(Service::Llm, url);
        let e1 = chat(&ep, request(), &mut || {}).expect_err("garbage");
        let e2 = chat(&ep, request(), &mut || {}).expect_err("truncated");
        assert!(matches!(&e1.kind, ErrorKind::BadResponse { reason, .. } if reason.contains("not JSON")), "{e1:?}");
        assert_eq!(e1.detail().as_deref(), Some("Response body: <html>oops</html>"));
        assert!(matches!(&e2.kind, ErrorKind::BadResponse { reason, .. } if reason.contains("truncated")), "{e2:?}");
        assert_eq!(e2.sqlstate(), SqlState::ProtocolViolation);
        h.join().expect("server");
    }

    #[test]
    fn empty_answer() {
        let body = serde_json::json!({"choices": [{"message": {"content": "  "}, "finish_reason": "length"}]}).to_string();
        let (url, h) = serve(vec![(200, body, 0)]);
        let e = chat(&endpoint(Service::Llm, url), request(), &mut || {}).expect_err("empty");
        assert_eq!(e.kind, ErrorKind::EmptyAnswer { finish_reason: Some("length".into()) });
        assert!(e.hint().unwrap_or_default().contains("llm_max_tokens"));
        h.join().expect("server");
    }

    #[test]
    fn many_requests_run_concurrently() {
        let (url, h) = serve((0..3).map(|_| (200, ok_body("SELECT 1"), 500)).collect());
        let t = std::time::Instant::now();
        let rs = chat_many(&endpoint(Service::Llm, url), vec![request(), request(), request()], &mut || {});
        assert!(rs.iter().all(|r| r.is_ok()));
        // Three answers that each take 500 ms arrive together, not one after another.
        assert!(t.elapsed() < Duration::from_millis(1200), "{:?}", t.elapsed());
        h.join().expect("server");
    }

    fn choices_body(contents: &[&str]) -> String {
        let choices: Vec<Value> = contents
            .iter()
            .enumerate()
            .rev()
            .map(|(i, c)| serde_json::json!({"index": i, "message": {"content": c}, "finish_reason": "stop"}))
            .collect();
        serde_json::json!({"choices": choices, "usage": {"prompt_tokens": 40, "completion_tokens": 9,
                           "prompt_tokens_details": {"cached_tokens": 32}}})
        .to_string()
    }

    #[test]
    fn several_answers_in_one_request_where_n_is_taken() {
        let (url, h) = serve(vec![(200, choices_body(&["SELECT 1", "SELECT 2", "SELECT 3"]), 0)]);
        let rs = sample(&endpoint(Service::Llm, url), request(), 3, true, &mut || {});
        let rs: Vec<Completion> = rs.into_iter().map(|r| r.expect("answer")).collect();
        assert_eq!(rs.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(), ["SELECT 1", "SELECT 2", "SELECT 3"]);
        assert_eq!((rs[0].prompt_tokens, rs[0].completion_tokens, rs[0].cached_tokens), (Some(40), Some(9), Some(32)));
        assert_eq!((rs[0].choices, rs[0].same_request, rs[1].same_request), (3, false, true));
        assert_eq!((rs[2].prompt_tokens, rs[2].completion_tokens), (Some(0), Some(0)));
        let seen = h.join().expect("server");
        assert_eq!(seen.len(), 1);
        assert!(seen[0].contains("\"n\":3"), "{}", seen[0]);
    }

    #[test]
    fn an_endpoint_refusing_n_gets_separate_requests_from_then_on() {
        let refusal = r#"{"error":{"code":400,"message":"Field 'n': Value must be between 1 <= value <= 1, but got 2"}}"#;
        let mut replies = vec![(400, refusal.to_string(), 0), (200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 1"), 0)];
        replies.extend([(200, ok_body("SELECT 2"), 0), (200, ok_body("SELECT 2"), 0)]);
        let (url, h) = serve(replies);
        let ep = endpoint(Service::Llm, url);
        let first = sample(&ep, request(), 2, true, &mut || {});
        assert!(first.iter().all(|r| r.as_ref().is_ok_and(|c| c.content == "SELECT 1" && c.choices == 1)), "{first:?}");
        let second = sample(&ep, request(), 2, true, &mut || {});
        assert!(second.iter().all(|r| r.as_ref().is_ok_and(|c| c.content == "SELECT 2")), "{second:?}");
        let seen = h.join().expect("server");
        assert_eq!(seen.iter().filter(|r| r.contains("\"n\":")).count(), 1, "{seen:?}");
    }

    #[test]
    fn an_older_llama_cpp_refusing_n_with_500_gets_separate_requests_without_retries() {
        let refusal = r#"{"error":{"code":500,"message":"Only one completion choice is allowed","type":"server_error"}}"#;
        let replies = vec![(500, refusal.to_string(), 0), (200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 1"), 0)];
        let (url, h) = serve(replies);
        let mut ep = endpoint(Service::Llm, url);
        ep.max_retries = 2;
        let rs = sample(&ep, request(), 2, true, &mut || {});
        assert!(rs.iter().all(|r| r.is_ok()), "{rs:?}");
        assert!(SINGLE_CHOICE.has(&ep));
        let seen = h.join().expect("server");
        assert_eq!(seen.len(), 3, "the request for two answers is not retried");
    }

    #[test]
    fn a_request_failing_alone_too_leaves_n_on() {
        let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#;
        let replies = vec![(400, too_long.to_string(), 0), (400, too_long.to_string(), 0), (400, too_long.to_string(), 0)];
        let (url, h) = serve(replies);
        let ep = endpoint(Service::Llm, url);
        let rs = sample(&ep, request(), 2, true, &mut || {});
        assert!(rs.iter().all(|r| matches!(r, Err(e) if matches!(e.kind, ErrorKind::Http { status: 400, .. }))), "{rs:?}");
        assert!(!SINGLE_CHOICE.has(&ep));
        h.join().expect("server");
    }

    fn scored_body(tokens: &[(&str, f64)]) -> String {
        let content: String = tokens.iter().map(|(t, _)| *t).collect();
        let lp: Vec<Value> = tokens.iter().map(|(t, l)| serde_json::json!({"token": t, "logprob": l})).collect();
        serde_json::json!({"choices": [{"message": {"content": content}, "finish_reason": "stop", "logprobs": {"content": lp}}],
                           "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
        .to_string()
    }

    #[test]
    fn confidence_is_the_least_likely_token_of_the_query_not_of_its_fence() {
        let tokens = [("```", -1.5), ("sql", -0.9), ("\n", -0.4), ("SELECT", -0.01), (" name", -0.2), (" FROM", 0.0), (" t", -0.05), ("\n", -2.0), ("```", -3.0)];
        let (url, h) = serve(vec![(200, scored_body(&tokens), 0)]);
        let c = chat_scored(&endpoint(Service::Llm, url), request(), &mut || {}).expect("answer");
        assert_eq!(c.content, "```sql\nSELECT name FROM t\n```");
        assert!((c.confidence.expect("scored") - (-0.2f32).exp()).abs() < 1e-6, "{:?}", c.confidence);
        let seen = h.join().expect("server");
        assert!(seen[0].contains("\"logprobs\":true"), "{}", seen[0]);
        // A plain request asks for none and reads none.
        let (url, h) = serve(vec![(200, ok_body("SELECT 1"), 0)]);
        assert_eq!(chat(&endpoint(Service::Llm, url), request(), &mut || {}).expect("answer").confidence, None);
        assert!(!h.join().expect("server")[0].contains("logprobs"));
        // Alternatives that differ only in case count with the token; others do not.
        let alts = |own: &str, lp: f64, others: &[(&str, f64)]| {
            let mut top = vec![serde_json::json!({"token": own, "logprob": lp})];
            top.extend(others.iter().map(|(t, l)| serde_json::json!({"token": t, "logprob": l})));
            serde_json::json!({"token": own, "logprob": lp, "top_logprobs": top})
        };
        let p = confidence(&[alts(" count", 0.6f64.ln(), &[(" COUNT", 0.3f64.ln()), (" sum", 0.1f64.ln())]), alts(";\n", 0.5f64.ln(), &[])]);
        assert!((p.expect("scored") - 0.9).abs() < 1e-6, "{p:?}");
        let p = confidence(&[alts(" name", 0.7f64.ln(), &[(" title", 0.3f64.ln())])]);
        assert!((p.expect("scored") - 0.7).abs() < 1e-6, "{p:?}");
        // An alias's name is left out; what follows it is not.
        let tok = |t: &str, p: f64| serde_json::json!({"token": t, "logprob": p.ln()});
        let p = confidence(&[tok(" AVG(age)", 0.95), tok(" AS", 0.9), tok(" average", 0.5), tok("_age", 0.6), tok(" FROM", 0.8)]);
        assert!((p.expect("scored") - 0.8).abs() < 1e-6, "{p:?}");
        // No log probabilities, or none that is a number: no confidence.
        assert_eq!(confidence(&[serde_json::json!({"token": "SELECT"})]), None);
        assert_eq!(confidence(&[]), None);
    }

    #[test]
    fn log_probabilities_do_not_count_against_the_answer_limit_the_answer_does() {
        // 40 tokens with their alternatives: far more JSON than the 600-byte limit of an answer.
        let tokens: Vec<(&str, f64)> = vec![(" x", -0.01); 40];
        let body = scored_body(&tokens);
        assert!(body.len() > 1000);
        let (url, h) = serve(vec![(200, body, 0), (200, scored_body(&[(&"y".repeat(700), -0.01)]), 0)]);
        let mut ep = endpoint(Service::Llm, url);
        ep.max_body = 600;
        assert!(chat_scored(&ep, request(), &mut || {}).expect("answer").confidence.is_some());
        let too_long = chat_scored(&ep, request(), &mut || {});
        assert!(matches!(too_long, Err(e) if matches!(e.kind, ErrorKind::TooLarge { limit: 600, .. })));
        h.join().expect("server");
    }

    #[test]
    fn confidence_keeps_cast_types_and_quoted_case() {
        let alts = |own: &str, lp: f64, others: &[(&str, f64)]| {
            let mut top = vec![serde_json::json!({"token": own, "logprob": lp})];
            top.extend(others.iter().map(|(t, l)| serde_json::json!({"token": t, "logprob": l})));
            serde_json::json!({"token": own, "logprob": lp, "top_logprobs": top})
        };
        let tok = |t: &str, p: f64| serde_json::json!({"token": t, "logprob": p.ln()});
        // A cast's type after AS is scored; an alias is not.
        let p = confidence(&[tok(" CAST(x", 0.9), tok(" AS", 0.9), tok(" integer", 0.4), tok(")", 0.9)]);
        assert!((p.expect("scored") - 0.4).abs() < 1e-6, "{p:?}");
        // Case variants merge outside quotes only: 'Paris' and 'paris' are two values.
        let p = confidence(&[tok(" WHERE city =", 0.9), alts(" '", 0.9f64.ln(), &[]), alts("Paris", 0.6f64.ln(), &[("paris", 0.4f64.ln())]), tok("'", 0.9)]);
        assert!((p.expect("scored") - 0.6).abs() < 1e-6, "{p:?}");
        // Hostile shapes: null logprobs, tokens that are not strings, numbers out of range.
        assert_eq!(confidence(&[serde_json::json!({"token": 7, "logprob": -0.1})]), None, "no text: not a token of the query");
        assert_eq!(confidence(&[serde_json::json!({"token": "x", "logprob": null})]), None);
        assert_eq!(confidence(&[serde_json::json!({"token": "x", "logprob": 5.0})]), Some(1.0));
        let body = serde_json::json!({"choices": [{"message": {"content": "SELECT 1"}, "logprobs": null}]}).to_string();
        let (url, h) = serve(vec![(200, body, 0)]);
        let ep = endpoint(Service::Llm, url);
        assert_eq!(chat_scored(&ep, request(), &mut || {}).expect("answer").confidence, None);
        // An endpoint that answers without log probabilities is not asked for them again.
        assert!(!can_score(&ep));
        h.join().expect("server");
    }

    #[test]
    fn an_older_server_refusing_logprobs_with_500_is_asked_without_them() {
        let refusal = r#"{"error":{"code":500,"message":"logprobs is not supported","type":"server_error"}}"#;
        let (url, h) = serve(vec![(500, refusal.to_string(), 0), (200, ok_body("SELECT 1"), 0)]);
        let ep = endpoint(Service::Llm, url);
        assert_eq!(chat_scored(&ep, request(), &mut || {}).expect("answer").content, "SELECT 1");
        assert!(!can_score(&ep));
        h.join().expect("server");
    }

    #[test]
    fn an_endpoint_refusing_logprobs_is_asked_again_without_them_from_then_on() {
        let refusal = r#"{"error":{"code":400,"message":"Unrecognized request argument supplied: logprobs"}}"#;
        let replies = vec![(400, refusal.to_string(), 0), (200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 2"), 0)];
        let (url, h) = serve(replies);
        let ep = endpoint(Service::Llm, url);
        let first = chat_scored(&ep, request(), &mut || {}).expect("answer");
        assert_eq!((first.content.as_str(), first.confidence), ("SELECT 1", None));
        assert_eq!(chat_scored(&ep, request(), &mut || {}).expect("answer").content, "SELECT 2");
        let seen = h.join().expect("server");
        assert_eq!(seen.iter().map(|r| r.contains("logprobs")).collect::<Vec<_>>(), [true, false, false]);
    }

    #[test]
    fn a_request_failing_without_logprobs_too_leaves_them_on() {
        let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#;
        let (url, h) = serve(vec![(400, too_long.to_string(), 0), (400, too_long.to_string(), 0), (200, scored_body(&[("SELECT 1", -0.1)]), 0)]);
        let ep = endpoint(Service::Llm, url);
        assert!(matches!(chat_scored(&ep, request(), &mut || {}), Err(e) if matches!(e.kind, ErrorKind::Http { status: 400, .. })));
        assert!(chat_scored(&ep, request(), &mut || {}).expect("answer").confidence.is_some());
        h.join().expect("server");
    }

    #[test]
    fn a_hostile_number_of_choices_is_read_only_up_to_n() {
        let many: Vec<&str> = vec!["SELECT 1"; 5000];
        let (url, h) = serve(vec![(200, choices_body(&many), 0)]);
        let rs = sample(&endpoint(Service::Llm, url), request(), 3, true, &mut || {});
        assert_eq!(rs.len(), 3);
        assert!(rs.iter().all(|r| r.is_ok()));
        h.join().expect("server");
    }

    #[test]
    fn usage_goes_on_the_first_answer_with_content() {
        let body = serde_json::json!({"choices": [{"index": 0, "message": {"content": " "}, "finish_reason": "length"},
                                                   {"index": 1, "message": {"content": "SELECT 2"}, "finish_reason": "stop"}],
                                      "usage": {"prompt_tokens": 40, "completion_tokens": 9}})
        .to_string();
        let (url, h) = serve(vec![(200, body, 0)]);
        let rs = sample(&endpoint(Service::Llm, url), request(), 2, true, &mut || {});
        assert!(matches!(&rs[0], Err(e) if matches!(e.kind, ErrorKind::EmptyAnswer { .. })));
        let second = rs[1].as_ref().expect("answer");
        assert_eq!((second.prompt_tokens, second.completion_tokens, second.same_request), (Some(40), Some(9), false));
        h.join().expect("server");
    }

    #[test]
    fn an_endpoint_ignoring_n_gets_the_rest_separately() {
        let (url, h) = serve(vec![(200, choices_body(&["SELECT 1"]), 0), (200, ok_body("SELECT 2"), 0), (200, ok_body("SELECT 3"), 0)]);
        let rs = sample(&endpoint(Service::Llm, url), request(), 3, true, &mut || {});
        let mut got: Vec<String> = rs.into_iter().map(|r| r.expect("answer").content).collect();
        got.sort();
        assert_eq!(got, ["SELECT 1", "SELECT 2", "SELECT 3"]);
        assert_eq!(h.join().expect("server").len(), 3);
    }

    #[test]
    fn other_errors_of_an_n_request_fail_every_answer() {
        let (url, h) = serve(vec![(401, "{}".into(), 0)]);
        let rs = sample(&endpoint(Service::Llm, url), request(), 2, true, &mut || {});
        assert!(rs.iter().all(|r| matches!(r, Err(e) if matches!(e.kind, ErrorKind::Auth { .. }))), "{rs:?}");
        h.join().expect("server");
    }

    #[test]
    fn n_is_never_sent_when_switched_off() {
        let (url, h) = serve(vec![(200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 1"), 0)]);
        let rs = sample(&endpoint(Service::Llm, url), request(), 2, false, &mut || {});
        assert!(rs.iter().all(|r| r.is_ok()));
        assert!(h.join().expect("server").iter().all(|r| !r.contains("\"n\":")));
    }
}
