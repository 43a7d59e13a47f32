//! Agent alignment of joins: a join that equates the keys of two tables no foreign key links,
//! where the foreign keys link them through one third table, joins through that table; so
//! does a join that equates a key to a column the other table lacks, where a third table has
//! that column, linked to the key, and a foreign key to the other table. A join that equates a
//! key to a column the other table lacks, where one foreign key links that very key to the
//! other table, equates the two ends of that foreign key (`cars_data AS d JOIN car_names AS n
//! ON d.makeid = n.makeid`, with cars_data.id -> car_names.makeid: `d.id = n.makeid`).
//!
//! A chain of inner joins written in the wrong order, whose bridge is the table joined next,
//! swaps the two (order.rs).
//!
//! `car_makers JOIN continents ON car_makers.country = continents.contid`, with
//! car_makers.country -> countries.countryid and countries.continent -> continents.contid, reads
//! a country's id as a continent's; the model meant the path through countries.

use super::{fold, relation_name, Scope};
use crate::schema::{Schema, Table};
use sqlparser::ast::{BinaryOperator, Expr, Ident, Join, JoinConstraint, JoinOperator, OrderBy, Query, Select, SelectItem, SetExpr, TableFactor, TableWithJoins, VisitMut, VisitorMut};
use std::ops::ControlFlow;

/// One-column foreign keys: (table ident, column ident, referenced table ident, column ident).
fn key_pairs(schema: &Schema) -> Vec<(&str, &str, &str, &str)> {
    schema
        .foreign_keys
        .iter()
        .filter(|fk| fk.columns.len() == 1 && fk.ref_columns.len() == 1)
        .map(|fk| (fk.table.as_str(), fk.columns[0].as_str(), fk.ref_table.as_str(), fk.ref_columns[0].as_str()))
        .collect()
}

/// Whether `(a, x)` and `(b, y)` are the two ends of one foreign key, either way.
fn linked(keys: &[(&str, &str, &str, &str)], a: (&str, &str), b: (&str, &str)) -> bool {
    keys.iter().any(|&(t, c, rt, rc)| ((t, c) == a && (rt, rc) == b) || ((t, c) == b && (rt, rc) == a))
}

/// Whether a column is one end of some foreign key.
fn is_key(keys: &[(&str, &str, &str, &str)], at: (&str, &str)) -> bool {
    keys.iter().any(|&(t, c, rt, rc)| (t, c) == at || (rt, rc) == at)
}

/// The other ends of the foreign keys `at` is one end of: (table ident, column ident).
fn other_ends<'a>(keys: &[(&'a str, &'a str, &'a str, &'a str)], at: (&str, &str)) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = keys
        .iter()
        .filter_map(|&(t, c, rt, rc)| if (t, c) == at { Some((rt, rc)) } else if (rt, rc) == at { Some((t, c)) } else { None })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The column's identifier in its table (as foreign keys write it).
fn column_ident<'a>(table: &'a Table, name: &str) -> Option<&'a str> {
    table.columns.iter().find(|c| c.name == name).map(|c| c.ident.as_str())
}

/// `q.c = r.d`, both qualified: (q, c, r, d) as written.
fn key_equality(e: &Expr) -> Option<(&Ident, &Ident, &Ident, &Ident)> {
    let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = e else { return None };
    match (left.as_ref(), right.as_ref()) {
        (Expr::CompoundIdentifier(l), Expr::CompoundIdentifier(r)) if l.len() == 2 && r.len() == 2 => Some((&l[0], &l[1], &r[0], &r[1])),
        _ => None,
    }
}

/// The name a FROM item is referred to by (its alias, else its table's name), folded.
fn referred_as(t: &TableFactor) -> Option<String> {
    match t {
        TableFactor::Table { alias: Some(a), .. } => Some(fold(&a.name)),
        TableFactor::Table { name, alias: None, .. } => relation_name(name).map(|(_, t)| t),
        _ => None,
    }
}

