//! The FROM items each SELECT of a statement reads, as PostgreSQL resolves a name: a reference
//! may read its own SELECT's items or an enclosing one's, the innermost that declares the name,
//! never those only a subquery, a sibling subquery or another WITH block reads. Shared by the
//! rules that read a column's table (column names, key comparisons).

use super::{find_table, fold, relation_name};
use crate::schema::Schema;
use sqlparser::ast::{Expr, OrderBy, Query, Select, SetExpr, TableFactor, VisitMut, VisitorMut};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// One FROM item: the name a reference qualifies it with (its alias, else its relation's name),
/// and the table it reads when it is a table of the schema; None for anything whose columns the
/// rules do not know (a CTE, a derived table, a function, a join with an alias, a relation not
/// shown, a FROM item of another kind).
#[derive(Clone)]
pub(super) struct Item {
    pub(super) name: Option<String>,
    pub(super) table: Option<usize>,
}

impl Item {
    fn opaque() -> Item {
        Item { name: None, table: None }
    }
}

/// The FROM items of a SELECT (not its subqueries'). `ctes`: the statement's CTE names, folded
/// (a FROM item named as a CTE reads the CTE, whatever table has the name too).
fn level_items(schema: &Schema, ctes: &HashSet<String>, s: &Select) -> Vec<Item> {
    fn factor(schema: &Schema, ctes: &HashSet<String>, t: &TableFactor, out: &mut Vec<Item>) {
        match t {
            TableFactor::Table { name, alias, args: None, .. } if alias.as_ref().is_none_or(|a| a.columns.is_empty()) => {
                let written = relation_name(name);
                let cte = matches!(&written, Some((None, n)) if ctes.contains(n));
                let table = if cte { None } else { find_table(schema, name) };
                out.push(Item { name: alias.as_ref().map(|a| fold(&a.name)).or(written.map(|(_, n)| n)), table });
            }
            TableFactor::NestedJoin { table_with_joins, alias: None } => {
                factor(schema, ctes, &table_with_joins.relation, out);
                for j in &table_with_joins.joins {
                    factor(schema, ctes, &j.relation, out);
                }
            }
            TableFactor::Derived { alias, .. }
            | TableFactor::Function { alias, .. }
            | TableFactor::UNNEST { alias, .. }
            | TableFactor::NestedJoin { alias, .. }
            | TableFactor::Table { alias, .. } => out.push(Item { name: alias.as_ref().map(|a| fold(&a.name)), table: None }),
            _ => out.push(Item::opaque()),
        }
    }
    let mut out = Vec::new();
    for twj in &s.from {
        factor(schema, ctes, &twj.relation, &mut out);
        for j in &twj.joins {
            factor(schema, ctes, &j.relation, &mut out);
        }
    }
    out
}

/// The FROM items visible at each point of a walk over a statement, kept by `walk_with`.
pub(super) struct Walk<'s> {
    schema: &'s Schema,
    /// The statement's CTE names, folded.
    ctes: HashSet<String>,
    /// The FROM items of each enclosing SELECT (or query's ORDER BY), outermost first.
    pub(super) levels: Vec<Vec<Item>>,
    /// The FROM items of each enclosing query's body, for its ORDER BY.
    bodies: Vec<Vec<Item>>,
}

impl<'s> Walk<'s> {
    pub(super) fn new(schema: &'s Schema, ctes: HashSet<String>) -> Walk<'s> {
        Walk { schema, ctes, levels: Vec::new(), bodies: Vec::new() }
    }

    fn enter_query(&mut self, q: &Query) {
        let mut body = q.body.as_ref();
        // `(SELECT ... FROM t) ORDER BY t.x`: the parenthesised query's FROM.
        while let SetExpr::Query(inner) = body {
            if inner.order_by.is_some() || inner.limit_clause.is_some() || inner.with.is_some() {
                break;
            }
            body = inner.body.as_ref();
        }
        let items = match body {
            SetExpr::Select(s) => self.items(s),
            // Set operations: ORDER BY reads output names only; nothing to resolve with.
            _ => vec![Item::opaque()],
        };
        self.bodies.push(items);
    }

    /// A query's ORDER BY reads its body's FROM items (its CTEs never see them).
    fn enter_order_by(&mut self) {
        let items = self.bodies.last_mut().map(std::mem::take).unwrap_or_default();
        self.levels.push(items);
    }

    fn leave_order_by(&mut self) {
        if let (Some(items), Some(body)) = (self.levels.pop(), self.bodies.last_mut()) {
            *body = items;
        }
    }

    /// The FROM items of a SELECT somewhere in the statement (a subquery's, say).
    pub(super) fn items(&self, s: &Select) -> Vec<Item> {
        level_items(self.schema, &self.ctes, s)
    }
}

/// A rule applied to each expression, after its parts, with the FROM items visible there.
pub(super) trait WalkingRule<'s> {
    fn walk(&mut self) -> &mut Walk<'s>;
    fn expr(&mut self, e: &mut Expr);
}

