//! OpenAI-compatible chat completions over ureq, run on helper threads so the caller can keep
//! answering interrupts (Ctrl-C, pg_cancel_backend, statement_timeout) while it waits.
//!
//! Helper threads never touch PostgreSQL and block every signal, so the kernel delivers the
//! backend's signals to the main thread only.

use crate::error::{Diagnostic, Report, Secret, SqlState};
use serde::Serialize;
use serde_json::Value;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How often the waiting thread wakes to check for interrupts.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// First backoff after a 429 or 5xx; doubled each retry.
const BACKOFF: Duration = Duration::from_millis(250);
/// Longest Retry-After we honour.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Bytes of an error body quoted back to the user.
const BODY_EXCERPT: usize = 300;

/// Where and how to reach the model.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL such as http://127.0.0.1:8080/v1, or the full …/chat/completions URL.
    pub base_url: String,
    pub model: Option<String>,
    pub api_key: Option<Secret>,
    /// Time allowed for one call, retries included.
    pub timeout: Duration,
    pub max_retries: u32,
}

impl Endpoint {
    pub fn chat_url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        }
    }

    /// The URL without user:password, for messages.
    pub fn display_url(&self) -> String {
        strip_userinfo(&self.chat_url())
    }
}

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
    pub latency: Duration,
    pub attempts: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LlmError {
    NotConfigured,
    BadUrl { url: String, reason: String },
    Connect { url: String, reason: String },
    Timeout { url: String, ms: u128 },
    Auth { url: String, status: u16, body: String },
    RateLimited { url: String, attempts: u32 },
    Server { url: String, status: u16, attempts: u32, body: String },
    Http { url: String, status: u16, body: String },
    BadResponse { url: String, reason: String, body: String },
    EmptyAnswer { finish_reason: Option<String> },
}

impl Diagnostic for LlmError {
    fn sqlstate(&self) -> SqlState {
        match self {
            LlmError::NotConfigured => SqlState::ObjectNotInPrerequisiteState,
            LlmError::BadUrl { .. } => SqlState::InvalidParameterValue,
            LlmError::Connect { .. } => SqlState::UnableToEstablishConnection,
            LlmError::Timeout { .. } => SqlState::QueryCanceled,
            LlmError::Auth { .. } => SqlState::InvalidAuthorization,
            LlmError::RateLimited { .. } => SqlState::ConfigurationLimitExceeded,
            LlmError::Server { .. } => SqlState::ConnectionFailure,
            LlmError::Http { .. } | LlmError::BadResponse { .. } | LlmError::EmptyAnswer { .. } => {
                SqlState::ProtocolViolation
            }
        }
    }

    fn message(&self) -> String {
        match self {
            LlmError::NotConfigured => "nl2sql.llm_url is not set".into(),
            LlmError::BadUrl { url, .. } => format!("invalid LLM endpoint URL \"{url}\""),
            LlmError::Connect { url, .. } => format!("could not connect to the LLM endpoint {url}"),
            LlmError::Timeout { url, ms } => format!("LLM request to {url} timed out after {ms} ms"),
            LlmError::Auth { url, status, .. } => format!("LLM endpoint {url} refused the credentials (HTTP {status})"),
            LlmError::RateLimited { url, attempts } => {
                format!("LLM endpoint {url} is rate limiting (HTTP 429 after {})", attempts_text(*attempts))
            }
            LlmError::Server { url, status, attempts, .. } => {
                format!("LLM endpoint {url} failed with HTTP {status} after {}", attempts_text(*attempts))
            }
            LlmError::Http { url, status, .. } => format!("LLM endpoint {url} answered HTTP {status}"),
            LlmError::BadResponse { url, reason, .. } => {
                format!("LLM endpoint {url} sent an unusable answer: {reason}")
            }
            LlmError::EmptyAnswer { .. } => "the model returned an empty answer".into(),
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            LlmError::BadUrl { reason, .. } | LlmError::Connect { reason, .. } => Some(sentence(reason)),
            LlmError::Auth { body, .. }
            | LlmError::Server { body, .. }
            | LlmError::Http { body, .. }
            | LlmError::BadResponse { body, .. }
                if !body.is_empty() =>
            {
                Some(format!("Response body: {body}"))
            }
            LlmError::EmptyAnswer { finish_reason: Some(r) } => Some(format!("The model stopped with finish_reason \"{r}\".")),
            _ => None,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            LlmError::NotConfigured => Some(
                "A superuser sets the endpoint of any OpenAI-compatible API, for example: \
                 ALTER SYSTEM SET nl2sql.llm_url = 'http://127.0.0.1:8080/v1' (llama.cpp server), \
                 'http://127.0.0.1:11434/v1' (Ollama) or 'https://api.openai.com/v1' (OpenAI, with nl2sql.llm_api_key); \
                 then SELECT pg_reload_conf(). scripts/local-llm.sh starts a local model."
                    .into(),
            ),
            LlmError::BadUrl { .. } => Some("Use a base URL such as http://127.0.0.1:8080/v1.".into()),
            LlmError::Connect { .. } => Some("Check that the server runs and that nl2sql.llm_url is right.".into()),
            LlmError::Timeout { .. } => Some("Raise nl2sql.llm_timeout, or use a faster model.".into()),
            LlmError::Auth { .. } => Some(
                "Set nl2sql.llm_api_key (superuser), or NL2SQL_LLM_API_KEY in the server's environment.".into(),
            ),
            LlmError::RateLimited { .. } => Some("Wait, or raise nl2sql.llm_max_retries.".into()),
            LlmError::Http { status: 404, .. } => Some(
                "Check that nl2sql.llm_url ends with the API's base path (often /v1) and that nl2sql.llm_model exists."
                    .into(),
            ),
            LlmError::EmptyAnswer { finish_reason: Some(r) } if r == "length" => {
                Some("Raise nl2sql.llm_max_tokens.".into())
            }
            LlmError::EmptyAnswer { .. } => Some("Check that nl2sql.llm_model names a chat model.".into()),
            _ => None,
        }
    }
}

