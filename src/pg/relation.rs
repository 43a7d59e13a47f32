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
use std::cell::RefCell;
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
/// A name that is not UTF-8 raises 22021.
pub(crate) fn name(rel: pg_sys::Oid) -> Option<String> {
    parts(rel).map(|(qualified, _)| utf8(rel, qualified))
}

/// `name` as text. Exactly the catalog's bytes or nothing: a name replaced lossily (a SQL_ASCII
/// database holds names that are not UTF-8) would be another relation's, which the name then
/// reads.
fn utf8(rel: pg_sys::Oid, name: Vec<u8>) -> String {
    String::from_utf8(name).unwrap_or_else(|_| {
        errors::raise(
            &Report::new(SqlState::from_code("22021"), format!("the name of relation with OID {} is not valid UTF-8", u32::from(rel)))
                .hint("nl2sql works on relations whose schema and name are UTF-8; rename them."),
        )
    })
}

/// A name a table owner chose (a schema's, a table's, a column's), for messages only: quoted
/// where SQL needs it, invisible characters written as `U&"..."` escapes.
pub(crate) fn display_ident(name: &str) -> String {
    nl2sql_core::render::ident(&pgrx::spi::quote_identifier(name))
}

/// The relation's name as [`name`] gives it, for messages only: bytes that are not UTF-8 are
/// shown replaced (never a name to run: so spelled, it may be another relation's).
pub(crate) fn display_name(rel: pg_sys::Oid) -> Option<String> {
    parts(rel).map(|(qualified, _)| String::from_utf8_lossy(&qualified).into_owned())
}

/// The relation's schema-qualified, quoted name and its own name (unqualified, unquoted), from
/// one lookup as committed now, as the catalog's bytes.
fn parts(rel: pg_sys::Oid) -> Option<(Vec<u8>, Vec<u8>)> {
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
        let quoted = |s: *const std::ffi::c_char| CStr::from_ptr(pg_sys::quote_identifier(s)).to_bytes();
        Some(([quoted(schema), b".", quoted(relname)].concat(), CStr::from_ptr(relname).to_bytes().to_vec()))
    }
}

/// Runs `f` with `rel`'s name as it is now, then checks that the name is still `rel`'s: a
/// statement that read a table of that name read `rel`. Otherwise the transaction fails (40001)
/// and undoes what `f` did. For reads run as the table's owner only (they gain nothing from
/// another table): what the extension's owner does to a table goes by OID.
///
/// Meanwhile no statement may read another relation that now bears the name
/// ([`check_analyzed`], from the parse-analysis hook): a rename between the lookup and the
/// parse makes the name another relation's, a view that would run its owner's functions as
/// the table's owner, which a rollback does not undo (a sequence's `setval`).
pub(crate) fn by_name<T>(rel: pg_sys::Oid, f: impl FnOnce(&str) -> T) -> T {
    let (qualified, relname) = parts(rel).unwrap_or_else(|| gone(rel));
    let before = utf8(rel, qualified);
    let read = Read { rel, name: before.clone(), relname };
    let prev = READING.with_borrow_mut(|r| r.replace(read));
    let restore = Reading(prev);
    let out = f(&before);
    drop(restore);
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

thread_local! {
    /// While [`by_name`] runs: the relation and the name its statements use.
    static READING: RefCell<Option<Read>> = const { RefCell::new(None) };
}

/// A read by name under way: the relation, the quoted name its statements use, and the
/// relation's own name (unqualified, the catalog's bytes).
#[derive(Clone)]
struct Read {
    rel: pg_sys::Oid,
    name: String,
    relname: Vec<u8>,
}

/// Restores the read that was under way before, also when the statement raised an error.
struct Reading(Option<Read>);

impl Drop for Reading {
    fn drop(&mut self) {
        let prev = self.0.take();
        READING.with_borrow_mut(|r| *r = prev);
    }
}

/// Called after PostgreSQL analysed a statement (post_parse_analyze_hook). While [`by_name`]
/// runs, a statement whose text holds the name it gave out, and that names another relation
/// of the same relname outside nl2sql's own schema, raises 40001 before it is planned or run:
/// the name resolved to that relation (a schema renamed between the lookup and the parse).
/// The relname, not the qualified name, is compared: the parser holds a lock on what it
/// resolved, which a rename of that relation waits for, while its schema may be renamed
/// again before this check.
///
/// # Safety
/// `pstate` and `query` are the hook's arguments.
pub(crate) unsafe fn check_analyzed(pstate: *mut pg_sys::ParseState, query: *mut pg_sys::Query) {
    let Some(read) = READING.with_borrow(|r| r.clone()) else { return };
    if pstate.is_null() || (*pstate).p_sourcetext.is_null() || query.is_null() {
        return;
    }
    // Only the read's own statements: code the table's owner runs meanwhile (a policy's
    // function) may read tables of that relname elsewhere.
    let text = CStr::from_ptr((*pstate).p_sourcetext).to_bytes();
    if !nl2sql_core::safety::names::holds_name(text, read.name.as_bytes()) {
        return;
    }
    if (*query).commandType == pg_sys::CmdType::CMD_UTILITY {
        // Its inner query (a cursor's, EXPLAIN's) is not walked: never one of nl2sql's reads.
        errors::raise(&Report::new(SqlState::InternalError, "nl2sql internal error: a read by name is a utility statement".to_string()));
    }
    let own = pg_sys::get_namespace_oid(c"nl2sql".as_ptr(), true);
    for other in crate::pg::policy::named(query) {
        if other != read.rel && pg_sys::get_rel_namespace(other) != own && parts(other).is_some_and(|(_, n)| n == read.relname) {
            errors::raise(
                &Report::new(SqlState::from_code("40001"), format!("relation {} was renamed while nl2sql read it", read.name))
                    .detail("Its name now names another relation; nothing of the statement ran.")
                    .hint("Try again when no one renames the relation or its schema."),
            );
        }
    }
}

/// A trigger of a table, found by name as committed now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// No trigger of that name.
    Missing,
    /// One that calls `function` and is the table's own (not a partition's clone of its
    /// parent's): its OID.
    Calls(pg_sys::Oid),
    /// One of that name made otherwise: by the table's owner, or cloned from a parent.
    Other,
}

