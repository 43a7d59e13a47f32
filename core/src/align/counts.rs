//! Function alignments of counts written as something that never means anything:
//!
//! - a key summed: `sum(sales.id)`, where `sales.id` identifies a row (a table's one-column
//!   declared primary key, a one-column foreign key to a table's primary key, or a table's
//!   primary key that one references), adds up identifiers; the question asked how many
//!   (`count(sales.id)`; 0 where `sum` gave NULL, no rows). Only PostgreSQL's own `sum`
//!   (unqualified or `pg_catalog.sum`), outside a window, on the column itself.
//! - a count grouped by what it counts: `SELECT count(DISTINCT c.id) ... GROUP BY c.id` is a
//!   list of ones, one a group, and nothing names the groups: the question asked for one
//!   number, and the GROUP BY goes. Only where the statement's own SELECT lists nothing else,
//!   the key is written the same way in both, and neither HAVING, grouping sets, `DISTINCT ON`
//!   nor an ORDER BY other than by that count needs the groups; never in a subquery, whose rows
//!   may be counted, averaged or tested for existence.

use super::aggregates::{aggregate_name, single_arg};
use super::levels::{resolve_at, walk_with, Walk, WalkingRule};
use super::names::cte_names;
use super::fold;
use crate::schema::Schema;
use sqlparser::ast::{
    Distinct, DuplicateTreatment, Expr, FunctionArguments, GroupByExpr, Ident, ObjectNamePart, OrderByKind, Query, SelectItem, SetExpr,
};

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
        // PostgreSQL's own sum: another schema's function of that name may mean anything.
        let Some((_, qualifier)) = f.name.0.split_last() else { return };
        let own = match qualifier {
            [] => true,
            [schema] => schema.as_ident().is_some_and(|s| fold(s) == "pg_catalog"),
            _ => false,
        };
        if !own {
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

/// Whether `e` is `count(DISTINCT key)` itself (no FILTER, no window).
fn counts_distinct(e: &Expr, key: &[String]) -> bool {
    let Expr::Function(f) = e else { return false };
    let distinct = matches!(&f.args, FunctionArguments::List(l) if l.duplicate_treatment == Some(DuplicateTreatment::Distinct) && l.clauses.is_empty());
    distinct
        && f.filter.is_none()
        && aggregate_name(e).as_deref() == Some("count")
        && single_arg(e).as_ref().and_then(written).as_deref() == Some(key)
}

/// The GROUP BY key (as written) of a statement's own query whose SELECT lists nothing but
/// `count(DISTINCT key)`: a list of ones, one a group.
fn grouped_by_counted(q: &Query) -> Option<String> {
    // The statement's query itself, not a parenthesised one: an ORDER BY outside the
    // parentheses reads the SELECT inside.
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let GroupByExpr::Expressions(keys, modifiers) = &s.group_by else { return None };
    let ([key], true, None) = (keys.as_slice(), modifiers.is_empty(), &s.having) else { return None };
    if matches!(s.distinct, Some(Distinct::On(_))) || !s.named_window.is_empty() || s.qualify.is_some() {
        return None;
    }
    let key_written = written(key)?;
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
