use super::*;
use crate::error::{Diagnostic, SqlState};
use crate::model::http::tests::{endpoint, serve};

fn request() -> ChatRequest {
    ChatRequest { messages: vec![Message::user("hi")], temperature: 0.0, max_tokens: 16, grammar: None, reask: true }
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

fn with_grammar(g: &str) -> ChatRequest {
    ChatRequest { grammar: Some(Arc::new(g.to_string())), ..request() }
}

fn length_body(content: &str) -> String {
    serde_json::json!({"choices": [{"message": {"content": content}, "finish_reason": "length"}]}).to_string()
}

#[test]
fn a_grammar_goes_in_the_form_the_setting_names_and_not_when_off() {
    let (url, h) = serve(vec![(200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 2"), 0), (200, ok_body("SELECT 3"), 0)]);
    let mut ep = endpoint(Service::Llm, url);
    ep.grammar = Mode::LlamaCpp;
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer");
    assert_eq!(c.grammar, Some(12));
    ep.grammar = Mode::Vllm;
    assert_eq!(chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer").grammar, Some(12));
    ep.grammar = Mode::Off;
    assert!(!takes_grammar(&ep));
    assert_eq!(chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer").grammar, None);
    let seen = h.join().expect("server");
    assert!(seen[0].contains(r#""grammar":"root ::= \"x\"""#) && !seen[0].contains("structured_outputs"), "{}", seen[0]);
    assert!(seen[1].contains(r#""structured_outputs":{"grammar":"root ::= \"x\""}"#), "{}", seen[1]);
    assert!(!seen[2].contains("grammar"), "{}", seen[2]);
}

#[test]
fn an_endpoint_refusing_a_grammar_is_asked_again_without_and_not_sent_one_again() {
    let refusal = r#"{"error":{"code":400,"message":"Unrecognized request argument supplied: grammar"}}"#;
    let replies = vec![(400, refusal.to_string(), 0), (200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 2"), 0)];
    let (url, h) = serve(replies);
    let mut ep = endpoint(Service::Llm, url);
    ep.grammar = Mode::Auto;
    assert!(takes_grammar(&ep));
    let first = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer");
    assert_eq!((first.content.as_str(), first.grammar), ("SELECT 1", None));
    assert!(!takes_grammar(&ep));
    assert_eq!(chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer").content, "SELECT 2");
    let seen = h.join().expect("server");
    assert_eq!(seen.iter().map(|r| r.contains("\"grammar\"")).collect::<Vec<_>>(), [true, false, false]);
}

#[test]
fn a_request_failing_without_the_grammar_too_keeps_it() {
    let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#;
    let (url, h) = serve(vec![(400, too_long.to_string(), 0), (400, too_long.to_string(), 0)]);
    let mut ep = endpoint(Service::Llm, url);
    ep.grammar = Mode::Auto;
    assert!(chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).is_err());
    assert!(takes_grammar(&ep));
    h.join().expect("server");
}

#[test]
fn an_answer_that_ran_to_the_limit_under_the_grammar_is_asked_again_without() {
    let (url, h) = serve(vec![(200, length_body("SELECT a.b, a.b, a.b"), 0), (200, ok_body("SELECT 1"), 0), (200, length_body("SELECT 2"), 0)]);
    let mut ep = endpoint(Service::Llm, url);
    ep.grammar = Mode::Auto;
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer");
    assert_eq!((c.content.as_str(), c.grammar), ("SELECT 1", None));
    // the grammar stays on for the next request; without a grammar, the limit is the answer's own
    assert!(takes_grammar(&ep));
    assert_eq!(chat(&ep, request(), &mut || {}).expect("answer").finish_reason.as_deref(), Some("length"));
    let seen = h.join().expect("server");
    assert_eq!(seen.iter().map(|r| r.contains("\"grammar\"")).collect::<Vec<_>>(), [true, false, false]);
}

#[test]
fn an_answer_asked_again_counts_what_both_requests_spent() {
    let looped = serde_json::json!({"choices": [{"message": {"content": "SELECT a.b, a.b"}, "finish_reason": "length"}],
                                    "usage": {"prompt_tokens": 40, "completion_tokens": 16}})
    .to_string();
    let (url, h) = serve(vec![(200, looped, 0), (200, ok_body("SELECT 1"), 0)]);
    let mut ep = endpoint(Service::Llm, url);
    ep.grammar = Mode::Auto;
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer");
    assert_eq!((c.content.as_str(), c.prompt_tokens, c.completion_tokens, c.attempts), ("SELECT 1", Some(52), Some(19), 2));
    // Without usage in the looped answer, its tokens are estimated: never counted as none.
    let (url, h2) = serve(vec![(200, length_body("SELECT a.b, a.b, a.b, a.b"), 0), (200, ok_body("SELECT 1"), 0)]);
    ep = Endpoint { grammar: Mode::Auto, ..endpoint(Service::Llm, url) };
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer");
    let estimated = (estimate_tokens("hi") + 12) as u64;
    assert_eq!((c.prompt_tokens, c.completion_tokens), (Some(estimated), Some(estimate_tokens("SELECT a.b, a.b, a.b, a.b") as u64 + 3)));
    h.join().expect("server");
    h2.join().expect("server");
}

#[test]
fn a_looped_answer_of_several_counts_the_requests_usage_once() {
    let choices = serde_json::json!({"choices": [
        {"index": 0, "message": {"content": "SELECT a.b, a.b"}, "finish_reason": "length"},
        {"index": 1, "message": {"content": "SELECT 2"}, "finish_reason": "stop"},
        {"index": 2, "message": {"content": "SELECT c.d, c.d"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 30}})
    .to_string();
    let (url, h) = serve(vec![(200, choices, 0), (200, ok_body("SELECT 1"), 0), (200, ok_body("SELECT 1"), 0)]);
    let ep = Endpoint { grammar: Mode::Auto, ..endpoint(Service::Llm, url) };
    let rs: Vec<Completion> = sample(&ep, with_grammar("root ::= \"x\""), 3, true, &mut || {}).into_iter().map(|r| r.expect("answer")).collect();
    assert_eq!(rs.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(), ["SELECT 1", "SELECT 2", "SELECT 1"]);
    // The request's usage rode on its first answer: kept there, with the new request's added.
    assert_eq!((rs[0].prompt_tokens, rs[0].completion_tokens, rs[0].same_request), (Some(52), Some(33), false));
    // The third answer's request spent only what it reports.
    assert_eq!((rs[2].prompt_tokens, rs[2].completion_tokens, rs[2].same_request), (Some(12), Some(3), false));
    assert_eq!(h.join().expect("server").len(), 3);
}

#[test]
fn a_looped_answer_whose_retry_fails_stands_with_its_spending() {
    let looped = serde_json::json!({"choices": [{"message": {"content": "SELECT a.b, a.b"}, "finish_reason": "length"}],
                                    "usage": {"prompt_tokens": 40, "completion_tokens": 16}})
    .to_string();
    let bad = r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#;
    let (url, h) = serve(vec![(200, looped, 0), (400, bad.to_string(), 0)]);
    let ep = Endpoint { grammar: Mode::Auto, ..endpoint(Service::Llm, url) };
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("the looped answer");
    assert_eq!((c.content.as_str(), c.finish_reason.as_deref()), ("SELECT a.b, a.b", Some("length")));
    // Its own tokens, and the failed request's prompt (estimated): never fewer than were spent.
    assert_eq!((c.prompt_tokens, c.completion_tokens), (Some(40 + estimate_tokens("hi") as u64), Some(16)));
    assert_eq!(h.join().expect("server").len(), 2);
}

#[test]
fn later_answers_of_a_request_without_usage_are_left_to_be_estimated() {
    let choices = serde_json::json!({"choices": [
        {"index": 0, "message": {"content": "SELECT 1"}, "finish_reason": "stop"},
        {"index": 1, "message": {"content": "SELECT 2"}, "finish_reason": "stop"}]})
    .to_string();
    let (url, h) = serve(vec![(200, choices, 0)]);
    let rs: Vec<Completion> = sample(&endpoint(Service::Llm, url), request(), 2, true, &mut || {}).into_iter().map(|r| r.expect("answer")).collect();
    assert_eq!((rs[0].completion_tokens, rs[1].completion_tokens, rs[1].same_request), (None, None, true));
    h.join().expect("server");
}

#[test]
fn a_server_error_under_the_grammar_is_sent_once_more_without_and_counts_every_attempt() {
    // Two retries with the grammar (three attempts), then one request without: four in all.
    let boom = || (500, "boom".to_string(), 0);
    let (url, h) = serve(vec![boom(), boom(), boom(), boom()]);
    let ep = Endpoint { grammar: Mode::Auto, ..endpoint(Service::Llm, url) };
    let e = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect_err("down");
    assert!(matches!(e.kind, ErrorKind::Server { status: 500, attempts: 4, .. }), "{e:?}");
    assert!(e.message().contains("after 4 attempts"), "{}", e.message());
    let seen = h.join().expect("server");
    assert_eq!(seen.iter().map(|r| r.contains("\"grammar\"")).collect::<Vec<_>>(), [true, true, true, false]);
    // A 500 is not a refusal: the grammar stays on.
    assert!(takes_grammar(&ep));
}

#[test]
fn an_answer_asked_again_after_a_server_error_counts_both_requests_attempts() {
    let (url, h) = serve(vec![(500, "boom".into(), 0), (200, ok_body("SELECT 1"), 0)]);
    let ep = Endpoint { grammar: Mode::Auto, max_retries: 0, ..endpoint(Service::Llm, url) };
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("answer");
    assert_eq!((c.content.as_str(), c.attempts, c.grammar), ("SELECT 1", 2, None));
    h.join().expect("server");
}

#[test]
fn both_requests_of_a_call_share_its_timeout() {
    // The answer at the limit arrives after 400 ms of a 700 ms timeout; asked again, the second
    // would take 400 ms more: past the call's time, so the first answer stands.
    let (url, h) = serve(vec![(200, length_body("SELECT a.b, a.b"), 400), (200, ok_body("SELECT 1"), 400)]);
    let ep = Endpoint { grammar: Mode::Auto, timeout: Duration::from_millis(700), ..endpoint(Service::Llm, url) };
    let c = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect("the looped answer");
    assert_eq!((c.content.as_str(), c.finish_reason.as_deref()), ("SELECT a.b, a.b", Some("length")));
    h.join().expect("server");
    // A refusal that took most of the time leaves the request without the grammar the rest.
    let refusal = r#"{"error":{"message":"Unrecognized request argument supplied: grammar"}}"#;
    let (url, h) = serve(vec![(400, refusal.to_string(), 400), (200, ok_body("SELECT 1"), 400)]);
    let ep = Endpoint { grammar: Mode::Auto, timeout: Duration::from_millis(700), ..endpoint(Service::Llm, url) };
    let e = chat(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect_err("out of time");
    assert!(matches!(e.kind, ErrorKind::Timeout { ms: 700, .. }), "{e:?}");
    h.join().expect("server");
}

#[test]
fn an_answer_at_the_limit_stands_where_the_request_may_not_be_asked_again() {
    let (url, h) = serve(vec![(200, length_body("SELECT a.b, a.b"), 0), (200, length_body("SELECT c.d, c.d"), 0)]);
    let ep = Endpoint { grammar: Mode::Auto, ..endpoint(Service::Llm, url) };
    let once = ChatRequest { reask: false, ..with_grammar("root ::= \"x\"") };
    let c = chat(&ep, once.clone(), &mut || {}).expect("answer");
    assert_eq!((c.content.as_str(), c.grammar, c.attempts), ("SELECT a.b, a.b", Some(12), 1));
    // Nor one of several.
    let rs = chat_many(&ep, vec![once], &mut || {});
    assert_eq!(rs[0].as_ref().map(|c| c.content.as_str()).ok(), Some("SELECT c.d, c.d"));
    assert_eq!(h.join().expect("server").len(), 2);
}

#[test]
fn a_scored_request_in_an_outage_sends_a_bounded_number_of_requests_and_counts_them() {
    // With the grammar and log probabilities, retried once (2); without the grammar (1); then
    // without log probabilities, with the grammar (1) and without it (1), neither retried.
    let boom = || (500, "boom".to_string(), 0);
    let (url, h) = serve(vec![boom(), boom(), boom(), boom(), boom()]);
    let ep = Endpoint { grammar: Mode::Auto, max_retries: 1, ..endpoint(Service::Llm, url) };
    let e = chat_scored(&ep, with_grammar("root ::= \"x\""), &mut || {}).expect_err("down");
    assert!(matches!(e.kind, ErrorKind::Server { attempts: 5, .. }), "{e:?}");
    let seen = h.join().expect("server");
    assert_eq!(seen.iter().map(|r| r.contains("\"grammar\"")).collect::<Vec<_>>(), [true, true, false, true, false]);
    assert_eq!(seen.iter().map(|r| r.contains("\"logprobs\"")).collect::<Vec<_>>(), [true, true, true, false, false]);
}

#[test]
fn requests_sent_alone_after_a_refused_n_have_what_is_left_of_the_call() {
    // The request for two answers is refused after 400 ms of a 700 ms timeout; the two sent
    // alone would each take 400 ms more: they time out with the call.
    let refusal = r#"{"error":{"message":"only one completion choice is allowed"}}"#;
    let (url, h) = serve(vec![(400, refusal.to_string(), 400), (200, ok_body("SELECT 1"), 400), (200, ok_body("SELECT 1"), 400)]);
    let ep = Endpoint { timeout: Duration::from_millis(700), ..endpoint(Service::Llm, url) };
    let rs = sample(&ep, request(), 2, true, &mut || {});
    assert!(rs.iter().all(|r| matches!(r, Err(e) if matches!(e.kind, ErrorKind::Timeout { ms: 700, .. }))), "{rs:?}");
    h.join().expect("server");
}
