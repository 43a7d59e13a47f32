//! POSTs to OpenAI-compatible endpoints (chat completions, embeddings) on helper threads, so
//! the caller keeps answering interrupts (Ctrl-C, pg_cancel_backend, statement_timeout) while
//! it waits. Retries with backoff on 429 and 5xx, one deadline for all attempts, no redirects,
//! and the API key scrubbed from every error text.
//!
//! Helper threads never touch PostgreSQL and block every signal, so the kernel delivers the
//! backend's signals to the main thread only.

use crate::error::{Diagnostic, Report, Secret, SqlState};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How often the waiting thread wakes to check for interrupts.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// First backoff after a 429 or 5xx; doubled each retry.
const BACKOFF: Duration = Duration::from_millis(250);
/// Longest Retry-After we honour.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Characters of an error body quoted back to the user.
const BODY_EXCERPT: usize = 300;

/// Which API an endpoint serves; decides the path and the words of its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Llm,
    Embeddings,
}

impl Service {
    fn noun(self) -> &'static str {
        match self {
            Service::Llm => "LLM",
            Service::Embeddings => "embedding",
        }
    }
    fn path(self) -> &'static str {
        match self {
            Service::Llm => "/chat/completions",
            Service::Embeddings => "/embeddings",
        }
    }
    fn setting(self, what: &str) -> String {
        match self {
            Service::Llm => format!("nl2sql.llm_{what}"),
            Service::Embeddings => format!("nl2sql.embedding_{what}"),
        }
    }
}

/// Where and how to reach a model.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub service: Service,
    /// Base URL such as http://127.0.0.1:8080/v1, or the full URL ending in the service's path.
    pub base_url: String,
    pub model: Option<String>,
    pub api_key: Option<Secret>,
    /// Time allowed for one call, retries included.
    pub timeout: Duration,
    pub max_retries: u32,
    /// Largest response body read; a larger one is refused unread.
    pub max_body: usize,
    /// How the endpoint takes a grammar (chat completions only).
    pub grammar: crate::grammar::Mode,
}

