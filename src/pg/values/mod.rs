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
use build::rebuild;
pub use refresh::refresh;
pub use search::{closest_stored, search_columns, search_values, take_skipped, visible_name, Scope};

use crate::gucs;
use crate::pg::{errors, owner, relation, sandbox, spi};
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::prompt::refine::Failure;
use pgrx::prelude::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

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

/// Runs `f`, a build or rebuild of `rel`'s value index the caller asked for by naming the
/// table, in the caller's statement ([`crate::pg::sandbox::in_statement`]): an error a read as
/// the table's owner ended with (her code's) ends the statement as nl2sql's error naming her
/// table, her text only in its DETAIL ([`errors::of_table_owner`]); nl2sql's own errors (also
/// after an owner read whose failure was passed over) and a cancel go on as they came.
pub(super) fn in_named_read<T>(rel: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    use pgrx::pg_sys::panic::CaughtError;
    let (failed, name) = (owner::owner_reads_failed(), relation_text(rel));
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| sandbox::in_statement(f)))
        .catch_others(|e| match e {
            CaughtError::PostgresError(ref r) | CaughtError::ErrorReport(ref r) if owner::ended_owner_read(r.message(), failed, str::to_string) && !errors::is_cancel(r) => {
                errors::raise(&errors::of_table_owner(r, &name))
            }
            _ => e.rethrow(),
        })
        .execute()
}

/// The relation's schema-qualified, quoted name, for messages only (bytes that are not UTF-8
/// shown replaced, invisible characters written as `U&"..."` escapes). A statement that names
/// the relation takes its name through [`relation::by_name`].
fn relation_text(rel: pg_sys::Oid) -> String {
    nl2sql_core::render::ident(&relation::display_name(rel).unwrap_or_else(|| relation::gone(rel)))
}

/// Whether `role` may build, refresh or drop the indexes of `rel`: its owner (or a member of
/// the owning role), or a superuser. `role` is [`owner::caller`], taken before any switch. Read
/// as committed now, not by the transaction's snapshot (which may show an earlier owner).
fn may_maintain(rel: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    relation::may_act_as_owner(rel, role)
}

/// A column's values as the index stores them: printed by their type's output function, as the
/// triggers print them (never cast: a cast to text may be a function the type's owner wrote).
fn printed(qcol: &str) -> String {
    format!("pg_catalog.format('%s', {qcol})")
}

/// nl2sql.refresh_table_timeout as one budget per table: every part of a refresh that reads a
/// table (the copy of what DML added to a retired generation, the re-check of each column's
/// removed values, each column's rebuild) runs within what that table's earlier parts left of
/// it. A table is charged only the time its own parts took.
pub(super) struct TableClock {
    limit: Option<Duration>,
    spent: HashMap<pg_sys::Oid, Duration>,
}

impl TableClock {
    pub(super) fn new() -> TableClock {
        TableClock { limit: gucs::refresh_table_timeout(), spent: HashMap::new() }
    }

    /// [`sandbox::kept_within`] what is left of `rel`'s time; its timeout, without running `f`,
    /// once none is left. A timeout reports the setting's whole time.
    pub(super) fn kept<T>(&mut self, rel: pg_sys::Oid, f: impl FnOnce() -> T) -> Result<T, Failure> {
        let Some(limit) = self.limit else {
            return sandbox::kept_within(None, f).inspect_err(|_| owner::passed_over());
        };
        let spent = self.spent.get(&rel).copied().unwrap_or_default();
        let left = limit.saturating_sub(spent);
        let out = Failure::Timeout { ms: limit.as_millis() as u64 };
        if left.is_zero() {
            return Err(out);
        }
        let started = Instant::now();
        // Her error, if it was one, goes no further than this table's part of the work.
        let r = sandbox::kept_within(Some(left), f).inspect_err(|_| owner::passed_over());
        self.spent.insert(rel, spent + started.elapsed());
        r.map_err(|failure| match failure {
            Failure::Timeout { .. } => out,
            other => other,
        })
    }
}

/// Those of `values` that some row of `rel` still holds in its column `attnum`, read as the
/// table's owner (restricted) within what is left of its time on `clock`: one scan of the table,
/// hashed. An error when the read failed (a policy that raises or sleeps; None: the table or
/// the column is gone); the caller then leaves the column alone.
/// The column is named as committed once the table is locked (a rename then waits), never by
/// a snapshot, which may show a name from before a rename: another column's now.
fn still_held(rel: pg_sys::Oid, attnum: i16, values: &[String], clock: &mut TableClock) -> Result<Vec<String>, Option<Failure>> {
    if values.is_empty() {
        return Ok(vec![]);
    }
    let sql = |relname: &str, column: &str| {
        format!(
            "SELECT coalesce(pg_catalog.array_agg(g.v), '{{}}') FROM pg_catalog.unnest($1::pg_catalog.text[]) AS g(v)
             WHERE g.v OPERATOR(pg_catalog.=) ANY (SELECT {} FROM {relname} t)",
            printed(&format!("t.{}", pgrx::spi::quote_identifier(column)))
        )
    };
    let args = [pgrx::datum::DatumWithOid::from(values.to_vec())];
    let read = clock.kept(rel, || {
        if !relation::lock_existing(rel, pg_sys::AccessShareLock) {
            return None;
        }
        let column = relation::column_name(rel, attnum)?;
        Some(relation::by_name(rel, |relname| owner::as_table_owner(rel, || spi::read::<Vec<String>>(&sql(relname, &column), &args).unwrap_or_default())))
    });
    match read {
        Ok(Some(held)) => Ok(held),
        Ok(None) => Err(None),
        Err(failure) => Err(Some(failure)),
    }
}

/// What a WARNING about a table that could not be read says of why: its timeout only (an
/// error of the table's own code is not quoted: its text is the table owner's).
fn within(failure: Option<&Failure>) -> String {
    match failure {
        Some(Failure::Timeout { ms }) => format!(" within nl2sql.refresh_table_timeout ({ms} ms)"),
        _ => String::new(),
    }
}