fn on_mut(op: &mut JoinOperator) -> Option<&mut Expr> {
    match op {
        JoinOperator::Join(JoinConstraint::On(e)) | JoinOperator::Inner(JoinConstraint::On(e)) => Some(e),
        _ => None,
    }
}

/// The ON of an outer join (LEFT, RIGHT, FULL).
fn outer_on_mut(op: &mut JoinOperator) -> Option<&mut Expr> {
    match op {
        JoinOperator::Left(JoinConstraint::On(e))
        | JoinOperator::LeftOuter(JoinConstraint::On(e))
        | JoinOperator::Right(JoinConstraint::On(e))
        | JoinOperator::RightOuter(JoinConstraint::On(e))
        | JoinOperator::FullOuter(JoinConstraint::On(e)) => Some(e),
        _ => None,
    }
}

/// Joins through a bridge table where an inner join's only condition equates two keys that no
/// foreign key links and one table's foreign keys link both, or a key and a column its table
/// lacks that the bridge has (see `for_missing`), in the statement's own SELECT. In every other
/// SELECT (a subquery's, a CTE's, a derived table's, a set operation's branch), and in outer
/// joins, only a condition reading a column its table lacks is made the foreign key's two ends
/// (no table is added: it could capture a name there, or change which rows an outer join keeps).
/// The column so replaced is replaced wherever else that SELECT reads it with that table.
pub(super) fn bridge_joins(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    struct Each<'a, 'k> {
        cx: Cx<'a, 'k>,
        depth: usize,
        fired: &'k mut Vec<String>,
    }
    impl VisitorMut for Each<'_, '_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            let Query { body, order_by, .. } = q;
            match body.as_mut() {
                SetExpr::Select(s) => bridge_select(&self.cx, s, Some(order_by), self.depth > 1, self.fired),
                other => {
                    for s in branches(other) {
                        bridge_select(&self.cx, s, None, true, self.fired);
                    }
                }
            }
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
    }
    let keys = key_pairs(schema);
    if keys.is_empty() {
        return;
    }
    let ctes = super::names::cte_names(&*q);
    let cx = Cx { schema, sc, keys: &keys, ctes: &ctes };
    let _ = VisitMut::visit(q, &mut Each { cx, depth: 0, fired });
}

/// What the join rules read: the catalog, the statement's names, its one-column foreign keys
/// and its CTEs' names (folded).
struct Cx<'a, 'k> {
    schema: &'a Schema,
    sc: &'a Scope,
    keys: &'k [(&'a str, &'a str, &'a str, &'a str)],
    ctes: &'k [String],
}

/// The SELECTs of a set operation's branches (not those of a parenthesised query, which is a
/// query of its own).
fn branches(e: &mut SetExpr) -> Vec<&mut Select> {
    match e {
        SetExpr::Select(s) => vec![s.as_mut()],
        SetExpr::SetOperation { left, right, .. } => {
            let mut out = branches(left);
            out.extend(branches(right));
            out
        }
        _ => Vec::new(),
    }
}

/// A column a join's repaired condition no longer reads, as (qualifier, column) folded, and the
/// qualified name that replaced it.
type Rename = ((String, String), Vec<Ident>);

