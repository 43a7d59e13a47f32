//! Hooks, installed when the library loads:
//! - object_access_hook (the one sepgsql uses): while nl2sql runs generated SQL, reads user
//!   relations, or acts as the extension's owner, every function the executor initialises —
//!   built-in ones included — is judged again by the policy of that scope, so one more parser
//!   trick than policy.rs foresaw is still not a breach;
//! - needs_fmgr_hook and fmgr_hook: PostgreSQL also calls some functions without the executor
//!   (a cast to json inside to_json(), a range type's subtype_diff while planning); while a
//!   scope is active, every call set up for a function that is not built in or part of a
//!   superuser's extension goes through fmgr_hook, which refuses it when the scope's policy
//!   does (built-in functions never reach the fmgr hooks, and need not). Outside scopes the
//!   session is left alone, so the planner still inlines users' SQL functions; what a type
//!   caches across queries (a range's subtype_diff and canonical functions) is judged by
//!   policy.rs on the tree instead;
//! - planner_hook and get_relation_info_hook: while a scope is active, the functions the
//!   planner calls itself (the operators it estimates, their negators and commutators, range
//!   types' support functions: planner_calls.rs) are judged before the query is planned, and
//!   for the predicates of each relation's partial indexes as the planner opens it, and a
//!   foreign table it opens is refused unless nl2sql.allow_foreign_tables is on;
//! - ExecutorStart_hook: the same for a plan's foreign tables, which a plan cached earlier
//!   (a PL/pgSQL function's) brings without the planner;
//! - post_parse_analyze_hook: while a table's owner's read names the table (relation.rs's
//!   by_name), no statement may read another relation that now bears the table's name;
//! - ProcessUtility_hook: SET ROLE, RESET ROLE, SET SESSION AUTHORIZATION, RESET ALL and
//!   DISCARD ALL forget the session's last trace and cached samples; NOTIFY, SET CONSTRAINTS
//!   and DECLARE are refused in a table owner's code while nl2sql reads her table as her, as
//!   the object-access hook refuses the built-in functions that reach the caller's session
//!   (table_read.rs).

use crate::pg::compat::{list_len, list_ptr};
use crate::pg::{errors, planner_calls, policy};
use nl2sql_core::error::{Diagnostic, Report};
use nl2sql_core::safety::guard::GuardError;
use nl2sql_core::safety::policy::Scope;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_void, CStr};

