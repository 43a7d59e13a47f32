//! Agent alignment of a column written with a table one key short of it: `t.drug_type`, where
//! `t` is treatments, which lacks drug_type, and treatments.drug_id points to drugs, which has
//! it. The model skipped a join; the one table a foreign key of the written table points to
//! (declared or inferred) and that has the column is joined, and the column read from there.
//! So is a column written with the name of a table the statement never declares, where one
//! table of the SELECT has the one key to it (`singer.name` in `FROM singer_in_concert JOIN
//! concert ...`, which PostgreSQL refuses: a missing FROM-clause entry). And so is a column
//! written with a table of the SELECT that no key links with a table that has it, where one
//! other table of the SELECT, joined with the written one by an equality on a foreign key's
//! tables, has the one such key (`p.drug_name`, p patients, in `FROM patients p JOIN treatments
//! t ON t.patient_id = p.id`: the model put the column on the wrong table and skipped the join).
//!
//! Many rows to one, and a LEFT JOIN: the query keeps exactly the rows it had (a row whose key
//! finds nothing reads NULL, as a NULL column would). Left alone: a column some table of the
//! same SELECT has (another rule's business, or ambiguous), a column several such tables have,
//! a column used in a join's ON (the new table would join after it), a qualifier that is not a
//! table of the SELECT's own FROM (an enclosing query's), a table or CTE name already in use, a
//! `*` list, renamed columns, a FROM with a function or a parenthesised join, a derived table
//! that renames its columns, lists `*` or returns a column of the name or one named otherwise
//! than by a name or an alias (an aliased derived table is otherwise fine), a name several
//! schemas hold written for one off the search path,
//! and a key whose referenced column is not known to be unique (the join would multiply rows).

use super::names::on_search_path;
use super::{find_table, fold, ident, parsed_joins, relation_name, top_level_exprs, Scope};
use crate::schema::{ForeignKey, Schema, Table};
use sqlparser::ast::{Expr, Join, JoinConstraint, JoinOperator, Query, Select, SelectItem, SetExpr, TableFactor, TableWithJoins, VisitMut, VisitorMut};
use std::collections::HashMap;
use std::ops::ControlFlow;

/// Most joins one SELECT gets from this rule.
const MAX_JOINS: usize = 4;

/// Every SELECT of the statement, subqueries included, on its own.
pub(super) fn join_for_qualified(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    struct Each<'a> {
        schema: &'a Schema,
        sc: &'a Scope,
        fired: &'a mut Vec<String>,
    }
    impl VisitorMut for Each<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            let order_by = &mut q.order_by;
            if let SetExpr::Select(s) = q.body.as_mut() {
                one_select(self.schema, self.sc, s, order_by, self.fired);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(q, &mut Each { schema, sc, fired });
}

/// A SELECT's own tables by name (FROM item, table), and its derived tables' column names.
type Own = (HashMap<String, (usize, usize)>, Vec<String>);

/// The tables of a SELECT's own FROM, by the name each is referred to (folded): its alias, or
/// its table's name; and the names of the columns its derived tables return. A derived table
/// with an alias (its name is one the scope knows as not a table, never taken for the joined
/// one) counts only by those columns. None when a name is used twice, a derived table returns
/// columns not known here (`*`) or renames them, or a relation is anything else (a function, a
/// parenthesised join): then the SELECT is left alone.
fn own_tables(schema: &Schema, sc: &Scope, from: &[TableWithJoins]) -> Option<Own> {
    let mut out = HashMap::new();
    let mut derived = Vec::new();
    for (i, twj) in from.iter().enumerate() {
        for factor in std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)) {
            if let TableFactor::Derived { subquery, alias: Some(a), .. } = factor {
                if !a.columns.is_empty() {
                    return None;
                }
                // What it returns, where every name is known here: no `*` (of a CTE the
                // catalog's name may stand for), no column PostgreSQL names otherwise.
                let names = super::derived::returned(subquery, schema, &HashMap::new())?;
                if wildcard(subquery) || names.iter().any(|n| n == "?column?" || n.is_empty()) {
                    return None;
                }
                derived.extend(names);
                continue;
            }
            let TableFactor::Table { name, alias, args: None, .. } = factor else { return None };
            // Renamed columns (`AS c(a, b)`), or a name a CTE of the statement may stand for.
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return None;
            }
            let (written_schema, relname) = relation_name(name)?;
            if written_schema.is_none() && sc.other.contains(&relname) {
                return None;
            }
            let t = find_table(schema, name)?;
            // Unqualified, the name is the table PostgreSQL finds on the search path; where
            // several schemas hold a table of that name, only one on it is taken for it.
            // (A temporary or system table the schema does not list may shadow one it does.)
            if written_schema.is_none() && !on_search_path(&schema.tables[t].ident) {
                return None;
            }
            let by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| schema.tables[t].name.clone());
            if out.insert(by, (i, t)).is_some() {
                return None;
            }
        }
    }
    Some((out, derived))
}

