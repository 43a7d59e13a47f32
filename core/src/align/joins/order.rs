//! Agent alignment of a chain of inner joins written in the wrong order: `stadium AS s JOIN
//! singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN concert AS c ON sic.concert_id
//! = c.concert_id`, where singer_in_concert lacks stadium_id and concert, joined next, has it,
//! linked to the stadium's by a foreign key. PostgreSQL refuses the query (the column does not
//! exist); the model meant concert first. Inner joins give the same rows in any order, so the
//! two joined tables swap places and the first condition reads the column from concert.

use super::{column_ident, fold, key_equality, linked, on_mut, only_table, relation_name, FromItem};
use crate::align::Scope;
use crate::schema::Schema;
use sqlparser::ast::{Expr, Ident, TableFactor, TableWithJoins};

/// The identifier a FROM item is referred to by, as written (its alias, else its table's name).
fn referred_ident(t: &TableFactor) -> Option<Ident> {
    match t {
        TableFactor::Table { alias: Some(a), .. } => Some(a.name.clone()),
        TableFactor::Table { name, alias: None, .. } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

/// Swaps join `k` (l) and join `k + 1` (b) of `from` where join k's only condition equates an
/// earlier table's column with one l lacks that b has, the two linked by a foreign key, and no
/// other table of the FROM has a column of that name, and join k + 1's only condition equates a
/// column of l with one of b; both inner joins, no CTE in the FROM named like a table. Join
/// k + 1's condition sees the same tables after the swap; join k's reads the column from b.
/// Whether it swapped.
pub(super) fn joined_later(schema: &Schema, sc: &Scope, keys: &[(&str, &str, &str, &str)], (from, items): (&mut TableWithJoins, &[FromItem]), k: usize, fired: &mut Vec<String>) -> bool {
    let (Some(l_name), Some(b_name)) = (items.get(k + 1).and_then(|i| i.0.clone()), items.get(k + 2).and_then(|i| i.0.clone())) else { return false };
    let table = |i: usize| items.get(i).and_then(|x| x.1).map(|t| &schema.tables[t]);
    let (Some(tl), Some(tb)) = (table(k + 1), table(k + 2)) else { return false };
    if from.joins.len() < k + 2 {
        return false;
    }
    // Join k + 1 joins b to l: its condition equates a column of each (else l, moved after b,
    // would join to nothing: a cross join).
    let links = on_mut(&mut from.joins[k + 1].join_operator).and_then(|e| key_equality(e)).map(|(a, _, b, _)| {
        let (a, b) = (fold(a), fold(b));
        (a == l_name && b == b_name) || (a == b_name && b == l_name)
    });
    if links != Some(true) {
        return false;
    }
    // A CTE named like a catalog table is not that table.
    let cte = |t: &TableFactor| matches!(t, TableFactor::Table { name, .. } if relation_name(name).is_some_and(|(s, n)| s.is_none() && sc.other.contains(&n)));
    if std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)).any(cte) {
        return false;
    }
    let Some(b_ident) = referred_ident(&from.joins[k + 1].relation) else { return false };
    let Some(on) = on_mut(&mut from.joins[k].join_operator) else { return false };
    let Some((q1, c1, q2, c2)) = key_equality(on) else { return false };
    let (l_left, (eq, ec), lc) = match (fold(q1), fold(q2)) {
        (a, b) if b == l_name && a != l_name => (false, (a, fold(c1)), fold(c2)),
        (a, b) if a == l_name && b != l_name => (true, (b, fold(c2)), fold(c1)),
        _ => return false,
    };
    // The earlier side: one item before l of that name, a table of the catalog's.
    let Some(te) = only_table(schema, &items[..items.len().min(k + 1)], &eq) else { return false };
    if [&eq, &l_name, &b_name].iter().any(|n| sc.other.contains(n)) || items.iter().filter(|(n, _)| n.as_deref() == Some(b_name.as_str())).count() != 1 {
        return false;
    }
    if [te.oid, tl.oid].contains(&tb.oid) || te.oid == tl.oid || column_ident(tl, &lc).is_some() {
        return false;
    }
    let (Some(ex), Some(bx)) = (column_ident(te, &ec), column_ident(tb, &lc)) else { return false };
    // Another table of the FROM with that column: which one was meant is not known.
    let holders = items.iter().filter(|(_, t)| t.is_some_and(|t| schema.tables[t].has_column(&lc))).count();
    if holders != 1 + usize::from(te.has_column(&lc)) || !linked(keys, (te.ident.as_str(), ex), (tb.ident.as_str(), bx)) {
        return false;
    }
    let Expr::BinaryOp { left, right, .. } = on else { return false };
    if let Expr::CompoundIdentifier(p) = (if l_left { left } else { right }).as_mut() {
        p[0] = b_ident;
    }
    let (first, second) = from.joins.split_at_mut(k + 1);
    std::mem::swap(&mut first[k].relation, &mut second[0].relation);
    fired.push(format!("agent: {} joined before {}, which lacks {lc}", tb.name, tl.name));
    true
}
