//! Function alignments of counts written as something that never means anything:
//!
//! - a key summed: `sum(sales.id)`, where `sales.id` identifies a row (a table's one-column
//!   declared primary key, a one-column foreign key to a table's primary key, or a table's
//!   primary key found by profiling that such a key references), adds up identifiers; the
//!   question asked how many (`count(sales.id)`; 0 where `sum` gave NULL, no rows). Only
//!   PostgreSQL's own `sum` (unqualified or `pg_catalog.sum`), outside a window, on the column
//!   itself, of a table no other schema names alike; never where a GROUP BY of the statement
//!   groups on a column of the key's name (`sum(DISTINCT k) ... GROUP BY k` is k, the group's
//!   name).
//! - a count grouped by what it counts: `SELECT count(DISTINCT c.id) ... GROUP BY c.id` lists
//!   1 for every group (0 for the group of NULLs), and nothing names the groups: the question
//!   asked for one number, and the GROUP BY goes. Only where the statement's own SELECT lists
//!   nothing but PostgreSQL's `count(DISTINCT` of the key written the same way`)`, and neither
//!   HAVING, grouping sets, a WINDOW clause, `DISTINCT ON`, an OFFSET or FETCH, nor an ORDER BY
//!   other than by that count needs the groups; never in a subquery, whose rows may be
//!   counted, averaged or tested for existence.

use super::aggregates::{aggregate_name, single_arg};
use super::levels::{resolve_at, walk_with, Walk, WalkingRule};
use super::names::cte_names;
use super::fold;
use crate::schema::Schema;
use sqlparser::ast::{
    Distinct, DuplicateTreatment, Expr, FunctionArguments, GroupByExpr, Ident, LimitClause, ObjectName, ObjectNamePart, OrderByKind, Query,
    SelectItem, SetExpr, Visit, Visitor,
};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Whether column `c` of table `t` identifies rows: its table's one-column declared primary
/// key; a one-column foreign key to a table's primary key (declared, or found by profiling); or
/// a table's primary key (found by profiling) that such a foreign key references. A column a
/// key merely references, or a foreign key to another column, may hold a measure.
fn identifies(schema: &Schema, t: usize, c: usize) -> bool {
    let table = &schema.tables[t];
    let column = &table.columns[c];
    let is_pk = |table: &crate::schema::Table, name: &str| table.primary_key.len() == 1 && table.primary_key[0] == name;
    if !table.key_inferred && is_pk(table, &column.name) {
        return true;
    }
    schema.foreign_keys.iter().filter(|fk| fk.columns.len() == 1 && fk.ref_columns.len() == 1).any(|fk| {
        let Some(target) = schema.tables.iter().find(|x| x.ident == fk.ref_table) else { return false };
        let Some(referenced) = target.columns.iter().find(|x| x.ident == fk.ref_columns[0]) else { return false };
        is_pk(target, &referenced.name)
            && ((fk.table == table.ident && fk.columns[0] == column.ident) || (target.oid == table.oid && referenced.name == column.name))
    })
}

/// Whether a call names PostgreSQL's own function (unqualified or `pg_catalog.`): another
/// schema's function of that name may mean anything.
fn own_function(name: &ObjectName) -> bool {
    match name.0.split_last() {
        Some((_, [])) => true,
        Some((_, [schema])) => schema.as_ident().is_some_and(|s| fold(s) == "pg_catalog"),
        _ => false,
    }
}

