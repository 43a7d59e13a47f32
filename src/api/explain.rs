//! nl2sql_explain(question, hint): what every stage of the pipeline saw and did, as jsonb.

use crate::api::ask;
use crate::gucs;
use nl2sql_core::error::Diagnostic;
use nl2sql_core::pipeline::Trace;
use nl2sql_core::rows;
use pgrx::prelude::*;
use serde_json::{json, Map, Value};

/// Rows of the answer shown in the explanation.
const PREVIEW_ROWS: usize = 5;

/// Runs the pipeline for `question` and returns its trace: extraction, retrieved values,
/// the per-question schema, every candidate (raw, aligned, executed, corrected), the vote,
/// the confidence and every LLM call. What goes wrong in the pipeline (the model, the
/// candidates) is reported in "error"; bad input and a missing endpoint raise as in nl2sql().
#[pg_extern(volatile, parallel_unsafe)]
fn nl2sql_explain(
    question: Option<&str>,
    hint: default!(Option<&str>, "NULL"),
    follows: default!(Option<i64>, "NULL"),
    previous_question: default!(Option<&str>, "NULL"),
    previous_sql: default!(Option<&str>, "NULL"),
) -> Option<pgrx::JsonB> {
    let question = question?;
    let previous = ask::follow_up(follows, previous_question, previous_sql);
    let (result, secret) = ask::run(question, hint, previous);
    let mut out = Map::new();
    out.insert("question".into(), json!(question));
    out.insert("hint".into(), json!(hint));
    out.insert("settings".into(), settings());
    let trace: Trace = match result {
        Ok(a) => {
            let keys = rows::keys(&a.execution.columns);
            let preview: Vec<Value> =
                a.execution.rows.iter().take(PREVIEW_ROWS).map(|r| rows::row_object(&keys, &a.execution.columns, r)).collect();
            out.insert("sql".into(), json!(a.sql));
            out.insert(
                "result".into(),
                json!({
                    "columns": keys,
                    "rows": a.execution.rows.len(),
                    "truncated": a.execution.truncated,
                    "preview": preview,
                }),
            );
            out.insert("error".into(), Value::Null);
            a.trace
        }
        Err((e, trace)) => {
            out.insert("sql".into(), Value::Null);
            out.insert("result".into(), Value::Null);
            out.insert(
                "error".into(),
                json!({"sqlstate": e.sqlstate().code(), "message": e.message(), "detail": e.detail(), "hint": e.hint()}),
            );
            trace
        }
    };
    let unsure = trace.confidence.is_some_and(|c| c < gucs::min_confidence());
    out.insert("unsure".into(), json!(unsure));
    out.insert("totals".into(), totals(&trace));
    if let Ok(Value::Object(t)) = serde_json::to_value(&trace) {
        out.extend(t);
    }
    Some(pgrx::JsonB(scrub(Value::Object(out), secret.as_deref())))
}

/// The settings the pipeline ran with (never the endpoint's URL or key).
fn settings() -> Value {
    let s = ask::settings();
    json!({
        "mode": s.mode,
        "model": gucs::llm_model(),
        "candidates": s.candidates,
        "first_wave": s.first_wave,
        "agreement": gucs::agreement(),
        "alone_confidence": s.alone,
        "temperature": s.temperature,
        "max_corrections": s.max_corrections,
        "use_extraction": s.extraction,
        "extraction_min_tokens": s.extraction_min_tokens,
        "extraction_max_tokens": s.extraction_max_tokens,
        "llm_n": gucs::llm_n(),
        "use_chain_of_thought": s.chain_of_thought,
        "align_agent": s.alignment.agent,
        "align_function": s.alignment.function,
        "align_style": s.alignment.style,
        "use_values": gucs::use_values(),
        "value_top_k": gucs::value_top_k(),
        "value_threshold": gucs::value_threshold(),
        "column_matches": s.column_matches,
        "generators": s.generators.iter().map(|g| g.name()).collect::<Vec<_>>(),
        "examples": s.examples,
        "min_confidence": gucs::min_confidence(),
        "on_low_confidence": format!("{:?}", gucs::on_low_confidence()).to_lowercase(),
        "privacy": s.privacy,
        "max_tokens_per_call": s.token_budget,
        "max_cost": gucs::max_cost(),
        "history": gucs::history(),
        "agent_max_turns": s.agent_max_turns,
        "schema_max_tokens": s.schema_max_tokens,
    })
}

/// Sums over the LLM calls.
fn totals(t: &Trace) -> Value {
    let sum = |f: &dyn Fn(&nl2sql_core::pipeline::LlmCall) -> Option<u64>| -> Option<u64> {
        t.llm_calls.iter().map(f).try_fold(0u64, |acc, x| x.map(|x| acc + x))
    };
    json!({
        "llm_calls": t.llm_calls.len(),
        "round_trips": t.round_trips,
        "prompt_tokens": sum(&|c| c.prompt_tokens),
        "prompt_tokens_estimate": t.llm_calls.iter().map(|c| c.prompt_tokens_estimate).sum::<usize>(),
        "completion_tokens": sum(&|c| c.completion_tokens),
        "cached_tokens": sum(&|c| c.cached_tokens),
        "llm_ms": t.llm_calls.iter().map(|c| c.latency_ms).sum::<f64>(),
        "candidates": t.candidates.len(),
        "executed": t.candidates.iter().filter(|c| c.exec_ms.is_some()).count(),
        "corrections": t.candidates.iter().filter(|c| c.round > 0).count(),
    })
}

/// Replaces the API key wherever it appears, keys of objects included (a model could echo
/// what it was never sent; an endpoint's error body could hold it).
pub fn scrub(v: Value, secret: Option<&str>) -> Value {
    let Some(secret) = secret.filter(|s| s.len() >= 4) else { return v };
    let text = |s: String| if s.contains(secret) { s.replace(secret, "***") } else { s };
    match v {
        Value::String(s) => Value::String(text(s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| scrub(x, Some(secret))).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| (text(k), scrub(x, Some(secret)))).collect()),
        other => other,
    }
}
