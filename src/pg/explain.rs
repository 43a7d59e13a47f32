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

/// The settings the pipeline ran with (never the endpoint's URL or key): the pipeline's own,
/// and those the database side reads.
fn settings() -> Value {
    let mut out = match serde_json::to_value(ask::settings()) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    out.extend([
        ("model".into(), json!(gucs::llm_model())),
        ("llm_n".into(), json!(gucs::llm_n())),
        ("grammar".into(), json!(grammar_setting())),
        ("use_values".into(), json!(gucs::use_values())),
        ("value_top_k".into(), json!(gucs::value_top_k())),
        ("value_threshold".into(), json!(gucs::value_threshold())),
        ("min_confidence".into(), json!(gucs::min_confidence())),
        ("on_low_confidence".into(), json!(format!("{:?}", gucs::on_low_confidence()).to_lowercase())),
        ("max_cost".into(), json!(gucs::max_cost())),
        ("history".into(), json!(gucs::history())),
    ]);
    Value::Object(out)
}

/// nl2sql.grammar as it is written in SQL.
fn grammar_setting() -> &'static str {
    use nl2sql_core::grammar::Mode;
    match gucs::grammar() {
        Mode::Off => "off",
        Mode::Auto => "auto",
        Mode::LlamaCpp => "llama_cpp",
        Mode::Vllm => "vllm",
    }
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
