//! The FROM items each SELECT of a statement reads, as PostgreSQL resolves a name: a reference
//! may read its own SELECT's items or an enclosing one's, the innermost that declares the name,
//! never those only a subquery, a sibling subquery or another WITH block reads. Shared by the
//! rules that read a column's table (column names, key comparisons).

use super::{find_table, fold, relation_name};
use crate::schema::Schema;
use sqlparser::ast::{Query, Select, SetExpr, TableFactor};
use std::collections::HashSet;

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
    pub(super) fn opaque() -> Item {
        Item { name: None, table: None }
    }
}

/// The FROM items of a SELECT (not its subqueries'). `ctes`: the statement's CTE names, folded
/// (a FROM item named as a CTE reads the CTE, whatever table has the name too).
pub(super) fn level_items(schema: &Schema, ctes: &HashSet<String>, s: &Select) -> Vec<Item> {
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

/// The FROM items visible at each point of a walk over a statement: a visitor calls `enter_*`
/// and `leave_*` from its `pre_visit_*` and `post_visit_*` of queries, ORDER BYs and SELECTs.
pub(super) struct Walk {
    /// The statement's CTE names, folded.
    ctes: HashSet<String>,
    /// The FROM items of each enclosing SELECT (or query's ORDER BY), outermost first.
    pub(super) levels: Vec<Vec<Item>>,
    /// The FROM items of each enclosing query's body, for its ORDER BY.
    bodies: Vec<Vec<Item>>,
}

impl Walk {
    pub(super) fn new(ctes: HashSet<String>) -> Walk {
        Walk { ctes, levels: Vec::new(), bodies: Vec::new() }
    }

    pub(super) fn enter_query(&mut self, schema: &Schema, q: &Query) {
        let mut body = q.body.as_ref();
        // `(SELECT ... FROM t) ORDER BY t.x`: the parenthesised query's FROM.
        while let SetExpr::Query(inner) = body {
            if inner.order_by.is_some() || inner.limit_clause.is_some() || inner.with.is_some() {
                break;
            }
            body = inner.body.as_ref();
        }
        let items = match body {
            SetExpr::Select(s) => level_items(schema, &self.ctes, s),
            // Set operations: ORDER BY reads output names only; nothing to resolve with.
            _ => vec![Item::opaque()],
        };
        self.bodies.push(items);
    }

    pub(super) fn leave_query(&mut self) {
        self.bodies.pop();
    }

    /// A query's ORDER BY reads its body's FROM items (its CTEs never see them).
    pub(super) fn enter_order_by(&mut self) {
        let items = self.bodies.last_mut().map(std::mem::take).unwrap_or_default();
        self.levels.push(items);
    }

    pub(super) fn leave_order_by(&mut self) {
        if let (Some(items), Some(body)) = (self.levels.pop(), self.bodies.last_mut()) {
            *body = items;
        }
    }

    pub(super) fn enter_select(&mut self, schema: &Schema, s: &Select) {
        self.levels.push(level_items(schema, &self.ctes, s));
    }

    pub(super) fn leave_select(&mut self) {
        self.levels.pop();
    }

    /// The FROM items of a SELECT somewhere in the statement (a subquery's, say).
    pub(super) fn items(&self, schema: &Schema, s: &Select) -> Vec<Item> {
        level_items(schema, &self.ctes, s)
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