struct Active {
    scope: Scope,
    allowed: Vec<String>,
    verdicts: HashMap<u32, Result<(), GuardError>>,
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
    /// The last refusal this hook raised, so that the caller can tell it from other errors.
    static REFUSED: RefCell<Option<GuardError>> = const { RefCell::new(None) };
    /// Functions known to be system ones (built in, or in a superuser's extension); emptied
    /// whenever pg_proc changes.
    static SYSTEM: RefCell<HashSet<u32>> = RefCell::new(HashSet::new());
    /// How deep the planner is nested under a scope, the syscache hash values of the operators
    /// judged since the outermost call began, and whether a change to one was refused then.
    static PLANNING: RefCell<Planning> = RefCell::new(Planning::default());
    /// Whether code other than a built-in function began, or was set up to be called, under a
    /// scope since the last [`take_other_code`]: such code (an allow-listed function, an
    /// extension's, a domain CHECK calling one) may read rows, and quote them in an error,
    /// whenever PostgreSQL calls it. Also set when any function, built in or not, is set up for
    /// the executor (a domain CHECK run while a literal is read): what such a call raises, in
    /// whichever file, is the function's error, not the query's text read back.
    static OTHER_CODE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether code other than a built-in function began, or any function was set up for the
/// executor, under a scope since the last call.
pub fn take_other_code() -> bool {
    OTHER_CODE.replace(false)
}

#[derive(Default)]
struct Planning {
    depth: u32,
    judged: HashSet<u32>,
    /// A change to a judged operator taken in (Some(true) when it was a reset of the caches).
    changed: Option<bool>,
    /// operator_changed is running the callbacks its refusal would skip.
    redispatching: bool,
    /// planner_calls is reading operators (a syscache miss may take in changes meanwhile).
    walking: bool,
}

/// Runs `f` with one of PLANNING's flags set, cleared again however `f` ends.
fn flagged<T>(flag: fn(&mut Planning) -> &mut bool, f: impl FnOnce() -> T) -> T {
    struct Clear(fn(&mut Planning) -> &mut bool);
    impl Drop for Clear {
        fn drop(&mut self) {
            PLANNING.with_borrow_mut(|p| *(self.0)(p) = false);
        }
    }
    PLANNING.with_borrow_mut(|p| *flag(p) = true);
    let _clear = Clear(flag);
    f()
}

/// Runs `read` (a walk of planner_calls) with every operator change taken in meanwhile refused.
fn walking<T>(read: impl FnOnce() -> T) -> T {
    flagged(|p| &mut p.walking, read)
}

/// The refusal the hook raised since the last call, if any.
pub fn take_refusal() -> Option<GuardError> {
    REFUSED.with_borrow_mut(|r| r.take())
}

static mut PREV_OBJECT_ACCESS: pg_sys::object_access_hook_type = None;
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_FMGR: pg_sys::fmgr_hook_type = None;
static mut PREV_PLANNER: pg_sys::planner_hook_type = None;
static mut PREV_RELATION_INFO: pg_sys::get_relation_info_hook_type = None;
static mut PREV_POST_PARSE: pg_sys::post_parse_analyze_hook_type = None;
static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;

/// Installs the hooks, keeping the ones installed before.
pub fn install() {
    // SAFETY: _PG_init runs once per backend, before any query of this library.
    unsafe {
        PREV_OBJECT_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
        PREV_NEEDS_FMGR = pg_sys::needs_fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_fmgr);
        PREV_FMGR = pg_sys::fmgr_hook;
        pg_sys::fmgr_hook = Some(fmgr);
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
        PREV_RELATION_INFO = pg_sys::get_relation_info_hook;
        pg_sys::get_relation_info_hook = Some(relation_info);
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_POST_PARSE = pg_sys::post_parse_analyze_hook;
        pg_sys::post_parse_analyze_hook = Some(post_parse);
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            Some(forget_system),
            pg_sys::Datum::from(0usize),
        );
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::OPEROID as i32,
            Some(operator_changed),
            pg_sys::Datum::from(0usize),
        );
    }
}

/// Restores the scope that was active before, also when the code inside raised an error.
struct Restore(Option<Active>);

impl Drop for Restore {
    fn drop(&mut self) {
        let prev = self.0.take();
        ACTIVE.with_borrow_mut(|a| *a = prev);
    }
}

/// Runs `f` with every function the executor starts judged in `scope`; `verdicts` are the
/// decisions already taken (by policy.rs, on the parse tree) and are reused.
pub fn with_scope<T>(scope: Scope, allowed: &[String], verdicts: HashMap<u32, Result<(), GuardError>>, f: impl FnOnce() -> T) -> T {
    let next = Active { scope, allowed: allowed.to_vec(), verdicts };
    let prev = ACTIVE.with_borrow_mut(|a| a.replace(next));
    let _restore = Restore(prev);
    f()
}

/// The scope running now, if any.
pub fn scope() -> Option<Scope> {
    ACTIVE.with_borrow(|a| a.as_ref().map(|a| a.scope))
}

/// Runs `f` with no scope: code that runs with the rights of the role that wrote it.
pub fn suspended<T>(f: impl FnOnce() -> T) -> T {
    let prev = ACTIVE.with_borrow_mut(|a| a.take());
    let _restore = Restore(prev);
    f()
}

/// After parse analysis: a table owner's read by name (relation.rs) names only its relation.
#[pg_guard]
unsafe extern "C-unwind" fn post_parse(pstate: *mut pg_sys::ParseState, query: *mut pg_sys::Query, jstate: *mut pg_sys::JumbleState) {
    if let Some(prev) = PREV_POST_PARSE {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(pstate, query, jstate));
    }
    crate::pg::relation::check_analyzed(pstate, query);
}

