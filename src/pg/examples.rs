//! The examples library (sql/examples.sql): adding an example after running its SQL in the
//! sandbox, synthetic pairs (QA-SQL), chains of thought, and retrieval for the pipeline.
//!
//! Who may write: curators (members of nl2sql_curator) and superusers, checked here; the rows
//! are written as the extension owner with parameters only (nothing a curator wrote is
//! evaluated there). Who may read: every role, through the nl2sql.examples view, which shows
//! only examples whose relations the role may SELECT from.

use crate::gucs;
use crate::pg::errors::{fail, raise};
use crate::pg::model::Model;
use crate::pg::{catalog, owner, role, sandbox, spi};
use nl2sql_core::retrieval::embed;
use nl2sql_core::error::{Diagnostic, Report, SqlState};
use nl2sql_core::prompt::examples::{self, Example};
use nl2sql_core::model::http::ErrorKind;
use nl2sql_core::model::llm::ChatRequest;
use nl2sql_core::pipeline::{self, Llm, Rejected};
use nl2sql_core::schema::Schema;
use nl2sql_core::prompt::synthetic;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// Longest example query accepted, in bytes.
const MAX_SQL_BYTES: usize = 64 * 1024;
/// Completion tokens for a chain of thought (five short lines).
const THOUGHT_MAX_TOKENS: u32 = 300;

/// Whether `role` may curate the library: a superuser or a member of nl2sql_curator.
pub fn may_curate(role: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup of the role.
    if unsafe { pg_sys::superuser_arg(role) } {
        return true;
    }
    spi::read::<bool>(
        "SELECT CASE WHEN pg_catalog.to_regrole('nl2sql_curator') IS NULL THEN false
                     ELSE pg_catalog.pg_has_role($1, 'nl2sql_curator', 'MEMBER') END",
        &[role.into()],
    )
    .unwrap_or(false)
}

fn require_curator(what: &str) {
    if !may_curate(owner::caller()) {
        fail(
            SqlState::InsufficientPrivilege,
            format!("permission denied to {what}"),
            Some("Examples are shown in the prompts of other roles; only members of nl2sql_curator and superusers curate them.".into()),
            Some("GRANT nl2sql_curator TO the role that curates examples."),
        );
    }
}

fn require_primary(what: &str) {
    // SAFETY: reads shared memory state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        fail(
            SqlState::ReadOnlySqlTransaction,
            format!("cannot {what} on a hot standby"),
            Some("The examples library is written on the primary; standbys read it.".into()),
            None,
        );
    }
}

/// The masked question of an example and the built-in embedder's vector of it.
pub fn key(question: &str, sql: &str) -> (String, Vec<f32>) {
    let masked = examples::mask_example(question, sql);
    let v = embed::embed(&masked, embed::BUILTIN_DIMS);
    (masked, v)
}

/// The sentence model's vectors of masked questions (pgvector literals) when
/// nl2sql.column_embedder is minilm; None otherwise.
fn meaning(masked: &[String]) -> Option<Vec<String>> {
    if crate::gucs::column_embedder() != crate::gucs::ColumnEmbedder::MiniLm {
        return None;
    }
    Some(crate::pg::minilm::embed(masked).iter().map(|v| crate::pg::embedder::vector_literal(v)).collect())
}

/// Computes the sentence model's vector of every example that has none (minilm only), as the
/// extension's owner; how many.
pub fn embed_meanings() -> usize {
    if crate::gucs::column_embedder() != crate::gucs::ColumnEmbedder::MiniLm {
        return 0;
    }
    owner::as_owner(|| {
        let rows: Vec<(i64, String)> = spi::rows(
            "SELECT id, question_masked FROM nl2sql.example_store WHERE meaning IS NULL ORDER BY id",
            &[],
            |r| Some((r.get::<i64>(1).ok()??, r.get::<String>(2).ok()??)),
        );
        let texts: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
        let Some(vectors) = meaning(&texts) else { return 0 };
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        spi::write(
            "UPDATE nl2sql.example_store s SET meaning = x.m::vector
             FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[])) AS x(id, m) WHERE s.id = x.id",
            &[ids.into(), vectors.into()],
        );
        rows.len()
    })
}

