//! What differs between the PostgreSQL majors nl2sql supports (15 and 18; the `pg15`/`pg18`
//! features pgrx builds with), in one place: the rest of the crate calls these and never tests a
//! feature itself.
//!
//! - 16 moved permission checks from range table entries to `Query.rteperminfos`;
//! - 16 replaced `GetNumConfigOptions()` with `get_guc_variables(&n)`;
//! - 18 put a tuple descriptor's attributes behind its compact ones (`TupleDescAttr`);
//! - 18 dropped `ExecutorRun`'s `execute_once` argument;
//! - 18 added virtual generated columns, expanded inside the planner.
//!
//! Also the pointer-list helpers the policy and these share.

use pgrx::pg_sys;
use std::ffi::c_void;

/// The `i`-th element of a pointer list.
pub unsafe fn list_ptr(l: *mut pg_sys::List, i: usize) -> *mut c_void {
    (*(*l).elements.add(i)).ptr_value
}

/// The `i`-th element of an OID list.
pub unsafe fn list_oid(l: *mut pg_sys::List, i: usize) -> pg_sys::Oid {
    (*(*l).elements.add(i)).oid_value
}

/// A list's length (NIL is empty).
pub unsafe fn list_len(l: *mut pg_sys::List) -> usize {
    if l.is_null() {
        0
    } else {
        (*l).length as usize
    }
}

/// The relations of `q`'s own range table (not its subqueries') whose SELECT privilege the
/// executor checks as the current role: not those a view reads with its owner's rights.
pub unsafe fn read_as_caller(q: *mut pg_sys::Query, out: &mut Vec<pg_sys::Oid>) {
    let select = pg_sys::ACL_SELECT as pg_sys::AclMode;
    #[cfg(feature = "pg15")]
    {
        let rtable = (*q).rtable;
        for i in 0..list_len(rtable) {
            let rte = list_ptr(rtable, i) as *mut pg_sys::RangeTblEntry;
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).checkAsUser == pg_sys::InvalidOid && (*rte).requiredPerms & select != 0 {
                out.push((*rte).relid);
            }
        }
    }
    #[cfg(not(feature = "pg15"))]
    {
        let infos = (*q).rteperminfos;
        for i in 0..list_len(infos) {
            let info = list_ptr(infos, i) as *mut pg_sys::RTEPermissionInfo;
            if (*info).checkAsUser == pg_sys::InvalidOid && (*info).requiredPerms & select != 0 {
                out.push((*info).relid);
            }
        }
    }
}

/// Raises PostgreSQL's own error unless the current role may read every relation a planned
/// statement reads (its subqueries' included, a view's with its owner's rights), as the executor
/// checks before it starts.
pub unsafe fn check_permissions(plan: *mut pg_sys::PlannedStmt) {
    #[cfg(feature = "pg15")]
    pg_sys::ExecCheckRTPerms((*plan).rtable, true);
    #[cfg(not(feature = "pg15"))]
    pg_sys::ExecCheckPermissions((*plan).rtable, (*plan).permInfos, true);
}

/// The server's settings, as SHOW ALL reads them (copied: since 16 the array is built anew, in
/// the current memory context, at each call).
pub unsafe fn guc_variables() -> Vec<*mut pg_sys::config_generic> {
    #[cfg(feature = "pg15")]
    let (vars, n) = (pg_sys::get_guc_variables(), pg_sys::GetNumConfigOptions());
    #[cfg(not(feature = "pg15"))]
    let (vars, n) = {
        let mut n = 0;
        (pg_sys::get_guc_variables(&mut n), n)
    };
    if vars.is_null() || n <= 0 {
        return Vec::new();
    }
    std::slice::from_raw_parts(vars, n as usize).to_vec()
}

/// The `i`-th attribute of a tuple descriptor.
pub unsafe fn attribute(desc: pg_sys::TupleDesc, i: usize) -> *mut pg_sys::FormData_pg_attribute {
    #[cfg(feature = "pg18")]
    {
        pg_sys::TupleDescAttr(desc, i as i32)
    }
    #[cfg(not(feature = "pg18"))]
    {
        (*desc).attrs.as_mut_ptr().add(i)
    }
}

/// Runs a started query to its end.
pub unsafe fn executor_run(desc: *mut pg_sys::QueryDesc) {
    #[cfg(feature = "pg18")]
    pg_sys::ExecutorRun(desc, pg_sys::ScanDirection::ForwardScanDirection, 0);
    #[cfg(not(feature = "pg18"))]
    pg_sys::ExecutorRun(desc, pg_sys::ScanDirection::ForwardScanDirection, 0, true);
}

/// SQL/JSON expression nodes exprType() knows: JSON_OBJECT, JSON_ARRAY, IS JSON and the
/// formatted values inside them (16+), JSON_VALUE, JSON_QUERY, JSON_EXISTS, JSON_TABLE's
/// columns (17+). None before 16.
pub unsafe fn is_json_expression(node: *mut pg_sys::Node) -> bool {
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    {
        use pg_sys::NodeTag::*;
        let tag = (*node).type_;
        #[cfg(any(feature = "pg17", feature = "pg18"))]
        if tag == T_JsonExpr {
            return true;
        }
        matches!(tag, T_JsonValueExpr | T_JsonConstructorExpr | T_JsonIsPredicate)
    }
    #[cfg(not(any(feature = "pg16", feature = "pg17", feature = "pg18")))]
    {
        let _ = node;
        false
    }
}

/// The expressions of a relation's virtual generated columns (18+): the planner puts them in
/// place of the columns after every hook has seen the query. None before 18. The relation must
/// be locked already (it is, by the query that reads it).
pub unsafe fn virtual_generated(relid: pg_sys::Oid) -> Vec<*mut pg_sys::Node> {
    #[cfg(feature = "pg18")]
    {
        let mut out = Vec::new();
        let rel = pg_sys::relation_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        let desc = (*rel).rd_att;
        if !(*desc).constr.is_null() && (*(*desc).constr).has_generated_virtual {
            for i in 0..(*desc).natts as usize {
                let a = attribute(desc, i);
                if !(*a).attisdropped && (*a).attgenerated as u8 == pg_sys::ATTRIBUTE_GENERATED_VIRTUAL {
                    out.push(pg_sys::build_generation_expression(rel, (*a).attnum as i32));
                }
            }
        }
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        out
    }
    #[cfg(not(feature = "pg18"))]
    {
        let _ = relid;
        Vec::new()
    }
}
