//! Function alignments of counts written as something that never means anything:
//!
//! - a key summed: `sum(sales.id)`, where `sales.id` identifies a row (a table's one-column
//!   primary key, a one-column foreign key, or a column such a key references), adds up
//!   identifiers; the question asked how many (`count(sales.id)`). Keys a profiling inferred
//!   count only where another table's key references them: a unique measure is no identifier.
//! - a count grouped by what it counts: `SELECT count(DISTINCT c.id) ... GROUP BY c.id` is 1 for
//!   every group; where the SELECT list holds aggregates only, nothing names the groups either,
//!   so the question asked for one number: the GROUP BY goes.
//!
//! Neither touches a window (`OVER`), a HAVING, grouping sets or a SELECT list reading a
//! subquery: there the grouping may mean something else.

use super::aggregates::{aggregate_name, has_aggregate, single_arg};
use super::levels::{resolve_at, walk_with, Walk, WalkingRule};
use super::names::cte_names;
use super::fold;
use crate::schema::Schema;
use sqlparser::ast::{
    DuplicateTreatment, Expr, FunctionArguments, GroupByExpr, Ident, ObjectNamePart, OrderByKind, Query, SelectItem, SetExpr, Visit,
    VisitMut, Visitor, VisitorMut,
};
use std::ops::ControlFlow;

/// Whether column `c` of table `t` identifies rows: its one-column primary key (declared), a
/// one-column foreign key, or a column a one-column foreign key references.
fn identifies(schema: &Schema, t: usize, c: usize) -> bool {
    let table = &schema.tables[t];
    let column = &table.columns[c];
    let declared_key = !table.key_inferred && table.primary_key.len() == 1 && table.primary_key[0] == column.name;
    declared_key
        || schema.foreign_keys.iter().any(|fk| {
            fk.columns.len() == 1
                && ((fk.table == table.ident && fk.columns[0] == column.ident)
                    || (fk.ref_table == table.ident && fk.ref_columns.len() == 1 && fk.ref_columns[0] == column.ident))
        })
}

struct KeySums<'a> {
    schema: &'a Schema,
    walk: Walk<'a>,
    fired: &'a mut Vec<String>,
}

impl<'a> WalkingRule<'a> for KeySums<'a> {
    fn walk(&mut self) -> &mut Walk<'a> {
        &mut self.walk
    }

    fn expr(&mut self, e: &mut Expr) {
        if aggregate_name(e).as_deref() != Some("sum") {
            return;
        }
        let Some(arg) = single_arg(e) else { return };
        let Some((t, c)) = resolve_at(self.schema, &self.walk.levels, &arg) else { return };
        if !identifies(self.schema, t, c) {
            return;
        }
        let Expr::Function(f) = e else { return };
        let Some(ObjectNamePart::Identifier(name)) = f.name.0.last_mut() else { return };
        let (table, column) = (&self.schema.tables[t].name, &self.schema.tables[t].columns[c].name);
        self.fired.push(format!("function: sum({arg}) adds up the key {table}.{column} -> count({arg})"));
        *name = Ident::new("count");
    }
}

/// A key summed, anywhere in the statement, counts it instead.
pub(super) fn summed_keys(schema: &Schema, q: &mut Query, fired: &mut Vec<String>) {
    let ctes = cte_names(&*q).into_iter().collect();
    walk_with(q, &mut KeySums { schema, walk: Walk::new(schema, ctes), fired });
}

/// A column reference as written, each part folded: what two references must share to be one.
fn written(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::Nested(inner) => written(inner),
        Expr::Identifier(i) => Some(vec![fold(i)]),
        Expr::CompoundIdentifier(p) => Some(p.iter().map(fold).collect()),
        _ => None,
    }
}

/// The column references of `e` outside aggregate calls; None where `e` reads a subquery or
/// calls a window or an aggregate the rules do not know (its arguments would look bare).
fn bare_columns(e: &Expr) -> Option<Vec<Expr>> {
    struct Bare {
        depth: usize,
        found: Vec<Expr>,
        unsure: bool,
    }
    impl Visitor for Bare {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => self.unsure = true,
                Expr::Function(f) if f.over.is_some() => self.unsure = true,
                _ if aggregate_name(e).is_some() => self.depth += 1,
                Expr::Identifier(_) | Expr::CompoundIdentifier(_) if self.depth == 0 => self.found.push(e.clone()),
                _ => {}
            }
            if self.unsure {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if aggregate_name(e).is_some() {
                self.depth -= 1;
            }
            ControlFlow::Continue(())
        }
    }
    let mut b = Bare { depth: 0, found: vec![], unsure: false };
    let _ = e.visit(&mut b);
    (!b.unsure).then_some(b.found)
}

/// Whether `e` holds `count(DISTINCT key)`.
fn counts_distinct(e: &Expr, key: &[String]) -> bool {
    struct Find<'k>(&'k [String], bool);
    impl Visitor for Find<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e {
                let distinct = matches!(&f.args, FunctionArguments::List(l) if l.duplicate_treatment == Some(DuplicateTreatment::Distinct));
                if distinct && aggregate_name(e).as_deref() == Some("count") && single_arg(e).as_ref().and_then(written).as_deref() == Some(self.0) {
                    self.1 = true;
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Find(key, false);
    let _ = e.visit(&mut f);
    f.1
}

/// The one query (its body a SELECT) whose GROUP BY only splits a count of distinct values of
/// that same column into ones: (the GROUP BY key as written) when the rule applies.
fn grouped_by_counted(q: &Query) -> Option<String> {
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let GroupByExpr::Expressions(keys, modifiers) = &s.group_by else { return None };
    let ([key], true, None) = (keys.as_slice(), modifiers.is_empty(), &s.having) else { return None };
    let key_written = written(key)?;
    let mut aliases = Vec::new();
    let mut counted = false;
    for p in &s.projection {
        let e = match p {
            SelectItem::UnnamedExpr(e) => e,
            SelectItem::ExprWithAlias { expr, alias } => {
                aliases.push(vec![fold(alias)]);
                expr
            }
            _ => return None,
        };
        if !has_aggregate(e) || !bare_columns(e)?.is_empty() {
            return None;
        }
        counted |= counts_distinct(e, &key_written);
    }
    if let Some(order) = &q.order_by {
        let OrderByKind::Expressions(exprs) = &order.kind else { return None };
        for o in exprs {
            // Without groups, ORDER BY may name the list's aliases and aggregates only.
            if bare_columns(&o.expr)?.iter().any(|c| written(c).is_none_or(|w| !aliases.contains(&w))) {
                return None;
            }
        }
    }
    counted.then(|| key.to_string())
}

/// Drops, in every query of the statement, a GROUP BY that only splits a count of distinct
/// values of its key into ones.
pub(super) fn grouping_by_the_counted(q: &mut Query, fired: &mut Vec<String>) {
    struct Each<'f>(&'f mut Vec<String>);
    impl VisitorMut for Each<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            if let Some(key) = grouped_by_counted(q) {
                if let SetExpr::Select(s) = q.body.as_mut() {
                    s.group_by = GroupByExpr::Expressions(vec![], vec![]);
                    self.0.push(format!("function: GROUP BY {key} makes count(DISTINCT {key}) 1 in every group -> one count"));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(q, &mut Each(fired));
}

#[cfg(test)]
mod tests;