fn bridge_select(cx: &Cx, s: &mut Select, order_by: Option<&mut Option<OrderBy>>, nested: bool, fired: &mut Vec<String>) {
    let mut renames: Vec<Rename> = Vec::new();
    for f in 0..s.from.len() {
        let mut k = 0;
        while k < s.from[f].joins.len() {
            crate::interrupt::every(k, 64);
            // A name is read from this FROM, never from another SELECT that may use it for
            // another table; a bridge's name is none the SELECT's FROM declares (the scope was
            // read before any rule joined a table).
            let items = from_items(cx.schema, cx.ctes, &s.from[f]);
            let declared: Vec<String> = s.from.iter().flat_map(|t| from_items(cx.schema, cx.ctes, t)).filter_map(|(n, _)| n).collect();
            let from = &mut s.from[f];
            let before = fired.len();
            match bridge(cx, (&items, k, &declared), nested, &mut from.joins[k], &mut renames, fired) {
                Some(join) => {
                    from.joins.insert(k, join);
                    k += 2;
                }
                None => {
                    // The bridge may be the table joined next: then the two swap places.
                    if fired.len() == before && !nested {
                        order::joined_later(cx.schema, cx.sc, cx.keys, (from, &items), k, fired);
                    }
                    k += 1;
                }
            }
        }
    }
    // One column repaired two ways (`o.ref = c.id`, `o.ref = p.id`): which one it is elsewhere
    // is not known.
    let conflicting: Vec<(String, String)> = renames.iter().filter(|(k, n)| renames.iter().any(|(k2, n2)| k2 == k && n2 != n)).map(|(k, _)| k.clone()).collect();
    renames.retain(|(k, _)| !conflicting.contains(k));
    // A parenthesised join may declare an alias again, which the walk below would not see.
    let nested_join = s.from.iter().flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation))).any(|t| matches!(t, TableFactor::NestedJoin { .. }));
    if renames.is_empty() || nested_join {
        return;
    }
    let note = |q: &Ident, c: &Ident, new: &[Ident]| format!("agent: column {q}.{c} -> {} (as the join now reads it)", new.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("."));
    let find = |p: &[Ident]| match p {
        [q, c] => renames.iter().find(|(k, _)| *k == (fold(q), fold(c))).map(|(_, new)| new.clone()),
        _ => None,
    };
    // An output column keeps its name (an enclosing query, an ORDER BY or the caller reads it).
    for item in &mut s.projection {
        let SelectItem::UnnamedExpr(Expr::CompoundIdentifier(p)) = item else { continue };
        if let (Some(new), [q, c]) = (find(p), p.as_slice()) {
            fired.push(note(q, c, &new));
            let same = new.last().is_some_and(|n| fold(n) == fold(c));
            let alias = c.clone();
            *item = if same { SelectItem::UnnamedExpr(Expr::CompoundIdentifier(new)) } else { SelectItem::ExprWithAlias { expr: Expr::CompoundIdentifier(new), alias } };
        }
    }
    // The SELECT's own expressions (its subqueries read their own FROM items).
    let mut follow = |e: &mut Expr| {
        let Expr::CompoundIdentifier(p) = e else { return };
        if let (Some(new), [q, c]) = (find(p), p.as_slice()) {
            fired.push(note(q, c, &new));
            *p = new;
        }
    };
    super::top_level_exprs(&mut *s, &mut follow);
    if let Some(Some(ob)) = order_by {
        super::top_level_exprs(ob, &mut follow);
    }
}

/// A FROM item: the name the statement refers to it with, and its table when it is one of the
/// catalog's (None for a subquery, a function, a CTE).
type FromItem = (Option<String>, Option<usize>);

/// The catalog's table that the one item of `items` named `name` is; None where no item or
/// more than one has that name, or it is not a catalog table.
fn only_table<'a>(schema: &'a Schema, items: &[FromItem], name: &str) -> Option<&'a Table> {
    let mut found = items.iter().filter(|(n, _)| n.as_deref() == Some(name));
    match (found.next(), found.next()) {
        (Some((_, Some(t))), None) => Some(&schema.tables[*t]),
        _ => None,
    }
}

/// The items of one FROM entry, its relation first, then its joins in order (item k + 1 is
/// join k).
fn from_items(schema: &Schema, ctes: &[String], from: &TableWithJoins) -> Vec<FromItem> {
    std::iter::once(&from.relation)
        .chain(from.joins.iter().map(|j| &j.relation))
        .map(|t| {
            let table = match t {
                // A name one of the statement's CTEs has reads the CTE.
                TableFactor::Table { name, args: None, .. } if !matches!(relation_name(name), Some((None, n)) if ctes.contains(&n)) => super::find_table(schema, name),
                _ => None,
            };
            (referred_as(t), table)
        })
        .collect()
}

