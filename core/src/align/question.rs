//! Rules that read the question's own words: a join to a table the question never names, and
//! key columns nobody asked for when no extraction said what the answer returns.
//!
//! `SELECT singer.name FROM singer JOIN singer_in_concert ON …` for "the youngest singer" keeps
//! only singers with a concert, once per concert; the question says nothing of concerts.

use super::levels::from_tables;
use super::names::{one_or_linked, own_columns};
use super::drops::{inner_join, references, used_outside_on};
use super::{aggregated, body_select, find_table, fold, is_key, object_name, resolve, Scope};
use crate::schema::{Schema, Table};
use sqlparser::ast::{
    visit_expressions, BinaryOperator, Distinct, Expr, GroupByExpr, OrderByKind, Query, SelectItem, SetExpr, TableFactor, Value, Visit,
};
use std::ops::ControlFlow;

/// Words that join the words of a name and say nothing of what it holds.
const CONNECTIVES: &[&str] = &["a", "an", "and", "at", "by", "for", "has", "have", "in", "is", "of", "on", "per", "the", "to", "with"];

/// A name's or a text's words, lowercased, a plural's final `s` taken off (`concerts` → concert).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_lowercase();
            match w.strip_suffix('s') {
                Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_string(),
                _ => w,
            }
        })
        .collect()
}

/// Whether one of the question's words is `word`, starts it or with it when both have four
/// letters or more (`arranged` names arrange, `teacher` names teach), or shares its first five
/// letters (`evaluated` names evaluation).
fn mentioned(question: &[String], word: &str) -> bool {
    question.iter().any(|q| names(q, word))
}

/// Whether the question's word `q` names `word`, as [`mentioned`] reads it.
fn names(q: &str, word: &str) -> bool {
    let common = q.chars().zip(word.chars()).take_while(|(x, y)| x == y).count();
    q == word || (q.len() >= 4 && word.len() >= 4 && (q.starts_with(word) || word.starts_with(q))) || common >= 5
}

/// Drops an inner join to a table that holds a foreign key to the table it is joined with, when
/// nothing but its ON condition uses it and the question names none of its name's own words (the
/// words no other table of the statement has): such a join only keeps the rows that have a match
/// there, once per match. The statement's own SELECT only; a table joined first stays, and so does
/// every join of a grouped or aggregated SELECT (`count(*)` counts the joined rows).
pub(super) fn unmentioned_joins(schema: &Schema, sc: &Scope, q: &mut Query, question: &str, fired: &mut Vec<String>) {
    if question.is_empty() {
        return;
    }
    let asked = words(question);
    let order = q.order_by.clone();
    let Some(s) = body_select(q) else { return };
    let counted = aggregated(s) || s.having.is_some() || s.projection.iter().any(windowed) || order.as_ref().is_some_and(windowed);
    if s.from.len() != 1 || counted {
        return;
    }
    let mut i = 0;
    while i < s.from[0].joins.len() {
        crate::interrupt::check();
        let Some((constraint, t, me, name)) = inner_join(schema, s, i) else {
            i += 1;
            continue;
        };
        // ON t.fk = other.key: each row of the other table meets none, one or many of t's.
        let child = match &constraint {
            Expr::BinaryOp { left, op: BinaryOperator::Eq, right } => [(left, right), (right, left)].iter().any(|(mine, theirs)| {
                match (resolve(schema, sc, mine), resolve(schema, sc, theirs)) {
                    (Some(a), Some(b)) => a.0 == t && b.0 != t && references(schema, a, b),
                    _ => false,
                }
            }),
            _ => false,
        };
        if !child || used_outside_on(schema, s, order.as_ref(), i, &me, t) {
            i += 1;
            continue;
        }
        let others: Vec<String> = sc.tables.iter().filter(|&&o| o != t).flat_map(|&o| words(&schema.tables[o].name)).collect();
        let own: Vec<String> =
            words(&schema.tables[t].name).into_iter().filter(|w| !CONNECTIVES.contains(&w.as_str()) && !others.contains(w)).collect();
        if own.is_empty() || own.iter().any(|w| mentioned(&asked, w)) {
            i += 1;
            continue;
        }
        fired.push(format!("function: join of {name} dropped (the question names no {})", own.join(" ")));
        s.from[0].joins.remove(i);
    }
}