#[pg_guard]
unsafe extern "C-unwind" fn object_access(access: pg_sys::ObjectAccessType::Type, class: Oid, object: Oid, sub: c_int, arg: *mut c_void) {
    if let Some(prev) = PREV_OBJECT_ACCESS {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(access, class, object, sub, arg));
    }
    if access != pg_sys::ObjectAccessType::OAT_FUNCTION_EXECUTE {
        return;
    }
    if ACTIVE.with_borrow(|a| a.is_some()) {
        OTHER_CODE.set(true);
    }
    enforce(object);
    crate::pg::table_read::refuse_function(object);
}

/// Raises the scope's refusal of `object`, if it refuses it.
unsafe fn enforce(object: Oid) {
    // Judged outside the borrow: the catalog lookups must not find ACTIVE borrowed.
    let Some((scope, allowed, known)) =
        ACTIVE.with_borrow(|a| a.as_ref().map(|a| (a.scope, a.allowed.clone(), a.verdicts.get(&u32::from(object)).cloned())))
    else {
        return;
    };
    let verdict = match known {
        Some(v) => v,
        None => {
            let mut cache = HashMap::new();
            let v = policy::judge_oid(object, scope, &allowed, &mut cache);
            ACTIVE.with_borrow_mut(|a| {
                if let Some(a) = a.as_mut() {
                    a.verdicts.insert(object.into(), v.clone());
                }
            });
            v
        }
    };
    if let Err(e) = verdict {
        refuse(scope, e);
    }
}

/// Raises the scope's refusal of a function the planner would call itself (planner_calls.rs):
/// stricter than [`enforce`] in nl2sql's own scopes, which trust every built-in.
unsafe fn enforce_planner_call(object: Oid) {
    let Some((scope, allowed)) = ACTIVE.with_borrow(|a| a.as_ref().map(|a| (a.scope, a.allowed.clone()))) else {
        return;
    };
    if let Err(e) = policy::judge_planner_call(object, scope, &allowed) {
        refuse(scope, e);
    }
}

/// Raises `e` as the refusal of `scope`, noted for take_refusal.
unsafe fn refuse(scope: Scope, e: GuardError) -> ! {
    REFUSED.with_borrow_mut(|r| *r = Some(e.clone()));
    let why = match scope {
        Scope::Generated => "nl2sql refused this function while running generated SQL.",
        Scope::Inspect => "nl2sql refused this function while reading a relation for the caller.",
        Scope::Elevated => "nl2sql runs no function another role wrote with its owner's rights.",
        Scope::Catalog => "nl2sql's catalog queries run only built-in functions and those of extensions a superuser installed; check the search_path.",
    };
    let message = match (scope, &e) {
        (Scope::Generated, _) => e.message(),
        (_, GuardError::ForeignTable(t)) => format!("nl2sql's read of a relation reaches the foreign table {t}"),
        _ => e.message().replace(" in generated SQL", ""),
    };
    // A change of the catalog, a shell operator: no function's refusal; they say what happened.
    let detail = match e {
        GuardError::CatalogChanged { .. } | GuardError::ShellOperator(_) => e.detail().unwrap_or_default(),
        GuardError::ForeignTable(_) => "nl2sql reached it through a view, a row-level security policy, a partition, an inheritance child or a function's cached plan.".to_string(),
        _ => why.to_string(),
    };
    let mut r = Report::new(e.sqlstate(), message).detail(detail);
    // The allow-list opens functions to generated SQL and nl2sql's reads, nothing else.
    if let Some(h) = e.hint().filter(|_| matches!(scope, Scope::Generated | Scope::Inspect) || matches!(e, GuardError::CatalogChanged { .. })) {
        r = r.hint(h);
    }
    errors::raise(&r);
}