fn attempts_text(n: u32) -> String {
    if n == 1 {
        "1 attempt".into()
    } else {
        format!("{n} attempts")
    }
}

/// A detail line in PostgreSQL's style: a capitalised sentence ending with a period.
fn sentence(s: &str) -> String {
    let mut c = s.trim().chars();
    let mut out: String = match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => return String::new(),
    };
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

impl LlmError {
    /// The error as a report, with the API key scrubbed from every text.
    pub fn report(&self, key: Option<&Secret>) -> Report {
        Report::from_diagnostic(self).redact(key.map(|k| k.expose()))
    }
}

/// Sends one request and waits for it, calling `poll` every few milliseconds.
pub fn chat(ep: &Endpoint, req: ChatRequest, poll: &mut dyn FnMut()) -> Result<Completion, LlmError> {
    chat_many(ep, vec![req], poll).pop().unwrap_or(Err(LlmError::EmptyAnswer { finish_reason: None }))
}

/// Sends all requests concurrently and waits for all, calling `poll` every few milliseconds.
/// `poll` may unwind (a PostgreSQL error on cancel); the helper threads then finish on their own.
pub fn chat_many(ep: &Endpoint, reqs: Vec<ChatRequest>, poll: &mut dyn FnMut()) -> Vec<Result<Completion, LlmError>> {
    let n = reqs.len();
    let (tx, rx) = mpsc::channel::<(usize, Result<Completion, LlmError>)>();
    let mut results: Vec<Option<Result<Completion, LlmError>>> = (0..n).map(|_| None).collect();
    for (i, req) in reqs.into_iter().enumerate() {
        let worker_ep = ep.clone();
        let tx = tx.clone();
        let spawned = thread::Builder::new().name(format!("nl2sql-llm-{i}")).spawn(move || {
            block_signals();
            let _ = tx.send((i, send_with_retries(&worker_ep, &req)));
        });
        if let Err(e) = spawned {
            results[i] = Some(Err(LlmError::Connect { url: ep.display_url(), reason: format!("cannot start thread: {e}") }));
        }
    }
    drop(tx);
    let mut pending = results.iter().filter(|r| r.is_none()).count();
    while pending > 0 {
        poll();
        match rx.recv_timeout(POLL_INTERVAL) {
            Ok((i, r)) => {
                results[i] = Some(r);
                pending -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or(Err(LlmError::BadResponse {
                url: ep.display_url(),
                reason: "worker thread died".into(),
                body: String::new(),
            }))
        })
        .collect()
}

/// Blocks every signal in the calling thread, so that signals meant for the PostgreSQL backend
/// reach its main thread only.
#[cfg(unix)]
pub fn block_signals() {
    // SAFETY: plain libc calls on a zeroed, then filled, signal set owned by this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(not(unix))]
pub fn block_signals() {}

fn request_body(ep: &Endpoint, req: &ChatRequest) -> String {
    let mut body = serde_json::json!({
        "messages": req.messages,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "stream": false,
    });
    if let Some(m) = ep.model.as_deref().filter(|m| !m.is_empty()) {
        body["model"] = Value::String(m.to_string());
    }
    body.to_string()
}

fn send_with_retries(ep: &Endpoint, req: &ChatRequest) -> Result<Completion, LlmError> {
    let url = ep.chat_url();
    let shown = ep.display_url();
    let key = ep.api_key.as_ref();
    let redact = |s: String| match key {
        Some(k) if k.expose().len() >= 4 => s.replace(k.expose(), "***"),
        _ => s,
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(LlmError::BadUrl { url: shown, reason: "the URL must start with http:// or https://".into() });
    }
    let body = request_body(ep, req);
    let start = Instant::now();
    let deadline = start + ep.timeout;
    let timed_out = || LlmError::Timeout { url: shown.clone(), ms: ep.timeout.as_millis() };
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(timed_out());
        }
        // No redirects: a 3xx must not carry the bearer token to another host.
        let mut cfg = ureq::Agent::config_builder()
            .timeout_global(Some(remaining))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent("nl2sql");
        if is_loopback(&url) {
            cfg = cfg.proxy(None);
        }
        let agent: ureq::Agent = cfg.build().into();
        let mut builder = agent.post(&url).content_type("application/json");
        if let Some(k) = key.filter(|k| !k.is_empty()) {
            builder = builder.header("Authorization", format!("Bearer {}", k.expose()));
        }
        let mut resp = match builder.send(&body) {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => return Err(timed_out()),
            Err(e) => return Err(classify_transport(e, &shown, redact)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = match resp.body_mut().read_to_string() {
            Ok(t) => t,
            Err(ureq::Error::Timeout(_)) => return Err(timed_out()),
            Err(e) => {
                return Err(LlmError::BadResponse {
                    url: shown.clone(),
                    reason: redact(format!("reading the body failed: {e}")),
                    body: String::new(),
                })
            }
        };
        let retryable = status == 429 || matches!(status, 500 | 502 | 503 | 504);
        if retryable && attempts <= ep.max_retries {
            let backoff = retry_after.unwrap_or(BACKOFF * 2u32.pow(attempts - 1)).min(MAX_BACKOFF);
            let remaining = deadline.saturating_duration_since(Instant::now());
            if backoff >= remaining {
                return Err(timed_out());
            }
            thread::sleep(backoff);
            continue;
        }
        let excerpt = || redact(excerpt(&text));
        return match status {
            200..=299 => parse_completion(&text, &shown, start.elapsed(), attempts).map_err(|e| match e {
                LlmError::BadResponse { url, reason, .. } => LlmError::BadResponse { url, reason, body: excerpt() },
                other => other,
            }),
            401 | 403 => Err(LlmError::Auth { url: shown, status, body: excerpt() }),
            429 => Err(LlmError::RateLimited { url: shown, attempts }),
            500..=599 => Err(LlmError::Server { url: shown, status, attempts, body: excerpt() }),
            _ => Err(LlmError::Http { url: shown, status, body: excerpt() }),
        };
    }
}

fn classify_transport(e: ureq::Error, url: &str, redact: impl Fn(String) -> String) -> LlmError {
    let reason = match &e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::BadUri(u) => {
            return LlmError::BadUrl { url: url.to_string(), reason: redact(format!("bad URI: {u}")) };
        }
        other => other.to_string(),
    };
    LlmError::Connect { url: url.to_string(), reason: redact(reason) }
}

/// Reads an OpenAI chat completion response.
pub fn parse_completion(text: &str, url: &str, latency: Duration, attempts: u32) -> Result<Completion, LlmError> {
    let bad = |reason: String| LlmError::BadResponse { url: url.to_string(), reason, body: String::new() };
    let v: Value = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            bad("the JSON is truncated".into())
        } else {
            bad(format!("the body is not JSON ({e})"))
        }
    })?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| bad("no choices in the response".into()))?;
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_string);
    let content = choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .or_else(|| choice.get("text").and_then(Value::as_str))
        .unwrap_or("")
        .to_string();
    if content.trim().is_empty() {
        return Err(LlmError::EmptyAnswer { finish_reason });
    }
    let usage = v.get("usage");
    let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
    Ok(Completion {
        content,
        finish_reason,
        prompt_tokens: tokens("prompt_tokens"),
        completion_tokens: tokens("completion_tokens"),
        latency,
        attempts,
    })
}

