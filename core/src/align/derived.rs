//! Columns read from what a query block's own relations return, CTEs and subqueries included:
//! `s.id` where the CTE `s` returns `student_id`, `c.total` where the subquery `c` returns
//! `total_spent`, `cnt` in a query over a CTE that returns `n_orders` and nothing else like it.
//! The other agent rules resolve names over every table the statement reads; this one reads
//! each query block's FROM alone, so that a CTE's or subquery's columns are what it returns.
//!
//! A name is replaced only when exactly one column of the block's relations matches it: the
//! same name but for case or a typo, the same words in another order, a name whose words hold
//! all of the written one's in a row, or the written one is the column after its relation's
//! name (`salesperson_id` for the `id` of `salespersons`). Never by guess: two matches, or a
//! relation whose columns are not known (`*`, a function), leave it to PostgreSQL.
//!
//! It reads the blocks that read a CTE or a subquery, and every block of a statement with a
//! WITH (the statement's query and its CTEs, which nothing encloses: there a name the block
//! lacks is wrong even when another block has it). A bare column fixed in a select list keeps
//! the name it was written with, as an alias, for the blocks that read it by that name.

use super::{closest, fold, ident};
use crate::schema::Schema;
use sqlparser::ast::{Expr, Query, Select, SelectItem, SetExpr, Statement, TableFactor, VisitMut, VisitorMut};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

/// One relation of a block's FROM: the name the block knows it by, what it returns, and
/// whether it is a CTE or a subquery (not a table).
struct Relation {
    by: String,
    /// The table's or CTE's own name (a subquery's alias).
    name: String,
    columns: Vec<String>,
    derived: bool,
}

pub(super) fn derived_columns(schema: &Schema, stmt: &mut Statement, fired: &mut Vec<String>) {
    // Columns a requalification could make compared with themselves, as the column rule reads them.
    let paired = super::columns::paired_columns(stmt);
    let Statement::Query(q) = stmt else { return };
    // Every name the statement could mean as a column anywhere: the columns of the tables it
    // reads, what its CTEs and subqueries return, its output aliases. An unqualified name that
    // is one of these may be a correlated reference or ambiguous, not a wrong name.
    let mut known = Known { schema, names: HashSet::new(), ctes: HashMap::new(), paired, unclear: false, unnamed: false, opaque: false, depth: 0 };
    let _ = VisitMut::visit(&mut **q, &mut known);
    // Which CTE a name means is left to PostgreSQL where scopes differ by block: a CTE named
    // like a table (its own body reads the table), two CTEs of one name, a WITH in a subquery.
    if known.unclear {
        return;
    }
    // The blocks nothing encloses: the statement's own query and its CTEs. A name one of them
    // lacks cannot be an enclosing block's column.
    let mut roots: HashSet<usize> = HashSet::from([&**q as *const Query as usize]);
    if let Some(w) = &q.with {
        roots.extend(w.cte_tables.iter().map(|c| &*c.query as *const Query as usize));
    }
    let many = roots.len() > 1;
    let mut each = Each { known: &known, roots: &roots, many, depth: 0, fired };
    let _ = VisitMut::visit(&mut **q, &mut each);
}

/// The names a statement makes known, and what each CTE returns (None when not known).
struct Known<'a> {
    schema: &'a Schema,
    names: HashSet<String>,
    ctes: HashMap<String, Option<Vec<String>>>,
    /// Column references (as written) that a requalification could turn into a comparison of
    /// a column with itself, or a join condition into one relation's: (join keys, compared),
    /// from `columns::paired_columns`.
    paired: (HashSet<String>, HashSet<String>),
    /// A CTE's scope is not the whole statement's.
    unclear: bool,
    /// A FROM item is known by a name `names` lacks (a function's, UNNEST's without an alias).
    unnamed: bool,
    /// A FROM item's columns are not known (a function's, a relation not shown).
    opaque: bool,
    depth: usize,
}

