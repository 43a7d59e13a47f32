//! Least privilege: the role generated SQL runs as. A role's own rights, except for superusers,
//! whose questions are answered as nl2sql.superuser_role (default pg_read_all_data: reads every
//! table, is not a superuser, and row-level security applies to it).

use crate::gucs;
use nl2sql_core::error::{Report, SqlState};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use std::ffi::CString;
use std::panic::AssertUnwindSafe;

/// The role that reads and runs generated SQL for the current user.
pub fn exec_role() -> Oid {
    // SAFETY: reads the current user id and looks up roles by name and OID.
    unsafe {
        let me = pg_sys::GetUserId();
        if !pg_sys::superuser_arg(me) {
            return me;
        }
        let name = gucs::superuser_role();
        let cname = CString::new(name.clone()).unwrap_or_default();
        let role = pg_sys::get_role_oid(cname.as_ptr(), true);
        if role == pg_sys::InvalidOid {
            crate::pg::errors::raise(
                &Report::new(SqlState::from_code("42704"), format!("role \"{name}\" named by nl2sql.superuser_role does not exist"))
                    .detail("Generated SQL never runs with superuser rights; a superuser's questions run as nl2sql.superuser_role.".to_string())
                    .hint("Create that role, or set nl2sql.superuser_role to a role that may read the tables questions are about.".to_string()),
            );
        }
        if pg_sys::superuser_arg(role) {
            crate::pg::errors::raise(
                &Report::new(SqlState::InsufficientPrivilege, format!("nl2sql.superuser_role names the superuser \"{name}\""))
                    .detail("Generated SQL never runs with superuser rights.".to_string())
                    .hint("Set nl2sql.superuser_role to a role that is not a superuser, such as pg_read_all_data.".to_string()),
            );
        }
        role
    }
}

/// Runs `f` as `role` with `flags` (SECURITY_* bits) added to the security context, the way
/// fmgr_security_definer switches; restores both afterwards, also when `f` raises an error.
pub fn as_role<T>(role: Oid, flags: u32, f: impl FnOnce() -> T) -> T {
    let mut old_user = pg_sys::InvalidOid;
    let mut old_ctx: i32 = 0;
    // SAFETY: the save/switch/restore sequence of fmgr_security_definer.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut old_user, &mut old_ctx);
        pg_sys::SetUserIdAndSecContext(role, old_ctx | flags as i32);
    }
    PgTryBuilder::new(AssertUnwindSafe(f))
        .finally(|| unsafe { pg_sys::SetUserIdAndSecContext(old_user, old_ctx) })
        .execute()
}

/// Runs `f` as the role that reads and runs generated SQL (see [`exec_role`]).
pub fn as_exec_role<T>(f: impl FnOnce() -> T) -> T {
    let role = exec_role();
    // SAFETY: reads the current user id.
    if role == unsafe { pg_sys::GetUserId() } {
        return f();
    }
    as_role(role, pg_sys::SECURITY_LOCAL_USERID_CHANGE, f)
}

/// Security context bits for running what another role wrote: no SET ROLE, no temporary
/// objects, no session state that outlives the call (as VACUUM and ANALYZE do).
pub const RESTRICTED: u32 = pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION;