/// Whether the query's first SELECT (the one that names a set operation's columns) lists `*`.
fn wildcard(q: &Query) -> bool {
    super::derived::first_select(q).is_none_or(|s| s.projection.iter().any(|p| matches!(p, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))))
}

/// `q.c` as (q, c), folded.
fn qualified(e: &Expr) -> Option<(String, String)> {
    match e {
        Expr::CompoundIdentifier(p) if p.len() == 2 => Some((fold(&p[0]), fold(&p[1]))),
        _ => None,
    }
}

/// Qualified columns used in the ON of a join of this SELECT.
fn used_in_on(from: &[TableWithJoins]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for j in from.iter().flat_map(|t| &t.joins) {
        if let Some(JoinConstraint::On(e)) = constraint(&j.join_operator) {
            let _ = sqlparser::ast::visit_expressions(e, |x| {
                out.extend(qualified(x));
                ControlFlow::<()>::Continue(())
            });
        }
    }
    out
}

fn constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// The single-column foreign keys of `table` whose referenced table (another) has `column`.
fn keys_to<'a>(schema: &'a Schema, table: &Table, column: &str) -> Vec<(&'a ForeignKey, &'a Table)> {
    schema
        .foreign_keys
        .iter()
        .filter(|fk| fk.table == table.ident && fk.columns.len() == 1 && fk.ref_columns.len() == 1)
        .filter_map(|fk| schema.tables.iter().find(|u| u.ident == fk.ref_table).map(|u| (fk, u)))
        .filter(|(_, u)| u.oid != table.oid && u.has_column(column) && super::may_stand_for(u))
        .collect()
}

/// The one key of `table` (to one row) whose referenced table has `column`.
fn the_key<'a>(schema: &'a Schema, table: &Table, column: &str) -> Option<(&'a ForeignKey, &'a Table)> {
    let mut found = keys_to(schema, table, column).into_iter().filter(|(fk, u)| fk.to_key_or_found(u));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// For `qualifier.column` where no foreign key links the qualifier's table `qt` with a table
/// that has the column, either way round (`p.drug_name`, p patients, in `FROM patients p JOIN
/// treatments t ON t.patient_id = p.id`, treatments.drug_id -> drugs): the one table of the
/// SELECT that the query joins with the written one (see [`joined_with`]) and that has the one
/// key (to one row) to such a table, as its FROM entry, the name it is referred to by, the key
/// and the table. None where several tables or keys (of any number of columns) could be meant.
fn through_another<'a>(
    schema: &'a Schema,
    own: &HashMap<String, (usize, usize)>,
    joined: &[(String, String)],
    (qualifier, qt): (&str, usize),
    column: &str,
) -> Option<(usize, String, &'a ForeignKey, &'a Table)> {
    let table = &schema.tables[qt];
    let holds = |ident: &str| schema.tables.iter().any(|u| u.ident == ident && u.oid != table.oid && u.has_column(column));
    if schema.foreign_keys.iter().any(|fk| (fk.table == table.ident && holds(&fk.ref_table)) || (fk.ref_table == table.ident && holds(&fk.table))) {
        return None;
    }
    let reached = joined_with(schema, own, joined, qualifier);
    let mut found = Vec::new();
    for (by, &(item, t)) in own.iter().filter(|(by, _)| by.as_str() != qualifier && reached.contains(by)) {
        let from = &schema.tables[t];
        // Every key of that table to a table with the column counts, of any width.
        let keys = schema.foreign_keys.iter().filter(|fk| fk.table == from.ident && holds(&fk.ref_table)).count();
        let single = keys_to(schema, from, column);
        if keys != single.len() {
            return None;
        }
        found.extend(single.into_iter().map(|(fk, parent)| (item, by.clone(), fk, parent)));
    }
    if found.len() == 1 && found[0].2.to_key_or_found(found[0].3) {
        found.pop()
    } else {
        None
    }
}

