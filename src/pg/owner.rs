//! Runs code as the extension's owner, the only role that can read nl2sql's internal tables,
//! the way a SECURITY DEFINER function would. Callers check the invoking role's privileges
//! themselves (has_column_privilege(caller, ...)) before anything is returned.
//!
//! Nothing another role wrote runs with the owner's rights: while acting as the owner, the
//! object-access hook refuses every function that is not built in or part of an extension a
//! superuser installed (Scope::Elevated), and user tables are read as their own owner, in a
//! restricted security context ([`as_table_owner`]), the way VACUUM and ANALYZE read them.

use crate::pg::{hooks, role};
use nl2sql_core::policy::Scope;
use pgrx::prelude::*;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

/// What acting as the owner needs, read in one query: the owner, a safe search_path (PostgreSQL's
/// catalog, pgvector's and pg_trgm's schemas, this session's temporary schema last), and the
/// caller's path.
struct Context {
    owner: pg_sys::Oid,
    safe_path: String,
    caller_path: String,
}

fn context() -> Context {
    let row = Spi::get_three::<pg_sys::Oid, String, String>(
        "SELECT e.extowner,
                'pg_catalog, ' || coalesce((SELECT pg_catalog.string_agg(DISTINCT pg_catalog.quote_ident(n.nspname), ', ') || ', '
                                            FROM pg_catalog.pg_extension v JOIN pg_catalog.pg_namespace n ON n.oid = v.extnamespace
                                            WHERE v.extname IN ('vector', 'pg_trgm')), '') || 'pg_temp',
                pg_catalog.current_setting('search_path')
         FROM pg_catalog.pg_extension e WHERE e.extname = 'nl2sql'",
    );
    match row {
        Ok((Some(owner), Some(safe_path), Some(caller_path))) => Context { owner, safe_path, caller_path },
        _ => error!("the nl2sql extension is not installed in this database"),
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
    let mut old_user = pg_sys::InvalidOid;
    let mut old_ctx: i32 = 0;
    // SAFETY: the save/switch/restore sequence of fmgr_security_definer.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut old_user, &mut old_ctx);
        pg_sys::SetUserIdAndSecContext(ctx.owner, old_ctx | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
    }
    set_search_path(&ctx.safe_path);
    PgTryBuilder::new(AssertUnwindSafe(|| hooks::with_scope(Scope::Elevated, &[], HashMap::new(), f)))
        .finally(|| {
            unsafe { pg_sys::SetUserIdAndSecContext(old_user, old_ctx) };
            set_search_path(&ctx.caller_path);
        })
        .execute()
}

/// Runs `f` as the owner of `rel`, in a restricted security context (no SET ROLE, no temporary
/// objects) and with a safe search_path: how nl2sql reads a user's table for the value index,
/// so that whatever the table runs (row-level security policies, say) runs with the rights of
/// the role that wrote it, never the extension owner's. The elevated scope is lifted meanwhile:
/// the table owner's own code may run as the table owner.
pub fn as_table_owner<T>(rel: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let ctx = context();
    let relowner = Spi::get_one_with_args::<pg_sys::Oid>("SELECT relowner FROM pg_catalog.pg_class WHERE oid = $1", &[rel.into()])
        .ok()
        .flatten()
        .unwrap_or_else(|| error!("relation with OID {} does not exist", u32::from(rel)));
    let current = Spi::get_one::<String>("SELECT pg_catalog.current_setting('search_path')").ok().flatten().unwrap_or_default();
    set_search_path(&ctx.safe_path);
    PgTryBuilder::new(AssertUnwindSafe(|| hooks::suspended(|| role::as_role(relowner, role::RESTRICTED, f))))
        .finally(|| set_search_path(&current))
        .execute()
}

fn set_search_path(path: &str) {
    let _ = Spi::run_with_args("SELECT pg_catalog.set_config('search_path', $1, true)", &[path.into()]);
}
