//! Whether PostgreSQL ran a domain's CHECK constraint while it read a generated query.
//!
//! Reading a literal of an array, record or range type whose element is a domain runs the
//! domain's input function, and the domain's CHECK constraints with it, while the query is still
//! being parsed (array_in calls domain_in). A CHECK that calls a function is seen by the hooks
//! (hooks.rs marks other code); one made of casts, `session_user` and tests alone is not (an
//! I/O cast sets up its input function without the object-access hook, and a built-in one
//! without the fmgr hook), and what it raises (a reg* cast's `type "..." does not exist`, in
//! parse_type.c) looks like reading's own error, quoting what the CHECK computed.
//!
//! Before the query is read, every domain's constraints are marked stale (the type cache clears
//! one flag on each domain entry), so the type cache loads them again, setting that flag, before
//! it runs any: an entry of a domain a CHECK applies to whose flag is set again was reached. The
//! flag's value is PostgreSQL's own, private and different between major versions: it is learned
//! as the one flag marking clears, and until the backend has seen it cleared once, any change
//! of an entry's flags counts. A change to pg_type or pg_constraint taken in while the query is
//! read (another session's domain, or a second marking that would clear the flag again) counts
//! as reached too. Either way the error is not the query's text read back.

use pgrx::prelude::*;
use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::c_int;

/// Past this many domains with a CHECK, any read is taken to have reached one.
const MAX_DOMAINS: i64 = 10_000;

const CHECKED_SQL: &str = include_str!("../../../sql/queries/sandbox_checked_domains.sql");

thread_local! {
    /// A read is being watched (between [`mark`] and the end of its [`Marks`]).
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    /// pg_type or pg_constraint changed (an invalidation taken in) while a read was watched.
    static MOVED: Cell<bool> = const { Cell::new(false) };
    /// The type cache's flag of a domain entry whose constraints are loaded; 0 until learned.
    static LOADED_FLAG: Cell<c_int> = const { Cell::new(0) };
}

/// Registers the catalog callbacks; once per backend (_PG_init).
pub fn install() {
    // SAFETY: _PG_init, before any query of this library.
    unsafe {
        for cache in [pg_sys::SysCacheIdentifier::TYPEOID, pg_sys::SysCacheIdentifier::CONSTROID] {
            pg_sys::CacheRegisterSyscacheCallback(cache as i32, Some(moved), pg_sys::Datum::from(0usize));
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn moved(_arg: pg_sys::Datum, _cache: c_int, _hash: u32) {
    if WATCHING.get() {
        MOVED.set(true);
    }
}

/// The domains a CHECK constraint applies to (their own or a base domain's), as committed now
/// (not by the transaction's snapshot: the parser finds types as committed now); None past
/// MAX_DOMAINS.
pub fn checked() -> Option<Vec<pg_sys::Oid>> {
    let oids = crate::pg::spi::rows_now(CHECKED_SQL, &[(MAX_DOMAINS + 1).into()], |r| r.get::<pg_sys::Oid>(1).ok().flatten());
    (i64::try_from(oids.len()).unwrap_or(i64::MAX) <= MAX_DOMAINS).then_some(oids)
}

/// Whether the domains a CHECK constraint applies to are still those `before` listed, none
/// added (one created, or given a CHECK, by another session after they were listed, and read by
/// the query, had no entry noted). Read once the query's subtransaction ended.
pub fn none_added(before: &Option<Vec<pg_sys::Oid>>) -> bool {
    let (Some(before), Some(now)) = (before, checked()) else { return false };
    let before: HashSet<u32> = before.iter().map(|d| u32::from(*d)).collect();
    now.iter().all(|d| before.contains(&u32::from(*d)))
}

struct Mark {
    entry: *mut pg_sys::TypeCacheEntry,
    /// Its flags once its constraints were marked stale.
    flags: c_int,
}

/// The type cache's entries of the domains [`checked`] found, as they stood when marked; the
/// read is watched until this is dropped.
pub struct Marks(Option<Vec<Mark>>);

/// Marks every domain's constraints stale (as a commit that changed pg_constraint would), lists
/// the domains a CHECK applies to, as committed now, and notes the type cache's entry of each;
/// from here until the marks are dropped, a change to pg_type or pg_constraint taken in is
/// noted. Also returns the list (None: too many), for [`none_added`] once the read is over.
///
/// # Safety
/// In a transaction.
pub unsafe fn mark() -> (Marks, Option<Vec<pg_sys::Oid>>) {
    // Changes committed until now are taken in first: the list and the entries are then those
    // the parser starts from.
    pg_sys::AcceptInvalidationMessages();
    let Some(domains) = checked() else {
        stale();
        return (Marks(None), None);
    };
    let none = pg_sys::Datum::from(0usize);
    let mut entries = Vec::with_capacity(domains.len());
    for &oid in &domains {
        // A domain dropped since it was listed has no entry to note (and cannot be read).
        if !pg_sys::SearchSysCacheExists(pg_sys::SysCacheIdentifier::TYPEOID as i32, pg_sys::Datum::from(oid), none, none, none) {
            continue;
        }
        // Flags 0: the entry's pg_type data only; its constraints are not loaded.
        let entry = pg_sys::lookup_type_cache(oid, 0);
        if !entry.is_null() {
            entries.push((entry, (*entry).flags));
        }
    }
    stale();
    let mut marks = Vec::with_capacity(entries.len());
    for (entry, before) in entries {
        let flags = (*entry).flags;
        // The one flag marking stale clears is the one loading sets.
        let cleared = before & !flags;
        if cleared != 0 && cleared.count_ones() == 1 {
            LOADED_FLAG.set(cleared);
        }
        marks.push(Mark { entry, flags });
    }
    MOVED.set(false);
    WATCHING.set(true);
    (Marks(Some(marks)), Some(domains))
}

/// Fires pg_constraint's invalidation callbacks: the type cache's marks each domain entry's
/// constraints stale, to be loaded again (their CHECKs folded again) when next used.
unsafe fn stale() {
    pg_sys::CallSyscacheCallbacks(pg_sys::SysCacheIdentifier::CONSTROID as i32, 0);
}

impl Marks {
    /// Whether a marked domain's constraints were loaded again since [`mark`] (any change of
    /// its flags while the flag that says so is not known yet), or pg_type or pg_constraint
    /// changed meanwhile; true when there were too many to mark. Reads memory only: safe in an
    /// error handler.
    pub fn reached(&self) -> bool {
        let Some(marks) = &self.0 else { return true };
        let loaded = LOADED_FLAG.get();
        // SAFETY: type cache entries live as long as the backend, at a fixed address.
        MOVED.get()
            || marks.iter().any(|m| {
                let now = unsafe { (*m.entry).flags };
                if loaded == 0 { now != m.flags } else { now & loaded != 0 }
            })
    }

}

impl Drop for Marks {
    fn drop(&mut self) {
        WATCHING.set(false);
    }
}