/// For one join: the bridge's join to put before it (its own condition rewritten to the
/// bridge), or None; a condition repaired in place instead (see `repaired`) adds to `renames`.
fn bridge(cx: &Cx, (items, k, declared): (&[FromItem], usize, &[String]), nested: bool, join: &mut Join, renames: &mut Vec<Rename>, fired: &mut Vec<String>) -> Option<Join> {
    let (schema, sc, keys) = (cx.schema, cx.sc, cx.keys);
    let later = referred_as(&join.relation)?;
    // Item k + 1 is this join; the ones before it are the FROM's relation and earlier joins.
    let earlier = |name: &str| items.iter().take(k + 1).any(|(n, _)| n.as_deref() == Some(name));
    // The table an item of this FROM up to the join is.
    let table_of = |name: &str| only_table(schema, &items[..items.len().min(k + 2)], name);
    let inner = on_mut(&mut join.join_operator).is_some();
    let on = if inner { on_mut(&mut join.join_operator)? } else { outer_on_mut(&mut join.join_operator)? };
    let (q1, c1, q2, c2) = key_equality(on)?;
    // Which side is the joined table, which one an earlier one.
    let ((eq, ec), (lq, lc)) = match (fold(q1), fold(q2)) {
        (a, b) if b == later && earlier(&a) => ((q1, c1), (q2, c2)),
        (a, b) if a == later && earlier(&b) => ((q2, c2), (q1, c1)),
        _ => return None,
    };
    // A CTE or derived table of that name is not the catalog's table.
    if [fold(eq), fold(lq)].iter().any(|n| sc.other.contains(n)) {
        return None;
    }
    let (te, tl) = (table_of(&fold(eq))?, table_of(&fold(lq))?);
    if te.oid == tl.oid {
        return None;
    }
    let (ce, cl) = (column_ident(te, &fold(ec)), column_ident(tl, &fold(lc)));
    if let Some((cond, note, (wq, wc))) = repaired(cx, (items, k), (te, tl), ((eq, ec), (lq, lc)), fold(q1) == later) {
        let old = (fold(wq), fold(wc));
        let first = old == (fold(q1), fold(c1));
        let mut joins = super::parsed_joins(&format!("SELECT 1 FROM x JOIN y ON {cond}")).into_iter();
        let new_on = on_mut(&mut joins.next()?.join_operator)?.clone();
        // The name that took the lacking one's place: the same side of the new condition.
        let Expr::BinaryOp { left, right, .. } = &new_on else { return None };
        let Expr::CompoundIdentifier(new) = (if first { left } else { right }).as_ref() else { return None };
        renames.push((old, new.clone()));
        *on = new_on;
        fired.push(note);
        return None;
    }
    if !inner || nested {
        return None;
    }
    let (bt, bx, ex, by, lx) = match (ce, cl) {
        (Some(ex), Some(lx)) => between_keys(keys, (te.ident.as_str(), ex), (tl.ident.as_str(), lx))?,
        (Some(ex), None) => for_missing(schema, keys, (te.ident.as_str(), ex), tl, &fold(lc))?,
        (None, Some(lx)) => {
            let (bt, by, lx, bx, ex) = for_missing(schema, keys, (tl.ident.as_str(), lx), te, &fold(ec))?;
            (bt, bx, ex, by, lx)
        }
        (None, None) => return None,
    };
    // never a stranger's table (names::may_stand_for): no rule brings in a table of hers
    let b = schema.tables.iter().find(|t| t.ident == bt && super::may_stand_for(t))?;
    if declared.contains(&b.name) || sc.names.contains_key(&b.name) || sc.other.contains(&b.name) || b.oid == te.oid || b.oid == tl.oid {
        return None;
    }
    let bq = super::ident(&b.name);
    let text = format!("SELECT 1 FROM x JOIN {} ON {bq}.{bx} = {eq}.{ex} JOIN y ON {lq}.{lx} = {bq}.{by}", b.ident);
    let mut joins = super::parsed_joins(&text).into_iter();
    let (through, mut rest) = (joins.next()?, joins.next()?);
    *on = on_mut(&mut rest.join_operator)?.clone();
    fired.push(format!("agent: {} joined to {} through {}", te.name, tl.name, b.ident));
    Some(through)
}