/// Before a query is planned under a scope, judges the functions the planner calls itself,
/// outside the executor and, when built in, outside the fmgr hooks (planner_calls.rs). Covers
/// every path a scope guards, nl2sql's own reads of a view included. While it plans, a change
/// to an operator judged here is refused (operator_changed).
#[pg_guard]
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    let plan = || match PREV_PLANNER {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(parse, query_string, cursor_options, bound_params)),
        None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
    };
    if ACTIVE.with_borrow(|a| a.is_none()) {
        return plan();
    }
    // Changes committed before planning (while the model was asked, in a transaction held
    // open) are taken in before anything is judged, not inside the window.
    if PLANNING.with_borrow(|p| p.depth == 0) {
        pg_sys::AcceptInvalidationMessages();
    }
    let _depth = PlanningDepth::enter();
    judge_calls(walking(|| planner_calls::of_query(parse)));
    let planned = plan();
    // A refusal some code caught (an exception block in a function folded while planning) still
    // keeps the plan from running.
    refuse_if_changed();
    planned
}

/// As the planner opens a relation under a scope (each inheritance child and partition too),
/// judges what it will call estimating the predicates of the relation's partial indexes, which
/// the query never shows.
#[pg_guard]
unsafe extern "C-unwind" fn relation_info(root: *mut pg_sys::PlannerInfo, relid: Oid, inhparent: bool, rel: *mut pg_sys::RelOptInfo) {
    if let Some(prev) = PREV_RELATION_INFO {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(root, relid, inhparent, rel));
    }
    if ACTIVE.with_borrow(|a| a.is_none()) || rel.is_null() {
        return;
    }
    refuse_if_changed();
    refuse_foreign(relid);
    let indexes = (*rel).indexlist;
    for i in 0..list_len(indexes) {
        let index = list_ptr(indexes, i) as *mut pg_sys::IndexOptInfo;
        judge_calls(walking(|| planner_calls::of_expression((*index).indpred.cast())));
    }
}

/// A foreign table the planner opens while generated SQL runs or nl2sql reads a relation for
/// the caller, with nl2sql.allow_foreign_tables off: refused before its foreign data wrapper
/// plans or connects. The parse-tree check (policy.rs) and `reaches_foreign` see the relations
/// a query, its views, partitions and children name; this sees also what a row-level security
/// policy's subquery reads, and each relation as it is when the planner locks it.
unsafe fn refuse_foreign(relid: Oid) {
    let Some(scope) = scope() else {
        return;
    };
    if !matches!(scope, Scope::Generated | Scope::Inspect) || crate::gucs::allow_foreign_tables() {
        return;
    }
    if pg_sys::get_rel_relkind(relid) as u8 != pg_sys::RELKIND_FOREIGN_TABLE {
        return;
    }
    let name = crate::pg::relation::display_name(relid).unwrap_or_else(|| format!("with OID {}", u32::from(relid)));
    refuse(scope, GuardError::ForeignTable(name));
}

/// Before a plan runs under a scope: a foreign table in its range table is refused as the
/// planner's hook refuses it ([`refuse_foreign`]), for a plan that was not planned now (one a
/// PL/pgSQL function of the allow-list cached earlier in the session).
#[pg_guard]
unsafe extern "C-unwind" fn executor_start(query: *mut pg_sys::QueryDesc, eflags: c_int) {
    if ACTIVE.with_borrow(|a| a.is_some()) && !query.is_null() && !(*query).plannedstmt.is_null() {
        let rtable = (*(*query).plannedstmt).rtable;
        for i in 0..list_len(rtable) {
            let rte = list_ptr(rtable, i) as *mut pg_sys::RangeTblEntry;
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).relkind as u8 == pg_sys::RELKIND_FOREIGN_TABLE {
                refuse_foreign((*rte).relid);
            }
        }
    }
    match PREV_EXECUTOR_START {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(query, eflags)),
        None => pg_sys::standard_ExecutorStart(query, eflags),
    }
}