impl VisitorMut for Known<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        if let Some(w) = &q.with {
            if self.depth > 1 {
                self.unclear = true;
            }
            for cte in &w.cte_tables {
                let name = fold(&cte.alias.name);
                if self.ctes.contains_key(&name) || self.schema.tables.iter().any(|t| t.name == name) {
                    self.unclear = true;
                }
                let mut out = returned(&cte.query, self.schema, &self.ctes);
                if let (Some(cols), false) = (out.as_mut(), cte.alias.columns.is_empty()) {
                    rename(cols, cte.alias.columns.iter().map(|c| fold(&c.name)));
                }
                self.names.extend(out.iter().flatten().cloned());
                self.names.insert(name.clone());
                self.ctes.insert(name, out);
            }
        }
        ControlFlow::Continue(())
    }
    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
    fn pre_visit_select(&mut self, s: &mut Select) -> ControlFlow<()> {
        self.names.extend(aliases(s));
        ControlFlow::Continue(())
    }
    fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        // Every FROM item's name and column names (a function's, UNNEST's): a whole-row
        // reference or a correlated column, never a typo.
        if let Some(a) = crate::sqlinfo::table_alias(t) {
            self.names.insert(fold(&a.name));
            self.names.extend(a.columns.iter().map(|c| fold(&c.name)));
        }
        if let TableFactor::Table { name, .. } = t {
            if let Some((_, n)) = super::relation_name(name) {
                self.names.insert(n);
            }
        }
        let named_here = matches!(t, TableFactor::Table { .. } | TableFactor::Derived { .. } | TableFactor::NestedJoin { .. });
        if !named_here && crate::sqlinfo::table_alias(t).is_none() {
            self.unnamed = true;
        }
        if !matches!(t, TableFactor::NestedJoin { .. }) && relation(t, self.schema, &self.ctes).is_none() {
            self.opaque = true;
        }
        match t {
            TableFactor::Table { name, .. } => {
                if let Some(i) = super::find_table(self.schema, name) {
                    self.names.extend(self.schema.tables[i].columns.iter().map(|c| c.name.clone()));
                }
            }
            TableFactor::Derived { subquery, .. } => {
                self.names.extend(returned(subquery, self.schema, &self.ctes).into_iter().flatten());
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Column names in order, the first ones renamed by a column list (`AS s(a, b)`).
fn rename(cols: &mut [String], names: impl Iterator<Item = String>) {
    for (c, n) in cols.iter_mut().zip(names) {
        *c = n;
    }
}

/// What a query returns, named as PostgreSQL names its columns; None when that is not known
/// here (`*`, a set operation's first branch not a SELECT).
pub(super) fn returned(q: &Query, schema: &Schema, ctes: &HashMap<String, Option<Vec<String>>>) -> Option<Vec<String>> {
    let s = first_select(q)?;
    let mut out = Vec::new();
    for item in &s.projection {
        match item {
            SelectItem::ExprWithAlias { alias, .. } => out.push(fold(alias)),
            SelectItem::UnnamedExpr(e) => out.push(output_name(e)),
            // `t.*` of a table of the schema, or of a CTE known here.
            SelectItem::QualifiedWildcard(..) | SelectItem::Wildcard(_) => {
                let [from] = s.from.as_slice() else { return None };
                if !from.joins.is_empty() {
                    return None;
                }
                out.extend(relation(&from.relation, schema, ctes)?.columns);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The SELECT that names a query's columns: its own, or a set operation's first branch's; None
/// where that is not a SELECT (`VALUES`, `TABLE t`, a parenthesised query).
pub(super) fn first_select(q: &Query) -> Option<&Select> {
    let mut body = q.body.as_ref();
    while let SetExpr::SetOperation { left, .. } = body {
        body = left.as_ref();
    }
    match body {
        SetExpr::Select(s) => Some(s.as_ref()),
        _ => None,
    }
}

/// The name PostgreSQL gives an unnamed output column.
fn output_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => fold(i),
        Expr::CompoundIdentifier(p) => p.last().map(fold).unwrap_or_default(),
        Expr::Nested(inner) | Expr::Cast { expr: inner, .. } => output_name(inner),
        Expr::Function(f) => f.name.0.last().and_then(|p| p.as_ident()).map(fold).unwrap_or_default(),
        _ => "?column?".to_string(),
    }
}

/// One FROM item as a relation; None when what it returns is not known.
fn relation(t: &TableFactor, schema: &Schema, ctes: &HashMap<String, Option<Vec<String>>>) -> Option<Relation> {
    match t {
        TableFactor::Table { name, alias, args: None, .. } => {
            let (qualifier, want) = super::relation_name(name)?;
            let by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| want.clone());
            let mut found = match ctes.get(&want) {
                Some(cols) if qualifier.is_none() => Relation { by, name: want.clone(), columns: cols.clone()?, derived: true },
                _ => {
                    let i = super::find_table(schema, name)?;
                    let t = &schema.tables[i];
                    Relation { by, name: t.name.clone(), columns: t.columns.iter().map(|c| c.name.clone()).collect(), derived: false }
                }
            };
            if let Some(a) = alias {
                rename(&mut found.columns, a.columns.iter().map(|c| fold(&c.name)));
            }
            Some(found)
        }
        TableFactor::Derived { subquery, alias: Some(a), .. } => {
            let mut columns = returned(subquery, schema, ctes)?;
            rename(&mut columns, a.columns.iter().map(|c| fold(&c.name)));
            Some(Relation { by: fold(&a.name), name: fold(&a.name), columns, derived: true })
        }
        _ => None,
    }
}

struct Each<'a> {
    known: &'a Known<'a>,
    roots: &'a HashSet<usize>,
    /// Whether the statement has several blocks nothing encloses (it has a WITH).
    many: bool,
    depth: usize,
    fired: &'a mut Vec<String>,
}

impl VisitorMut for Each<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        let root = self.roots.contains(&(&*q as *const Query as usize));
        let order_by = &mut q.order_by;
        let SetExpr::Select(s) = q.body.as_mut() else { return ControlFlow::Continue(()) };
        let Some(rels) = block(s, self.known.schema, &self.known.ctes) else { return ControlFlow::Continue(()) };
        // A block that reads a CTE or a subquery, or one of a WITH's blocks: the other rules
        // read every table of the statement as one scope, which is this block's only when the
        // statement is one block reading tables.
        if !rels.iter().any(|r| r.derived) && !(root && self.many) {
            return ControlFlow::Continue(());
        }
        let block = Block { known: self.known, rels: &rels, root, aliases: aliases(s) };
        // What a bare column of the select list is named stays the name written: the block
        // may be a CTE or subquery another block reads by it.
        if self.depth > 1 {
            for item in s.projection.iter_mut() {
                if let SelectItem::UnnamedExpr(e @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_))) = item {
                    let written = output_name(e);
                    let mut one = Vec::new();
                    fix_one(e, &block, &mut one);
                    let renamed = output_name(e) != written;
                    self.fired.extend(one);
                    if renamed {
                        let expr = std::mem::replace(e, Expr::Value(sqlparser::ast::Value::Null.with_empty_span()));
                        *item = SelectItem::ExprWithAlias { expr, alias: ident(&written) };
                    }
                }
            }
        }
        let mut fix = |e: &mut Expr| fix_one(e, &block, self.fired);
        super::top_level_exprs(&mut **s, &mut fix);
        if let Some(ob) = order_by.as_mut() {
            super::top_level_exprs(ob, &mut fix);
        }
        ControlFlow::Continue(())
    }
    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

