//! nl2sql_explain(question, hint): what every stage of the pipeline saw and did, as jsonb;
//! declared here, assembled by pg/explain.rs.

use pgrx::prelude::*;

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
    Some(pgrx::JsonB(crate::pg::explain::explain(question, hint, follows, previous_question, previous_sql)))
}
