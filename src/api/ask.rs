//! nl2sql(question, hint) and nl2sql_run(question, hint): declared here, run by pg/ask.rs.

use crate::pg::ask::{answer, follow_up, scrub, scrub_text};
use nl2sql_core::{pipeline::rows, Execution};
use pgrx::prelude::*;

/// Translates a question into one read-only query, checked by executing it in the sandbox.
/// A follow-up names the call it follows (`follows`, a history id) or passes the earlier
/// question and query.
#[pg_extern(volatile, parallel_unsafe)]
fn nl2sql(
    question: Option<&str>,
    hint: default!(Option<&str>, "NULL"),
    follows: default!(Option<i64>, "NULL"),
    previous_question: default!(Option<&str>, "NULL"),
    previous_sql: default!(Option<&str>, "NULL"),
) -> Option<String> {
    let question = question?;
    let previous = follow_up(follows, previous_question, previous_sql);
    let (a, secret) = answer(question, hint, previous);
    Some(scrub_text(a.sql, secret.as_deref()))
}

/// Translates a question and returns the rows of the query, one jsonb object a row.
#[pg_extern(volatile, parallel_unsafe)]
fn nl2sql_run(
    question: Option<&str>,
    hint: default!(Option<&str>, "NULL"),
    follows: default!(Option<i64>, "NULL"),
    previous_question: default!(Option<&str>, "NULL"),
    previous_sql: default!(Option<&str>, "NULL"),
) -> SetOfIterator<'static, pgrx::JsonB> {
    let Some(question) = question else {
        return SetOfIterator::empty();
    };
    let previous = follow_up(follows, previous_question, previous_sql);
    let (a, secret) = answer(question, hint, previous);
    if a.execution.byte_limited {
        note!("result truncated to {} rows (nl2sql.max_result_bytes)", a.execution.rows.len());
    } else if a.execution.truncated {
        note!("result truncated to {} rows (nl2sql.max_rows)", a.execution.rows.len());
    }
    let Execution { columns, rows: data, .. } = a.execution;
    let keys = rows::keys(&columns);
    SetOfIterator::new(
        data.into_iter().map(move |r| pgrx::JsonB(scrub(rows::row_object(&keys, &columns, &r), secret.as_deref()))),
    )
}
