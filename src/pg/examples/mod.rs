//! The examples library (sql/examples.sql), by lifecycle: curation (curate.rs: adding an example
//! after running its SQL in the sandbox, removing, enabling, embedding), retrieval for the
//! pipeline (search.rs), and batch model jobs (generate.rs: synthetic pairs after QA-SQL, chains
//! of thought). What they share is here: validation, storage; who may write and which rows a
//! role sees are the curated stores' rules (curated.rs), shared with instructions.
//!
//! Who may write: curators (members of nl2sql_curator) and superusers; the rows
//! are written as the extension owner with parameters only (nothing a curator wrote is
//! evaluated there). Who may read: every role, through the nl2sql.examples view, which shows
//! only examples whose relations the role may SELECT from.

use crate::gucs;
use crate::pg::curated::{self, Store};
use crate::pg::errors::{fail, raise};
use crate::pg::model::{self, Model};
use crate::pg::{catalog, owner, role, sandbox, spi};
use nl2sql_core::retrieval::embed;
use nl2sql_core::error::{Diagnostic, Report, SqlState};
use nl2sql_core::prompt::examples;
use nl2sql_core::model::http::ErrorKind;
use nl2sql_core::model::llm::ChatRequest;
use nl2sql_core::pipeline::{self, Llm, Rejected};
use nl2sql_core::schema::Schema;
use nl2sql_core::prompt::synthetic;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

mod curate;
mod generate;
mod search;
pub use curate::{add, embed_meanings, embed_missing, offer, remove, set_enabled};
pub use generate::{generate, write_thoughts};
pub use search::similar;

/// Longest example query accepted, in bytes.
const MAX_SQL_BYTES: usize = 64 * 1024;
/// Completion tokens for a chain of thought (five short lines).
const THOUGHT_MAX_TOKENS: u32 = 300;

/// The examples library, as its refusals describe it (the checks are curated.rs's).
const STORE: Store = Store {
    curated_because: "Examples are shown in the prompts of other roles; only members of nl2sql_curator and superusers curate them.",
    grant: "GRANT nl2sql_curator TO the role that curates examples.",
    written_on_primary: "The examples library is written on the primary; standbys read it.",
};

/// The masked question of an example and the built-in embedder's vector of it.
pub fn key(question: &str, sql: &str) -> (String, Vec<f32>) {
    let masked = examples::mask_example(question, sql);
    let v = embed::embed(&masked, embed::BUILTIN_DIMS);
    (masked, v)
}

/// The sentence model's vectors of masked questions (pgvector literals) when
/// nl2sql.column_embedder is minilm; None otherwise.
pub(crate) fn meaning(masked: &[String]) -> Option<Vec<String>> {
    if crate::gucs::column_embedder() != crate::gucs::ColumnEmbedder::MiniLm {
        return None;
    }
    Some(crate::pg::minilm::embed(masked).iter().map(|v| crate::pg::embedder::vector_literal(v)).collect())
}

/// A quoted schema name of pgvector (its operators are spelled out in queries that run with
/// the caller's search_path).
pub(crate) fn vector_schema() -> String {
    spi::read::<String>(
        "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension v
         JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) v.extnamespace
         WHERE v.extname OPERATOR(pg_catalog.=) 'vector'",
        &[],
    )
    .unwrap_or_else(|| "public".into())
}

/// Checks an example's question, hint and SQL, and runs the SQL in the sandbox as the role
/// generated SQL runs as; the relations it needed SELECT on, or an error.
fn validate(question: &str, sql: &str, hint: Option<&str>) -> Vec<pg_sys::Oid> {
    let q = pipeline::Question { text: question.to_string(), hint: hint.map(str::to_string), ..Default::default() };
    if let Err(e) = pipeline::validate(&q) {
        raise(&e);
    }
    if sql.trim().is_empty() {
        fail(SqlState::InvalidParameterValue, "example query must not be empty".into(), None, None);
    }
    if sql.len() > MAX_SQL_BYTES {
        fail(SqlState::ProgramLimitExceeded, format!("example query is too long ({} bytes, at most {MAX_SQL_BYTES})", sql.len()), None, None);
    }
    match role::as_exec_role(|| sandbox::execute_reading(sql, sandbox::Limits::from_settings())) {
        Ok((_, reads)) => {
            refuse_temporary(&reads);
            reads
        }
        Err(Rejected::Refused(e)) => {
            let detail = e.detail().map(|d| format!("{d}\nExample query: {sql}")).unwrap_or_else(|| format!("Example query: {sql}"));
            fail(e.sqlstate(), format!("example query refused: {}", e.message()), Some(detail), Some("An example must be one read-only query nl2sql would run."))
        }
        Err(Rejected::Failed(f)) => {
            let r = Report::from_diagnostic(&pipeline::AskError::Failed { sql: Some(sql.to_string()), failure: f });
            fail(
                r.sqlstate,
                r.message.replacen("generated query failed", "example query failed", 1),
                r.detail.map(|d| d.replace("Generated SQL: ", "Example query: ")),
                Some("An example's query must run for the role that adds it; fix it and add it again."),
            )
        }
    }
}