impl Trigger {
    /// Whether it is one of nl2sql's (it calls the function asked about).
    pub(crate) fn is_nl2sqls(self) -> bool {
        matches!(self, Trigger::Calls(_))
    }
}

/// The trigger of `rel` named `trigger`, judged by the function it calls.
pub(crate) fn trigger(rel: pg_sys::Oid, trigger: &str, function: pg_sys::Oid) -> Trigger {
    let Ok(name) = CString::new(trigger) else { return Trigger::Missing };
    // SAFETY: an index scan of pg_trigger by (tgrelid, tgname) under the catalog snapshot (as
    // get_trigger_oid scans it); the row's fields are copied before the scan ends. The name
    // datum points at `name`, alive for the scan.
    unsafe {
        let catalog = pg_sys::table_open(pg_sys::TriggerRelationId, pg_sys::AccessShareLock as i32);
        let mut keys: [pg_sys::ScanKeyData; 2] = std::mem::zeroed();
        let eq = pg_sys::BTEqualStrategyNumber as u16;
        pg_sys::ScanKeyInit(&mut keys[0], pg_sys::Anum_pg_trigger_tgrelid as i16, eq, pg_sys::Oid::from(pg_sys::F_OIDEQ), pg_sys::Datum::from(rel));
        pg_sys::ScanKeyInit(&mut keys[1], pg_sys::Anum_pg_trigger_tgname as i16, eq, pg_sys::Oid::from(pg_sys::F_NAMEEQ), pg_sys::Datum::from(name.as_ptr()));
        let index = pg_sys::Oid::from(pg_sys::TriggerRelidNameIndexId);
        let scan = pg_sys::systable_beginscan(catalog, index, true, std::ptr::null_mut(), 2, keys.as_mut_ptr());
        let tup = pg_sys::systable_getnext(scan);
        let found = if tup.is_null() {
            Trigger::Missing
        } else {
            let row = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_trigger>(tup);
            if (*row).tgfoid == function && (*row).tgparentid == pg_sys::InvalidOid {
                Trigger::Calls((*row).oid)
            } else {
                Trigger::Other
            }
        };
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(catalog, pg_sys::AccessShareLock as i32);
        found
    }
}

/// The name of `rel`'s column `attnum` as committed now; None when it has none (dropped, or a
/// name that is not UTF-8).
pub(crate) fn column_name(rel: pg_sys::Oid, attnum: i16) -> Option<String> {
    // SAFETY: invalidations applied, then a cache lookup by OID and number; the name is copied
    // before the tuple is released.
    unsafe {
        pg_sys::AcceptInvalidationMessages();
        let tup = pg_sys::SearchSysCache2(
            pg_sys::SysCacheIdentifier::ATTNUM as i32,
            pg_sys::Datum::from(rel),
            pg_sys::Datum::from(attnum),
        );
        if tup.is_null() {
            return None;
        }
        let att = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_attribute>(tup);
        // A dropped column keeps a placeholder name, which a live column may have been given.
        let name = (!(*att).attisdropped).then(|| CStr::from_ptr((*att).attname.data.as_ptr()).to_str().map(str::to_owned).ok()).flatten();
        pg_sys::ReleaseSysCache(tup);
        name
    }
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

/// Drops the triggers of `rel` named `names` that call `function`, by OID. Takes ACCESS
/// EXCLUSIVE on `rel`, as DROP TRIGGER does, first.
pub(crate) fn drop_triggers(rel: pg_sys::Oid, names: &[&str], function: pg_sys::Oid) {
    if !lock_existing(rel, pg_sys::AccessExclusiveLock) {
        return;
    }
    for name in names {
        check_for_interrupts!();
        // Only a trigger that calls nl2sql's function: one the table's owner made under the
        // same name is hers, and stays.
        let Trigger::Calls(oid) = trigger(rel, name, function) else { continue };
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