/// Written name pairs of a join condition: (qualifier, column).
type Side<'i> = (&'i Ident, &'i Ident);

/// A condition `e = l` (earlier table's column, joined table's) reading a column its table
/// lacks, repaired in place: made the two ends of the one foreign key between the other side's
/// column and the lacking table, where no third item of the FROM has the missing column or may
/// have it (a subquery, CTE or function: the qualifier, not the column, may be what is wrong); else, where the earlier table lacks it,
/// read from the one other table joined before whose column is the end of a foreign key to
/// the joined table's, unless the lacking table has a key of its own to or from the joined one
/// (two meanings). The new condition (sides in the order written), its note, and the side that
/// lacked the column.
fn repaired<'i>(cx: &Cx, (items, k): (&[FromItem], usize), (te, tl): (&Table, &Table), ((eq, ec), (lq, lc)): (Side<'i>, Side<'i>), later_first: bool) -> Option<(String, String, Side<'i>)> {
    let (schema, keys) = (cx.schema, cx.keys);
    // A third item may hold the missing column: a table that has it, or an item whose columns
    // the catalog does not say (a subquery, a CTE, a function), which may.
    let held_elsewhere = |column: &str| {
        items.iter().any(|(_, t)| t.is_none_or(|t| ![te.oid, tl.oid].contains(&schema.tables[t].oid) && schema.tables[t].has_column(column)))
    };
    let written = |e: String, l: String| if later_first { format!("{l} = {e}") } else { format!("{e} = {l}") };
    let joined = |cond: &str| format!("agent: {} joined to {} on their foreign key ({cond})", te.name, tl.name);
    match (column_ident(te, &fold(ec)), column_ident(tl, &fold(lc))) {
        (Some(ex), None) if !held_elsewhere(&fold(lc)) => {
            let lx = one_link(keys, (te.ident.as_str(), ex), tl)?;
            let cond = written(format!("{eq}.{ex}"), format!("{lq}.{lx}"));
            Some((cond.clone(), joined(&cond), (lq, lc)))
        }
        (None, Some(lx)) if !held_elsewhere(&fold(ec)) => {
            let ex = one_link(keys, (tl.ident.as_str(), lx), te)?;
            let cond = written(format!("{eq}.{ex}"), format!("{lq}.{lx}"));
            Some((cond.clone(), joined(&cond), (eq, ec)))
        }
        (None, Some(lx)) => {
            let own_key = keys.iter().any(|&(t, _, rt, _)| (t == te.ident && rt == tl.ident) || (t == tl.ident && rt == te.ident));
            if own_key {
                return None;
            }
            let holder = earlier_holder(schema, keys, &items[..items.len().min(k + 1)], te, &fold(ec), (tl, lx))?;
            if cx.sc.other.contains(&holder) {
                return None;
            }
            let h = super::ident(&holder);
            let cond = written(format!("{h}.{ec}"), format!("{lq}.{lc}"));
            Some((cond, format!("agent: column {eq}.{ec} -> {h}.{ec} (a foreign key to {})", tl.name), (eq, ec)))
        }
        _ => None,
    }
}