impl Endpoint {
    pub fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with(self.service.path()) {
            base.to_string()
        } else {
            format!("{base}{}", self.service.path())
        }
    }

    /// The URL without user:password, for messages.
    pub fn display_url(&self) -> String {
        strip_userinfo(&self.url())
    }

    pub fn error(&self, kind: ErrorKind) -> EndpointError {
        EndpointError { service: self.service, kind }
    }

    /// An answer that could not be used, with an excerpt of its body (scrubbed).
    pub fn bad_response(&self, reason: impl Into<String>, body: &str) -> EndpointError {
        self.error(ErrorKind::BadResponse {
            url: self.display_url(),
            reason: self.redact(reason.into()),
            body: self.redact(excerpt(body)),
        })
    }

    /// A response body as JSON; an error saying whether it was cut short or is no JSON at all.
    pub fn parse_json(&self, body: &str) -> Result<serde_json::Value, EndpointError> {
        serde_json::from_str(body).map_err(|e| {
            if e.is_eof() {
                self.bad_response("the JSON is truncated", body)
            } else {
                self.bad_response(format!("the body is not JSON ({e})"), body)
            }
        })
    }

    fn redact(&self, s: String) -> String {
        match &self.api_key {
            Some(k) if k.expose().len() >= 4 => s.replace(k.expose(), "***"),
            _ => s,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EndpointError {
    pub service: Service,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
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
    TooLarge { url: String, limit: usize },
}

impl Diagnostic for EndpointError {
    fn sqlstate(&self) -> SqlState {
        match &self.kind {
            ErrorKind::NotConfigured => SqlState::ObjectNotInPrerequisiteState,
            ErrorKind::BadUrl { .. } => SqlState::InvalidParameterValue,
            ErrorKind::Connect { .. } => SqlState::UnableToEstablishConnection,
            ErrorKind::Timeout { .. } => SqlState::QueryCanceled,
            ErrorKind::Auth { .. } => SqlState::InvalidAuthorization,
            ErrorKind::RateLimited { .. } => SqlState::ConfigurationLimitExceeded,
            ErrorKind::Server { .. } => SqlState::ConnectionFailure,
            ErrorKind::Http { .. } | ErrorKind::BadResponse { .. } | ErrorKind::EmptyAnswer { .. } => {
                SqlState::ProtocolViolation
            }
            ErrorKind::TooLarge { .. } => SqlState::ProgramLimitExceeded,
        }
    }

    fn message(&self) -> String {
        let svc = self.service.noun();
        match &self.kind {
            ErrorKind::NotConfigured => format!("{} is not set", self.service.setting("url")),
            ErrorKind::BadUrl { url, .. } => format!("invalid {svc} endpoint URL \"{url}\""),
            ErrorKind::Connect { url, .. } => format!("could not connect to the {svc} endpoint {url}"),
            ErrorKind::Timeout { url, ms } => format!("{svc} request to {url} timed out after {ms} ms"),
            ErrorKind::Auth { url, status, .. } => format!("{svc} endpoint {url} refused the credentials (HTTP {status})"),
            ErrorKind::RateLimited { url, attempts } => {
                format!("{svc} endpoint {url} is rate limiting (HTTP 429 after {})", attempts_text(*attempts))
            }
            ErrorKind::Server { url, status, attempts, .. } => {
                format!("{svc} endpoint {url} failed with HTTP {status} after {}", attempts_text(*attempts))
            }
            ErrorKind::Http { url, status, .. } => format!("{svc} endpoint {url} answered HTTP {status}"),
            ErrorKind::BadResponse { url, reason, .. } => format!("{svc} endpoint {url} sent an unusable answer: {reason}"),
            ErrorKind::EmptyAnswer { .. } => "the model returned an empty answer".into(),
            ErrorKind::TooLarge { url, limit } => format!("{svc} endpoint {url} sent an answer larger than {limit} bytes"),
        }
    }

    fn detail(&self) -> Option<String> {
        match &self.kind {
            ErrorKind::BadUrl { reason, .. } | ErrorKind::Connect { reason, .. } => Some(sentence(reason)),
            ErrorKind::Auth { body, .. }
            | ErrorKind::Server { body, .. }
            | ErrorKind::Http { body, .. }
            | ErrorKind::BadResponse { body, .. }
                if !body.is_empty() =>
            {
                Some(format!("Response body: {body}"))
            }
            ErrorKind::EmptyAnswer { finish_reason: Some(r) } => Some(format!("The model stopped with finish_reason \"{r}\".")),
            _ => None,
        }
    }

    fn hint(&self) -> Option<String> {
        let url = self.service.setting("url");
        match (&self.kind, self.service) {
            (ErrorKind::NotConfigured, Service::Llm) => Some(
                "A superuser sets the endpoint of any OpenAI-compatible API, for example: \
                 ALTER SYSTEM SET nl2sql.llm_url = 'http://127.0.0.1:8080/v1' (llama.cpp server), \
                 'http://127.0.0.1:11434/v1' (Ollama) or 'https://api.openai.com/v1' (OpenAI, with a key in \
                 NL2SQL_LLM_API_KEY or nl2sql.llm_api_key_file); \
                 then SELECT pg_reload_conf(). scripts/local-llm.sh starts a local model."
                    .into(),
            ),
            (ErrorKind::NotConfigured, Service::Embeddings) => Some(
                "Leave nl2sql.embedding_url empty for the built-in embedder, or have a superuser set it to an \
                 OpenAI-compatible API, e.g. 'http://127.0.0.1:8000/v1'."
                    .into(),
            ),
            (ErrorKind::BadUrl { .. }, _) => Some("Use a base URL such as http://127.0.0.1:8080/v1.".into()),
            (ErrorKind::Connect { .. }, _) => Some(format!("Check that the server runs and that {url} is right.")),
            (ErrorKind::Timeout { .. }, _) => {
                Some(format!("Raise {}, or use a faster model.", self.service.setting("timeout")))
            }
            (ErrorKind::Auth { .. }, Service::Llm) => Some(
                "Put the key in NL2SQL_LLM_API_KEY in the server's environment, or in the file named by nl2sql.llm_api_key_file (superuser).".into(),
            ),
            (ErrorKind::Auth { .. }, Service::Embeddings) => Some(
                "Put the key in NL2SQL_EMBEDDING_API_KEY in the server's environment, or in the file named by nl2sql.embedding_api_key_file (superuser)."
                    .into(),
            ),
            (ErrorKind::RateLimited { .. }, _) => Some("Wait, or raise nl2sql.llm_max_retries.".into()),
            (ErrorKind::Http { status: 404, .. }, _) => Some(format!(
                "Check that {url} ends with the API's base path (often /v1) and that {} exists.",
                self.service.setting("model")
            )),
            (ErrorKind::EmptyAnswer { finish_reason: Some(r) }, _) if r == "length" => {
                Some("Raise nl2sql.llm_max_tokens.".into())
            }
            (ErrorKind::EmptyAnswer { .. }, _) => Some("Check that nl2sql.llm_model names a chat model.".into()),
            (ErrorKind::TooLarge { .. }, Service::Llm) => {
                Some("Lower nl2sql.llm_max_tokens, or raise nl2sql.max_answer_bytes.".into())
            }
            _ => None,
        }
    }
}

impl EndpointError {
    /// Whether the error is the endpoint's as a whole, not one request's: it refuses the
    /// credentials, rate-limits, cannot be reached or is not set; another request would fail alike.
    pub fn is_the_endpoints(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Auth { .. } | ErrorKind::RateLimited { .. } | ErrorKind::Connect { .. } | ErrorKind::BadUrl { .. } | ErrorKind::NotConfigured
        )
    }

    /// The error as a report, with the API key scrubbed from every text.
    pub fn report(&self, key: Option<&Secret>) -> Report {
        Report::from_diagnostic(self).redact(key.map(|k| k.expose()))
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

/// A 2xx answer: its body, how many attempts it took, and how long since the first.
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub attempts: u32,
    pub latency: Duration,
}

/// POSTs a JSON body on the calling thread, retrying 429 and 5xx within the endpoint's timeout.
pub fn post_json(ep: &Endpoint, body: &str) -> Result<Reply, EndpointError> {
    post_json_until(ep, body, Instant::now() + ep.timeout)
}

/// [`post_json`] within a `deadline` the caller keeps (a request sent again in the same call
/// has what is left of the call's time, not a new timeout); a timeout error names the setting.
pub fn post_json_until(ep: &Endpoint, body: &str, deadline: Instant) -> Result<Reply, EndpointError> {
    let url = ep.url();
    let shown = ep.display_url();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ep.error(ErrorKind::BadUrl { url: shown, reason: "the URL must start with http:// or https://".into() }));
    }
    let start = Instant::now();
    let timed_out = || ep.error(ErrorKind::Timeout { url: shown.clone(), ms: ep.timeout.as_millis() });
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
        if let Some(k) = ep.api_key.as_ref().filter(|k| !k.is_empty()) {
            builder = builder.header("Authorization", format!("Bearer {}", k.expose()));
        }
        let mut resp = match builder.send(body) {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => return Err(timed_out()),
            Err(e) => return Err(classify_transport(ep, e)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = match resp.body_mut().with_config().limit(ep.max_body as u64).read_to_string() {
            Ok(t) => t,
            Err(ureq::Error::Timeout(_)) => return Err(timed_out()),
            Err(ureq::Error::BodyExceedsLimit(_)) => {
                return Err(ep.error(ErrorKind::TooLarge { url: shown, limit: ep.max_body }));
            }
            Err(e) => return Err(ep.bad_response(format!("reading the body failed: {e}"), "")),
        };
        let retryable = status == 429 || matches!(status, 500 | 502 | 503 | 504);
        if retryable && attempts <= ep.max_retries {
            let backoff = retry_after.unwrap_or(BACKOFF * 2u32.pow(attempts - 1)).min(MAX_BACKOFF);
            if backoff >= deadline.saturating_duration_since(Instant::now()) {
                return Err(timed_out());
            }
            thread::sleep(backoff);
            continue;
        }
        let body = || ep.redact(excerpt(&text));
        return match status {
            200..=299 => Ok(Reply { text, attempts, latency: start.elapsed() }),
            401 | 403 => Err(ep.error(ErrorKind::Auth { url: shown, status, body: body() })),
            429 => Err(ep.error(ErrorKind::RateLimited { url: shown, attempts })),
            500..=599 => Err(ep.error(ErrorKind::Server { url: shown, status, attempts, body: body() })),
            _ => Err(ep.error(ErrorKind::Http { url: shown, status, body: body() })),
        };
    }
}

fn classify_transport(ep: &Endpoint, e: ureq::Error) -> EndpointError {
    let url = ep.display_url();
    let reason = match &e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::BadUri(u) => {
            return ep.error(ErrorKind::BadUrl { url, reason: ep.redact(format!("bad URI: {u}")) });
        }
        other => other.to_string(),
    };
    ep.error(ErrorKind::Connect { url, reason: ep.redact(reason) })
}

