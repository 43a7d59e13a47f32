//! Runs code as the extension's owner, the only role that can read nl2sql's internal tables,
//! the way a SECURITY DEFINER function would. Callers check the invoking role's privileges
//! themselves (has_column_privilege(caller, ...)) before anything is returned.

use pgrx::prelude::*;
use std::panic::AssertUnwindSafe;

/// The role that created the extension.
pub fn extension_owner() -> pg_sys::Oid {
    Spi::get_one::<pg_sys::Oid>("SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'nl2sql'")
        .ok()
        .flatten()
        .unwrap_or_else(|| error!("the nl2sql extension is not installed in this database"))
}

/// The role nl2sql acts for: the current user of the calling statement.
pub fn caller() -> pg_sys::Oid {
    // SAFETY: reads the current user id.
    unsafe { pg_sys::GetUserId() }
}

/// A search_path that no ordinary role can plant objects in: PostgreSQL's catalog, pgvector's
/// schema (its types and operators), and this session's temporary schema last.
fn safe_search_path() -> String {
    Spi::get_one::<String>(
        "SELECT 'pg_catalog, ' || pg_catalog.quote_ident(n.nspname) || ', pg_temp'
         FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'vector'",
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| "pg_catalog, pg_temp".into())
}

/// Runs `f` with the extension owner as the current user and a safe search_path, the way a
/// SECURITY DEFINER function with SET search_path would; restores both afterwards, also when
/// `f` raises an error. Names `f` splices into SQL must be schema-qualified.
pub fn as_owner<T>(f: impl FnOnce() -> T) -> T {
    let owner = extension_owner();
    let path = safe_search_path();
    let old_path = Spi::get_one::<String>("SELECT pg_catalog.current_setting('search_path')").ok().flatten().unwrap_or_default();
    let mut old_user = pg_sys::InvalidOid;
    let mut old_ctx: i32 = 0;
    // SAFETY: the save/switch/restore sequence of fmgr_security_definer.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut old_user, &mut old_ctx);
        pg_sys::SetUserIdAndSecContext(owner, old_ctx | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
    }
    set_search_path(&path);
    PgTryBuilder::new(AssertUnwindSafe(f))
        .finally(|| {
            unsafe { pg_sys::SetUserIdAndSecContext(old_user, old_ctx) };
            set_search_path(&old_path);
        })
        .execute()
}

fn set_search_path(path: &str) {
    let _ = Spi::run_with_args("SELECT pg_catalog.set_config('search_path', $1, true)", &[path.into()]);
}
