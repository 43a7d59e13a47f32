//! Runs code as the extension's owner, the only role that can read nl2sql's internal tables,
//! the way a SECURITY DEFINER function would. Callers check the invoking role's privileges
//! themselves (has_column_privilege(caller, ...)) before anything is returned.
//!
//! Nothing another role wrote runs with the owner's rights: while acting as the owner, the
//! object-access hook refuses every function that is not built in or part of an extension a
//! superuser installed (Scope::Elevated), and user tables are read as their own owner, in a
//! restricted security context ([`as_table_owner`]), the way VACUUM and ANALYZE read them.

use crate::pg::table_read::{self, TableRead};
use crate::pg::{errors, hooks, relation, role};
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::safety::policy::Scope;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use std::collections::HashMap;

/// What acting as the owner needs, read in one query: the owner, and a safe search_path
/// (PostgreSQL's catalog, pgvector's schema, this session's temporary schema last).
struct Context {
    owner: pg_sys::Oid,
    safe_path: String,
}

fn context() -> Context {
    let row = crate::pg::spi::read_row(
        include_str!("../../sql/queries/owner_context.sql"),
        &[],
        |r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<String>(2).ok()?)),
    );
    match row {
        Some((owner, Some(safe_path))) => Context { owner, safe_path },
        Some((_, None)) => errors::raise(
            &Report::new(SqlState::ObjectNotInPrerequisiteState, "pgvector's schema is named \"$user\", which a search_path cannot name")
                .detail("search_path reads \"$user\" as the current role's own schema, quoted or not.")
                .hint("Move pgvector to another schema: ALTER EXTENSION vector SET SCHEMA ..."),
        ),
        None => error!("the nl2sql extension is not installed in this database"),
    }
}

/// The role nl2sql acts for: the current user of the calling statement.
pub fn caller() -> pg_sys::Oid {
    // SAFETY: reads the current user id.
    unsafe { pg_sys::GetUserId() }
}

/// Runs `f` with the extension owner as the current user and a safe search_path, the way a
/// SECURITY DEFINER function with SET search_path would; restores both afterwards, also when
/// `f` raises an error. Names `f` splices into SQL must be schema-qualified.
pub fn as_owner<T>(f: impl FnOnce() -> T) -> T {
    let ctx = context();
    role::switched(ctx.owner, pg_sys::SECURITY_LOCAL_USERID_CHANGE, ctx.safe_path.as_str(), || {
        hooks::with_scope(Scope::Elevated, &[], HashMap::new(), f)
    })
}

/// Runs `f` as the owner of `rel`, in a restricted security context (no SET ROLE, no temporary
/// objects) and with a safe search_path: how nl2sql reads a user's table for the value index,
/// so that whatever the table runs (row-level security policies, casts of its types) runs with
/// the rights of the role that wrote it, never the extension owner's, and what it changes in
/// the session's settings is undone. The elevated scope is lifted meanwhile: the table owner's
/// own code may run as the table owner.
pub fn as_table_owner<T>(rel: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let relowner = table_owner(rel);
    // Only pg_catalog: nothing in the table owner's code path is resolved in a schema others
    // may write.
    let outermost = OWNER_READ_DEPTH.with(|d| d.replace(d.get() + 1)) == 0;
    let out = PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
        let _read = TableRead::enter();
        table_read::plan_afresh();
        hooks::suspended(|| role::switched(relowner, role::RESTRICTED, "pg_catalog, pg_temp", || errors::unheard(f)))
    }))
    .catch_others(|e| {
        OWNER_READ_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        if outermost {
            OWNER_READS_FAILED.with(|n| n.set(n.get() + 1));
            let said = match &e {
                CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => Some(r.message().to_string()),
                CaughtError::RustPanic { .. } => None,
            };
            LAST_FAILURE.with(|m| *m.borrow_mut() = said);
        }
        e.rethrow()
    })
    .execute();
    OWNER_READ_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    out
}

thread_local! {
    static LAST_FAILURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    static OWNER_READS_FAILED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static OWNER_READ_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How many reads as a table's owner ([`as_table_owner`]) ended in an error in this backend,
/// counting only the outermost: where an error came from, a table's owner's code or nl2sql
/// itself, is told by whether this moved (a read her own code starts, and fails inside an
/// exception block of hers, does not count).
pub fn owner_reads_failed() -> u64 {
    OWNER_READS_FAILED.with(|n| n.get())
}

/// Whether the error a statement ends with is the one the last outermost read as a table's
/// owner ([`as_table_owner`]) ended with: that read came after `since` ([`owner_reads_failed`]
/// then), its failure was not passed over since ([`passed_over`]), and `said` is its message as
/// `shown` renders a message (an error of the read itself: her code's, or PostgreSQL's about her
/// table; never one nl2sql raised afterwards, an endpoint's or a lock's, with the same text).
pub fn ended_owner_read(said: &str, since: u64, shown: impl Fn(&str) -> String) -> bool {
    owner_reads_failed() != since && LAST_FAILURE.with(|m| m.borrow().as_deref().is_some_and(|m| shown(m) == said))
}

/// Forgets the error the last read as a table's owner ended with: where a caller catches such
/// an error and goes on (a refresh's re-check of removed values, a table a schema-wide build
/// skips), so that an error nl2sql raises later in the same statement is never taken for hers.
pub fn passed_over() {
    LAST_FAILURE.with(|m| *m.borrow_mut() = None);
}

/// Like [`as_table_owner`], but running none of the owner's code either: only system functions
/// may run (Scope::Elevated), so a function of the owner's in an index expression the planner
/// folds, a policy, or a cast added to the table's types after it was listed fails the read
/// instead of running. How profiling reads tables whose owners never asked for it.
pub fn as_table_owner_running_no_code<T>(rel: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let relowner = table_owner(rel);
    let _read = TableRead::enter();
    hooks::with_scope(Scope::Elevated, &[], HashMap::new(), || {
        role::switched(relowner, role::RESTRICTED, "pg_catalog, pg_temp", || errors::unheard(f))
    })
}

/// The table's owner as committed now (the system cache), whatever the transaction's snapshot.
fn table_owner(rel: pg_sys::Oid) -> pg_sys::Oid {
    relation::owner(rel).unwrap_or_else(|| relation::gone(rel))
}
