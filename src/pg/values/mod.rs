//! Value indexes over sql/values.sql's tables, by lifecycle: [`build`] (a column's index as a
//! new generation beside the one serving, the switch, triggers, drop), [`refresh`] (removals,
//! the endpoint's queue, flags, old generations) and [`search`] (the store the core's lookups
//! run over, and the schema embeddings' search). Builds run in the caller's transaction, so a
//! cancel or an endpoint failure leaves the old generation serving. Internal tables are read
//! and written as the extension owner; what is returned is filtered by the caller's privileges.
//! Locks are taken in the order sql/values.sql's header gives.

mod build;
mod entries;
mod refresh;
mod search;

pub use build::{create, create_in_schemas, drop};
pub use refresh::refresh;
pub use search::{closest_stored, search_columns, search_values, take_skipped, visible_name};

use crate::pg::{errors, owner, spi};
use nl2sql_core::error::{Report, SqlState};
use pgrx::prelude::*;

/// What one build did, one row of create_value_index()'s result.
pub struct Built {
    pub relid: pg_sys::Oid,
    pub column: String,
    pub status: String,
    pub values: i64,
    pub phrases: i64,
    pub skipped: i64,
    pub seconds: f64,
}

fn fail(state: SqlState, message: String, hint: Option<&str>) -> ! {
    let mut r = Report::new(state, message);
    if let Some(h) = hint {
        r = r.hint(h);
    }
    errors::raise(&r)
}

/// The table holding a generation of a column's entries (digits only: safe to splice).
fn entries_table(id: i32, generation: i32) -> String {
    format!("nl2sql.value_entries_{id}_{generation}")
}

/// The relation's schema-qualified, quoted name: valid whatever the search_path. Read under
/// the caller's search_path and spliced into statements the owner runs (LOCK TABLE, CREATE
/// TRIGGER), so it names no operator: an `||(text, text)` of the caller's, first on her path,
/// would otherwise choose the text.
fn relation_text(rel: pg_sys::Oid) -> String {
    spi::read::<String>(
        "SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
         WHERE c.oid OPERATOR(pg_catalog.=) $1",
        &[rel.into()],
    )
    .unwrap_or_else(|| fail(SqlState::UndefinedTable, format!("relation with OID {} does not exist", u32::from(rel)), None))
}

/// Whether `role` may build, refresh or drop the indexes of `rel`: its owner (or a member of
/// the owning role), or a superuser. `role` is [`owner::caller`], taken before any switch.
fn may_maintain(rel: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    spi::read::<bool>(
        "SELECT pg_catalog.pg_has_role($2, c.relowner, 'USAGE') OR r.rolsuper
         FROM pg_catalog.pg_class c, pg_catalog.pg_roles r
         WHERE c.oid OPERATOR(pg_catalog.=) $1 AND r.oid OPERATOR(pg_catalog.=) $2",
        &[rel.into(), role.into()],
    )
    .unwrap_or(false)
}

/// A column's values as the index stores them: printed by their type's output function, as the
/// triggers print them (never cast: a cast to text may be a function the type's owner wrote).
fn printed(qcol: &str) -> String {
    format!("pg_catalog.format('%s', {qcol})")
}

/// Those of `values` that some row of `rel` still holds in `column`, read as the table's owner
/// (restricted): one scan of the table, hashed. None when the read failed (a policy that
/// raises, say); the caller then leaves the column alone.
fn still_held(rel: pg_sys::Oid, column: &str, values: &[String]) -> Option<Vec<String>> {
    if values.is_empty() {
        return Some(vec![]);
    }
    let relname = relation_text(rel);
    let sql = format!(
        "SELECT coalesce(pg_catalog.array_agg(g.v), '{{}}') FROM pg_catalog.unnest($1::pg_catalog.text[]) AS g(v)
         WHERE g.v OPERATOR(pg_catalog.=) ANY (SELECT {} FROM {relname} t)",
        printed(&format!("t.{}", pgrx::spi::quote_identifier(column)))
    );
    let args = [pgrx::datum::DatumWithOid::from(values.to_vec())];
    crate::pg::sandbox::savepoint(|| owner::as_table_owner(rel, || spi::read::<Vec<String>>(&sql, &args).unwrap_or_default()))
}
