//! The security decision on generated SQL, made on PostgreSQL's own parse tree: the text is
//! parsed, analysed and rewritten once, by PostgreSQL, as the role that will run it; the policy
//! walks that tree; and that very tree is planned and executed (see sandbox.rs), so nothing can
//! read the text differently in between.
//!
//! Refused: anything but exactly one plain SELECT; data-modifying CTEs, SELECT INTO, row locks
//! at any depth; every function the tree reaches — called, through operators, casts and
//! attribute notation, in views and row-level security policies (after the rewrite), in the
//! CHECK constraints of domains it coerces to, an aggregate's support functions, the output
//! functions of the result's types, what the planner calls itself for its operators and range
//! types (planner_calls.rs) — that nl2sql_core::safety::policy::judge refuses.

use crate::pg::compat::{list_len, list_ptr};
use crate::pg::planner_calls;
use nl2sql_core::safety::guard::GuardError;
use nl2sql_core::safety::policy::{self, FunctionFacts, Scope};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr};

thread_local! {
    /// What the catalog said about functions, by OID; emptied whenever pg_proc changes
    /// (hooks.rs registers the invalidation callback).
    static FACTS: std::cell::RefCell<HashMap<u32, Option<(FunctionFacts, bool)>>> = std::cell::RefCell::new(HashMap::new());
}

/// Forgets what the catalog said (pg_proc changed).
pub fn forget_facts() {
    FACTS.with_borrow_mut(|f| f.clear());
}

/// What a function is, read from its catalog row, and whether it is an aggregate; None when no
/// such function exists. Remembered until pg_proc changes.
pub fn facts(oid: Oid) -> Option<(FunctionFacts, bool)> {
    if let Some(known) = FACTS.with_borrow(|f| f.get(&u32::from(oid)).cloned()) {
        return known;
    }
    let read = read_facts(oid);
    FACTS.with_borrow_mut(|f| f.insert(oid.into(), read.clone()));
    read
}

/// pg_language's fixed OID for SQL (`SQLlanguageId`, the same on every major).
const SQL_LANGUAGE: u32 = 14;

/// Whether `oid` is a `LANGUAGE sql` function: one the planner may inline, parsing its body
/// anew with the session's search_path, after the planner hook walked the query.
pub fn written_in_sql(oid: Oid) -> bool {
    // SAFETY: a syscache lookup by OID; the tuple is released before returning.
    unsafe {
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::PROCOID as i32, pg_sys::Datum::from(oid));
        if tup.is_null() {
            return false;
        }
        let language = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup)).prolang;
        pg_sys::ReleaseSysCache(tup);
        u32::from(language) == SQL_LANGUAGE
    }
}

fn read_facts(oid: Oid) -> Option<(FunctionFacts, bool)> {
    // SAFETY: syscache lookups by OID; the tuple is released before returning, and names are
    // copied out first. A name that is not UTF-8 (a SQL_ASCII database) gives None, judged
    // untrusted: spelled lossily it could equal a name the allow-list holds.
    unsafe {
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::PROCOID as i32, pg_sys::Datum::from(oid));
        if tup.is_null() {
            return None;
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup);
        let name = CStr::from_ptr((*form).proname.data.as_ptr()).to_str().map(str::to_owned);
        let namespace = (*form).pronamespace;
        let owner = (*form).proowner;
        let volatility = (*form).provolatile as u8 as char;
        let aggregate = (*form).prokind as u8 == b'a';
        pg_sys::ReleaseSysCache(tup);
        let nsp = pg_sys::get_namespace_name(namespace);
        let schema = if nsp.is_null() { Ok(String::new()) } else { CStr::from_ptr(nsp).to_str().map(str::to_owned) };
        let (Ok(name), Ok(schema)) = (name, schema) else {
            return None;
        };
        let ext = pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, oid);
        let extension = if ext == pg_sys::InvalidOid {
            None
        } else {
            let n = pg_sys::get_extension_name(ext);
            (!n.is_null()).then(|| CStr::from_ptr(n).to_string_lossy().into_owned())
        };
        let facts = FunctionFacts {
            oid: oid.into(),
            schema,
            name,
            volatility,
            builtin: u32::from(oid) < pg_sys::FirstNormalObjectId,
            extension,
            owner_is_superuser: pg_sys::superuser_arg(owner),
        };
        Some((facts, aggregate))
    }
}