/// The column names (last part, folded) every GROUP BY of the statement groups on: the columns
/// its keys read (in ROLLUP, CUBE and grouping sets too), and those of the select item a key
/// names by position or by output name.
fn grouped_names(q: &Query) -> HashSet<String> {
    fn columns(e: &Expr, out: &mut HashSet<String>) {
        struct Columns<'o>(&'o mut HashSet<String>);
        impl Visitor for Columns<'_> {
            type Break = ();
            fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
                if let Some(name) = written(e).and_then(|mut w| w.pop()) {
                    self.0.insert(name);
                }
                ControlFlow::Continue(())
            }
        }
        let _ = e.visit(&mut Columns(out));
    }
    struct Keys(HashSet<String>);
    impl Visitor for Keys {
        type Break = ();
        fn pre_visit_select(&mut self, s: &sqlparser::ast::Select) -> ControlFlow<()> {
            let GroupByExpr::Expressions(keys, _) = &s.group_by else { return ControlFlow::Continue(()) };
            for key in keys {
                columns(key, &mut self.0);
                // `GROUP BY 2`, `GROUP BY total`: the select item it names.
                let position = match key {
                    Expr::Value(v) => v.to_string().parse::<usize>().ok(),
                    _ => None,
                };
                let output = written(key).filter(|w| w.len() == 1).and_then(|mut w| w.pop());
                for (i, item) in s.projection.iter().enumerate() {
                    let (e, alias) = match item {
                        SelectItem::UnnamedExpr(e) => (e, None),
                        SelectItem::ExprWithAlias { expr, alias } => (expr, Some(fold(alias))),
                        _ => continue,
                    };
                    if position == Some(i + 1) || (output.is_some() && alias == output) {
                        columns(e, &mut self.0);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut k = Keys(HashSet::new());
    let _ = q.visit(&mut k);
    k.0
}

struct KeySums<'a> {
    schema: &'a Schema,
    walk: Walk<'a>,
    /// Column names some GROUP BY of the statement groups on.
    grouped: HashSet<String>,
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
        // Summed where a GROUP BY groups on a column of its name (`sum(DISTINCT k) ... GROUP BY
        // k`, or a key grouped on itself): it may be k itself, the group's name.
        if written(&arg).and_then(|mut w| w.pop()).is_some_and(|n| self.grouped.contains(&n)) {
            return;
        }
        let Some((t, c)) = resolve_at(self.schema, &self.walk.levels, &arg) else { return };
        let table = &self.schema.tables[t];
        // A table name several schemas hold: which one PostgreSQL reads depends on the path.
        if !identifies(self.schema, t, c) || self.schema.name_in_several_schemas(&table.name) {
            return;
        }
        let Expr::Function(f) = e else { return };
        if !own_function(&f.name) {
            return;
        }
        let Some(ObjectNamePart::Identifier(name)) = f.name.0.last_mut() else { return };
        let (table, column) = (&self.schema.tables[t].name, &self.schema.tables[t].columns[c].name);
        self.fired.push(format!("function: sum({arg}) adds up the key {table}.{column} -> count({arg})"));
        *name = Ident::new("count");
    }
}

/// A key summed, anywhere in the statement, counts it instead.
pub(super) fn summed_keys(schema: &Schema, q: &mut Query, fired: &mut Vec<String>) {
    let ctes = cte_names(&*q).into_iter().collect();
    let grouped = grouped_names(q);
    walk_with(q, &mut KeySums { schema, walk: Walk::new(schema, ctes), grouped, fired });
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

/// Whether `e` is `count(DISTINCT key)` itself (no FILTER, no window).
fn counts_distinct(e: &Expr, key: &[String]) -> bool {
    let Expr::Function(f) = e else { return false };
    let distinct = matches!(&f.args, FunctionArguments::List(l) if l.duplicate_treatment == Some(DuplicateTreatment::Distinct) && l.clauses.is_empty());
    distinct
        && f.filter.is_none()
        && own_function(&f.name)
        && aggregate_name(e).as_deref() == Some("count")
        && single_arg(e).as_ref().and_then(written).as_deref() == Some(key)
}

/// The GROUP BY key (as written) of a statement's own query whose SELECT lists nothing but
/// `count(DISTINCT key)`: a list of ones, one a group.
fn grouped_by_counted(q: &Query) -> Option<String> {
    // The statement's query itself, not a parenthesised one: an ORDER BY outside the
    // parentheses reads the SELECT inside.
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    // An OFFSET skips rows of the groups' list: on one count it would return nothing; a FETCH
    // is declined with it (`OFFSET n ROWS FETCH ...`).
    let offset = matches!(&q.limit_clause, Some(LimitClause::LimitOffset { offset: Some(_), .. }) | Some(LimitClause::OffsetCommaLimit { .. }));
    if offset || q.fetch.is_some() {
        return None;
    }
    let GroupByExpr::Expressions(keys, modifiers) = &s.group_by else { return None };
    let ([key], true, None) = (keys.as_slice(), modifiers.is_empty(), &s.having) else { return None };
    if matches!(s.distinct, Some(Distinct::On(_))) || !s.named_window.is_empty() || s.qualify.is_some() {
        return None;
    }
    let key_written = written(key)?;
    if s.projection.is_empty() {
        return None;
    }
    let mut aliases = Vec::new();
    for p in &s.projection {
        let e = match p {
            SelectItem::UnnamedExpr(e) => e,
            SelectItem::ExprWithAlias { expr, alias } => {
                aliases.push(fold(alias));
                expr
            }
            _ => return None,
        };
        if !counts_distinct(e, &key_written) {
            return None;
        }
    }
    if let Some(order) = &q.order_by {
        let OrderByKind::Expressions(exprs) = &order.kind else { return None };
        // Without groups, ORDER BY may name the count only: its alias, alone, or the count.
        let the_count = |e: &Expr| match e {
            Expr::Identifier(i) => aliases.contains(&fold(i)),
            e => counts_distinct(e, &key_written),
        };
        if !exprs.iter().all(|o| the_count(&o.expr)) {
            return None;
        }
    }
    Some(key.to_string())
}

/// Drops the GROUP BY of a statement whose SELECT lists nothing but `count(DISTINCT` of the
/// GROUP BY's one key`)`: every group counts 1, and nothing names the groups. Only the
/// statement's own query: a subquery's rows may be counted, averaged or tested for existence.
pub(super) fn grouping_by_the_counted(q: &mut Query, fired: &mut Vec<String>) {
    let Some(key) = grouped_by_counted(q) else { return };
    if let SetExpr::Select(s) = q.body.as_mut() {
        s.group_by = GroupByExpr::Expressions(vec![], vec![]);
        fired.push(format!("function: GROUP BY {key} makes count(DISTINCT {key}) 1 in every group -> one count"));
    }
}

#[cfg(test)]
mod tests;
