//! The explanation of one question's run: its answer or error, the settings it ran with, the
//! trace of every stage and sums over the model calls.

use crate::gucs;
use crate::pg::ask::{self, scrub};
use nl2sql_core::error::Diagnostic;
use nl2sql_core::pipeline::rows;
use nl2sql_core::pipeline::Trace;
use serde_json::{json, Map, Value};

/// Rows of the answer shown in the explanation.
const PREVIEW_ROWS: usize = 5;

/// Runs the pipeline for `question` and returns its explanation, scrubbed of the API key. What
/// goes wrong in the pipeline is reported in "error"; bad input and a missing endpoint raise.
pub fn explain(
    question: &str,
    hint: Option<&str>,
    follows: Option<i64>,
    previous_question: Option<&str>,
    previous_sql: Option<&str>,
) -> Value {
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
    scrub(Value::Object(out), secret.as_deref())
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