/// A temporary relation goes at the end of its session without the sql_drop trigger that takes
/// a dropped relation's examples with it: its OID could name another relation later.
fn refuse_temporary(reads: &[pg_sys::Oid]) {
    if let Some(name) = temporary(reads) {
        fail(
            SqlState::FeatureNotSupported,
            format!("an example cannot read temporary relation {name}"),
            Some("Examples outlive the session; a temporary relation does not.".into()),
            Some("Write the example over permanent tables."),
        );
    }
}

/// The first temporary relation among `oids`, by name.
fn temporary(oids: &[pg_sys::Oid]) -> Option<String> {
    spi::read::<String>(
        "SELECT c.oid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1) AND c.relpersistence OPERATOR(pg_catalog.=) 't' LIMIT 1",
        &[oids.to_vec().into()],
    )
}

/// Stores one example as the extension owner; its id. `sampled`: the relations whose sample
/// rows the model saw when it wrote the thought or the pair (a subset of `reads`).
#[allow(clippy::too_many_arguments)]
fn store(
    question: &str,
    sql: &str,
    thought: Option<&str>,
    hint: Option<&str>,
    source: &str,
    enabled: bool,
    reads: Vec<pg_sys::Oid>,
    sampled: Vec<pg_sys::Oid>,
) -> i64 {
    let (masked, v) = key(question, sql);
    let by = owner::caller();
    let meaning = meaning(std::slice::from_ref(&masked)).and_then(|mut v| v.pop());
    owner::as_owner(|| {
        spi::write_one::<i64>(
            "INSERT INTO nl2sql.example_store (question, question_masked, sql, thought, hint, source, executed, enabled, relations, sampled, added_by, embedding, meaning)
             VALUES ($1, $2, $3, $4, $5, $6, true, $7, $8::pg_catalog.oid[]::pg_catalog.regclass[], $9::pg_catalog.oid[]::pg_catalog.regclass[], $10, $11::text::vector, $12::text::vector) RETURNING id",
            &[
                question.into(),
                masked.as_str().into(),
                sql.into(),
                thought.into(),
                hint.into(),
                source.into(),
                enabled.into(),
                DatumWithOid::from(reads),
                DatumWithOid::from(sampled),
                by.into(),
                crate::pg::embedder::vector_literal(&v).as_str().into(),
                meaning.into(),
            ],
        )
    })
    .unwrap_or_else(|| fail(SqlState::InternalError, "example was not stored".into(), None, None))
}

/// Refuses what would send rows, samples or literals to the model under nl2sql.privacy.
fn refuse_under_privacy(what: &str) {
    if crate::pg::session::privacy() {
        fail(
            SqlState::FeatureNotSupported,
            format!("cannot {what} while nl2sql.privacy is on"),
            Some("It sends sample rows or the literals of example queries to the model endpoint.".into()),
            Some("Add examples with nl2sql.add_example(); their chains of thought are left out."),
        );
    }
}