/// The names of the SELECT's tables that the query joins with `start`, directly or through
/// others: two are joined where an `ON` or the `WHERE` equates a column of one with a column
/// of the other (`t.patient_id = p.id`) and a foreign key links their tables, either way round.
/// Tables merely listed together (`ON true`, a comma, a cross join) are not.
fn joined_with(schema: &Schema, own: &HashMap<String, (usize, usize)>, joined: &[(String, String)], start: &str) -> Vec<String> {
    let linked = |a: &str, b: &str| match (own.get(a), own.get(b)) {
        (Some(&(_, x)), Some(&(_, y))) => schema.tables_linked(&schema.tables[x].ident, &schema.tables[y].ident),
        _ => false,
    };
    let mut reached = vec![start.to_string()];
    let mut i = 0;
    while i < reached.len() {
        for (a, b) in joined {
            let next = if *a == reached[i] { b } else if *b == reached[i] { a } else { continue };
            if !reached.contains(next) && linked(&reached[i], next) {
                reached.push(next.clone());
            }
        }
        i += 1;
    }
    reached
}

/// Pairs of qualifiers (folded) whose columns an equality in a join's `ON` or the `WHERE`
/// compares (`a.x = b.y`).
fn equated(s: &Select) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |e: &Expr| {
        let _ = sqlparser::ast::visit_expressions(e, |x| {
            if let Expr::BinaryOp { left, op: sqlparser::ast::BinaryOperator::Eq, right } = x {
                if let (Some((a, _)), Some((b, _))) = (qualified(left), qualified(right)) {
                    if a != b {
                        out.push((a, b));
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
    };
    for j in s.from.iter().flat_map(|t| &t.joins) {
        if let Some(JoinConstraint::On(e)) = constraint(&j.join_operator) {
            add(e);
        }
    }
    if let Some(w) = &s.selection {
        add(w);
    }
    out
}

/// For `qualifier.column` where the qualifier is no name the statement declares but the name of
/// a table on the search path that has the column (`singer.name` in `FROM singer_in_concert
/// JOIN concert ...`): the one table of the SELECT with the one foreign key to it (to one row),
/// as (its FROM entry, the name it is referred to by, the key, the table). None where the name
/// is declared anywhere in the statement (an enclosing query's, a CTE), several tables of that
/// name or several keys could be meant, or the table is one of the SELECT's already.
fn undeclared<'a>(schema: &'a Schema, sc: &Scope, own: &HashMap<String, (usize, usize)>, qualifier: &str, column: &str) -> Option<(usize, String, &'a ForeignKey, &'a Table)> {
    if sc.names.contains_key(qualifier) || sc.other.iter().any(|o| o == qualifier) {
        return None;
    }
    let mut named = schema.tables.iter().filter(|t| t.name == qualifier && on_search_path(&t.ident));
    let parent = match (named.next(), named.next()) {
        (Some(p), None) if p.has_column(column) => p,
        _ => return None,
    };
    if own.values().any(|&(_, t)| schema.tables[t].oid == parent.oid) {
        return None;
    }
    let mut found = Vec::new();
    for (by, &(item, t)) in own {
        let table = &schema.tables[t];
        for fk in schema.foreign_keys.iter().filter(|fk| fk.table == table.ident && fk.ref_table == parent.ident) {
            if fk.columns.len() == 1 && fk.ref_columns.len() == 1 && fk.to_key_or_found(parent) {
                found.push((item, by.clone(), fk, parent));
            }
        }
    }
    match found.len() {
        1 => found.pop(),
        _ => None,
    }
}

/// A LEFT JOIN of `parent` on `by.key = parent.referenced`, parsed (identifiers as the schema
/// spells them, quoted where needed).
fn left_join(parent: &Table, by: &str, fk: &ForeignKey) -> Option<Join> {
    let text = format!(
        "SELECT 1 FROM x LEFT JOIN {} ON {}.{} = {}.{}",
        parent.ident,
        ident(by),
        fk.columns[0],
        ident(&parent.name),
        fk.ref_columns[0]
    );
    parsed_joins(&text).into_iter().next()
}

fn one_select(schema: &Schema, sc: &Scope, s: &mut Select, order_by: &mut Option<sqlparser::ast::OrderBy>, fired: &mut Vec<String>) {
    // `*` would return the joined table's columns too.
    if s.projection.iter().any(|p| matches!(p, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))) {
        return;
    }
    let Some((own, derived)) = own_tables(schema, sc, &s.from) else { return };
    // What this SELECT (and its ORDER BY) writes as q.c, outside subqueries.
    let mut written: Vec<(String, String)> = Vec::new();
    top_level_exprs(&mut *s, |e| written.extend(qualified(e)));
    if let Some(ob) = order_by.as_mut() {
        top_level_exprs(ob, |e| written.extend(qualified(e)));
    }
    let on = used_in_on(&s.from);
    let joined_pairs = equated(s);
    // Unqualified names anywhere in the SELECT, subqueries included: a joined table having one
    // would capture it from the table or enclosing query it now refers to.
    let mut bare: Vec<String> = Vec::new();
    let _ = sqlparser::ast::visit_expressions(&*s, |e| {
        match e {
            Expr::Identifier(i) => bare.push(fold(i)),
            Expr::CompoundIdentifier(p) if !p.is_empty() => bare.push(fold(&p[0])),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    if let Some(ob) = order_by.as_ref() {
        let _ = sqlparser::ast::visit_expressions(ob, |e| {
            if let Expr::Identifier(i) = e {
                bare.push(fold(i));
            }
            ControlFlow::<()>::Continue(())
        });
    }
    // (qualifier, column) -> the name of the table that has it, joined.
    let mut moved: HashMap<(String, String), String> = HashMap::new();
    let mut joins: Vec<(usize, Join)> = Vec::new();
    let mut joined: HashMap<(String, String, u32), String> = HashMap::new();
    for (n, (qualifier, column)) in written.into_iter().enumerate() {
        crate::interrupt::every(n, 16);
        if moved.contains_key(&(qualifier.clone(), column.clone())) || on.contains(&(qualifier.clone(), column.clone())) {
            continue;
        }
        if sc.other.contains(&column) || derived.contains(&column) || own.values().any(|&(_, u)| schema.tables[u].has_column(&column)) {
            continue;
        }
        // Written with a table of the SELECT that lacks the column, or with the name of a table
        // the statement never declares that one of them has a key to.
        let (item, by, fk, parent) = match own.get(&qualifier) {
            Some(&(item, t)) => match the_key(schema, &schema.tables[t], &column) {
                Some((fk, parent)) => (item, qualifier.clone(), fk, parent),
                None => match through_another(schema, &own, &joined_pairs, (&qualifier, t), &column) {
                    Some(found) => found,
                    None => continue,
                },
            },
            None => match undeclared(schema, sc, &own, &qualifier, &column) {
                Some(found) => found,
                None => continue,
            },
        };
        // (A qualifier naming the undeclared table is the column this join is for.)
        if bare.iter().any(|b| (*b == parent.name && *b != qualifier) || parent.has_column(b)) {
            continue;
        }
        // One join per key followed, named after the parent's table.
        let key = (by.clone(), fk.columns[0].clone(), parent.oid);
        let name = match joined.get(&key) {
            Some(n) => n.clone(),
            None => {
                let n = parent.name.clone();
                if joins.len() >= MAX_JOINS || own.contains_key(&n) || sc.names.contains_key(&n) || sc.other.contains(&n) || joined.values().any(|x| *x == n) {
                    continue;
                }
                let Some(join) = left_join(parent, &by, fk) else { continue };
                joins.push((item, join));
                joined.insert(key, n.clone());
                fired.push(format!("agent: {} joined on {}.{} for {}.{}", parent.ident, by, fk.columns[0], qualifier, column));
                n
            }
        };
        moved.insert((qualifier, column), name);
    }
    if moved.is_empty() {
        return;
    }
    let mut requalify = |e: &mut Expr| {
        let Some(k) = qualified(e) else { return };
        if let (Some(owner), Expr::CompoundIdentifier(p)) = (moved.get(&k), e) {
            p[0] = ident(owner);
        }
    };
    top_level_exprs(&mut *s, &mut requalify);
    if let Some(ob) = order_by.as_mut() {
        top_level_exprs(ob, &mut requalify);
    }
    for (item, join) in joins {
        if let Some(twj) = s.from.get_mut(item) {
            twj.joins.push(join);
        }
    }
}

#[cfg(test)]
mod tests;