/// Runs the jobs on helper threads and waits for all, calling `poll` every few milliseconds.
/// `poll` may unwind (a PostgreSQL error on cancel); the threads then finish on their own and
/// their results are dropped. A job whose thread cannot start or dies yields `lost()`.
pub fn run_concurrently<T: Send + 'static>(
    jobs: Vec<Box<dyn FnOnce() -> T + Send>>,
    poll: &mut dyn FnMut(),
    lost: impl Fn() -> T,
) -> Vec<T> {
    let n = jobs.len();
    let (tx, rx) = mpsc::channel::<(usize, T)>();
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut pending = 0;
    for (i, job) in jobs.into_iter().enumerate() {
        let tx = tx.clone();
        let spawned = spawn_without_signals(format!("nl2sql-http-{i}"), move || {
            let _ = tx.send((i, job()));
        });
        if spawned.is_ok() {
            pending += 1;
        }
    }
    drop(tx);
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
    results.into_iter().map(|r| r.unwrap_or_else(&lost)).collect()
}

/// Starts a helper thread with every signal blocked from its first instruction (it inherits the
/// mask set here around the spawn; the calling thread's own mask is restored after), so that a
/// signal meant for the PostgreSQL backend never runs PostgreSQL's handler on it.
#[cfg(unix)]
pub fn spawn_without_signals<T: Send + 'static>(name: String, f: impl FnOnce() -> T + Send + 'static) -> std::io::Result<thread::JoinHandle<T>> {
    // SAFETY: sigset_t is plain data that sigfillset fills; pthread_sigmask with valid sets.
    // The caller's mask comes back when `_restore` drops, also if the spawn panics.
    let _restore = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        (libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old) == 0).then_some(RestoreMask(old))
    };
    thread::Builder::new().name(name).spawn(move || {
        // Blocked already where the mask could be set above; blocked here otherwise.
        block_signals();
        f()
    })
}

/// A thread's signal mask, set again when dropped.
#[cfg(unix)]
struct RestoreMask(libc::sigset_t);

#[cfg(unix)]
impl Drop for RestoreMask {
    fn drop(&mut self) {
        // SAFETY: a mask pthread_sigmask returned.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(not(unix))]
pub fn spawn_without_signals<T: Send + 'static>(name: String, f: impl FnOnce() -> T + Send + 'static) -> std::io::Result<thread::JoinHandle<T>> {
    thread::Builder::new().name(name).spawn(f)
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

/// What an endpoint URL carries that is a credential or cannot work: a user name and password
/// before the host (shown to every role by SHOW, like any setting), or a query string or
/// fragment (a key in `?key=`; the service's path is appended after it, so it never works).
/// None for a URL that carries neither.
pub fn url_carries(url: &str) -> Option<&'static str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Some("a user name or password");
    }
    if rest.contains(['?', '#']) {
        return Some("a query string or fragment");
    }
    None
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
pub(crate) mod tests;
