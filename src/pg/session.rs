//! What a session's state says about who is asking, beyond its roles: the values of custom
//! settings (`app.tenant`, `request.jwt.claims`), which row-level security policies often read.
//! Traces and cached samples are valid only while they are unchanged, so that clients of a
//! connection pooler that share one role never see each other's.

use pgrx::pg_sys;
use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::ffi::CStr;
use std::hash::{Hash, Hasher};

/// The source of a setting's current value and the role that set it.
pub fn setting_origin(name: &str) -> Option<(pg_sys::GucSource::Type, pg_sys::Oid)> {
    // SAFETY: reads the GUC array as SHOW ALL does, on the backend's thread.
    unsafe {
        for g in crate::pg::compat::guc_variables() {
            if !g.is_null() && CStr::from_ptr((*g).name).to_bytes() == name.as_bytes() {
                return Some(((*g).source, (*g).srole));
            }
        }
    }
    None
}

/// A hash of every custom setting's name and value (placeholders: `x.y` names no loaded
/// library defines) other than nl2sql's own, and of application_name.
pub fn fingerprint() -> u64 {
    // Bytes, not text: two values that differ only in bytes that are not UTF-8 (a SQL_ASCII
    // database) must not hash alike.
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    // SAFETY: reads the GUC array as SHOW ALL does, on the backend's thread; placeholders are
    // string variables, so the cast to config_string is the one guc.c makes.
    unsafe {
        for g in crate::pg::compat::guc_variables() {
            if g.is_null() {
                continue;
            }
            let name = CStr::from_ptr((*g).name).to_bytes();
            let custom = (*g).flags & pg_sys::GUC_CUSTOM_PLACEHOLDER as i32 != 0;
            if !custom && name != b"application_name" {
                continue;
            }
            if name.starts_with(b"nl2sql.") {
                continue;
            }
            let var = (*(g as *mut pg_sys::config_string)).variable;
            let value = if var.is_null() || (*var).is_null() { Vec::new() } else { CStr::from_ptr(*var).to_bytes().to_vec() };
            pairs.push((name.to_vec(), value));
        }
    }
    pairs.sort();
    let mut h = DefaultHasher::new();
    pairs.hash(&mut h);
    h.finish()
}

/// Whether nl2sql.privacy holds for this session: the setting, or a DBA's ALTER ROLE/DATABASE
/// ... SET nl2sql.privacy = on (any spelling PostgreSQL reads as true: on, 1, t, tr, tru, true, y, ye, yes) for the session's or current role in this database, read from
/// the catalog. (A role's own connection options can shadow the catalog's value before the
/// library is loaded, and PostgreSQL then drops both when it refuses the role's: the catalog
/// still says what the DBA set.)
pub fn privacy() -> bool {
    if crate::gucs::privacy() {
        return true;
    }
    crate::pg::spi::read::<bool>(
        include_str!("../../sql/queries/session_privacy.sql"),
        // SAFETY: reads the session and current user ids.
        &[unsafe { pg_sys::GetSessionUserId() }.into(), unsafe { pg_sys::GetUserId() }.into()],
    )
    .unwrap_or(false)
}

/// A trace and who made it: the roles, and the custom settings (a tenant's id, say).
struct Owned {
    user: pg_sys::Oid,
    session_user: pg_sys::Oid,
    settings: u64,
    trace: serde_json::Value,
}

thread_local! {
    /// The trace of this backend's last call, for nl2sql.last_trace(), scrubbed of the key.
    static LAST_TRACE: RefCell<Option<Owned>> = const { RefCell::new(None) };
}

pub fn who() -> (pg_sys::Oid, pg_sys::Oid, u64) {
    // SAFETY: reads the current and the session user ids.
    let (user, session_user) = unsafe { (pg_sys::GetUserId(), pg_sys::GetSessionUserId()) };
    (user, session_user, fingerprint())
}

/// The last trace, when the role that made it is still the one asking, with the same custom
/// settings (clients of a pooler that share a role differ there); forgotten otherwise (but not
/// for a table owner's code that runs inside the caller's call).
pub fn last_trace() -> Option<serde_json::Value> {
    // A table owner's code, run as her inside the caller's build (owner.rs), neither sees nor
    // forgets the caller's trace.
    if crate::pg::table_read::reading_as_table_owner() {
        return None;
    }
    let (user, session_user, settings) = who();
    LAST_TRACE.with_borrow_mut(|t| match t {
        Some(o) if o.user == user && o.session_user == session_user && o.settings == settings => Some(o.trace.clone()),
        _ => {
            *t = None;
            None
        }
    })
}

/// Forgets the last trace (the role changed: SET ROLE, SET SESSION AUTHORIZATION, DISCARD ALL).
pub fn forget_trace() {
    LAST_TRACE.with_borrow_mut(|t| *t = None);
}

/// Keeps `trace` as the session's last, for the roles and custom settings `owner` names (as
/// [`who`] gave them when the call began).
pub fn keep_trace(owner: (pg_sys::Oid, pg_sys::Oid, u64), trace: Option<serde_json::Value>) {
    let (user, session_user, settings) = owner;
    let stored = trace.map(|trace| Owned { user, session_user, settings, trace });
    LAST_TRACE.with_borrow_mut(|t| *t = stored);
}

thread_local! {
    /// How many times the role changed in this backend (see [`role_changed`]).
    static ROLE_CHANGES: Cell<u64> = const { Cell::new(0) };
}

/// The role changed (SET ROLE, SET SESSION AUTHORIZATION, RESET ALL, DISCARD ALL): the last
/// trace is forgotten now, and what other rooms cached for the old role (catalog.rs) at their
/// next read, when they see [`role_changes`] move.
pub fn role_changed() {
    forget_trace();
    ROLE_CHANGES.with(|n| n.set(n.get().wrapping_add(1)));
}

/// How many times the role changed in this backend.
pub fn role_changes() -> u64 {
    ROLE_CHANGES.with(Cell::get)
}