/// Whether an expression calls a window function (`count(*) OVER ()` counts the joined rows too).
pub(super) fn windowed<V: Visit>(e: &V) -> bool {
    let mut found = false;
    let _ = visit_expressions(e, |x| {
        if matches!(x, Expr::Function(f) if f.over.is_some()) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// Whether a statement's ORDER BY or its SELECT's GROUP BY or DISTINCT ON names a column by its
/// position in the SELECT list, which trimming the list would move.
pub(super) fn positional(q: &Query) -> bool {
    let number = |e: &Expr| matches!(e, Expr::Value(v) if matches!(v.value, Value::Number(..)));
    let in_order = q.order_by.as_ref().is_some_and(|o| match &o.kind {
        OrderByKind::Expressions(es) => es.iter().any(|x| number(&x.expr)),
        _ => true,
    });
    let in_select = match q.body.as_ref() {
        SetExpr::Select(s) => {
            (match &s.group_by {
                GroupByExpr::Expressions(es, _) => es.iter().any(number),
                GroupByExpr::All(_) => true,
            }) || matches!(s.distinct, Some(Distinct::On(_)))
        }
        _ => false,
    };
    in_order || in_select
}

/// Without the extraction's word on what the answer returns: a key column the question does not
/// ask for leaves a SELECT list where another column of its table stands for the row
/// (`SELECT shop.shop_id, shop.name, count(*)` for "the name of each shop"). Only ids (numeric
/// keys, columns named id or *_id: a text key such as a country's name is an answer); not under
/// DISTINCT, whose rows the key keeps apart, nor where the FROM has the table twice (a self-join's
/// columns are of different rows) or the list is referred to by position.
pub(super) fn unasked_keys(schema: &Schema, sc: &Scope, q: &mut Query, question: &str, fired: &mut Vec<String>) {
    if question.is_empty() || positional(q) {
        return;
    }
    let asked = words(question);
    if asked.iter().any(|w| matches!(w.as_str(), "id" | "ids" | "identifier" | "key")) {
        return;
    }
    let Some(s) = body_select(q) else { return };
    if s.distinct.is_some() || s.projection.len() < 2 {
        return;
    }
    let from = from_tables(schema, s);
    let mut unique = from.clone();
    unique.sort_unstable();
    unique.dedup();
    if unique.len() != from.len() {
        return;
    }
    let column = |p: &SelectItem| -> Option<(usize, usize)> {
        let SelectItem::UnnamedExpr(e @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_))) = p else { return None };
        resolve(schema, sc, e)
    };
    let id = |t: usize, c: usize| -> bool {
        let col = &schema.tables[t].columns[c];
        let name = col.name.to_lowercase();
        is_key(schema, t, c) && (col.category == "N" || name == "id" || name.ends_with("_id"))
    };
    // A column of the table that is no key: it stands for the row.
    let stand_in: Vec<usize> = s.projection.iter().filter_map(column).filter(|&(t, c)| !is_key(schema, t, c)).map(|(t, _)| t).collect();
    let joined = question.to_lowercase().replace(['_', ' '], "");
    let unasked = |p: &SelectItem| -> bool {
        column(p).is_some_and(|(t, c)| {
            id(t, c) && stand_in.contains(&t) && !joined.contains(&schema.tables[t].columns[c].name.to_lowercase().replace('_', ""))
        })
    };
    let dropped: Vec<String> = s.projection.iter().filter(|p| unasked(p)).map(|p| p.to_string()).collect();
    if dropped.is_empty() {
        return;
    }
    let keep: Vec<SelectItem> = s.projection.iter().filter(|p| !unasked(p)).cloned().collect();
    s.projection = keep;
    fired.push(format!("style: SELECT list trimmed to what was asked (dropped {})", dropped.join(", ")));
}

/// Words that start a list of what the answer returns ("list the name and the count").
const LISTING: &[&str] = &["list", "show", "give", "return", "display", "find", "report", "output", "provide", "tell"];

/// Words a question uses for an aggregate's result (`how many` for count, `oldest` for max).
fn aggregate_words(name: &str) -> &'static [&'static str] {
    match name {
        "count" => &["number", "count", "amount"],
        "avg" => &["average", "avg", "mean"],
        "max" => &["maximum", "max", "highest", "largest", "biggest", "most", "oldest", "latest", "longest", "greatest"],
        "min" => &["minimum", "min", "lowest", "smallest", "least", "youngest", "earliest", "shortest", "fewest"],
        "sum" => &["total", "sum"],
        _ => &[],
    }
}

