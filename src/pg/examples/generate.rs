//! Batch model jobs over the examples library: synthetic question/SQL pairs per table (QA-SQL),
//! each run in the sandbox and kept only when its result is new; chains of thought for examples
//! that lack one.

use super::{example_schema, reader_dependent, refuse_under_privacy, schema_for_prompts, store, temporary, thought, STORE};
use crate::gucs;
use crate::pg::errors::{fail, raise};
use crate::pg::{model, owner, role, sandbox, spi};
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::pipeline::{self, Llm};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use std::collections::HashSet;

pub use nl2sql_core::library::Generated;
use nl2sql_core::library::{self, Job, Library, Row};
use nl2sql_core::model::llm::LlmError;

/// The database side of the job: pairs run for the caller in the sandbox, kept as the extension
/// owner when no relation they read shows each reader other rows.
struct Host<'a> {
    secret: Option<&'a str>,
}

impl Library for Host<'_> {
    fn run(&mut self, sql: &str) -> Option<(Vec<Row>, Vec<u32>)> {
        let ran = sandbox::savepoint(|| role::as_exec_role(|| sandbox::execute_reading(sql, sandbox::Limits::from_settings())));
        let (execution, reads) = ran?.ok()?;
        Some((execution.rows, reads.into_iter().map(u32::from).collect()))
    }

    fn keep(&mut self, question: &str, sql: &str, reads: Vec<u32>) -> bool {
        let reads: Vec<pg_sys::Oid> = reads.into_iter().map(pg_sys::Oid::from).collect();
        // Kept because it returned rows for this role: a table whose rows depend on the reader
        // would make the pair tell others what only this role sees.
        if !reader_dependent(&reads).is_empty() || temporary(&reads).is_some() {
            return false;
        }
        store(question, sql, None, None, "synthetic", true, reads.clone(), reads);
        true
    }

    fn progress(&mut self, done: usize, of: usize, row: &Generated) {
        note!("nl2sql: {done}/{of} {}: {} pairs written, {} ran, {} kept", row.scope, row.written, row.executed, row.kept);
    }

    fn failed(&mut self, scope: &str, error: &LlmError) {
        alert!("no examples for {scope}: {}", Report::from_diagnostic(error).redact(self.secret).message);
    }
}

/// nl2sql.generate_examples(): QA-SQL pairs per table and per joined pair of tables, kept
/// when they run for the caller and return rows, deduplicated by normalised SQL and by result
/// (the decisions are the core's, nl2sql_core::library).
pub fn generate(per_table: i32) -> Vec<Generated> {
    STORE.require_writer("generate examples");
    refuse_under_privacy("generate examples");
    if !(1..=20).contains(&per_table) {
        fail(SqlState::InvalidParameterValue, format!("per_table must be between 1 and 20, not {per_table}"), None, None);
    }
    let mut model = model::from_settings().unwrap_or_else(|e| raise(&e.report(None)));
    let schema = schema_for_prompts();
    if schema.is_empty() {
        fail(SqlState::UndefinedTable, "no tables to write examples for".into(), None, Some("GRANT SELECT on the tables to this role."));
    }
    // What the library already holds, as far as this role sees it.
    let seen_sql: HashSet<String> =
        spi::rows("SELECT sql FROM nl2sql.examples", &[], |r| r.get::<String>(1).ok()?).iter().map(|s| pipeline::normal_form(s)).collect();
    let job = Job { per_table: per_table as usize, temperature: gucs::temperature(), schema_max_tokens: gucs::schema_max_tokens() };
    let secret = model.secret().map(str::to_string);
    let mut host = Host { secret: secret.as_deref() };
    let out = library::generate(&job, &schema, seen_sql, &mut model, &mut host)
        .unwrap_or_else(|e| raise(&Report::from_diagnostic(&e).redact(secret.as_deref())));
    let (p, c): (i64, i64) = out.iter().fold((0, 0), |(p, c), r| (p + r.prompt_tokens, c + r.completion_tokens));
    note!(
        "nl2sql: {} synthetic examples kept of {} written; {p} prompt and {c} completion tokens",
        out.iter().map(|r| r.kept).sum::<i32>(),
        out.iter().map(|r| r.written).sum::<i32>()
    );
    out
}

/// nl2sql.write_example_thoughts(): writes the missing chains of thought of up to `max`
/// examples the caller sees; how many were written.
pub fn write_thoughts(max: i32) -> i64 {
    STORE.require_writer("write chains of thought");
    refuse_under_privacy("write chains of thought");
    let mut model = model::from_settings().unwrap_or_else(|e| raise(&e.report(None)));
    let todo: Vec<(i64, String, String, Vec<pg_sys::Oid>)> = spi::rows(
        "SELECT id, question, sql, relations::pg_catalog.oid[] FROM nl2sql.examples
         WHERE thought IS NULL AND source <> 'builtin' ORDER BY id LIMIT $1",
        &[(max.max(0) as i64).into()],
        |r| Some((r.get::<i64>(1).ok()??, r.get::<String>(2).ok()??, r.get::<String>(3).ok()??, r.get::<Vec<pg_sys::Oid>>(4).ok()??)),
    );
    if todo.is_empty() {
        return 0;
    }
    let schema = schema_for_prompts();
    let mut written = 0;
    for (i, (id, question, sql, reads)) in todo.iter().enumerate() {
        check_for_interrupts!();
        let (text, shown) = example_schema(&schema, reads);
        if let Some(t) = thought(&mut model, &text, question, sql) {
            // A synthetic pair or an offered query was written from rows of every relation it
            // reads (`sampled` holds them all, the thought's among them); a curator's example
            // records what the new thought was written from.
            owner::as_owner(|| {
                spi::write(
                    include_str!("../../../sql/queries/examples_generate_write_thoughts.sql"),
                    &[(*id).into(), t.as_str().into(), DatumWithOid::from(shown)],
                )
            });
            written += 1;
        }
        note!("nl2sql: {}/{} chains of thought", i + 1, todo.len());
    }
    written
}
