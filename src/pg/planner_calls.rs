//! The functions the planner calls itself, outside the executor and, when they are built in,
//! outside the fmgr hooks: what hooks.rs judges before a query is planned under a scope (the
//! query, the virtual generated columns it reads) and as each relation is opened (its indexes'
//! predicates), and what policy.rs judges on the tree of generated SQL.
//!
//! - Selectivity estimators run operators on a column's most common values and histogram:
//!   `eqsel` the operator's own function, `neqsel` its negator's, `scalarltsel` its commutator's
//!   when the column is on the right. The planner negates (`NOT (a < b)` becomes `a >= b`) and
//!   commutes clauses before estimating them, so every operator reachable through negators and
//!   commutators, however many hops away, may be called.
//! - A range type's `subtype_diff` and `canonical` functions, which the type cache keeps across
//!   queries (a call made through it is not seen by the fmgr hooks when the cache was filled
//!   outside a scope): `rangesel` calls `subtype_diff`.
//! - Partial indexes: the planner estimates the clauses of their predicates, which the query
//!   never shows.

use crate::pg::compat::{list_len, list_oid};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use std::collections::HashSet;
use std::ffi::c_void;

/// pg_range's columns (catalog/pg_range.h; pgrx has no struct for it): rngtypid, rngsubtype,
/// rngmultitypid, rngcollation, rngsubopc, rngcanonical, rngsubdiff.
const RNGCANONICAL: pg_sys::AttrNumber = 6;
const RNGSUBDIFF: pg_sys::AttrNumber = 7;

/// What a walk has reached so far: the operators applied and the types of the values handled.
#[derive(Default)]
pub struct Reached {
    operators: HashSet<Oid>,
    types: HashSet<Oid>,
}

impl Reached {
    /// Notes what `node` itself applies and handles (not its children).
    pub unsafe fn note(&mut self, node: *mut pg_sys::Node) {
        operators(node, &mut self.operators);
        if is_typed_expression(node) {
            let typ = pg_sys::exprType(node);
            if typ != pg_sys::InvalidOid {
                // A domain's base type: a range under a domain is still estimated as a range.
                self.types.insert(pg_sys::getBaseType(typ));
            }
        }
    }

    /// What the planner may call for what was reached: the functions of every operator
    /// reachable through negators and commutators, the range types' support functions.
    pub unsafe fn calls(self) -> Calls {
        let mut out = Calls::default();
        let mut seen = HashSet::new();
        let mut todo: Vec<Oid> = self.operators.into_iter().collect();
        while let Some(op) = todo.pop() {
            if op == pg_sys::InvalidOid || !seen.insert(op) {
                continue;
            }
            // Each operator is visited once: the walk ends within pg_operator.
            pg_sys::check_for_interrupts!();
            out.operators.push(op);
            match pg_sys::get_opcode(op) {
                f if f == pg_sys::InvalidOid => {
                    if !owned_by_superuser(op) {
                        out.shell = out.shell.or(Some(op));
                    }
                }
                f => out.functions.push(f),
            }
            todo.push(pg_sys::get_negator(op));
            todo.push(pg_sys::get_commutator(op));
        }
        for t in self.types {
            out.functions.extend(range_support(t));
        }
        out
    }
}

#[derive(Default)]
struct Found {
    reached: Reached,
    /// Whether the relations a query reads are opened for their virtual generated columns.
    virtual_columns: bool,
}

/// What the planner may call itself, and what it was read from.
#[derive(Default)]
pub struct Calls {
    pub functions: Vec<Oid>,
    /// Every operator visited: a change to one of them after this was read is a change to what
    /// the planner calls (hooks.rs).
    pub operators: Vec<Oid>,
    /// An operator reached that is only a shell (no function yet) and that a role other than a
    /// superuser owns: its owner can complete it after it was judged.
    pub shell: Option<Oid>,
}

/// What the planner may call for `q`: its operators' functions and those of every operator
/// reachable from them through negators and commutators, the support functions of the range
/// types its expressions have, in its subqueries, WITH queries and the virtual generated columns
/// (18+) of the relations it reads too.
pub unsafe fn of_query(q: *mut pg_sys::Query) -> Calls {
    let mut found = Found { virtual_columns: true, ..Found::default() };
    walker(q.cast(), (&mut found as *mut Found).cast());
    found.reached.calls()
}

/// The same for an expression, or a list of them (an index predicate).
pub unsafe fn of_expression(node: *mut pg_sys::Node) -> Calls {
    let mut found = Found::default();
    walker(node, (&mut found as *mut Found).cast());
    found.reached.calls()
}