/// Where the question first names a word of `name` (as `mentioned` matches), skipping
/// connectives; for a name of words run together (`pettype`), a question word of three letters or
/// more that starts or ends it.
fn first_mention(asked: &[String], name: &str) -> Option<usize> {
    let own = words(name);
    let named = own.iter().filter(|w| !CONNECTIVES.contains(&w.as_str())).filter_map(|w| asked.iter().position(|q| names(q, w))).min();
    if named.is_some() {
        return named;
    }
    let whole: String = own.concat();
    asked.iter().position(|q| {
        q.len() >= 3 && q.len() < whole.len() && !CONNECTIVES.contains(&q.as_str()) && (whole.starts_with(q.as_str()) || whole.ends_with(q.as_str()))
    })
}

/// What a select item is to [`question_order`]: an aggregate (by its function's name) or a column.
enum Item {
    Aggregate(String),
    Column(String),
}

/// Puts a SELECT list's aggregates and its plain columns in the order the question asks for them
/// (`SELECT avg(age), max(age), pettype` for "the average and maximum age for each type of pet";
/// `SELECT name, count(*)` for "the name of each shop and its number of employees"). Only when the
/// question names every item, and names all of one kind before all of the other; each kind keeps
/// its own order. Where a listing word ("list", "show", "return"...) starts a clause that names
/// every item, the order is read from the last such clause. The statement's own SELECT only;
/// never when the list is referred to by position.
pub(super) fn question_order(q: &mut Query, question: &str, fired: &mut Vec<String>) {
    if question.is_empty() || positional(q) {
        return;
    }
    let asked = words(question);
    let Some(s) = body_select(q) else { return };
    if s.projection.len() < 2 {
        return;
    }
    // Any other kind of item: no rule.
    let mut kinds: Vec<Item> = Vec::with_capacity(s.projection.len());
    for p in &s.projection {
        crate::interrupt::check();
        let e = match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => return,
        };
        match (super::aggregate_name(e), crate::sqlinfo::column(e)) {
            (Some(name), _) => kinds.push(Item::Aggregate(name)),
            (None, Some(c)) => kinds.push(Item::Column(c)),
            (None, None) => return,
        }
    }
    // (is an aggregate, where the question names it) per item, reading from word `from` on.
    let place = |from: usize| -> Option<Vec<(bool, usize)>> {
        let tail = &asked[from..];
        kinds
            .iter()
            .map(|item| match item {
                Item::Aggregate(name) => {
                    aggregate_words(name).iter().filter_map(|w| tail.iter().position(|q| q == w)).min().map(|at| (true, from + at))
                }
                Item::Column(c) => first_mention(tail, c).map(|at| (false, from + at)),
            })
            .collect()
    };
    // The last listing clause that names every item ("... each maker? Only list the count and
    // the maker's full name"), else the whole question.
    let clauses = asked.iter().enumerate().rev().filter(|(_, w)| LISTING.contains(&w.as_str())).map(|(i, _)| i + 1);
    let Some(items) = clauses.chain(std::iter::once(0)).find_map(place) else { return };
    let span = |agg: bool| {
        let at = items.iter().filter(|i| i.0 == agg).map(|i| i.1);
        (at.clone().min(), at.max())
    };
    let ((Some(a_first), Some(a_last)), (Some(p_first), Some(p_last))) = (span(true), span(false)) else { return };
    let aggregates_first = if a_last < p_first {
        true
    } else if p_last < a_first {
        false
    } else {
        return;
    };
    // Already in order: every item of the kind that goes first comes before every other.
    if items.is_sorted_by_key(|i| i.0 != aggregates_first) {
        return;
    }
    let (mut front, back): (Vec<_>, Vec<_>) =
        s.projection.drain(..).zip(items.iter()).partition(|(_, i)| i.0 == aggregates_first);
    front.extend(back);
    s.projection = front.into_iter().map(|(p, _)| p).collect();
    let list: Vec<String> = s.projection.iter().map(|p| p.to_string()).collect();
    fired.push(format!("style: SELECT list in the order the question asks ({})", list.join(", ")));
}