fn excerpt(body: &str) -> String {
    let one_line = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= BODY_EXCERPT {
        one_line
    } else {
        let mut s: String = one_line.chars().take(BODY_EXCERPT).collect();
        s.push('…');
        s
    }
}

fn host_of(url: &str) -> &str {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    host_port.split(':').next().unwrap_or(host_port)
}

fn is_loopback(url: &str) -> bool {
    let h = host_of(url);
    h == "localhost" || h.starts_with("127.") || h == "::1"
}

fn strip_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn endpoint(url: String) -> Endpoint {
        Endpoint { base_url: url, model: Some("m".into()), api_key: Some(Secret::new("sk-test-secret")), timeout: Duration::from_secs(5), max_retries: 2 }
    }

    fn request() -> ChatRequest {
        ChatRequest { messages: vec![Message::user("hi")], temperature: 0.0, max_tokens: 16 }
    }

    /// An HTTP server on 127.0.0.1 that answers the n-th connection with the n-th scripted reply,
    /// each connection on its own thread; returns the requests it saw.
    fn serve(replies: Vec<(u16, String, u64)>) -> (String, thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://127.0.0.1:{}/v1", listener.local_addr().expect("addr").port());
        let h = thread::spawn(move || {
            let mut workers = Vec::new();
            for (status, body, delay_ms) in replies {
                let Ok((mut s, _)) = listener.accept() else { break };
                workers.push(thread::spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    let mut req = String::new();
                    for _ in 0..4 {
                        let n = s.read(&mut buf).unwrap_or(0);
                        req.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if n == 0 || req.contains("\"stream\"") {
                            break;
                        }
                    }
                    thread::sleep(Duration::from_millis(delay_ms));
                    let _ = write!(
                        s,
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    req
                }));
            }
            workers.into_iter().filter_map(|w| w.join().ok()).collect()
        });
        (url, h)
    }

    fn ok_body(content: &str) -> String {
        serde_json::json!({"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
        .to_string()
    }

    #[test]
    fn happy_path_sends_key_and_model() {
        let (url, h) = serve(vec![(200, ok_body("SELECT 1"), 0)]);
        let c = chat(&endpoint(url), request(), &mut || {}).expect("completion");
        assert_eq!(c.content, "SELECT 1");
        assert_eq!((c.prompt_tokens, c.completion_tokens, c.attempts), (Some(12), Some(3), 1));
        let seen = h.join().expect("server");
        assert!(seen[0].starts_with("POST /v1/chat/completions"));
        assert!(seen[0].to_ascii_lowercase().contains("authorization: bearer sk-test-secret"));
        assert!(seen[0].contains("\"model\":\"m\""));
    }

    #[test]
    fn retries_5xx_then_succeeds() {
        let (url, h) = serve(vec![(503, "{}".into(), 0), (200, ok_body("SELECT 2"), 0)]);
        let c = chat(&endpoint(url), request(), &mut || {}).expect("completion");
        assert_eq!((c.content.as_str(), c.attempts), ("SELECT 2", 2));
        h.join().expect("server");
    }

    #[test]
    fn gives_up_after_retries() {
        let (url, h) = serve(vec![(500, "boom".into(), 0), (500, "boom".into(), 0), (500, "boom".into(), 0)]);
        let e = chat(&endpoint(url), request(), &mut || {}).expect_err("must fail");
        assert!(matches!(e, LlmError::Server { status: 500, attempts: 3, .. }), "{e:?}");
        assert_eq!(e.sqlstate(), SqlState::ConnectionFailure);
        h.join().expect("server");
    }

    #[test]
    fn auth_error_never_shows_key() {
        let (url, h) = serve(vec![(401, "{\"error\":\"bad key sk-test-secret\"}".into(), 0)]);
        let ep = endpoint(url);
        let e = chat(&ep, request(), &mut || {}).expect_err("must fail");
        let r = e.report(ep.api_key.as_ref());
        assert_eq!(r.sqlstate, SqlState::InvalidAuthorization);
        assert!(!format!("{r:?}").contains("sk-test-secret"), "{r:?}");
        h.join().expect("server");
    }

    #[test]
    fn garbage_and_truncated_json() {
        let (url, h) = serve(vec![(200, "<html>oops</html>".into(), 0), (200, "{\"choices\": [".into(), 0)]);
        let ep = endpoint(url);
        let e1 = chat(&ep, request(), &mut || {}).expect_err("garbage");
        let e2 = chat(&ep, request(), &mut || {}).expect_err("truncated");
        assert!(matches!(&e1, LlmError::BadResponse { reason, .. } if reason.contains("not JSON")), "{e1:?}");
        assert_eq!(e1.detail().as_deref(), Some("Response body: <html>oops</html>"));
        assert!(matches!(&e2, LlmError::BadResponse { reason, .. } if reason.contains("truncated")), "{e2:?}");
        h.join().expect("server");
    }

    #[test]
    fn empty_answer() {
        let body = serde_json::json!({"choices": [{"message": {"content": "  "}, "finish_reason": "length"}]}).to_string();
        let (url, h) = serve(vec![(200, body, 0)]);
        let e = chat(&endpoint(url), request(), &mut || {}).expect_err("empty");
        assert_eq!(e, LlmError::EmptyAnswer { finish_reason: Some("length".into()) });
        assert!(e.hint().unwrap_or_default().contains("llm_max_tokens"));
        h.join().expect("server");
    }

    #[test]
    fn refused_connection() {
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let e = chat(&endpoint(format!("http://127.0.0.1:{port}/v1")), request(), &mut || {}).expect_err("refused");
        assert!(matches!(&e, LlmError::Connect { reason, .. } if reason == "connection refused"), "{e:?}");
        assert_eq!(e.detail().as_deref(), Some("Connection refused."));
        assert_eq!(e.sqlstate().code(), "08001");
    }

    #[test]
    fn slow_server_times_out_in_bounded_time() {
        let (url, _h) = serve(vec![(200, ok_body("late"), 3000)]);
        let mut ep = endpoint(url);
        ep.timeout = Duration::from_millis(300);
        let t = Instant::now();
        let e = chat(&ep, request(), &mut || {}).expect_err("timeout");
        assert!(matches!(e, LlmError::Timeout { ms: 300, .. }), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn poll_runs_while_waiting_and_may_abort() {
        let (url, _h) = serve(vec![(200, ok_body("late"), 3000)]);
        let t = Instant::now();
        let mut polls = 0;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            chat(&endpoint(url), request(), &mut || {
                polls += 1;
                if polls == 20 {
                    panic!("cancel");
                }
            })
        }));
        assert!(r.is_err());
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn many_requests_run_concurrently() {
        let (url, h) = serve((0..3).map(|_| (200, ok_body("SELECT 1"), 500)).collect());
        let t = Instant::now();
        let rs = chat_many(&endpoint(url), vec![request(), request(), request()], &mut || {});
        assert!(rs.iter().all(|r| r.is_ok()));
        // Three answers that each take 500 ms arrive together, not one after another.
        assert!(t.elapsed() < Duration::from_millis(1200), "{:?}", t.elapsed());
        h.join().expect("server");
    }

    #[test]
    fn redirects_are_not_followed() {
        let (url, h) = serve(vec![(307, "".into(), 0)]);
        let e = chat(&endpoint(url), request(), &mut || {}).expect_err("redirect");
        assert!(matches!(e, LlmError::Http { status: 307, .. }), "{e:?}");
        assert_eq!(h.join().expect("server").len(), 1);
    }

    #[test]
    fn urls() {
        let ep = endpoint("http://u:p@127.0.0.1:8080/v1/".into());
        assert_eq!(ep.chat_url(), "http://u:p@127.0.0.1:8080/v1/chat/completions");
        assert_eq!(ep.display_url(), "http://127.0.0.1:8080/v1/chat/completions");
        assert!(is_loopback(&ep.chat_url()));
        assert!(!is_loopback("https://api.openai.com/v1"));
        assert!(is_loopback("http://[::1]:8080/v1"));
        let full = endpoint("http://h/v1/chat/completions".into());
        assert_eq!(full.chat_url(), "http://h/v1/chat/completions");
    }

    #[test]
    fn bad_url_scheme() {
        let e = chat(&endpoint("ftp://x".into()), request(), &mut || {}).expect_err("bad url");
        assert!(matches!(e, LlmError::BadUrl { .. }));
    }
}