/// Judges what the planner calls, and remembers the operators it was read from.
unsafe fn judge_calls(calls: planner_calls::Calls) {
    let Some(scope) = scope() else {
        return;
    };
    for &op in &calls.operators {
        let hash = pg_sys::GetSysCacheHashValue(
            pg_sys::SysCacheIdentifier::OPEROID as c_int,
            pg_sys::Datum::from(op),
            pg_sys::Datum::from(0usize),
            pg_sys::Datum::from(0usize),
            pg_sys::Datum::from(0usize),
        );
        PLANNING.with_borrow_mut(|p| p.judged.insert(hash));
    }
    if let Some(shell) = calls.shell {
        refuse(scope, GuardError::ShellOperator(planner_calls::operator_name(shell)));
    }
    for f in calls.functions {
        enforce_planner_call(f);
    }
}

unsafe fn refuse_if_changed() {
    let Some(reset) = PLANNING.with_borrow(|p| p.changed.filter(|_| p.depth > 0)) else {
        return;
    };
    if let Some(scope) = ACTIVE.with_borrow(|a| a.as_ref().map(|a| a.scope)) {
        refuse(scope, GuardError::CatalogChanged { reset });
    }
}

/// One level of planning under a scope; the outermost starts afresh and ends the window.
struct PlanningDepth;

impl PlanningDepth {
    fn enter() -> PlanningDepth {
        PLANNING.with_borrow_mut(|p| {
            if p.depth == 0 {
                p.judged.clear();
                p.changed = None;
                p.redispatching = false;
                p.walking = false;
            }
            p.depth += 1;
        });
        PlanningDepth
    }
}

impl Drop for PlanningDepth {
    fn drop(&mut self) {
        PLANNING.with_borrow_mut(|p| p.depth = p.depth.saturating_sub(1));
    }
}

/// Forgets what belongs to the role a session acted as, when the role changes.
#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query: *const c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    let forget = changes_role((*pstmt).utilityStmt);
    if let Some(what) = callers_transaction((*pstmt).utilityStmt) {
        crate::pg::table_read::refuse_statement(what);
    }
    match PREV_PROCESS_UTILITY {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(pstmt, query, read_only_tree, context, params, env, dest, qc)),
        None => pg_sys::standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc),
    }
    if forget {
        crate::pg::session::role_changed();
    }
}

/// NOTIFY, SET CONSTRAINTS and DECLARE (a cursor left open in the calling transaction, which
/// would run as the caller when fetched): statements whose effect is the calling transaction's
/// (refused in a table owner's code while nl2sql reads her table as her).
unsafe fn callers_transaction(stmt: *mut pg_sys::Node) -> Option<&'static str> {
    if stmt.is_null() {
        None
    } else if pgrx::is_a(stmt, pg_sys::NodeTag::T_NotifyStmt) {
        Some("NOTIFY")
    } else if pgrx::is_a(stmt, pg_sys::NodeTag::T_ConstraintsSetStmt) {
        Some("SET CONSTRAINTS")
    } else if pgrx::is_a(stmt, pg_sys::NodeTag::T_DeclareCursorStmt) {
        Some("DECLARE")
    } else {
        None
    }
}

/// SET/RESET ROLE, SET/RESET SESSION AUTHORIZATION, RESET ALL, DISCARD ALL.
unsafe fn changes_role(stmt: *mut pg_sys::Node) -> bool {
    if stmt.is_null() {
        return false;
    }
    if pgrx::is_a(stmt, pg_sys::NodeTag::T_DiscardStmt) {
        return (*(stmt as *mut pg_sys::DiscardStmt)).target == pg_sys::DiscardMode::DISCARD_ALL;
    }
    if pgrx::is_a(stmt, pg_sys::NodeTag::T_VariableSetStmt) {
        let v = stmt as *mut pg_sys::VariableSetStmt;
        if (*v).kind == pg_sys::VariableSetKind::VAR_RESET_ALL {
            return true;
        }
        if !(*v).name.is_null() {
            let name = CStr::from_ptr((*v).name).to_bytes();
            return name.eq_ignore_ascii_case(b"role") || name.eq_ignore_ascii_case(b"session_authorization");
        }
    }
    false
}

