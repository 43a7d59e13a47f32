//! The examples a question is shown: the most similar enabled ones the calling role may read.

use super::{meaning, vector_schema};
use crate::pg::{sandbox, spi};
use nl2sql_core::prompt::examples::Example;
use nl2sql_core::retrieval::embed;

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
