//! Writing entries into a generation of a value index outside the full load: values embedded
//! by an endpoint, values DML added while a build ran, and the catch-up of a replaced
//! generation. Used by build.rs and refresh.rs alike.

use super::{fail, relation_text, still_held, within, TableClock};
use crate::pg::{embedder, spi};
use nl2sql_core::error::SqlState;
use nl2sql_core::retrieval::embedder::Embedder;
use nl2sql_core::retrieval::lookup;
use pgrx::prelude::*;

/// Rows a batch when loading vectors from an endpoint.
const LOAD_CHUNK: usize = 5000;

/// Embeds the terms of `rows` with the endpoint and stores them; returns the dimension.
pub fn insert_remote(table: &str, ep: &nl2sql_core::model::http::Endpoint, rows: &[(String, String)]) -> i32 {
    let mut dims = 0i32;
    for (n, chunk) in rows.chunks(LOAD_CHUNK).enumerate() {
        check_for_interrupts!();
        let terms: Vec<String> = chunk.iter().map(|(_, t)| t.clone()).collect();
        let vectors = embedder::embed(ep, &terms);
        dims = vectors.first().map(|v| v.len() as i32).unwrap_or(dims);
        if dims > 64_000 {
            fail(SqlState::ProgramLimitExceeded, format!("the embedding endpoint returns {dims} dimensions; at most 64000 are supported"), None);
        }
        let vals: Vec<String> = chunk.iter().map(|(v, _)| v.clone()).collect();
        let lits: Vec<String> = vectors.iter().map(|v| embedder::vector_literal(v)).collect();
        spi::write(
            &format!(
                "INSERT INTO {table} (value, term, key, sig, embedding)
                 SELECT x.v, x.t, nl2sql.fold(x.t), binary_quantize(x.e::vector)::bit({dims}), x.e::vector
                 FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS x(v, t, e)"
            ),
            &[vals.into(), terms.into(), lits.into()],
        );
        if (n + 1) % 20 == 0 {
            note!("nl2sql: {} of {} entries embedded", ((n + 1) * LOAD_CHUNK).min(rows.len()), rows.len());
        }
    }
    dims.max(1)
}

/// Adds `values` (and their phrases) to a generation outside a full build: the values DML
/// added while a build ran. The phrase cap is not recounted.
fn insert_values(table: &str, emb: &Embedder, values: Vec<String>) {
    if values.is_empty() {
        return;
    }
    match emb {
        Embedder::Builtin => spi::write(
            &format!(
                "INSERT INTO {table} (value, term, key, sig)
                 SELECT v, v, nl2sql.fold(v), nl2sql.signature(v)::bit(256) FROM pg_catalog.unnest($1::text[]) AS v
                 UNION ALL
                 SELECT v, p, p, nl2sql.signature(p)::bit(256) FROM pg_catalog.unnest($1::text[]) AS v, pg_catalog.unnest(nl2sql.phrases(v)) AS p"
            ),
            &[values.into()],
        ),
        Embedder::Remote(ep) => {
            insert_remote(table, ep, &lookup::entries(&values));
        }
    }
}

/// Copies to the generation `new` the values that `old` holds, `new` lacks and the table still
/// holds (DML added them after the build read the table); returns how many.
pub fn catch_up(id: i32, rel: pg_sys::Oid, attnum: i16, old: &str, new: &str, emb: &Embedder, clock: &mut TableClock) -> i64 {
    let exists = spi::read::<bool>("SELECT pg_catalog.to_regclass($1) IS NOT NULL", &[old.into()]).unwrap_or(false);
    if !exists {
        return 0;
    }
    let missing: Vec<String> = spi::rows(
        &format!(
            "SELECT o.value FROM {old} o WHERE o.term = o.value
             AND NOT EXISTS (SELECT 1 FROM {new} n WHERE n.key = o.key AND n.value = o.value)"
        ),
        &[],
        |r| r.get::<String>(1).ok()?,
    );
    if missing.is_empty() {
        return 0;
    }
    let held = match still_held(rel, attnum, &missing, clock) {
        Ok(held) => held,
        Err(why) => {
            alert!("nl2sql could not re-read the values added to {} while its value index was built{}", relation_text(rel), within(why.as_ref()));
            spi::write("INSERT INTO nl2sql.value_flags (column_id, flag) VALUES ($1, 'stale')", &[id.into()]);
            return 0;
        }
    };
    let n = held.len() as i64;
    insert_values(new, emb, held);
    n
}
