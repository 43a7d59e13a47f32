//! A table another role owns, acted on by the extension's owner: locked, its owner read, its
//! triggers made and dropped, all by OID. A table's owner who also owns its schema can rename
//! the schema at any moment (ALTER SCHEMA RENAME waits for no lock on the tables in it), so a
//! name taken before a wait may afterwards be another table's; and a transaction's snapshot
//! (REPEATABLE READ) may show a name, or an owner, that is no longer the table's. So nothing
//! here reads the catalog by snapshot: the system caches show it as committed now, as the
//! parser and the executor see it. Where SQL has no way but a name (the table owner's reads),
//! [`by_name`] takes it just before and checks it just after.

use crate::pg::compat::{list_len, list_ptr};
use crate::pg::errors;
use nl2sql_core::error::{Report, SqlState};
use pgrx::prelude::*;
use std::ffi::{CStr, CString};

/// Takes `mode` on `rel` until the transaction ends and says whether it still exists. Taking
/// the lock processes pending invalidations, so what is read next is the catalog as committed.
pub(crate) fn lock_existing(rel: pg_sys::Oid, mode: u32) -> bool {
    let none = pg_sys::Datum::from(0usize);
    // SAFETY: any OID may be locked; the cache lookup takes plain datums.
    unsafe {
        pg_sys::LockRelationOid(rel, mode as pg_sys::LOCKMODE);
        pg_sys::SearchSysCacheExists(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(rel), none, none, none)
    }
}

/// The relation's owner as committed now; None when it no longer exists.
pub(crate) fn owner(rel: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: invalidations other sessions committed are applied (a cached row may be older
    // than the last ALTER TABLE OWNER), then a cache lookup by OID, released before returning.
    unsafe {
        pg_sys::AcceptInvalidationMessages();
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(rel));
        if tup.is_null() {
            return None;
        }
        let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tup)).relowner;
        pg_sys::ReleaseSysCache(tup);
        Some(owner)
    }
}

/// Whether `role` has the privileges of `rel`'s owner (is it, or a member of it), or is a
/// superuser: who may build, refresh and drop the relation's value indexes.
pub(crate) fn may_act_as_owner(rel: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    // SAFETY: role lookups by OID.
    owner(rel).is_some_and(|o| unsafe { pg_sys::superuser_arg(role) || pg_sys::has_privs_of_role(role, o) })
}

/// The relation's schema-qualified, quoted name as committed now; None when it no longer exists.
pub(crate) fn name(rel: pg_sys::Oid) -> Option<String> {
    // SAFETY: invalidations applied (a cached name may be older than the last rename), then
    // cache lookups by OID; each returns NULL or a palloc'd C string.
    unsafe {
        pg_sys::AcceptInvalidationMessages();
        let relname = pg_sys::get_rel_name(rel);
        if relname.is_null() {
            return None;
        }
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(rel));
        if schema.is_null() {
            return None;
        }
        let quoted = |s: *const std::ffi::c_char| CStr::from_ptr(pg_sys::quote_identifier(s)).to_string_lossy().into_owned();
        Some(format!("{}.{}", quoted(schema), quoted(relname)))
    }
}

/// Runs `f` with `rel`'s name as it is now, then checks that the name is still `rel`'s: a
/// statement that read a table of that name read `rel`. Otherwise the transaction fails (40001)
/// and undoes what `f` did. For reads run as the table's owner only (they gain nothing from
/// another table): what the extension's owner does to a table goes by OID.
pub(crate) fn by_name<T>(rel: pg_sys::Oid, f: impl FnOnce(&str) -> T) -> T {
    let before = name(rel).unwrap_or_else(|| gone(rel));
    let out = f(&before);
    match name(rel) {
        Some(after) if after == before => out,
        Some(after) => errors::raise(
            &Report::new(SqlState::from_code("40001"), format!("relation {before} was renamed to {after} while nl2sql read it"))
                .detail("A statement naming it may have read another relation; what it did is undone.")
                .hint("Try again when no one renames the relation or its schema."),
        ),
        None => gone(rel),
    }
}

/// Whether `rel` has a trigger named `trigger`, as committed now.
pub(crate) fn has_trigger(rel: pg_sys::Oid, trigger: &str) -> bool {
    trigger_oid(rel, trigger).is_some()
}

fn trigger_oid(rel: pg_sys::Oid, trigger: &str) -> Option<pg_sys::Oid> {
    let name = CString::new(trigger).ok()?;
    // SAFETY: a catalog scan by relation and name (missing_ok: InvalidOid when there is none).
    let oid = unsafe { pg_sys::get_trigger_oid(rel, name.as_ptr(), true) };
    (oid != pg_sys::InvalidOid).then_some(oid)
}

/// Makes a trigger on `rel` from `statement`, a CREATE TRIGGER whose ON clause names any
/// relation: PostgreSQL's CreateTrigger, given `rel`'s OID, opens that relation (under SHARE ROW
/// EXCLUSIVE, as the statement would) and never resolves the name.
pub(crate) fn create_trigger(rel: pg_sys::Oid, statement: &str) {
    let Ok(sql) = CString::new(statement) else { internal("a trigger's statement holds a NUL byte") };
    // SAFETY: the statement is nl2sql's own text; the node is checked to be a CreateTrigStmt
    // before it is used as one; errors are PostgreSQL's own.
    unsafe {
        let list = pg_sys::raw_parser(sql.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        if list_len(list) != 1 {
            internal("a trigger's statement is not one statement");
        }
        let node = (*list_ptr(list, 0).cast::<pg_sys::RawStmt>()).stmt;
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_CreateTrigStmt {
            internal("a trigger's statement is not CREATE TRIGGER");
        }
        let invalid = pg_sys::InvalidOid;
        pg_sys::CreateTrigger(
            node.cast::<pg_sys::CreateTrigStmt>(),
            sql.as_ptr(),
            rel,
            invalid,
            invalid,
            invalid,
            invalid,
            invalid,
            std::ptr::null_mut(),
            false,
            false,
        );
        pg_sys::CommandCounterIncrement();
    }
}

/// Drops the triggers of `rel` named `names` where there are any, by OID. Takes ACCESS
/// EXCLUSIVE on `rel`, as DROP TRIGGER does, first.
pub(crate) fn drop_triggers(rel: pg_sys::Oid, names: &[&str]) {
    if !lock_existing(rel, pg_sys::AccessExclusiveLock) {
        return;
    }
    for trigger in names {
        check_for_interrupts!();
        let Some(oid) = trigger_oid(rel, trigger) else { continue };
        let object = pg_sys::ObjectAddress { classId: pg_sys::TriggerRelationId, objectId: oid, objectSubId: 0 };
        // SAFETY: the trigger was found after the table's ACCESS EXCLUSIVE lock, which every
        // DROP TRIGGER and ALTER TABLE of it waits for; errors are PostgreSQL's own.
        unsafe {
            pg_sys::performDeletion(&object, pg_sys::DropBehavior::DROP_RESTRICT, 0);
            pg_sys::CommandCounterIncrement();
        }
    }
}

/// Raises 42P01 for a relation that no longer exists.
pub(crate) fn gone(rel: pg_sys::Oid) -> ! {
    errors::raise(&Report::new(SqlState::UndefinedTable, format!("relation with OID {} does not exist", u32::from(rel))))
}

fn internal(what: &str) -> ! {
    errors::raise(&Report::new(SqlState::InternalError, format!("nl2sql internal error: {what}")))
}
