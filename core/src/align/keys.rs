//! Agent alignment of key comparisons: a foreign key compared with a column of the table it
//! points to, other than the one it references, of another type, means the referenced column.
//!
//! `SELECT id, maker FROM car_makers WHERE maker IN (SELECT maker FROM model_list ...)`, where
//! model_list.maker (integer) holds car_makers.id: PostgreSQL refuses `text = integer`; the model
//! read model_list.maker as the maker's name. The comparison becomes `id IN (...)`.

use super::levels::{resolve_at, walk_with, Item, Walk, WalkingRule};
use super::names::cte_names;
use super::ident;
use crate::schema::Schema;
use sqlparser::ast::{BinaryOperator, Expr, Query, SelectItem, SetExpr};

/// The one column a subquery returns, with the FROM items it reads.
fn returned(walk: &Walk, q: &Query) -> Option<(Expr, Vec<Item>)> {
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let [item] = s.projection.as_slice() else { return None };
    let e = match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
        _ => return None,
    };
    Some((e, walk.items(s)))
}

/// The column `key` (a foreign key) references, when `other` is another column of that table
/// with a type of another kind than the key's: (table, referenced column).
fn meant(schema: &Schema, key: (usize, usize), other: (usize, usize)) -> Option<usize> {
    let (kt, kc) = (&schema.tables[key.0], &schema.tables[key.0].columns[key.1]);
    let fk = schema
        .foreign_keys
        .iter()
        .find(|fk| fk.table == kt.ident && fk.columns.len() == 1 && fk.columns[0] == kc.ident && fk.ref_columns.len() == 1)?;
    let rt = &schema.tables[other.0];
    if fk.ref_table != rt.ident {
        return None;
    }
    let referenced = rt.columns.iter().position(|c| c.ident == fk.ref_columns[0])?;
    let (o, r) = (&rt.columns[other.1], &rt.columns[referenced]);
    (referenced != other.1 && !o.category.is_empty() && o.category != kc.category && r.category == kc.category).then_some(referenced)
}

/// `e`, a reference to a column, made a reference to `column` of the same table (written the
/// same way: qualified or not).
fn rename(e: &mut Expr, column: &str) {
    match e {
        Expr::Nested(inner) => rename(inner, column),
        Expr::Identifier(i) => *i = ident(column),
        Expr::CompoundIdentifier(p) => {
            if let Some(last) = p.last_mut() {
                *last = ident(column);
            }
        }
        _ => {}
    }
}

struct Comparisons<'a> {
    schema: &'a Schema,
    /// The FROM items visible where the walk is.
    walk: Walk<'a>,
    fired: &'a mut Vec<String>,
}

impl Comparisons<'_> {
    /// Rewrites `other` when it is compared with the foreign key `key` (resolved at `key_levels`).
    fn fix(&mut self, other: &mut Expr, key: &Expr, key_levels: &[Vec<Item>]) {
        let Some(k) = resolve_at(self.schema, key_levels, key) else { return };
        let Some(o) = resolve_at(self.schema, &self.walk.levels, other) else { return };
        if let Some(r) = meant(self.schema, k, o) {
            // The new name must read that column where it is written: a bare `id` in a subquery
            // could read the subquery's own table, or two tables'.
            let mut renamed = other.clone();
            rename(&mut renamed, &self.schema.tables[o.0].columns[r].name);
            if resolve_at(self.schema, &self.walk.levels, &renamed) != Some((o.0, r)) {
                return;
            }
            let (t, from, to) = (&self.schema.tables[o.0], &self.schema.tables[o.0].columns[o.1], &self.schema.tables[o.0].columns[r]);
            let kt = &self.schema.tables[k.0];
            self.fired.push(format!(
                "agent: {}.{} compared with {}.{} -> {}.{} (the key it references)",
                t.name, from.name, kt.name, kt.columns[k.1].name, t.name, to.name
            ));
            rename(other, &to.name);
        }
    }
}

impl<'a> WalkingRule<'a> for Comparisons<'a> {
    fn walk(&mut self) -> &mut Walk<'a> {
        &mut self.walk
    }

    fn expr(&mut self, e: &mut Expr) {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::Eq | BinaryOperator::NotEq, right } => {
                let levels = self.walk.levels.clone();
                let (l, r) = (left.as_ref().clone(), right.as_ref().clone());
                self.fix(left, &r, &levels);
                if l == **left {
                    self.fix(right, &l, &levels);
                }
            }
            Expr::InSubquery { expr, subquery, .. } => {
                if let Some((key, items)) = returned(&self.walk, subquery) {
                    let mut levels = self.walk.levels.clone();
                    levels.push(items);
                    self.fix(expr, &key, &levels);
                }
            }
            _ => {}
        }
    }
}

/// Comparisons of a foreign key with the wrong column of the table it points to, everywhere in
/// the statement (joins, WHERE, subqueries).
pub(super) fn key_comparisons(schema: &Schema, q: &mut Query, fired: &mut Vec<String>) {
    if schema.foreign_keys.is_empty() {
        return;
    }
    let ctes = cte_names(&*q).into_iter().collect();
    walk_with(q, &mut Comparisons { schema, walk: Walk::new(schema, ctes), fired });
}