/// Judges one function by OID in `scope`, remembering the verdict in `cache`.
pub fn judge_oid(oid: Oid, scope: Scope, allowed: &[String], cache: &mut HashMap<u32, Result<(), GuardError>>) -> Result<(), GuardError> {
    if let Some(v) = cache.get(&u32::from(oid)) {
        return v.clone();
    }
    let verdict = match facts(oid) {
        Some((f, _)) => policy::judge(&f, scope, allowed),
        None => Err(GuardError::UntrustedFunction(format!("with OID {}", u32::from(oid)))),
    };
    cache.insert(oid.into(), verdict.clone());
    verdict
}

/// Judges one function the planner would call itself (planner_calls.rs) in `scope`.
pub fn judge_planner_call(oid: Oid, scope: Scope, allowed: &[String]) -> Result<(), GuardError> {
    match facts(oid) {
        Some((f, _)) => policy::judge_planner_call(&f, scope, allowed),
        None => Err(GuardError::UntrustedFunction(format!("with OID {}", u32::from(oid)))),
    }
}

/// What a walk over a query tree collects.
#[derive(Default)]
struct Walk {
    functions: Vec<Oid>,
    domains: Vec<Oid>,
    /// Relations read: (OID, relkind, whether inheritance children or partitions are read too).
    relations: Vec<(Oid, u8, bool)>,
    /// Relations whose SELECT privilege is checked as the current role (not those a view reads
    /// with its owner's rights).
    read_as_caller: Vec<Oid>,
    /// Operators applied and types of values handled: what the planner calls itself for them.
    reached: planner_calls::Reached,
    refusal: Option<GuardError>,
}

