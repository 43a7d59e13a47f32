//! Agent alignment of key comparisons: a foreign key compared with a column of the table it
//! points to, other than the one it references, of another type, means the referenced column.
//!
//! `SELECT id, maker FROM car_makers WHERE maker IN (SELECT maker FROM model_list ...)`, where
//! model_list.maker (integer) holds car_makers.id: PostgreSQL refuses `text = integer`; the model
//! read model_list.maker as the maker's name. The comparison becomes `id IN (...)`.

use super::{find_table, fold, ident, Scope};
use crate::schema::Schema;
use sqlparser::ast::{BinaryOperator, Expr, Query, Select, SelectItem, SetExpr, TableFactor, VisitMut, VisitorMut};
use std::ops::ControlFlow;

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

/// (table, column) of a column reference: a qualified one by the statement's names, an
/// unqualified one by the innermost query level whose tables hold it (exactly one of them).
fn resolve_at(schema: &Schema, sc: &Scope, levels: &[Vec<usize>], e: &Expr) -> Option<(usize, usize)> {
    match e {
        Expr::Nested(inner) => resolve_at(schema, sc, levels, inner),
        Expr::CompoundIdentifier(p) if p.len() == 2 => {
            let t = *sc.names.get(&fold(&p[0]))?;
            schema.tables[t].columns.iter().position(|c| c.name == fold(&p[1])).map(|c| (t, c))
        }
        Expr::Identifier(i) => {
            let name = fold(i);
            for level in levels.iter().rev() {
                let hits: Vec<(usize, usize)> =
                    level.iter().filter_map(|&t| schema.tables[t].columns.iter().position(|c| c.name == name).map(|c| (t, c))).collect();
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

/// The one column a subquery returns, with the tables it reads.
fn returned(schema: &Schema, q: &Query) -> Option<(Expr, Vec<usize>)> {
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let [item] = s.projection.as_slice() else { return None };
    let e = match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
        _ => return None,
    };
    Some((e, from_tables(schema, s)))
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
    sc: &'a Scope,
    /// The tables of each enclosing query, outermost first.
    levels: Vec<Vec<usize>>,
    fired: &'a mut Vec<String>,
}

impl Comparisons<'_> {
    /// Rewrites `other` when it is compared with the foreign key `key` (resolved at `key_levels`).
    fn fix(&mut self, other: &mut Expr, key: &Expr, key_levels: &[Vec<usize>]) {
        let Some(k) = resolve_at(self.schema, self.sc, key_levels, key) else { return };
        let Some(o) = resolve_at(self.schema, self.sc, &self.levels, other) else { return };
        if let Some(r) = meant(self.schema, k, o) {
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

impl VisitorMut for Comparisons<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        let tables = match q.body.as_ref() {
            SetExpr::Select(s) => from_tables(self.schema, s),
            _ => Vec::new(),
        };
        self.levels.push(tables);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.levels.pop();
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::Eq | BinaryOperator::NotEq, right } => {
                let levels = self.levels.clone();
                let (l, r) = (left.as_ref().clone(), right.as_ref().clone());
                self.fix(left, &r, &levels);
                if l == **left {
                    self.fix(right, &l, &levels);
                }
            }
            Expr::InSubquery { expr, subquery, .. } => {
                if let Some((key, tables)) = returned(self.schema, subquery) {
                    let mut levels = self.levels.clone();
                    levels.push(tables);
                    self.fix(expr, &key, &levels);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Comparisons of a foreign key with the wrong column of the table it points to, everywhere in
/// the statement (joins, WHERE, subqueries).
pub(super) fn key_comparisons(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    if schema.foreign_keys.is_empty() {
        return;
    }
    let _ = VisitMut::visit(q, &mut Comparisons { schema, sc, levels: Vec::new(), fired });
}