/// The name of the one item of `earlier` (a FROM's items before a join), other than the
/// lacking table `lacking`, that has the column `missing`, where that column and the joined
/// table's column `joined` are the two ends of a foreign key: the table the condition meant
/// (`… JOIN model_list ON … JOIN car_makers ON car_names.maker = car_makers.id`, with
/// model_list.maker referencing car_makers.id: model_list). None where no item or several do,
/// or the item's name is not one table's in that FROM.
fn earlier_holder(schema: &Schema, keys: &[(&str, &str, &str, &str)], earlier: &[FromItem], lacking: &Table, missing: &str, (joined, jx): (&Table, &str)) -> Option<String> {
    let found: Vec<&str> = earlier
        .iter()
        .filter_map(|(name, t)| {
            let (name, t) = (name.as_deref()?, &schema.tables[(*t)?]);
            let x = column_ident(t, missing)?;
            (t.oid != lacking.oid && linked(keys, (t.ident.as_str(), x), (joined.ident.as_str(), jx))).then_some(name)
        })
        .collect();
    match found.as_slice() {
        [one] if only_table(schema, earlier, one).is_some() => Some(one.to_string()),
        _ => None,
    }
}

/// The column of `other` that the one foreign key linking the key `at` with `other` has at its
/// other end (either way round); None when no foreign key or several do.
fn one_link<'a>(keys: &[(&'a str, &'a str, &'a str, &'a str)], at: (&str, &str), other: &Table) -> Option<&'a str> {
    let ends: Vec<&str> = other_ends(keys, at).into_iter().filter(|(t, _)| *t == other.ident).map(|(_, c)| c).collect();
    let [one] = ends.as_slice() else { return None };
    Some(*one)
}

/// A bridge, as (table, its column linked to the earlier side, that side's column, its column
/// linked to the later side, that side's column), all idents.
type Bridge<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

/// Two keys no foreign key links (`e_end`, `l_end`): the one table whose foreign keys link
/// both, with one column each (linear in the keys).
fn between_keys<'a>(keys: &[(&'a str, &'a str, &'a str, &'a str)], e_end: (&'a str, &'a str), l_end: (&'a str, &'a str)) -> Option<Bridge<'a>> {
    if linked(keys, e_end, l_end) || !is_key(keys, e_end) || !is_key(keys, l_end) {
        return None;
    }
    let (to_e, to_l) = (other_ends(keys, e_end), other_ends(keys, l_end));
    let mut found = Vec::new();
    for &(bt, bx) in &to_e {
        let ys: Vec<&str> = to_l.iter().filter(|(t, _)| *t == bt).map(|&(_, y)| y).collect();
        let xs = to_e.iter().filter(|(t, _)| *t == bt).count();
        if let ([y], 1) = (ys.as_slice(), xs) {
            if *y != bx && bt != e_end.0 && bt != l_end.0 {
                found.push((bt, bx, e_end.1, *y, l_end.1));
            }
        }
    }
    let [one] = found.as_slice() else { return None };
    Some(*one)
}

/// A key (`present`) equated to a column `missing` the other table (`lacking`) does not have
/// (`patients JOIN outcomes ON patients.patient_id = outcomes.patient_id`, where an outcome
/// knows its treatment and a treatment its patient): the one table that has a column of that
/// name linked to the key, and one foreign key to `lacking`. The bridge's link to `present`
/// comes first in what is returned, its link to `lacking` second.
fn for_missing<'a>(schema: &'a Schema, keys: &[(&'a str, &'a str, &'a str, &'a str)], present: (&'a str, &'a str), lacking: &'a Table, missing: &str) -> Option<Bridge<'a>> {
    let mut found = Vec::new();
    for (bt, bx) in other_ends(keys, present) {
        crate::interrupt::check();
        let Some(b) = schema.tables.iter().find(|t| t.ident == bt && super::may_stand_for(t)) else { continue };
        if bt == lacking.ident || column_ident(b, missing) != Some(bx) {
            continue;
        }
        let to_lacking: Vec<(&str, &str)> = keys
            .iter()
            .filter_map(|&(t, c, rt, rc)| match (t == bt && rt == lacking.ident, rt == bt && t == lacking.ident) {
                (true, _) => Some((c, rc)),
                (_, true) => Some((rc, c)),
                _ => None,
            })
            .collect();
        if let [(by, lx)] = to_lacking.as_slice() {
            found.push((bt, bx, present.1, *by, *lx));
        }
    }
    let [one] = found.as_slice() else { return None };
    Some(*one)
}