/// Parses, analyses and rewrites `sql` (as the current role, with the session's settings) and
/// applies the policy. Returns the rewritten query, ready for the planner; the relations the
/// current role needs SELECT on to run it (the tables and views it names, and the tables of
/// security_invoker views; not those a view reads with its owner's rights); and the relations
/// the statement names, as PostgreSQL resolved them (before views are expanded), sorted.
///
/// # Safety
/// Must run inside a transaction and inside the Generated scope of hooks.rs: analysis and the
/// typcache may already evaluate immutable functions (a domain's CHECK constraint is planned
/// when first loaded), and the hooks judge those before anything here could.
/// The returned tree lives in the current memory context.
pub unsafe fn check(
    sql: &CStr,
    allowed: &[String],
    foreign_tables: bool,
    cache: &mut HashMap<u32, Result<(), GuardError>>,
) -> Result<(*mut pg_sys::Query, Vec<Oid>, Vec<Oid>), GuardError> {
    let raw = pg_sys::pg_parse_query(sql.as_ptr());
    let n = list_len(raw);
    if n == 0 {
        return Err(GuardError::NoStatement);
    }
    if n > 1 {
        return Err(GuardError::MultipleStatements(n));
    }
    let rawstmt = list_ptr(raw, 0) as *mut pg_sys::RawStmt;
    let stmt = (*rawstmt).stmt;
    if !pgrx::is_a(stmt, pg_sys::NodeTag::T_SelectStmt) {
        let tag = pg_sys::CreateCommandTag(stmt);
        let name = CStr::from_ptr(pg_sys::GetCommandTagName(tag)).to_string_lossy().into_owned();
        return Err(GuardError::NotAQuery(name));
    }
    if !(*(stmt as *mut pg_sys::SelectStmt)).intoClause.is_null() {
        return Err(GuardError::SelectInto);
    }
    let query = pg_sys::parse_analyze_fixedparams(rawstmt, sql.as_ptr(), std::ptr::null(), 0, std::ptr::null_mut());
    plain_select(query)?;
    let mut named = named(query);
    named.sort_unstable_by_key(|o| u32::from(*o));
    named.dedup();
    let rewritten = pg_sys::pg_rewrite_query(query);
    if list_len(rewritten) != 1 {
        return Err(GuardError::NotPlainQuery(format!("the rewriter made {} queries of it", list_len(rewritten))));
    }
    let query = list_ptr(rewritten, 0) as *mut pg_sys::Query;
    let mut walk = Walk::default();
    walker(query.cast(), (&mut walk as *mut Walk).cast());
    if let Some(e) = walk.refusal.take() {
        return Err(e);
    }
    // The output function of every result column's type, and of the types inside it.
    let mut seen_types = HashSet::new();
    for i in 0..list_len((*query).targetList) {
        let te = list_ptr((*query).targetList, i) as *mut pg_sys::TargetEntry;
        if !(*te).resjunk {
            output_functions(pg_sys::exprType((*te).expr.cast()), &mut walk.functions, &mut seen_types);
        }
    }
    // Domain constraints the query coerces to, until no new domain turns up.
    let mut seen_domains = HashSet::new();
    while let Some(d) = walk.domains.pop() {
        if seen_domains.insert(d) {
            for expr in domain_checks(d) {
                walker(expr.cast(), (&mut walk as *mut Walk).cast());
            }
        }
    }
    if let Some(e) = walk.refusal.take() {
        return Err(e);
    }
    // Foreign tables, read directly or as partitions and inheritance children: remote queries
    // and connections that outlive the call.
    if !foreign_tables {
        for &(rel, kind, inh) in &walk.relations {
            if kind == b'f' || (inh && has_children(rel) && reaches_foreign(rel)) {
                return Err(GuardError::ForeignTable(relation_name(rel)));
            }
        }
    }
    // What the planner calls itself: the functions of the operators the query applies and of
    // their negators and commutators, however far; the subtype_diff and canonical functions
    // range types cache.
    let calls = std::mem::take(&mut walk.reached).calls();
    if let Some(shell) = calls.shell {
        return Err(GuardError::ShellOperator(planner_calls::operator_name(shell)));
    }
    walk.functions.extend(calls.functions);
    // Every function, and every support function of the aggregates among them.
    let mut todo = walk.functions;
    let mut judged = HashSet::new();
    while let Some(oid) = todo.pop() {
        if !judged.insert(oid) {
            continue;
        }
        judge_oid(oid, Scope::Generated, allowed, cache)?;
        if facts(oid).is_some_and(|(_, aggregate)| aggregate) {
            todo.extend(support_functions(AGGREGATE_SUPPORT_SQL, oid));
        }
    }
    let mut reads = walk.read_as_caller;
    reads.sort_unstable_by_key(|o| u32::from(*o));
    reads.dedup();
    Ok((query, reads, named))
}

/// The relations an analysed statement names (before views are expanded), subqueries, CTEs
/// and sublinks included.
///
/// # Safety
/// `query` is an analysed Query.
pub(crate) unsafe fn named(query: *mut pg_sys::Query) -> Vec<Oid> {
    let mut named: Vec<Oid> = Vec::new();
    named_walker(query.cast(), (&mut named as *mut Vec<Oid>).cast());
    named
}

/// Collects, into the `Vec<Oid>` behind `context`, the relation of every range-table entry of an
/// analysed tree, subqueries, CTEs and sublinks included.
#[pg_guard]
unsafe extern "C-unwind" fn named_walker(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    if pgrx::is_a(node, pg_sys::NodeTag::T_Query) {
        return pg_sys::query_tree_walker(node.cast(), Some(named_walker), context, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32);
    }
    if pgrx::is_a(node, pg_sys::NodeTag::T_RangeTblEntry) {
        let rte = node as *mut pg_sys::RangeTblEntry;
        if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
            (*(context as *mut Vec<Oid>)).push((*rte).relid);
        }
        return false;
    }
    pg_sys::expression_tree_walker(node, Some(named_walker), context)
}