/// The relations among `oids` whose rows may depend on who reads them: row-level security,
/// views (policies, security_invoker, current_user in a view), foreign tables and tables whose
/// partitions or children are (the reader's user mapping). Text the model writes from their
/// rows is never shown to other roles; the view nl2sql.examples hides what was written from
/// rows of a table that later became one of these (row-level security, a view).
fn reader_dependent(oids: &[pg_sys::Oid]) -> Vec<u32> {
    let mut out: Vec<u32> = spi::rows(
        "SELECT oid FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) ANY ($1)
           AND (relrowsecurity OR relkind OPERATOR(pg_catalog.<>) ALL ('{r,p,m}'::pg_catalog.\"char\"[]))",
        &[oids.to_vec().into()],
        |r| r.get::<pg_sys::Oid>(1).ok().flatten().map(u32::from),
    );
    for &o in oids {
        check_for_interrupts!();
        if !out.contains(&u32::from(o)) && crate::pg::policy::reaches_foreign(o) {
            out.push(u32::from(o));
        }
    }
    out
}

/// Asks the model for an example's chain of thought (Query-CoT-SQL); None when it fails.
fn thought(model: &mut Model, schema: &str, question: &str, sql: &str) -> Option<String> {
    let req = ChatRequest { messages: synthetic::thought_messages(schema, question, sql), temperature: 0.0, max_tokens: THOUGHT_MAX_TOKENS, grammar: None, reask: false };
    match model.chat(req) {
        Ok(c) => synthetic::parse_thought(&c.content),
        Err(e) => {
            let r = Report::from_diagnostic(&e).redact(model.secret());
            alert!("chain of thought not written: {}", r.message);
            None
        }
    }
}

/// The model, or None with a NOTICE when no endpoint is configured.
fn model_if_configured(why: &str) -> Option<Model> {
    if crate::pg::session::privacy() {
        note!("{why}: nl2sql.privacy keeps the example's query and samples from the model");
        return None;
    }
    match model::from_settings() {
        Ok(m) => Some(m),
        Err(e) if matches!(e.kind, ErrorKind::NotConfigured) => {
            note!("{why}: no model endpoint (nl2sql.llm_url); nl2sql.write_example_thoughts() writes it later");
            None
        }
        Err(e) => raise(&e.report(None)),
    }
}

/// The schema the role may read, for prompts whose answers other roles are shown (chains of
/// thought, synthetic pairs): no samples of relations whose rows depend on the reader.
fn schema_for_prompts() -> Schema {
    let mut schema = role::as_exec_role(|| catalog::for_prompt(false));
    let oids: Vec<pg_sys::Oid> = schema.tables.iter().map(|t| pg_sys::Oid::from(t.oid)).collect();
    let secured = reader_dependent(&oids);
    for t in schema.tables.iter_mut().filter(|t| secured.contains(&t.oid)) {
        for c in &mut t.columns {
            c.stats = None;
        }
    }
    schema
}

/// The tables of a prompt whose sample rows it shows.
fn sampled(scope: &Schema) -> Vec<pg_sys::Oid> {
    scope.tables.iter().filter(|t| t.columns.iter().any(|c| c.stats.is_some())).map(|t| pg_sys::Oid::from(t.oid)).collect()
}

/// The tables an example reads, rendered for the prompt that writes its chain of thought: only
/// those, so that what the model writes (and other roles are shown with the example) names
/// nothing beyond what the example's readers may read; and those whose samples it shows.
fn example_schema(schema: &Schema, reads: &[pg_sys::Oid]) -> (String, Vec<pg_sys::Oid>) {
    let tables: Vec<usize> = (0..schema.tables.len()).filter(|&t| reads.iter().any(|r| u32::from(*r) == schema.tables[t].oid)).collect();
    let scope = nl2sql_core::library::scope_schema(schema, &tables);
    (scope.render(gucs::schema_max_tokens()).text, sampled(&scope))
}

/// The condition, on example_store `s`, that the role `$2` may see the example (the view's
/// filter in sql/examples.sql, for a given role: the writes run as the extension's owner):
/// [`curated::readable_by`], and not a pair hidden because it was written from rows that depend
/// on the reader.
fn visible_to() -> String {
    curated::readable_by() + NOT_HIDDEN
}

/// The second half of [`visible_to`]: not a synthetic or offered pair written from the rows of a
/// relation whose rows depend on the reader.
const NOT_HIDDEN: &str = "
     AND NOT (s.source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[])
              AND EXISTS (SELECT FROM pg_catalog.pg_class c
                          WHERE c.oid OPERATOR(pg_catalog.=) ANY (s.sampled::pg_catalog.oid[])
                            AND (c.relrowsecurity OR c.relkind OPERATOR(pg_catalog.<>) ALL ('{r,p,m}'::pg_catalog.\"char\"[]))))";
