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
//! once per backend as the one flag that marking clears on a domain whose constraints were
//! loaded and that loading them again sets (information_schema's `cardinal_number`, a
//! superuser's); until then, or if it cannot be learned, any change of an entry's flags counts.
//! Any change to pg_type or pg_constraint taken in from the moment the domains are listed
//! (another session's new domain) counts as reached too, and so does a second marking while the
//! query is read (a generated query nested in it), which would clear the flag again. Either way
//! the error is not the query's text read back.
//!
//! The list is read again only after such a change: most executions read no catalog here.

use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::rc::Rc;

/// Past this many domains with a CHECK, any read is taken to have reached one.
const MAX_DOMAINS: i64 = 10_000;

const CHECKED_SQL: &str = include_str!("../../../sql/queries/sandbox_checked_domains.sql");
const KNOWN_SQL: &str = include_str!("../../../sql/queries/sandbox_known_domain.sql");

type Listed = Option<Rc<Vec<pg_sys::Oid>>>;

thread_local! {
    /// Counts the changes to pg_type and pg_constraint taken in (the sandbox's own marking of
    /// the constraints stale left out).
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// The sandbox is marking the constraints stale itself and its own call of the callback (the
    /// one not counted) has not come yet.
    static AWAITING_OWN: Cell<bool> = const { Cell::new(false) };
    /// The type cache's flag of a domain entry whose constraints are loaded; 0 until learned.
    static LOADED_FLAG: Cell<c_int> = const { Cell::new(0) };
    /// Counts the sandbox's own markings of the constraints stale: one made while a query was
    /// read (a nested generated query's) clears the flags the outer one watches.
    static MARKED: Cell<u64> = const { Cell::new(0) };
    /// The flag was looked for (once per backend: if the known domain is missing, it stays
    /// unlearned, and any change of an entry's flags counts).
    static KNOWN_TRIED: Cell<bool> = const { Cell::new(false) };
    /// The domains a CHECK applies to (None: too many), and the generation they were read at.
    static LISTED: RefCell<Option<(u64, Listed)>> = const { RefCell::new(None) };
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
unsafe extern "C-unwind" fn moved(_arg: pg_sys::Datum, cache: c_int, hash: u32) {
    // The sandbox's own marking calls this once, for all of pg_constraint; any other call (an
    // invalidation another callback took in meanwhile) counts.
    let own = cache == pg_sys::SysCacheIdentifier::CONSTROID as c_int && hash == 0;
    if !(own && AWAITING_OWN.replace(false)) {
        GENERATION.set(GENERATION.get().wrapping_add(1));
    }
}

/// The domains a CHECK constraint applies to (their own or a base domain's), as committed now;
/// None past MAX_DOMAINS. Read again only when pg_type or pg_constraint changed since the last
/// read. Returns the generation the list stands for.
fn listed() -> (u64, Listed) {
    let now = GENERATION.get();
    if let Some((at, list)) = LISTED.with_borrow(|l| l.clone()) {
        if at == now {
            return (at, list);
        }
    }
    // A change taken in while this reads bumps the generation past `now`: read again next time.
    let oids = crate::pg::spi::rows_now(CHECKED_SQL, &[(MAX_DOMAINS + 1).into()], |r| r.get::<pg_sys::Oid>(1).ok().flatten());
    let list = (i64::try_from(oids.len()).unwrap_or(i64::MAX) <= MAX_DOMAINS).then(|| Rc::new(oids));
    LISTED.with_borrow_mut(|l| *l = Some((now, list.clone())));
    (now, list)
}

/// Whether pg_type and pg_constraint are as they were at generation `since`, once the changes
/// committed until now are taken in: no domain was created or given a CHECK after the list the
/// read was watched with (one whose change arrives only after the query was read).
pub fn unchanged_since(since: u64) -> bool {
    // SAFETY: in a transaction; takes in other sessions' committed catalog changes.
    unsafe { pg_sys::AcceptInvalidationMessages() };
    GENERATION.get() == since
}

struct Mark {
    entry: *mut pg_sys::TypeCacheEntry,
    /// Its flags and constraint cache once its constraints were marked stale.
    flags: c_int,
    data: *mut pg_sys::DomainConstraintCache,
}

/// The type cache's entries of the listed domains as they stood when marked, and the generation
/// of the list.
pub struct Marks {
    since: u64,
    /// [`MARKED`] once this marking was made.
    marked: u64,
    marks: Option<Vec<Mark>>,
}

/// Marks every domain's constraints stale (as a commit that changed pg_constraint would) and
/// notes the type cache's entry of each domain a CHECK applies to.
///
/// # Safety
/// In a transaction.
pub unsafe fn mark() -> Marks {
    // Changes committed until now are taken in first: the list and the entries are then those
    // the parser starts from.
    pg_sys::AcceptInvalidationMessages();
    let (since, list) = listed();
    let Some(domains) = list else {
        stale();
        return Marks { since, marked: MARKED.get(), marks: None };
    };
    if LOADED_FLAG.get() == 0 && !KNOWN_TRIED.replace(true) {
        learn_flag();
    }
    let none = pg_sys::Datum::from(0usize);
    let mut entries = Vec::with_capacity(domains.len());
    for &oid in domains.iter() {
        pgrx::check_for_interrupts!();
        // A domain dropped since it was listed has no entry to note (and cannot be read).
        if !pg_sys::SearchSysCacheExists(pg_sys::SysCacheIdentifier::TYPEOID as i32, pg_sys::Datum::from(oid), none, none, none) {
            continue;
        }
        // Flags 0: the entry's pg_type data only; its constraints are not loaded.
        let entry = pg_sys::lookup_type_cache(oid, 0);
        if !entry.is_null() {
            entries.push(entry);
        }
    }
    stale();
    let marks = entries.into_iter().map(|entry| Mark { entry, flags: (*entry).flags, data: (*entry).domainData }).collect();
    Marks { since, marked: MARKED.get(), marks: Some(marks) }
}

/// Learns the flag that says a domain entry's constraints are loaded, from a domain a superuser
/// owns (its CHECK folds nothing another role wrote): the one flag that marking stale clears on
/// its entry, and that loading its constraints again sets. An invalidation that clears another
/// flag meanwhile (an operator class's) is not set again by loading: nothing is learned then.
unsafe fn learn_flag() {
    let Some(oid) = crate::pg::spi::read::<pg_sys::Oid>(KNOWN_SQL, &[]) else { return };
    let load = pg_sys::TYPECACHE_DOMAIN_CONSTR_INFO as c_int;
    let entry = pg_sys::lookup_type_cache(oid, load);
    if entry.is_null() {
        return;
    }
    let before = (*entry).flags;
    stale();
    let cleared = before & !(*entry).flags;
    if cleared.count_ones() == 1 {
        pg_sys::lookup_type_cache(oid, load);
        if (*entry).flags & cleared != 0 {
            LOADED_FLAG.set(cleared);
        }
    }
}

/// Fires pg_constraint's invalidation callbacks: the type cache's marks each domain entry's
/// constraints stale, to be loaded again (their CHECKs folded again) when next used.
unsafe fn stale() {
    /// Counting resumes however the callbacks end (an error raised in one unwinds through it).
    struct Resume;
    impl Drop for Resume {
        fn drop(&mut self) {
            AWAITING_OWN.set(false);
        }
    }
    AWAITING_OWN.set(true);
    MARKED.set(MARKED.get().wrapping_add(1));
    let _resume = Resume;
    pg_sys::CallSyscacheCallbacks(pg_sys::SysCacheIdentifier::CONSTROID as i32, 0);
}

impl Marks {
    /// The generation of the list the read was watched with.
    pub fn since(&self) -> u64 {
        self.since
    }

    /// Whether a marked domain's constraints were loaded again since [`mark`] (its flag set
    /// again; any change of its flags while that flag is not known; its constraint cache
    /// replaced or dropped), or pg_type or pg_constraint changed since the list was read, or the
    /// constraints were marked stale again (a nested generated query); true when there were too
    /// many to mark. Reads memory only: safe in an error handler.
    pub fn reached(&self) -> bool {
        let Some(marks) = &self.marks else { return true };
        let loaded = LOADED_FLAG.get();
        // SAFETY: type cache entries live as long as the backend, at a fixed address.
        GENERATION.get() != self.since
            || MARKED.get() != self.marked
            || marks.iter().any(|m| {
                let (flags, data) = unsafe { ((*m.entry).flags, (*m.entry).domainData) };
                data != m.data || if loaded == 0 { flags != m.flags } else { flags & loaded != 0 }
            })
    }
}