/// One plain SELECT: no utility statement, no data-modifying CTE, no row locks.
unsafe fn plain_select(q: *mut pg_sys::Query) -> Result<(), GuardError> {
    if !(*q).utilityStmt.is_null() {
        return Err(GuardError::NotPlainQuery("a utility statement".into()));
    }
    let kind = match (*q).commandType {
        pg_sys::CmdType::CMD_SELECT => None,
        pg_sys::CmdType::CMD_INSERT => Some("INSERT"),
        pg_sys::CmdType::CMD_UPDATE => Some("UPDATE"),
        pg_sys::CmdType::CMD_DELETE => Some("DELETE"),
        pg_sys::CmdType::CMD_MERGE => Some("MERGE"),
        _ => Some("a statement that is not a query"),
    };
    if let Some(k) = kind {
        return Err(GuardError::DataModifying(k.into()));
    }
    if (*q).hasModifyingCTE {
        return Err(GuardError::DataModifying("a data-modifying WITH".into()));
    }
    if (*q).hasForUpdate || list_len((*q).rowMarks) > 0 {
        return Err(GuardError::Locking);
    }
    Ok(())
}

#[pg_guard]
unsafe extern "C-unwind" fn collect_function(func: Oid, context: *mut c_void) -> bool {
    let walk = &mut *(context as *mut Walk);
    walk.functions.push(func);
    false
}

/// Visits every node: functions of each, plain-SELECT checks of each (sub)query, domains.
#[pg_guard]
unsafe extern "C-unwind" fn walker(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let walk = &mut *(context as *mut Walk);
    if walk.refusal.is_some() {
        return true;
    }
    if pgrx::is_a(node, pg_sys::NodeTag::T_Query) {
        let q = node as *mut pg_sys::Query;
        if let Err(e) = plain_select(q) {
            walk.refusal = Some(e);
            return true;
        }
        crate::pg::compat::read_as_caller(q, &mut walk.read_as_caller);
        return pg_sys::query_tree_walker(q, Some(walker), context, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32);
    }
    if pgrx::is_a(node, pg_sys::NodeTag::T_RangeTblEntry) {
        let rte = node as *mut pg_sys::RangeTblEntry;
        if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
            walk.relations.push(((*rte).relid, (*rte).relkind as u8, (*rte).inh));
        }
        // The walker visits what the entry holds (functions, subqueries, TABLESAMPLE, security
        // quals) itself.
        return false;
    }
    if pgrx::is_a(node, pg_sys::NodeTag::T_CoerceToDomain) {
        walk.domains.push((*(node as *mut pg_sys::CoerceToDomain)).resulttype);
    }
    // Operators and types of values: the planner calls functions for them itself.
    walk.reached.note(node);
    pg_sys::check_functions_in_node(node, Some(collect_function), context);
    pg_sys::expression_tree_walker(node, Some(walker), context)
}

/// The CHECK expressions of a domain, its base domains' included, as stored in the catalog: the
/// executor runs them as the type cache keeps them, with their immutable calls folded into
/// constants the first time the session used the domain (a function another role wrote may have
/// run then, outside nl2sql), so the cache's form would hide those calls.
unsafe fn domain_checks(domain: Oid) -> Vec<*mut pg_sys::Expr> {
    let stored = crate::pg::spi::rows_now(DOMAIN_CHECKS_SQL, &[domain.into()], |row| row.get::<String>(1).ok().flatten());
    let mut out = Vec::new();
    for text in stored {
        // Never: PostgreSQL's text holds no NUL byte. Refused rather than left unchecked.
        let Ok(text) = std::ffi::CString::new(text) else { pgrx::error!("a domain's CHECK constraint could not be read") };
        let node = pg_sys::stringToNode(text.as_ptr());
        if !node.is_null() {
            out.push(node as *mut pg_sys::Expr);
        }
    }
    out
}

