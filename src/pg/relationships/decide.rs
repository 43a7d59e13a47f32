//! A DBA's decision on one relationship: confirm it (adding it when profiling did not find it),
//! reject it (profiling never brings it back), or forget the decision. Who may: the owner of
//! the referencing table (or a member of its owning role), a superuser, or a member of
//! nl2sql_curator, as for the examples every role's prompts are shown; the owner of the
//! referenced table may also reject and forget. Confirming needs, as a declared foreign key
//! does, the right to reference the target columns (REFERENCES or SELECT on them).

use crate::pg::errors::fail;
use crate::pg::relation::display_ident;
use crate::pg::{owner, spi};
use nl2sql_core::error::SqlState;
use nl2sql_core::render::{ident, visible};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

/// Most columns one relationship joins on.
const MAX_COLUMNS: usize = 4;

/// What is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Confirm,
    Reject,
    Forget,
}

impl Decision {
    fn stored(self) -> &'static str {
        match self {
            Decision::Confirm => "confirmed",
            Decision::Reject => "rejected",
            Decision::Forget => "forget",
        }
    }
}

/// Checks and keeps a decision on `from`(`from_columns`) → `to`(`to_columns`).
pub fn decide(from: pg_sys::Oid, from_columns: Vec<String>, to: pg_sys::Oid, to_columns: Vec<String>, decision: Decision) {
    super::require_primary("decide on relationships");
    let caller = owner::caller();
    let (from_name, to_name) = (relation(from), relation(to));
    if from_columns.is_empty() || from_columns.len() > MAX_COLUMNS || from_columns.len() != to_columns.len() {
        fail(
            SqlState::InvalidParameterValue,
            format!("a relationship joins 1 to {MAX_COLUMNS} columns on each side, as many on one as on the other"),
            Some(format!("{} column(s) of {from_name}, {} of {to_name}", from_columns.len(), to_columns.len())),
            None,
        );
    }
    for (rel, name) in [(from, &from_name), (to, &to_name)] {
        if temporary(rel) {
            fail(
                SqlState::from_code("42809"),
                format!("{name} is a temporary table"),
                None,
                Some("Relationships are kept for permanent relations only."),
            );
        }
    }
    let allowed = may_decide(from, caller) || (decision != Decision::Confirm && may_decide(to, caller));
    if !allowed {
        fail(
            SqlState::InsufficientPrivilege,
            format!("permission denied to decide on relationships of {from_name}"),
            None,
            Some("The owner of the referencing table, a superuser or a member of nl2sql_curator may; the owner of the referenced table may reject or forget."),
        );
    }
    // Only now, allowed, the two tables are locked as a SELECT would lock them (a DROP waits
    // for the decision to commit), and one dropped meanwhile is refused instead of kept.
    for rel in [from, to] {
        if !super::lock_existing(rel) {
            fail(SqlState::UndefinedTable, format!("relation with OID {} does not exist", u32::from(rel)), None, None);
        }
    }
    if decision == Decision::Forget {
        // A decision on columns renamed or dropped since can still be forgotten.
        return store(from, from_columns, to, to_columns, decision, caller);
    }
    let from_types = types(from, &from_name, &from_columns);
    let to_types = types(to, &to_name, &to_columns);
    if decision == Decision::Confirm && !may_reference(to, &to_columns, caller) {
        fail(
            SqlState::InsufficientPrivilege,
            format!("permission denied to reference {to_name} ({})", listed(&to_columns)),
            None,
            Some("Confirming a relationship needs REFERENCES or SELECT on the columns it points to, as a foreign key does."),
        );
    }
    if decision == Decision::Confirm {
        for ((fc, ft), (tc, tt)) in from_columns.iter().zip(&from_types).zip(to_columns.iter().zip(&to_types)) {
            if ft.1 != tt.1 {
                fail(
                    SqlState::from_code("42804"),
                    format!("{from_name}.{} and {to_name}.{} cannot be joined on", display_ident(fc), display_ident(tc)),
                    Some(format!("{} is {} and {} is {}", display_ident(fc), visible(&ft.0, false), display_ident(tc), visible(&tt.0, false))),
                    Some("Both columns of each pair must be of one kind: numbers, strings, dates, ..."),
                );
            }
        }
    }
    if declared(from, &from_columns, to, &to_columns) {
        fail(
            SqlState::ObjectNotInPrerequisiteState,
            format!("{from_name} ({}) → {to_name} ({}) is a declared foreign key", listed(&from_columns), listed(&to_columns)),
            None,
            Some("A declared foreign key needs no decision; drop the constraint to stop using it."),
        );
    }
    store(from, from_columns, to, to_columns, decision, caller)
}

