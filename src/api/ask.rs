//! nl2sql(question, hint) and nl2sql_run(question, hint).

use crate::gucs;
use crate::pg::{catalog, errors, model::Model, sandbox, values};
use nl2sql_core::error::Report;
use nl2sql_core::guard::FunctionRef;
use nl2sql_core::pipeline::{self, Answer, Database, Question, Settings, Trace};
use nl2sql_core::refine::Failure;
use nl2sql_core::retrieve::ValueHint;
use nl2sql_core::{rows, Execution};
use pgrx::prelude::*;
use std::cell::RefCell;

thread_local! {
    /// The trace of this backend's last call, for nl2sql.last_trace().
    pub static LAST_TRACE: RefCell<Option<Trace>> = const { RefCell::new(None) };
}

/// Translates a question into one read-only query, checked by executing it in the sandbox.
#[pg_extern(volatile, parallel_unsafe)]
fn nl2sql(question: Option<&str>, hint: default!(Option<&str>, "NULL")) -> Option<String> {
    let question = question?;
    Some(answer(question, hint).sql)
}

/// Translates a question and returns the rows of the query, one jsonb object a row.
#[pg_extern(volatile, parallel_unsafe)]
fn nl2sql_run(question: Option<&str>, hint: default!(Option<&str>, "NULL")) -> SetOfIterator<'static, pgrx::JsonB> {
    let Some(question) = question else {
        return SetOfIterator::empty();
    };
    let a = answer(question, hint);
    if a.execution.truncated {
        notice!("result truncated to {} rows (nl2sql.max_rows)", a.execution.rows.len());
    }
    let Execution { columns, rows: data, .. } = a.execution;
    let keys = rows::keys(&columns);
    SetOfIterator::new(data.into_iter().map(move |r| pgrx::JsonB(rows::row_object(&keys, &columns, &r))))
}

/// Runs the pipeline, raising its errors as PostgreSQL errors.
fn answer(question: &str, hint: Option<&str>) -> Answer {
    let q = Question { text: question.to_string(), hint: hint.map(str::to_string) };
    if let Err(e) = pipeline::validate(&q) {
        errors::raise(&e);
    }
    let mut model = Model::from_settings().unwrap_or_else(|e| errors::raise(&e.report(None)));
    let schema = catalog::load_schema(gucs::sample_rows(), gucs::schema_max_tokens()).unwrap_or_else(|r| errors::raise(&r));
    let settings = Settings {
        max_corrections: gucs::max_corrections(),
        max_tokens: gucs::llm_max_tokens(),
        schema_max_tokens: gucs::schema_max_tokens(),
        allowed_functions: gucs::allowed_functions(),
    };
    let mut db = Sandboxed;
    let result = pipeline::ask(&q, &schema, &settings, &mut model, &mut db);
    let trace = match &result {
        Ok(a) => a.trace.clone(),
        Err((_, t)) => t.clone(),
    };
    if trace.tables_omitted > 0 {
        notice!(
            "the schema has {} tables; only {} fit in nl2sql.schema_max_tokens",
            trace.tables_shown + trace.tables_omitted,
            trace.tables_shown
        );
    }
    LAST_TRACE.with_borrow_mut(|t| *t = Some(trace));
    match result {
        Ok(a) => a,
        Err((e, _)) => errors::raise(&e),
    }
}

/// The database as the pipeline sees it: the catalog for function volatility, the sandbox for execution.
struct Sandboxed;

impl Database for Sandboxed {
    fn volatile_functions(&mut self, functions: &[FunctionRef]) -> Result<Vec<FunctionRef>, Report> {
        catalog::volatile_functions(functions)
    }

    fn execute(&mut self, sql: &str) -> Result<Execution, Failure> {
        sandbox::execute(sql, gucs::statement_timeout(), gucs::max_rows())
    }

    fn similar_values(&mut self, text: &str) -> Vec<ValueHint> {
        if !gucs::use_values() || gucs::value_top_k() == 0 {
            return Vec::new();
        }
        values::search_values(text, gucs::value_top_k(), gucs::value_threshold(), false)
            .into_iter()
            .map(|f| ValueHint {
                // The table as the schema prompt writes it (qualified only when not on the path).
                column: format!("{}.{}", values::visible_name(f.relid), pgrx::spi::quote_identifier(&f.column)),
                value: f.value,
                score: f.score,
            })
            .collect()
    }
}
