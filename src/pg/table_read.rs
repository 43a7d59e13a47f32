//! What a table owner's code may not reach while nl2sql reads her table as her (owner.rs): the
//! session of the role that asked for the read, past its settings. Kept apart from owner.rs so
//! that the hooks and the session's trace can ask whether such a read runs.

use crate::pg::errors;
use nl2sql_core::error::{Report, SqlState};
use pgrx::prelude::*;
use std::ffi::CStr;

/// Built-in functions a table owner's code may not call while nl2sql reads her table as her
/// (`owner::as_table_owner`): each reaches past the read into the session of the role that
/// asked for it (its session advisory locks, its random sequence, read or seeded, its
/// sequences' last values, the text of its query, cursors and prepared statements (the views
/// pg_cursors and pg_prepared_statements), notifications sent in its name), where a rollback
/// undoes nothing or what is read is the caller's. A transaction-level advisory lock is held
/// until the caller's transaction ends, as a row lock her code takes is: allowed.
const CALLERS_SESSION: &[&str] = &[
    "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared", "pg_advisory_unlock",
    "pg_advisory_unlock_shared", "pg_advisory_unlock_all", "setseed", "random", "random_normal", "current_query", "pg_cursor",
    "pg_prepared_statement", "lastval", "currval", "pg_notify",
];

/// While a table is read as its owner, refuses a function of [`CALLERS_SESSION`] before it
/// runs (from the object-access hook).
pub(crate) fn refuse_function(function: pg_sys::Oid) {
    if !reading_as_table_owner() {
        return;
    }
    // SAFETY: catalog lookups of a function the executor is about to start.
    let name = unsafe {
        let name = pg_sys::get_func_name(function);
        (pg_sys::get_func_namespace(function) == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE) && !name.is_null())
            .then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
    };
    if let Some(n) = name.filter(|n| CALLERS_SESSION.contains(&n.as_str())) {
        refuse(&format!("{n}()"));
    }
}

/// While a table is read as its owner, refuses a statement of the same reach (from the utility
/// hook: NOTIFY, SET CONSTRAINTS, DECLARE, which act on the caller's transaction).
pub(crate) fn refuse_statement(what: &str) {
    if reading_as_table_owner() {
        refuse(what);
    }
}

/// Raises the refusal of `name` (a function written `f()`, or a statement).
fn refuse(name: &str) -> ! {
    errors::raise(
        &Report::new(SqlState::InsufficientPrivilege, format!("{name} may not run while nl2sql reads a table as its owner"))
            .detail("It reaches the session of the role that asked for the read: its advisory locks, random numbers, last sequence value, query text, notifications, constraint checks or cursors.")
            .hint("Remove it from the table's row-level security policies and the functions they call."),
    )
}

/// Whether a table is being read as its owner now (`owner::as_table_owner`,
/// `owner::as_table_owner_running_no_code`).
pub(crate) fn reading_as_table_owner() -> bool {
    TABLE_READS.with(|d| d.get()) > 0
}

/// One read as a table's owner, from its start to its end (an error's too).
pub(crate) struct TableRead;

impl TableRead {
    pub(crate) fn enter() -> TableRead {
        TABLE_READS.with(|d| d.set(d.get() + 1));
        TableRead
    }
}

/// Before a read that runs the table owner's code: the refusals come as the executor sets a
/// call up, and PL/pgSQL keeps a simple expression set up for the rest of the transaction while
/// its plan holds, so one her function set up before the read (a call of it earlier in the
/// transaction) would run unjudged. Every cached plan is made to be planned again: what her
/// code runs in the read is set up in it. (The session's own plans are planned again once, as
/// after DISCARD PLANS.) Not needed where none of her code may run (Scope::Elevated).
pub(crate) fn plan_afresh() {
    // SAFETY: marks the plan cache's entries invalid, as a cache reset does.
    unsafe { pg_sys::ResetPlanCache() };
}

impl Drop for TableRead {
    fn drop(&mut self) {
        TABLE_READS.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

thread_local! {
    static TABLE_READS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