/// A block's relations, whether nothing encloses it, and its output aliases (which GROUP BY
/// and ORDER BY may name).
struct Block<'a> {
    /// What the whole statement makes known.
    known: &'a Known<'a>,
    rels: &'a [Relation],
    root: bool,
    aliases: Vec<String>,
}

/// Columns every table has that no schema lists.
const SYSTEM_COLUMNS: &[&str] = &["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"];

impl Known<'_> {
    /// Whether a column reference (as written) is paired with another.
    fn paired(&self, written: &str) -> bool {
        self.paired.0.contains(written) || self.paired.1.contains(written)
    }
}

/// What a SELECT's output columns are named (`count` for an unnamed `count(*)`), which its
/// ORDER BY and GROUP BY may use.
fn aliases(s: &Select) -> Vec<String> {
    s.projection
        .iter()
        .filter_map(|p| match p {
            SelectItem::ExprWithAlias { alias, .. } => Some(fold(alias)),
            // a bare column is the column itself, not a name of the list's own
            SelectItem::UnnamedExpr(Expr::Identifier(_) | Expr::CompoundIdentifier(_)) => None,
            SelectItem::UnnamedExpr(e) => Some(output_name(e)).filter(|n| n != "?column?"),
            _ => None,
        })
        .collect()
}

