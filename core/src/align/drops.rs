//! Joins that only filter or repeat rows: a lookup joined on a NOT NULL foreign key that
//! PostgreSQL enforces to its declared primary key, whose columns nothing else reads, where no
//! earlier outer join can leave the key NULL. The alignment runs this drop and the drop of joins
//! the question does not mention in passes, until neither fires.

use super::{body_select, find_table, fold, names_used, relation_name, resolve, Scope};
use crate::schema::{ForeignKey, Schema};
use sqlparser::ast::{BinaryOperator, Expr, JoinConstraint, JoinOperator, OrderBy, Query, TableFactor};

/// Whether a join matches columns by name (USING, NATURAL), which no expression shows.
fn joined_by_names(op: &JoinOperator) -> bool {
    use JoinOperator as J;
    let c = match op {
        J::Join(c) | J::Inner(c) | J::Left(c) | J::LeftOuter(c) | J::Right(c) | J::RightOuter(c) | J::FullOuter(c) | J::CrossJoin(c) => c,
        J::Semi(c) | J::LeftSemi(c) | J::RightSemi(c) | J::Anti(c) | J::LeftAnti(c) | J::RightAnti(c) => c,
        _ => return false,
    };
    matches!(c, JoinConstraint::Using(_) | JoinConstraint::Natural)
}

/// Whether anything in `s` or the statement's ORDER BY, but the ON condition of join `i`, uses
/// the table `t` joined there (as `me`, its alias or name): a qualifier, a `*`, a bare name `t`
/// has and no other item of the FROM has (one inside a subquery may be its own table's: counted
/// all the same), or another join by USING or NATURAL (its columns are no expressions).
pub(super) fn used_outside_on(schema: &Schema, s: &sqlparser::ast::Select, order: Option<&OrderBy>, i: usize, me: &str, t: usize) -> bool {
    let Some(from) = s.from.first() else { return true };
    let mut outer: Vec<Option<usize>> = Vec::new();
    for (k, item) in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)).enumerate() {
        if k != i + 1 {
            outer.push(match item {
                TableFactor::Table { name, args: None, .. } => find_table(schema, name),
                _ => None,
            });
        }
    }
    let by_names = from.joins.iter().enumerate().any(|(k, j)| k != i && joined_by_names(&j.join_operator));
    // Something of the FROM that is no table of the catalog (a subquery, a function) may
    // hold any name.
    if by_names || outer.iter().any(Option::is_none) {
        return true;
    }
    let mut others = s.clone();
    others.from[0].joins[i].join_operator = JoinOperator::CrossJoin(JoinConstraint::None);
    let (mut quals, mut bare) = names_used(&others);
    if let Some(o) = order {
        let (q2, b2) = names_used(o);
        quals.extend(q2);
        bare.extend(b2);
    }
    let bare_in_t = bare.iter().any(|b| {
        schema.tables[t].has_column(b) && !outer.iter().flatten().any(|&o| o != t && schema.tables[o].has_column(b))
    });
    quals.iter().any(|q| q == me || q == "*") || bare.iter().any(|b| b == "*") || bare_in_t
}

/// Whether a join keeps every row of both sides it joins (none comes back NULL-extended).
fn keeps_rows(op: &JoinOperator) -> bool {
    matches!(op, JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_))
}

/// The inner join `i` of a one-item FROM: (its ON condition, its table's index, how the statement
/// refers to it, its name as written). None after an outer join: there a column it equates may
/// be NULL in a row the inner join then removes, so dropping it would keep that row.
pub(super) fn inner_join(schema: &Schema, s: &sqlparser::ast::Select, i: usize) -> Option<(Expr, usize, String, String)> {
    let from = s.from.first()?;
    if !from.joins.iter().take(i).all(|j| keeps_rows(&j.join_operator)) {
        return None;
    }
    let join = from.joins.get(i)?;
    let constraint = match &join.join_operator {
        JoinOperator::Join(JoinConstraint::On(c)) | JoinOperator::Inner(JoinConstraint::On(c)) => c.clone(),
        _ => return None,
    };
    let TableFactor::Table { name, alias, args: None, .. } = &join.relation else { return None };
    let t = find_table(schema, name)?;
    let me = alias.as_ref().map(|a| fold(&a.name)).or_else(|| relation_name(name).map(|(_, n)| n)).unwrap_or_default();
    Some((constraint, t, me, name.to_string()))
}

/// The one-column foreign keys from `fk_side` (table, column) to `ref_side`.
fn keys_between(schema: &Schema, fk_side: (usize, usize), ref_side: (usize, usize)) -> impl Iterator<Item = &ForeignKey> {
    let (a, b) = (&schema.tables[fk_side.0], &schema.tables[ref_side.0]);
    let (from, to) = (&a.columns[fk_side.1].ident, &b.columns[ref_side.1].ident);
    schema.foreign_keys.iter().filter(move |fk| {
        fk.table == a.ident
            && fk.ref_table == b.ident
            && matches!(fk.columns.as_slice(), [c] if c == from)
            && matches!(fk.ref_columns.as_slice(), [c] if c == to)
    })
}

/// Whether `fk_side` (table, column) holds a one-column foreign key to `ref_side`.
pub(super) fn references(schema: &Schema, fk_side: (usize, usize), ref_side: (usize, usize)) -> bool {
    keys_between(schema, fk_side, ref_side).next().is_some()
}

/// Whether `fk_side` holds a foreign key to `ref_side` that PostgreSQL enforces, and `ref_side`
/// is its table's declared primary key: the join finds exactly one row for every row.
fn finds_one_row(schema: &Schema, fk_side: (usize, usize), ref_side: (usize, usize)) -> bool {
    let b = &schema.tables[ref_side.0];
    !b.key_inferred
        && b.primary_key.len() == 1
        && b.columns[ref_side.1].name == b.primary_key[0]
        && schema.tables[fk_side.0].columns[fk_side.1].not_null
        && keys_between(schema, fk_side, ref_side).any(|fk| fk.enforced && !fk.inferred)
}

pub(super) fn redundant_joins(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    let order = q.order_by.clone();
    let Some(s) = body_select(q) else { return };
    if s.from.len() != 1 {
        return;
    }
    let mut i = 0;
    while i < s.from[0].joins.len() {
        let Some((constraint, t, me, name)) = inner_join(schema, s, i) else {
            i += 1;
            continue;
        };
        if used_outside_on(schema, s, order.as_ref(), i, &me, t) {
            i += 1;
            continue;
        }
        // ON other.fk = t.pk, with a NOT NULL, enforced foreign key to t's single-column
        // primary key.
        let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = &constraint else {
            i += 1;
            continue;
        };
        let sides = [(left, right), (right, left)];
        let redundant = sides.iter().any(|(mine, theirs)| {
            let (Some((ta, ca)), Some((tb, cb))) = (resolve(schema, sc, mine), resolve(schema, sc, theirs)) else { return false };
            ta == t && tb != t && finds_one_row(schema, (tb, cb), (ta, ca))
        });
        if redundant {
            fired.push(format!("function: redundant join of {name} dropped"));
            s.from[0].joins.remove(i);
        } else {
            i += 1;
        }
    }
}