/// Applies `rule` to every expression of `node`, its walk kept at each query, ORDER BY and
/// SELECT.
pub(super) fn walk_with<'s, N: VisitMut, R: WalkingRule<'s>>(node: &mut N, rule: &mut R) {
    let _ = node.visit(&mut Walker(rule, std::marker::PhantomData));
}

struct Walker<'r, 's, R: WalkingRule<'s>>(&'r mut R, std::marker::PhantomData<&'s ()>);

impl<'s, R: WalkingRule<'s>> VisitorMut for Walker<'_, 's, R> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.0.walk().enter_query(q);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.0.walk().bodies.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_order_by(&mut self, _: &mut OrderBy) -> ControlFlow<()> {
        self.0.walk().enter_order_by();
        ControlFlow::Continue(())
    }

    fn post_visit_order_by(&mut self, _: &mut OrderBy) -> ControlFlow<()> {
        self.0.walk().leave_order_by();
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, s: &mut Select) -> ControlFlow<()> {
        let items = self.0.walk().items(s);
        self.0.walk().levels.push(items);
        ControlFlow::Continue(())
    }

    fn post_visit_select(&mut self, _: &mut Select) -> ControlFlow<()> {
        self.0.walk().levels.pop();
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        self.0.expr(e);
        ControlFlow::Continue(())
    }
}

/// What a qualifier names where it is written.
pub(super) enum Qualified {
    /// A table of the schema: (level, item).
    Table(usize, usize),
    /// Something whose columns are not known.
    Opaque,
    /// No FROM item visible there has that name.
    Undeclared,
}

/// The FROM item a qualifier (folded) names: the innermost level (of `levels`, outermost
/// first) that has an item of that name.
pub(super) fn qualified(levels: &[Vec<Item>], q: &str) -> Qualified {
    for (l, level) in levels.iter().enumerate().rev() {
        let named: Vec<usize> = (0..level.len()).filter(|&i| level[i].name.as_deref() == Some(q)).collect();
        match named.as_slice() {
            [] => continue,
            [i] => return level[*i].table.map_or(Qualified::Opaque, |_| Qualified::Table(l, *i)),
            _ => return Qualified::Opaque,
        }
    }
    Qualified::Undeclared
}

/// The tables a SELECT's FROM reads directly (joins included), by index.
pub(super) fn from_tables(schema: &Schema, s: &Select) -> Vec<usize> {
    let mut out = Vec::new();
    for f in &s.from {
        for t in std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)) {
            if let TableFactor::Table { name, args: None, .. } = t {
                if let Some(i) = find_table(schema, name) {
                    out.push(i);
                }
            }
        }
    }
    out
}

/// (table, column) of a column reference, as PostgreSQL resolves it from `levels` (the FROM
/// items of each enclosing SELECT, outermost first): a qualified one by the innermost item of
/// that name, an unqualified one by the innermost level whose tables hold it (exactly one of
/// them). None where the name may read something whose columns are not known (a CTE, a
/// derived table, a function).
pub(super) fn resolve_at(schema: &Schema, levels: &[Vec<Item>], e: &Expr) -> Option<(usize, usize)> {
    match e {
        Expr::Nested(inner) => resolve_at(schema, levels, inner),
        Expr::CompoundIdentifier(p) if p.len() == 2 => {
            let Qualified::Table(l, i) = qualified(levels, &fold(&p[0])) else { return None };
            let t = levels[l][i].table?;
            schema.tables[t].columns.iter().position(|c| c.name == fold(&p[1])).map(|c| (t, c))
        }
        Expr::Identifier(i) => {
            let name = fold(i);
            for level in levels.iter().rev() {
                if level.iter().any(|it| it.table.is_none()) {
                    return None;
                }
                let hits: Vec<(usize, usize)> = level
                    .iter()
                    .filter_map(|it| it.table)
                    .filter_map(|t| schema.tables[t].columns.iter().position(|c| c.name == name).map(|c| (t, c)))
                    .collect();
                match hits.as_slice() {
                    [] => continue,
                    [one] => return Some(*one),
                    _ => return None,
                }
            }
            None
        }
        _ => None,
    }
}