/// The `q.c = r.d` equalities of a condition's ANDed terms, folded: (q, c, r, d).
fn equalities(e: &Expr, out: &mut Vec<(String, String, String, String)>) {
    match e {
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            equalities(left, out);
            equalities(right, out);
        }
        Expr::Nested(inner) => equalities(inner, out),
        _ => {
            if let Some((a, b, c, d)) = key_equality(e) {
                out.push((fold(a), fold(b), fold(c), fold(d)));
            }
        }
    }
}

/// A bare column that several inner-joined tables of the statement's SELECT have, where the ON
/// conditions equate it across all of them (`JOIN model_list AS m ON m.model = n.model`): every
/// joined row holds one value for it, so it is taken from the first of them. PostgreSQL refuses
/// it as ambiguous. Expressions inside subqueries keep their own scope and are left alone.
pub(super) fn ambiguous_columns(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    let ctes = super::names::cte_names(&*q);
    let Some(s) = super::body_select(q) else { return };
    let [from] = s.from.as_slice() else { return };
    // The FROM items, by the name the statement refers to them with; any other kind of item
    // (a subquery, a function) may hold the name too.
    let Some(items) = from_items(schema, &ctes, from).into_iter().map(|(r, i)| Some((r?, i?))).collect::<Option<Vec<(String, usize)>>>() else { return };
    let mut eqs = Vec::new();
    for j in &from.joins {
        match &j.join_operator {
            JoinOperator::Join(JoinConstraint::On(e)) | JoinOperator::Inner(JoinConstraint::On(e)) => equalities(e, &mut eqs),
            _ => return,
        }
    }
    // Which item a bare name is taken from: the first holder, when the equalities on that very
    // column connect every holder (grown from the first, linear in holders × equalities).
    let owner = |name: &str| -> Option<String> {
        let holders: Vec<&str> = items.iter().filter(|(_, t)| schema.tables[*t].has_column(name)).map(|(r, _)| r.as_str()).collect();
        if holders.len() < 2 || sc.other.iter().any(|o| o == name) {
            return None;
        }
        let mut reached = vec![holders[0]];
        let mut grew = true;
        while grew {
            grew = false;
            for (a, c, b, d) in &eqs {
                if c != name || d != name {
                    continue;
                }
                for (x, y) in [(a, b), (b, a)] {
                    if reached.contains(&x.as_str()) && !reached.contains(&y.as_str()) && holders.contains(&y.as_str()) {
                        reached.push(y);
                        grew = true;
                    }
                }
            }
        }
        (reached.len() == holders.len()).then(|| holders[0].to_string())
    };
    let mut changed: Vec<String> = Vec::new();
    let mut qualify = |e: &mut Expr| {
        let Expr::Identifier(i) = e else { return };
        let name = fold(i);
        if let Some(r) = owner(&name) {
            changed.push(format!("{name} -> {r}.{name}"));
            *e = Expr::CompoundIdentifier(vec![super::ident(&r), i.clone()]);
        }
    };
    super::top_level_exprs(s, &mut qualify);
    if let Some(o) = q.order_by.as_mut() {
        super::top_level_exprs(o, &mut qualify);
    }
    changed.sort_unstable();
    changed.dedup();
    for c in changed {
        fired.push(format!("agent: ambiguous column {c}"));
    }
}

mod order;

#[cfg(test)]
mod tests;