/// Writes the decision, as the extension's owner.
fn store(from: pg_sys::Oid, from_columns: Vec<String>, to: pg_sys::Oid, to_columns: Vec<String>, decision: Decision, caller: pg_sys::Oid) {
    let args = [
        DatumWithOid::from(from),
        DatumWithOid::from(from_columns),
        DatumWithOid::from(to),
        DatumWithOid::from(to_columns),
        DatumWithOid::from(decision.stored()),
        DatumWithOid::from(caller),
    ];
    owner::as_owner(|| {
        spi::write(
            "SELECT nl2sql._relationship_decide($1::pg_catalog.oid::pg_catalog.regclass, $2::pg_catalog.name[],
                                                $3::pg_catalog.oid::pg_catalog.regclass, $4::pg_catalog.name[], $5,
                                                (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) $6))",
            &args,
        )
    });
}

/// The relation's name as SQL writes it; 42P01 when there is none, 42809 when it is not a
/// table, view, materialized view or foreign table (an index, a sequence).
fn relation(rel: pg_sys::Oid) -> String {
    let found = spi::read_row(
        "SELECT c.oid::pg_catalog.regclass::pg_catalog.text,
                c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f}'::pg_catalog.\"char\"[])
         FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
        &[rel.into()],
        |r| Some((r.get::<String>(1).ok()??, r.get::<bool>(2).ok()??)),
    );
    // For messages only: invisible characters in the owner's name written as `U&"..."` escapes.
    match found.map(|(name, kind)| (ident(&name), kind)) {
        Some((name, true)) => name,
        Some((name, false)) => fail(
            SqlState::from_code("42809"),
            format!("{name} is not a table, view, materialized view or foreign table"),
            None,
            Some("Relationships join tables and views."),
        ),
        None => fail(SqlState::UndefinedTable, format!("relation with OID {} does not exist", u32::from(rel)), None, None),
    }
}

/// Whether `role` may decide on relationships from `rel`.
fn may_decide(rel: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    spi::read::<bool>(
        include_str!("../../../sql/queries/profile_decide_may_decide.sql"),
        &[rel.into(), role.into()],
    )
    .unwrap_or(false)
}

/// Whether the relation is a temporary one (its drop at session end is not followed).
fn temporary(rel: pg_sys::Oid) -> bool {
    spi::read::<bool>(
        "SELECT c.relpersistence OPERATOR(pg_catalog.=) 't' FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
        &[rel.into()],
    )
    .unwrap_or(false)
}

/// Whether `role` may point a relationship at these columns: a superuser, or one with
/// REFERENCES or SELECT on each of them and USAGE on their schema.
fn may_reference(rel: pg_sys::Oid, columns: &[String], role: pg_sys::Oid) -> bool {
    spi::read::<bool>(
        include_str!("../../../sql/queries/profile_decide_may_reference.sql"),
        &[rel.into(), columns.to_vec().into(), role.into()],
    )
    .unwrap_or(false)
}

/// Each column's type and type category, in order; 42703 for a column the relation lacks.
fn types(rel: pg_sys::Oid, name: &str, columns: &[String]) -> Vec<(String, String)> {
    columns
        .iter()
        .map(|c| {
            spi::read_row(
                include_str!("../../../sql/queries/profile_decide_types.sql"),
                &[rel.into(), c.as_str().into()],
                |r| Some((r.get::<String>(1).ok()??, r.get::<String>(2).ok()??)),
            )
            .unwrap_or_else(|| fail(SqlState::from_code("42703"), format!("column \"{}\" of relation {name} does not exist", visible(c, false)), None, None))
        })
        .collect()
}

/// Whether a foreign key with exactly these columns is declared.
fn declared(from: pg_sys::Oid, from_columns: &[String], to: pg_sys::Oid, to_columns: &[String]) -> bool {
    spi::read::<bool>(
        // pg_constraint itself, not the caller's view of it: one with REFERENCES only on the
        // target does not see the declaration there, and must not shadow it with a decision.
        include_str!("../../../sql/queries/profile_decide_declared.sql"),
        &[from.into(), from_columns.to_vec().into(), to.into(), to_columns.to_vec().into()],
    )
    .unwrap_or(false)
}

/// Columns for messages, as [`display_ident`] writes each (the names are a table owner's, or
/// the caller's copy of them).
fn listed(columns: &[String]) -> String {
    columns.iter().map(|c| display_ident(c)).collect::<Vec<_>>().join(", ")
}