/// Whether calls of `oid` must go through fmgr_hook: while a scope is active, every function
/// that is not a system one. Built-in functions never get here.
#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr(oid: Oid) -> bool {
    if let Some(prev) = PREV_NEEDS_FMGR {
        if pg_sys::ffi::pg_guard_ffi_boundary(|| prev(oid)) {
            return true;
        }
    }
    if !pg_sys::IsTransactionState() || ACTIVE.with_borrow(|a| a.is_none()) {
        return false;
    }
    // Code not compiled into the server is about to be called: an extension's C or PL function
    // as much as another role's, trusted or not, may read rows and quote them in an error.
    OTHER_CODE.set(true);
    if SYSTEM.with_borrow(|s| s.contains(&u32::from(oid))) {
        return false;
    }
    match policy::facts(oid) {
        // A system function written in SQL is trusted, but the planner would inline it (no fmgr
        // hook needed), parsing its body with the session's search_path after the planner hook
        // judged the query: an operator of another role's there would never be judged. Called
        // through fmgr instead, its body is planned, and judged, on its own.
        Some((f, _)) if f.is_system() && !policy::written_in_sql(oid) => {
            SYSTEM.with_borrow_mut(|s| s.insert(oid.into()));
            false
        }
        _ => true,
    }
}

/// Refuses the start of a call the active scope's policy refuses.
#[pg_guard]
unsafe extern "C-unwind" fn fmgr(event: pg_sys::FmgrHookEventType::Type, flinfo: *mut pg_sys::FmgrInfo, arg: *mut pg_sys::Datum) {
    if let Some(prev) = PREV_FMGR {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(event, flinfo, arg));
    }
    if event == pg_sys::FmgrHookEventType::FHET_START && !flinfo.is_null() {
        if ACTIVE.with_borrow(|a| a.is_some()) {
            OTHER_CODE.set(true);
        }
        enforce((*flinfo).fn_oid);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_system(_arg: pg_sys::Datum, _cache: c_int, _hash: u32) {
    SYSTEM.with_borrow_mut(|s| s.clear());
    policy::forget_facts();
}

/// Another session's change to an operator the planner's calls were judged from, taken in while
/// the planner runs under a scope (it takes in catalog changes whenever it takes a new lock: on
/// an index, a partition, an inheritance child). What the planner will call for that operator
/// (a negator set by ALTER OPERATOR, or dropped and created again) was judged before the
/// change, so the query stops here, before the planner can read the new row. A reset of the
/// caches (hash 0: this session fell behind) cannot say which operator changed, and stops it too.
///
/// Raising here skips the callbacks registered after this one, and for a reset every relcache
/// callback: they are run first (this one returning at once meanwhile), so no cache is left
/// stale.
#[pg_guard]
unsafe extern "C-unwind" fn operator_changed(_arg: pg_sys::Datum, cache: c_int, hash: u32) {
    // While the operators are being read, any change may be to one already read.
    let concerned =
        PLANNING.with_borrow(|p| !p.redispatching && p.depth > 0 && (hash == 0 || p.walking || p.judged.contains(&hash)));
    if !concerned {
        return;
    }
    // Noted even where no scope is active (code the planner runs as a table owner): the
    // planner hook refuses the plan when it returns.
    PLANNING.with_borrow_mut(|p| p.changed = Some(p.changed.unwrap_or(false) || hash == 0));
    let Some(scope) = ACTIVE.with_borrow(|a| a.as_ref().map(|a| a.scope)) else {
        return;
    };
    flagged(
        |p| &mut p.redispatching,
        || {
            if hash == 0 {
                pg_sys::InvalidateSystemCaches();
            } else {
                pg_sys::CallSyscacheCallbacks(cache, hash);
            }
        },
    );
    refuse(scope, GuardError::CatalogChanged { reset: hash == 0 });
}
