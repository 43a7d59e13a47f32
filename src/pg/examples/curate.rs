//! Curating the examples library: add (the SQL run in the sandbox first), offer (from
//! feedback), remove, enable or disable, and embed their meanings at refresh.

use super::{example_schema, meaning, model_if_configured, reader_dependent, schema_for_prompts, store, thought, validate, visible_to, STORE};
use crate::pg::curated;
use crate::pg::errors::fail;
use crate::pg::{owner, spi};
use nl2sql_core::error::SqlState;
use pgrx::prelude::*;

/// Computes the sentence model's vector of every example that has none (minilm only), as the
/// extension's owner; how many.
pub fn embed_meanings() -> usize {
    embed_missing(
        "SELECT id, question_masked FROM nl2sql.example_store WHERE meaning IS NULL ORDER BY id",
        "UPDATE nl2sql.example_store s SET meaning = x.m::vector
         FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[])) AS x(id, m) WHERE s.id = x.id",
    )
}

/// The sentence model's vectors (minilm only), as the extension's owner, of the texts `select`
/// returns (id, text), written back by `update` ($1 the ids, $2 the vectors); how many. The
/// examples' and the instructions' meanings.
pub fn embed_missing(select: &str, update: &str) -> usize {
    if crate::gucs::column_embedder() != crate::gucs::ColumnEmbedder::MiniLm {
        return 0;
    }
    owner::as_owner(|| {
        let rows: Vec<(i64, String)> = spi::rows(select, &[], |r| Some((r.get::<i64>(1).ok()??, r.get::<String>(2).ok()??)));
        let texts: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
        let Some(vectors) = meaning(&texts) else { return 0 };
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        spi::write(update, &[ids.into(), vectors.into()]);
        rows.len()
    })
}

/// nl2sql.add_example(): checks, runs, writes the chain of thought when a model is configured,
/// stores; the new example's id.
pub fn add(question: &str, sql: &str, hint: Option<&str>) -> i64 {
    STORE.require_writer("add examples");
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
        note!("nl2sql: feedback recorded; the query is not offered as an example: a table whose rows the call's prompts showed no longer exists");
        return None;
    }
    let dependent = reader_dependent(&sampled);
    if let Some(&first) = dependent.first() {
        let name = spi::read::<String>("SELECT $1::pg_catalog.regclass::pg_catalog.text", &[pg_sys::Oid::from(first).into()]).unwrap_or_default();
        let how = if reads.iter().any(|r| u32::from(*r) == first) { "it reads" } else { "the call's prompts showed rows of" };
        note!(
            "nl2sql: feedback recorded; the query is not offered as an example: {how} {name}, which shows each reader its own rows (row-level security, a view or a foreign table)"
        );
        return None;
    }
    Some(store(question.trim(), sql, None, hint.map(str::trim).filter(|h| !h.is_empty()), "feedback", false, reads, sampled))
}

/// nl2sql.remove_example(): whether it existed among the examples about tables the caller may
/// read (a curator cannot touch an example about tables it may not read, nor learn that it
/// exists). A pair hidden because a table got row-level security can be removed: nothing of it
/// is shown, and a table's owner turning row-level security on cannot keep it from removal.
pub fn remove(id: i64) -> bool {
    STORE.require_writer("remove examples");
    let caller = owner::caller();
    let sql = format!("DELETE FROM nl2sql.example_store s WHERE s.id = $1 AND {} RETURNING s.id", curated::readable_by());
    owner::as_owner(|| spi::write_one::<i64>(&sql, &[id.into(), caller.into()])).is_some()
}

/// nl2sql.enable_example(): whether it exists among the examples the caller may see.
pub fn set_enabled(id: i64, enabled: bool) -> bool {
    STORE.require_writer("enable or disable examples");
    let caller = owner::caller();
    let sql = format!("UPDATE nl2sql.example_store s SET enabled = $3 WHERE s.id = $1 AND {} RETURNING s.id", visible_to());
    owner::as_owner(|| spi::write_one::<i64>(&sql, &[id.into(), caller.into(), enabled.into()])).is_some()
}