const DOMAIN_CHECKS_SQL: &str = include_str!("../../sql/queries/policy_domain_checks.sql");

/// The support functions an aggregate runs (transition, final, combine, (de)serialise, moving).
/// Whether `rel` is partitioned or has inheritance children (pg_class.relhassubclass).
fn has_children(rel: Oid) -> bool {
    // SAFETY: a syscache lookup by OID, released before returning.
    unsafe {
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(rel));
        if tup.is_null() {
            return true;
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tup);
        let children = (*form).relhassubclass || (*form).relkind as u8 == b'p';
        pg_sys::ReleaseSysCache(tup);
        children
    }
}

/// Whether reading `rel` reaches a foreign table: through its inheritance children or
/// partitions, or, for a view, through the relations its definition reads.
pub fn reaches_foreign(rel: Oid) -> bool {
    crate::pg::spi::read::<bool>(REACHES_FOREIGN_SQL, &[rel.into()]).unwrap_or(true)
}

const REACHES_FOREIGN_SQL: &str = include_str!("../../sql/queries/policy_reaches_foreign.sql");

fn relation_name(rel: Oid) -> String {
    crate::pg::spi::read::<String>("SELECT $1::pg_catalog.regclass::pg_catalog.text", &[rel.into()])
        .unwrap_or_else(|| format!("with OID {}", u32::from(rel)))
}

/// The support functions `sql` lists (as one oid[]) for the catalog row of `oid`.
fn support_functions(sql: &str, oid: Oid) -> Vec<Oid> {
    crate::pg::spi::read::<Vec<Option<Oid>>>(sql, &[oid.into()])
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .filter(|o| *o != pg_sys::InvalidOid)
        .collect()
}

/// An aggregate's transition, final, combine, (de)serialise and moving-aggregate functions.
const AGGREGATE_SUPPORT_SQL: &str = "SELECT ARRAY[aggtransfn, aggfinalfn, aggcombinefn, aggserialfn, aggdeserialfn,
              aggmtransfn, aggminvtransfn, aggmfinalfn]::pg_catalog.oid[]
       FROM pg_catalog.pg_aggregate WHERE aggfnoid OPERATOR(pg_catalog.=) $1";

/// The output functions that printing a value of `typ` runs: its own, and those of the types
/// inside it (array elements, a domain's base, a range's subtype, a composite's columns).
unsafe fn output_functions(typ: Oid, out: &mut Vec<Oid>, seen: &mut HashSet<Oid>) {
    if typ == pg_sys::InvalidOid || !seen.insert(typ) {
        return;
    }
    // A chain of a hundred thousand domains ends in an error, not a crash.
    pg_sys::check_stack_depth();
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::TYPEOID as i32, pg_sys::Datum::from(typ));
    if tup.is_null() {
        return;
    }
    let t = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_type>(tup);
    let (output, elem, base, relid, kind) = ((*t).typoutput, (*t).typelem, (*t).typbasetype, (*t).typrelid, (*t).typtype as u8);
    pg_sys::ReleaseSysCache(tup);
    out.push(output);
    output_functions(elem, out, seen);
    output_functions(base, out, seen);
    match kind {
        b'r' => output_functions(pg_sys::get_range_subtype(typ), out, seen),
        b'm' => output_functions(pg_sys::get_multirange_range(typ), out, seen),
        b'c' if relid != pg_sys::InvalidOid => {
            let desc = pg_sys::lookup_rowtype_tupdesc_copy(typ, -1);
            for i in 0..(*desc).natts as usize {
                let att = crate::pg::compat::attribute(desc, i);
                if !(*att).attisdropped {
                    output_functions((*att).atttypid, out, seen);
                }
            }
        }
        _ => {}
    }
}