/// Whether a superuser owns `op` (only its owner can give a shell a function).
unsafe fn owned_by_superuser(op: Oid) -> bool {
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::OPEROID as i32, pg_sys::Datum::from(op));
    if tup.is_null() {
        return false;
    }
    let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_operator>(tup)).oprowner;
    pg_sys::ReleaseSysCache(tup);
    pg_sys::superuser_arg(owner)
}

/// How an operator is shown in messages, schema-qualified (`public.<~>(integer,integer)`).
pub unsafe fn operator_name(op: Oid) -> String {
    std::ffi::CStr::from_ptr(pg_sys::format_operator_qualified(op)).to_string_lossy().into_owned()
}

/// A range or multirange type's subtype_diff and canonical functions (none for another type).
unsafe fn range_support(typ: Oid) -> Vec<Oid> {
    let range = match pg_sys::get_typtype(typ) as u8 {
        b'r' => typ,
        b'm' => pg_sys::get_multirange_range(typ),
        _ => return Vec::new(),
    };
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RANGETYPE as i32, pg_sys::Datum::from(range));
    if tup.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for column in [RNGCANONICAL, RNGSUBDIFF] {
        let mut null = false;
        let d = pg_sys::SysCacheGetAttr(pg_sys::SysCacheIdentifier::RANGETYPE as i32, tup, column, &mut null);
        match Oid::from_datum(d, null) {
            Some(f) if f != pg_sys::InvalidOid => out.push(f),
            _ => {}
        }
    }
    pg_sys::ReleaseSysCache(tup);
    out
}

#[pg_guard]
unsafe extern "C-unwind" fn walker(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let found = &mut *(context as *mut Found);
    if pgrx::is_a(node, pg_sys::NodeTag::T_Query) {
        let flags = pg_sys::QTW_EXAMINE_RTES_BEFORE as i32;
        return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(walker), context, flags);
    }
    if pgrx::is_a(node, pg_sys::NodeTag::T_RangeTblEntry) {
        let rte = node as *mut pg_sys::RangeTblEntry;
        if found.virtual_columns && (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
            for expr in crate::pg::compat::virtual_generated((*rte).relid) {
                walker(expr, context);
            }
        }
        // The walker visits what the entry holds itself.
        return false;
    }
    found.reached.note(node);
    pg_sys::expression_tree_walker(node, Some(walker), context)
}

/// The operators `node` applies.
unsafe fn operators(node: *mut pg_sys::Node, out: &mut HashSet<Oid>) {
    use pg_sys::NodeTag::*;
    match (*node).type_ {
        // DistinctExpr and NullIfExpr are OpExprs under another tag.
        T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
            out.insert((*(node as *mut pg_sys::OpExpr)).opno);
        }
        T_ScalarArrayOpExpr => {
            out.insert((*(node as *mut pg_sys::ScalarArrayOpExpr)).opno);
        }
        T_RowCompareExpr => {
            let l = (*(node as *mut pg_sys::RowCompareExpr)).opnos;
            out.extend((0..list_len(l)).map(|i| list_oid(l, i)));
        }
        _ => {}
    }
}

/// Expression nodes exprType() knows (it raises an error on any other node), the SQL/JSON
/// ones of the server's major included (a range type returned by JSON_VALUE is a type too).
unsafe fn is_typed_expression(node: *mut pg_sys::Node) -> bool {
    use pg_sys::NodeTag::*;
    let known = matches!(
        (*node).type_,
        T_Var | T_Const | T_Param | T_Aggref | T_WindowFunc | T_SubscriptingRef | T_FuncExpr | T_NamedArgExpr
            | T_OpExpr | T_DistinctExpr | T_NullIfExpr | T_ScalarArrayOpExpr | T_BoolExpr | T_FieldSelect
            | T_FieldStore | T_RelabelType | T_CoerceViaIO | T_ArrayCoerceExpr | T_ConvertRowtypeExpr
            | T_CollateExpr | T_CaseExpr | T_CaseTestExpr | T_ArrayExpr | T_RowExpr | T_RowCompareExpr
            | T_CoalesceExpr | T_MinMaxExpr | T_SQLValueFunction | T_XmlExpr | T_NullTest | T_BooleanTest
            | T_CoerceToDomain | T_CoerceToDomainValue | T_SetToDefault | T_NextValueExpr
    );
    known || crate::pg::compat::is_json_expression(node)
}
