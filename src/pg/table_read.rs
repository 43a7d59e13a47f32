//! What a table owner's code may not reach while nl2sql reads her table as her (owner.rs): the
//! session of the role that asked for the read, past its settings. Kept apart from owner.rs so
//! that the hooks and the session's trace can ask whether such a read runs.

use crate::pg::errors;
use nl2sql_core::error::{Report, SqlState};
use pgrx::prelude::*;
use std::ffi::CStr;

/// Built-in functions a table owner's code may not call while nl2sql reads her table as her
/// (`owner::as_table_owner`): each reaches past the read into the session of the role that
/// asked for it (its session advisory locks, its random sequence, read or seeded, its last
/// sequence value, its query's text, notifications sent in its name), where a rollback undoes
/// nothing or what is read is the caller's. A transaction-level advisory lock is held until the
/// caller's transaction ends, as a row lock her code takes is: allowed.
const CALLERS_SESSION: &[&str] = &[
    "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared", "pg_advisory_unlock",
    "pg_advisory_unlock_shared", "pg_advisory_unlock_all", "setseed", "random", "random_normal", "current_query", "lastval",
    "pg_notify",
];

/// While a table is read as its owner, refuses a function of [`CALLERS_SESSION`] before it
/// runs (from the object-access hook) and, from the utility hook, `what` statements of the
/// same reach (NOTIFY, SET CONSTRAINTS, DECLARE: the caller's transaction's).
pub(crate) fn refuse_callers_session(function: Option<pg_sys::Oid>, what: Option<&str>) {
    if !reading_as_table_owner() {
        return;
    }
    let name = match (function, what) {
        (Some(f), _) => {
            // SAFETY: catalog lookups of a function the executor is about to start.
            let named = unsafe {
                let name = pg_sys::get_func_name(f);
                (pg_sys::get_func_namespace(f) == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE) && !name.is_null())
                    .then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
            };
            match named.filter(|n| CALLERS_SESSION.contains(&n.as_str())) {
                Some(n) => format!("{n}()"),
                None => return,
            }
        }
        (None, Some(w)) => w.to_string(),
        (None, None) => return,
    };
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
        // The refusal comes as the executor sets a call up; PL/pgSQL keeps a simple expression
        // set up for the rest of the transaction while its plan holds, so one her function set
        // up before the read (a call of it earlier in the transaction) would run unjudged.
        // Every cached plan is made to be planned again: what her code runs in the read is set
        // up in it. (The session's own plans are planned again once, as after DISCARD PLANS.)
        // SAFETY: marks the plan cache's entries invalid, as a cache reset does.
        unsafe { pg_sys::ResetPlanCache() };
        TableRead
    }
}

impl Drop for TableRead {
    fn drop(&mut self) {
        TABLE_READS.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

thread_local! {
    static TABLE_READS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
