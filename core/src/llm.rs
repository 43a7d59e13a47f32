//! OpenAI-compatible chat completions, over the transport in [`crate::http`].

use crate::http::{self, Endpoint, EndpointError, ErrorKind, Service};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

pub use crate::http::block_signals;

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
    pub latency: Duration,
    pub attempts: u32,
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
                let reply = http::post_json(&ep, &request_body(&ep, &req))?;
                parse_completion(&ep, &reply.text, reply.latency, reply.attempts)
            });
            job
        })
        .collect();
    let lost = || Err(ep.bad_response("the worker thread could not run", ""));
    http::run_concurrently(jobs, poll, lost)
}

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

/// Reads an OpenAI chat completion response.
pub fn parse_completion(ep: &Endpoint, text: &str, latency: Duration, attempts: u32) -> Result<Completion, LlmError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            ep.bad_response("the JSON is truncated", text)
        } else {
            ep.bad_response(format!("the body is not JSON ({e})"), text)
        }
    })?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ep.bad_response("no choices in the response", text))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Diagnostic, SqlState};
    use crate::http::tests::{endpoint, serve};

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
}