/// The relations of a SELECT's FROM; None when one of them is not known.
fn block(s: &Select, schema: &Schema, ctes: &HashMap<String, Option<Vec<String>>>) -> Option<Vec<Relation>> {
    let mut rels = Vec::new();
    for f in &s.from {
        rels.push(relation(&f.relation, schema, ctes)?);
        for j in &f.joins {
            rels.push(relation(&j.relation, schema, ctes)?);
        }
    }
    Some(rels)
}

/// A column reference of a block: replaced when its relation (or, unqualified, the block)
/// returns no column of that name and exactly one that matches it.
fn fix_one(e: &mut Expr, b: &Block, fired: &mut Vec<String>) {
    let known = b.known;
    let rels = b.rels;
    let (qualifier, want) = match &*e {
        Expr::Identifier(i) => (None, fold(i)),
        Expr::CompoundIdentifier(p) if p.len() == 2 => (Some(fold(&p[0])), fold(&p[1])),
        _ => return,
    };
    if super::NOT_COLUMNS.contains(&want.as_str()) || want.starts_with(crate::grammar::NOTHING_FITS) {
        return;
    }
    let columns: Vec<&str> = match &qualifier {
        Some(q) => {
            let r = match rels.iter().filter(|r| r.by == *q).collect::<Vec<_>>()[..] {
                [r] => r,
                // A qualifier no block of the statement declares (every FROM item's name
                // known): the one relation of the block returning the column; not when it
                // names a CTE or table that has the column (the query may need that relation:
                // joining it is another rule's, or the correction's).
                [] if !known.names.contains(q) && !known.unnamed => {
                    let names_holder = known.ctes.get(q).is_some_and(|c| c.as_ref().is_none_or(|c| c.contains(&want)))
                        || known.schema.tables.iter().any(|t| t.name == *q && t.has_column(&want));
                    if !names_holder && !known.paired(&e.to_string()) {
                        requalify(e, q, &want, b, None, fired);
                    }
                    return;
                }
                // An enclosing block's, or declared twice: not this block's to judge.
                _ => return,
            };
            if r.columns.contains(&want) {
                return;
            }
            // A table's column: typos are the column rule's; written with the wrong relation,
            // the one other relation of the block returning it (the column rule leaves a
            // block reading a subquery or a CTE alone); else the column after the table's
            // name (`t1.adverse_event_id` for the `id` of adverse_events).
            if !r.derived {
                if rels.iter().any(|o| o.columns.contains(&want)) {
                    // Not where the table may have it after all: a system column, a table
                    // whose name several schemas hold (which one PostgreSQL reads is the
                    // search path's); not where the column rule finds it a column of the
                    // table's own (a typo, a part of its name, the name after the table's).
                    let own: Vec<&str> = r.columns.iter().map(String::as_str).collect();
                    let like_own = matching(&want, &own).is_some()
                        || crate::text::name_made_of(&want, own.iter().copied()).is_some()
                        || prefixed(&want, &[(r.name.as_str(), r.columns.as_slice())]).is_some();
                    if !known.schema.name_in_several_schemas(&r.name) && !like_own && !SYSTEM_COLUMNS.contains(&want.as_str()) && !known.paired(&e.to_string()) {
                        requalify(e, q, &want, b, Some(r.by.as_str()), fired);
                    }
                    return;
                }
                if let Some(best) = prefixed(&want, &[(r.name.as_str(), r.columns.as_slice())]) {
                    replace(e, q, best, fired);
                }
                return;
            }
            r.columns.iter().map(String::as_str).collect()
        }
        None => {
            // In a block something encloses, a name the statement knows anywhere, or any name
            // where a FROM item's columns are not known, may be an enclosing block's column.
            if (!b.root && (known.names.contains(&want) || known.opaque))
                || b.aliases.contains(&want)
                || rels.iter().any(|r| r.columns.contains(&want) || r.by == want || r.name == want)
            {
                return;
            }
            rels.iter().flat_map(|r| r.columns.iter().map(String::as_str)).collect()
        }
    };
    let owners: Vec<(&str, &[String])> = match &qualifier {
        Some(q) => rels.iter().filter(|r| r.by == *q).map(|r| (r.name.as_str(), r.columns.as_slice())).collect(),
        None => rels.iter().map(|r| (r.name.as_str(), r.columns.as_slice())).collect(),
    };
    let Some(best) = matching(&want, &columns).or_else(|| prefixed(&want, &owners)) else { return };
    // Unqualified, the replacement must itself be unambiguous in the block.
    if qualifier.is_none() && columns.iter().filter(|c| **c == best).count() > 1 {
        return;
    }
    replace(e, qualifier.as_deref().unwrap_or(""), best, fired);
}