/// A quoted schema name of pgvector (its operators are spelled out in queries that run with
/// the caller's search_path).
fn vector_schema() -> String {
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
    let q = pipeline::Question { text: question.to_string(), hint: hint.map(str::to_string), previous: None };
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

/// The model, or None with a NOTICE when no endpoint is configured.
fn model_if_configured(why: &str) -> Option<Model> {
    if crate::pg::session::privacy() {
        notice!("{why}: nl2sql.privacy keeps the example's query and samples from the model");
        return None;
    }
    match Model::from_settings() {
        Ok(m) => Some(m),
        Err(e) if matches!(e.kind, ErrorKind::NotConfigured) => {
            notice!("{why}: no model endpoint (nl2sql.llm_url); nl2sql.write_example_thoughts() writes it later");
            None
        }
        Err(e) => raise(&e.report(None)),
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
    let scope = scope_schema(schema, &tables);
    (scope.render(gucs::schema_max_tokens()).text, sampled(&scope))
}

/// Asks the model for an example's chain of thought (Query-CoT-SQL); None when it fails.
fn thought(model: &mut Model, schema: &str, question: &str, sql: &str) -> Option<String> {
    let req = ChatRequest { messages: synthetic::thought_messages(schema, question, sql), temperature: 0.0, max_tokens: THOUGHT_MAX_TOKENS };
    match model.chat(req) {
        Ok(c) => synthetic::parse_thought(&c.content),
        Err(e) => {
            let r = Report::from_diagnostic(&e).redact(model.secret());
            warning!("chain of thought not written: {}", r.message);
            None
        }
    }
}

/// nl2sql.add_example(): checks, runs, writes the chain of thought when a model is configured,
/// stores; the new example's id.
pub fn add(question: &str, sql: &str, hint: Option<&str>) -> i64 {
    require_curator("add examples");
    require_primary("add examples");
    let sql = sql.trim();
    let reads = validate(question, sql, hint);
    let written = model_if_configured("chain of thought not written").and_then(|mut m| {
        let (schema, sampled) = example_schema(&schema_for_prompts(), &reads);
        thought(&mut m, &schema, question, sql).map(|t| (t, sampled))
    });
    let (thought, sampled) = written.unzip();
    let hint = hint.map(str::trim).filter(|h| !h.is_empty());
    store(question.trim(), sql, thought.as_deref(), hint, "user", true, reads, sampled.unwrap_or_default())
}

/// A call's query offered by nl2sql.feedback(): checked and run as add_example() does, with the
/// caller's rights, and stored disabled (source feedback) until a curator enables it; its id.
/// Its chain of thought is written later (nl2sql.write_example_thoughts()). None, with a
/// NOTICE, when it reads a relation whose rows depend on the reader, or the call's prompts
/// showed rows of one (`shown`): the model wrote it from the asker's rows (samples, values,
/// results), which the example's other readers may not see, and may quote them anywhere in it
/// (a literal, a comment). A shown relation dropped since is taken for one.
pub fn offer(question: &str, sql: &str, hint: Option<&str>, shown: &[pg_sys::Oid]) -> Option<i64> {
    let sql = sql.trim();
    let reads = validate(question, sql, hint);
    // An example that reads no table is shown to every role: the question must not travel so.
    if reads.is_empty() {
        fail(
            SqlState::InvalidParameterValue,
            "a query that reads no table cannot be offered as an example".into(),
            Some("An example is shown to the roles that may read its tables; one that reads none would be shown to every role.".into()),
            Some("Give feedback without a query (correct => false), or with one that reads the tables the question is about."),
        );
    }
    let mut sampled: Vec<pg_sys::Oid> = reads.iter().chain(shown).copied().collect();
    sampled.sort_unstable_by_key(|o| u32::from(*o));
    sampled.dedup();
    let gone: Vec<pg_sys::Oid> = spi::rows(
        "SELECT o FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS o
         WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) o)",
        &[sampled.clone().into()],
        |r| r.get::<pg_sys::Oid>(1).ok().flatten(),
    );
    if !gone.is_empty() {
        notice!("nl2sql: feedback recorded; the query is not offered as an example: a table whose rows the call's prompts showed no longer exists");
        return None;
    }
    let dependent = reader_dependent(&sampled);
    if let Some(&first) = dependent.first() {
        let name = spi::read::<String>("SELECT $1::pg_catalog.regclass::pg_catalog.text", &[pg_sys::Oid::from(first).into()]).unwrap_or_default();
        let how = if reads.iter().any(|r| u32::from(*r) == first) { "it reads" } else { "the call's prompts showed rows of" };
        notice!(
            "nl2sql: feedback recorded; the query is not offered as an example: {how} {name}, which shows each reader its own rows (row-level security, a view or a foreign table)"
        );
        return None;
    }
    Some(store(question.trim(), sql, None, hint.map(str::trim).filter(|h| !h.is_empty()), "feedback", false, reads, sampled))
}

