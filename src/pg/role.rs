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

/// Runs `f` as `role` with `flags` added to the security context and `search_path` set at a
/// new GUC nest level, the way fmgr_security_definer and ANALYZE switch: every setting `f`
/// (or code it runs) changes is undone afterwards, without running a query. On an error only
/// the user id is restored here; the (sub)transaction's abort undoes the settings.
pub fn switched<T>(role: pg_sys::Oid, flags: u32, search_path: impl Into<Vec<u8>>, f: impl FnOnce() -> T) -> T {
    let mut old_user = pg_sys::InvalidOid;
    let mut old_ctx: i32 = 0;
    let path = std::ffi::CString::new(search_path).unwrap_or_default();
    // SAFETY: the save/switch sequence of fmgr_security_definer; set_config_option at a new
    // nest level as for a function's SET clause.
    let nest = unsafe {
        pg_sys::GetUserIdAndSecContext(&mut old_user, &mut old_ctx);
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            path.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        pg_sys::SetUserIdAndSecContext(role, old_ctx | flags as i32);
        nest
    };
    let out = PgTryBuilder::new(AssertUnwindSafe(f))
        .catch_others(|e| {
            unsafe { pg_sys::SetUserIdAndSecContext(old_user, old_ctx) };
            e.rethrow()
        })
        .execute();
    // SAFETY: the restore half of the same sequence.
    unsafe {
        pg_sys::SetUserIdAndSecContext(old_user, old_ctx);
        pg_sys::AtEOXact_GUC(false, nest);
    }
    out
}

/// Runs `f` as the role that reads and runs generated SQL (see [`exec_role`]). For a superuser
/// that is another role, whose name the search_path's `$user` would then mean: a schema named
/// after nl2sql.superuser_role, which any role that may create schemas can create, would come
/// first for every name the question's query leaves unqualified. So the path is set for the
/// call to the caller's own, `$user` spelt as the caller's name where a superuser owns the
/// schema of that name, and left out where another role does.
pub fn as_exec_role<T>(f: impl FnOnce() -> T) -> T {
    let role = exec_role();
    // SAFETY: reads the current user id.
    let me = unsafe { pg_sys::GetUserId() };
    if role == me {
        return f();
    }
    switched(role, pg_sys::SECURITY_LOCAL_USERID_CHANGE, callers_path(me), f)
}

/// `me`'s name, when a schema of that name exists that a superuser owns (`me` is one): what
/// `$user` is in `me`'s own session, less a schema another role created under that name, which
/// would put her tables first for every question. Null otherwise, and for a role named `$user`
/// itself (so quoted, the name would be the marker again).
unsafe fn own_schema(me: Oid) -> *const std::ffi::c_char {
    let name = pg_sys::GetUserNameFromId(me, true);
    if name.is_null() || std::ffi::CStr::from_ptr(name).to_bytes() == b"$user" {
        return std::ptr::null();
    }
    let nsp = pg_sys::get_namespace_oid(name, true);
    if nsp == pg_sys::InvalidOid {
        return std::ptr::null();
    }
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::NAMESPACEOID as i32, pg_sys::Datum::from(nsp));
    if tup.is_null() {
        return std::ptr::null();
    }
    let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_namespace>(tup)).nspowner;
    pg_sys::ReleaseSysCache(tup);
    if pg_sys::superuser_arg(owner) {
        name
    } else {
        std::ptr::null()
    }
}

/// The session's search_path with `$user` (quoted or not: PostgreSQL reads both as the marker)
/// replaced by `me`'s own schema ([`own_schema`]), every element quoted again (as bytes: a name
/// is in the database's encoding). Without one that element is left out; a setting that cannot
/// be read or split (never: it was checked when set) gives `pg_catalog` alone. Either way fewer
/// names resolve, none elsewhere.
fn callers_path(me: Oid) -> Vec<u8> {
    // SAFETY: reads a setting and copies it before SplitIdentifierString writes into the copy;
    // the list's elements point into that copy, which lives until the end of the call.
    unsafe {
        let raw = pg_sys::GetConfigOption(c"search_path".as_ptr(), true, false);
        if raw.is_null() {
            return b"pg_catalog".to_vec();
        }
        let copy = pg_sys::pstrdup(raw);
        let mut list: *mut pg_sys::List = std::ptr::null_mut();
        if !pg_sys::SplitIdentifierString(copy, b',' as std::ffi::c_char, &mut list) {
            return b"pg_catalog".to_vec();
        }
        let name = own_schema(me);
        let items = pgrx::PgList::<std::ffi::c_char>::from_pg(list);
        let mut out = Vec::new();
        for item in items.iter_ptr() {
            let element = if std::ffi::CStr::from_ptr(item).to_bytes() == b"$user" { name } else { item };
            if element.is_null() {
                continue;
            }
            out.push(std::ffi::CStr::from_ptr(pg_sys::quote_identifier(element)).to_bytes().to_vec());
        }
        out.join(&b", "[..])
    }
}

/// Security context bits for running what another role wrote: no SET ROLE, no temporary
/// objects, no session state that outlives the call (as VACUUM and ANALYZE do).
pub const RESTRICTED: u32 = pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION;