/// `q.want` qualified with the one relation of the block, other than `except`, that returns
/// `want`; left as written when none or several do.
fn requalify(e: &mut Expr, q: &str, want: &str, b: &Block, except: Option<&str>, fired: &mut Vec<String>) {
    let holders: Vec<&Relation> = b.rels.iter().filter(|r| Some(r.by.as_str()) != except && r.columns.iter().any(|c| c == want)).collect();
    let [owner] = holders[..] else { return };
    if let Expr::CompoundIdentifier(p) = e {
        if p.len() == 2 {
            fired.push(format!("agent: column {q}.{} -> {}.{} (the relation of the block that returns it)", p[1], owner.by, p[1]));
            p[0] = ident(&owner.by);
        }
    }
}

/// `e` (a column, `q`-qualified unless `q` is empty) made `best`, and the rule said.
fn replace(e: &mut Expr, q: &str, best: &str, fired: &mut Vec<String>) {
    let fixed = ident(best);
    let to = if q.is_empty() { fixed.to_string() } else { format!("{q}.{fixed}") };
    fired.push(format!("agent: column {e} -> {to} (what the relation returns)"));
    match e {
        Expr::Identifier(i) => *i = fixed,
        Expr::CompoundIdentifier(p) if p.len() == 2 => p[1] = fixed,
        _ => {}
    }
}

/// The one column of `columns` that `want` names: the same but for case or a typo; else the
/// same words in another order; else one whose words hold `want`'s in a row. Each step must
/// find exactly one.
pub(super) fn matching<'a>(want: &str, columns: &[&'a str]) -> Option<&'a str> {
    let mut unique: Vec<&str> = columns.iter().copied().filter(|c| !c.is_empty() && *c != "?column?").collect();
    unique.sort_unstable();
    unique.dedup();
    if let Some(best) = closest(want, unique.iter().copied()) {
        return Some(best);
    }
    let words = |s: &str| -> Vec<String> { s.split('_').filter(|w| !w.is_empty()).map(str::to_lowercase).collect() };
    let w = words(want);
    if w.is_empty() {
        return None;
    }
    let mut sorted_w = w.clone();
    sorted_w.sort();
    let same: Vec<&str> = unique.iter().copied().filter(|c| {
        let mut cw = words(c);
        cw.sort();
        cw == sorted_w
    }).collect();
    if let [one] = same.as_slice() {
        return Some(one);
    }
    let found: Vec<&str> = unique
        .iter()
        .copied()
        .filter(|c| {
            let cw = words(c);
            cw.len() > w.len() && cw.windows(w.len()).any(|x| x == w.as_slice())
        })
        .collect();
    match found.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

/// The one column `want` names with its relation's name before it: `salesperson_id` for the
/// `id` of `salespersons`, `customer_name` for the `name` of `customer` (the name as written,
/// or without a final `s`).
pub(super) fn prefixed<'a>(want: &str, owners: &[(&str, &'a [String])]) -> Option<&'a str> {
    let w = want.to_lowercase();
    let mut found: Vec<(usize, &str)> = Vec::new();
    for (i, (name, columns)) in owners.iter().enumerate() {
        let n = name.to_lowercase();
        for stem in [n.as_str(), n.strip_suffix('s').unwrap_or(&n)] {
            if let Some(rest) = w.strip_prefix(stem).and_then(|r| r.strip_prefix('_')) {
                found.extend(columns.iter().filter(|c| c.as_str() == rest).map(|c| (i, c.as_str())));
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    // one column of one relation
    match found.as_slice() {
        [(_, one)] => Some(one),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