/// The condition, on example_store `s`, that the role `$2` may read every relation the
/// example's SQL reads.
const READABLE_BY: &str = "NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                    WHERE NOT coalesce(pg_catalog.has_table_privilege($2::pg_catalog.oid, r.oid, 'SELECT'), false))";

/// The condition, on example_store `s`, that the role `$2` may see the example (the view's
/// filter in sql/examples.sql, for a given role: the writes below run as the extension's owner):
/// [`READABLE_BY`], and not a pair hidden because it was written from rows that depend on
/// the reader.
const VISIBLE_TO: &str = "NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                    WHERE NOT coalesce(pg_catalog.has_table_privilege($2::pg_catalog.oid, r.oid, 'SELECT'), false))
     AND NOT (s.source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[])
              AND EXISTS (SELECT FROM pg_catalog.pg_class c
                          WHERE c.oid OPERATOR(pg_catalog.=) ANY (s.sampled::pg_catalog.oid[])
                            AND (c.relrowsecurity OR c.relkind OPERATOR(pg_catalog.<>) ALL ('{r,p,m}'::pg_catalog.\"char\"[]))))";

/// nl2sql.remove_example(): whether it existed among the examples about tables the caller may
/// read (a curator cannot touch an example about tables it may not read, nor learn that it
/// exists). A pair hidden because a table got row-level security can be removed: nothing of it
/// is shown, and a table's owner turning row-level security on cannot keep it from removal.
pub fn remove(id: i64) -> bool {
    require_curator("remove examples");
    require_primary("remove examples");
    let caller = owner::caller();
    let sql = format!("DELETE FROM nl2sql.example_store s WHERE s.id = $1 AND {READABLE_BY} RETURNING s.id");
    owner::as_owner(|| spi::write_one::<i64>(&sql, &[id.into(), caller.into()])).is_some()
}

/// nl2sql.enable_example(): whether it exists among the examples the caller may see.
pub fn set_enabled(id: i64, enabled: bool) -> bool {
    require_curator("enable or disable examples");
    require_primary("enable or disable examples");
    let caller = owner::caller();
    let sql = format!("UPDATE nl2sql.example_store s SET enabled = $3 WHERE s.id = $1 AND {VISIBLE_TO} RETURNING s.id");
    owner::as_owner(|| spi::write_one::<i64>(&sql, &[id.into(), caller.into(), enabled.into()])).is_some()
}

/// The `k` enabled examples nearest the masked question among those the current role may
/// see (the view's filter); read-only, so it works on a hot standby. Never fails a question:
/// an error reading the library leaves the examples out.
pub fn similar(masked: &str, k: usize) -> Vec<Example> {
    if k == 0 {
        return Vec::new();
    }
    let v = crate::pg::embedder::vector_literal(&embed::embed(masked, embed::BUILTIN_DIMS));
    let vs = vector_schema();
    // With the sentence model, examples it embedded rank by meaning, the others after them by
    // the built-in embedder.
    let sql = format!(
        "SELECT id, question, sql, thought, hint, source,
                (1 OPERATOR(pg_catalog.-) d)::float4
         FROM (SELECT *, CASE WHEN $3::text IS NOT NULL AND meaning IS NOT NULL
                              THEN meaning OPERATOR({vs}.<=>) $3::text::{vs}.vector
                              ELSE embedding OPERATOR({vs}.<=>) $1::text::{vs}.vector END AS d
               FROM nl2sql.examples WHERE enabled) e
         ORDER BY ($3::text IS NOT NULL AND meaning IS NULL), d LIMIT $2"
    );
    sandbox::savepoint(|| {
        let by_meaning: Option<String> = meaning(&[masked.to_string()]).and_then(|mut m| m.pop());
        spi::rows(&sql, &[v.as_str().into(), (k as i64).into(), by_meaning.into()], |r| {
            Some(Example {
                id: r.get::<i64>(1).ok()??,
                question: r.get::<String>(2).ok()??,
                sql: r.get::<String>(3).ok()??,
                thought: r.get::<String>(4).ok()?,
                hint: r.get::<String>(5).ok()?,
                source: r.get::<String>(6).ok()??,
                score: r.get::<f32>(7).ok()??,
            })
        })
    })
    .unwrap_or_default()
}

/// One row of nl2sql.generate_examples(): a table or a joined pair of tables, the pairs the
/// model wrote, how many ran, how many were kept, tokens used.
pub struct Generated {
    pub scope: String,
    pub written: i32,
    pub executed: i32,
    pub kept: i32,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// The tables of one scope and the foreign keys between them, as a schema of their own.
fn scope_schema(schema: &Schema, tables: &[usize]) -> Schema {
    let picked: Vec<_> = tables.iter().map(|&t| schema.tables[t].clone()).collect();
    let idents: HashSet<&str> = picked.iter().map(|t| t.ident.as_str()).collect();
    let fks = schema.foreign_keys.iter().filter(|f| idents.contains(f.table.as_str()) && idents.contains(f.ref_table.as_str())).cloned().collect();
    Schema { tables: picked, foreign_keys: fks }
}

/// The scopes of generation: every table, then every pair joined by a foreign key.
fn scopes(schema: &Schema) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = (0..schema.tables.len()).map(|t| vec![t]).collect();
    let mut pairs = HashSet::new();
    for fk in &schema.foreign_keys {
        let a = schema.tables.iter().position(|t| t.ident == fk.table);
        let b = schema.tables.iter().position(|t| t.ident == fk.ref_table);
        if let (Some(a), Some(b)) = (a, b) {
            if a != b && pairs.insert((a.min(b), a.max(b))) {
                out.push(vec![a.min(b), a.max(b)]);
            }
        }
    }
    out
}

fn result_key(reads: &[pg_sys::Oid], rows: &[Vec<Option<String>>]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    reads.hash(&mut h);
    rows.hash(&mut h);
    h.finish()
}

/// nl2sql.generate_examples(): QA-SQL pairs per table and per joined pair of tables, kept
/// when they run for the caller and return rows, deduplicated by normalised SQL and by result.
pub fn generate(per_table: i32) -> Vec<Generated> {
    require_curator("generate examples");
    require_primary("generate examples");
    refuse_under_privacy("generate examples");
    if !(1..=20).contains(&per_table) {
        fail(SqlState::InvalidParameterValue, format!("per_table must be between 1 and 20, not {per_table}"), None, None);
    }
    let mut model = Model::from_settings().unwrap_or_else(|e| raise(&e.report(None)));
    let schema = schema_for_prompts();
    if schema.is_empty() {
        fail(SqlState::UndefinedTable, "no tables to write examples for".into(), None, Some("GRANT SELECT on the tables to this role."));
    }
    // What the library already holds, as far as this role sees it.
    let mut seen_sql: HashSet<String> =
        spi::rows("SELECT sql FROM nl2sql.examples", &[], |r| r.get::<String>(1).ok()?).iter().map(|s| pipeline::normal_form(s)).collect();
    let mut seen_results: HashSet<u64> = HashSet::new();
    let scopes = scopes(&schema);
    let mut out = Vec::with_capacity(scopes.len());
    let (mut failures, mut last_error) = (0usize, None);
    for (i, scope) in scopes.iter().enumerate() {
        check_for_interrupts!();
        let sub = scope_schema(&schema, scope);
        let name = sub.tables.iter().map(|t| t.ident.as_str()).collect::<Vec<_>>().join(" + ");
        let text = sub.render(gucs::schema_max_tokens()).text;
        let req = ChatRequest {
            messages: synthetic::messages(&text, per_table as usize),
            temperature: gucs::temperature() as f32,
            // About 150 tokens a pair.
            max_tokens: per_table as u32 * 150 + 100,
        };
        let mut row = Generated { scope: name.clone(), written: 0, executed: 0, kept: 0, prompt_tokens: 0, completion_tokens: 0 };
        match model.chat(req) {
            Ok(c) => {
                row.prompt_tokens = c.prompt_tokens.unwrap_or(0) as i64;
                row.completion_tokens = c.completion_tokens.unwrap_or(0) as i64;
                let pairs = synthetic::parse(&c.content);
                row.written = pairs.len() as i32;
                for (question, sql) in pairs.into_iter().take(per_table as usize * 2) {
                    check_for_interrupts!();
                    let form = pipeline::normal_form(&sql);
                    if seen_sql.contains(&form) {
                        continue;
                    }
                    let ran = sandbox::savepoint(|| role::as_exec_role(|| sandbox::execute_reading(&sql, sandbox::Limits::from_settings())));
                    let Some(Ok((execution, mut reads))) = ran else { continue };
                    row.executed += 1;
                    // A query that reads no table is no example of this database's tables.
                    if reads.is_empty() || execution.rows.is_empty() || !seen_results.insert(result_key(&reads, &execution.rows)) {
                        continue;
                    }
                    // The model wrote the question after seeing the scope's tables and samples:
                    // only roles that may read all of them are shown it.
                    reads.extend(sub.tables.iter().map(|t| pg_sys::Oid::from(t.oid)));
                    reads.sort_unstable_by_key(|o| u32::from(*o));
                    reads.dedup();
                    // Kept because it returned rows for this role: a table whose rows depend on
                    // the reader would make the pair tell others what only this role sees.
                    if !reader_dependent(&reads).is_empty() || temporary(&reads).is_some() {
                        continue;
                    }
                    seen_sql.insert(form);
                    let sampled = reads.clone();
                    store(&question, &sql, None, None, "synthetic", true, reads, sampled);
                    row.kept += 1;
                }
            }
            Err(e) => {
                failures += 1;
                let r = Report::from_diagnostic(&e).redact(model.secret());
                warning!("no examples for {name}: {}", r.message);
                last_error = Some(r);
            }
        }
        notice!(
            "nl2sql: {}/{} {name}: {} pairs written, {} ran, {} kept",
            i + 1,
            scopes.len(),
            row.written,
            row.executed,
            row.kept
        );
        out.push(row);
    }
    if failures == scopes.len() {
        if let Some(r) = last_error {
            raise(&r);
        }
    }
    let (p, c): (i64, i64) = out.iter().fold((0, 0), |(p, c), r| (p + r.prompt_tokens, c + r.completion_tokens));
    notice!(
        "nl2sql: {} synthetic examples kept of {} written; {p} prompt and {c} completion tokens",
        out.iter().map(|r| r.kept).sum::<i32>(),
        out.iter().map(|r| r.written).sum::<i32>()
    );
    out
}

/// nl2sql.write_example_thoughts(): writes the missing chains of thought of up to `max`
/// examples the caller sees; how many were written.
pub fn write_thoughts(max: i32) -> i64 {
    require_curator("write chains of thought");
    require_primary("write chains of thought");
    refuse_under_privacy("write chains of thought");
    let mut model = Model::from_settings().unwrap_or_else(|e| raise(&e.report(None)));
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
                    "UPDATE nl2sql.example_store SET thought = $2,
                            sampled = CASE WHEN source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[])
                                           THEN sampled ELSE $3::pg_catalog.oid[]::pg_catalog.regclass[] END
                     WHERE id = $1",
                    &[(*id).into(), t.as_str().into(), DatumWithOid::from(shown)],
                )
            });
            written += 1;
        }
        notice!("nl2sql: {}/{} chains of thought", i + 1, todo.len());
    }
    written
}