/// A one-table SELECT reading columns its table lacks, where one other table of its schema has
/// every column it reads (`SELECT maker, model FROM car_names` where model_list has both): that
/// table, when the question names none of the written table's own words (a question about the
/// written table's rows wants the foreign-key join [`super::names`] adds instead). The statement's
/// own SELECT; its WHERE, GROUP BY, HAVING and ORDER BY count, its subqueries do not. Without an
/// alias, a column qualified with the written table's name anywhere (a subquery's included)
/// leaves it alone.
pub(super) fn other_table(schema: &Schema, q: &mut Query, linked: &[String], question: &str, fired: &mut Vec<String>) {
    if question.is_empty() {
        return;
    }
    let mut used = match q.order_by.as_mut() {
        Some(o) => own_columns(o),
        None => Vec::new(),
    };
    let Some(s) = body_select(q) else { return };
    if s.from.len() != 1 || !s.from[0].joins.is_empty() {
        return;
    }
    used.extend(own_columns(s));
    let TableFactor::Table { name, alias, args: None, .. } = &s.from[0].relation else { return };
    let Some(t) = find_table(schema, name) else { return };
    let aliased = alias.is_some();
    let written = &schema.tables[t];
    let by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| written.name.clone());
    let aliases: Vec<String> = s
        .projection
        .iter()
        .filter_map(|p| match p {
            SelectItem::ExprWithAlias { alias, .. } => Some(fold(alias)),
            _ => None,
        })
        .collect();
    let mut cols: Vec<String> = Vec::new();
    for (qualifier, c) in used {
        if qualifier.as_ref().is_some_and(|q| *q != by) {
            return;
        }
        if !aliases.contains(&c) && !cols.contains(&c) {
            cols.push(c);
        }
    }
    if cols.is_empty() || cols.iter().all(|c| written.has_column(c)) {
        return;
    }
    let holds: Vec<&Table> =
        schema.tables.iter().enumerate().filter(|&(i, x)| i != t && x.schema == written.schema && cols.iter().all(|c| x.has_column(c))).map(|(_, x)| x).collect();
    let Some(holder) = one_or_linked(&holds, linked) else { return };
    // The written table's own words, those the other's name lacks (car_names: none of `car`).
    let theirs = words(&holder.name);
    let own: Vec<String> = words(&written.name).into_iter().filter(|w| !CONNECTIVES.contains(&w.as_str()) && !theirs.contains(w)).collect();
    let asked = words(question);
    if own.is_empty() || own.iter().any(|w| mentioned(&asked, w)) {
        return;
    }
    // Without an alias, a subquery may name the written table: `car_names.model` would dangle.
    if !aliased {
        let mut named = false;
        let _ = visit_expressions(&*q, |e| {
            if matches!(e, Expr::CompoundIdentifier(p) if p.len() >= 2 && fold(&p[p.len() - 2]) == by) {
                named = true;
            }
            ControlFlow::<()>::Continue(())
        });
        if named {
            return;
        }
    }
    let Some(fixed) = object_name(&holder.ident) else { return };
    let Some(s) = body_select(q) else { return };
    if let TableFactor::Table { name, .. } = &mut s.from[0].relation {
        fired.push(format!("agent: table {name} -> {} (it has every column the query reads)", holder.ident));
        *name = fixed;
    }
}
