//! Agent alignments: names of tables and columns, and string values, made the ones the catalog
//! and the value index hold.

use super::{closest, find_table, fold, ident, object_name, parsed_joins, relation_name, resolve, top_level_exprs, Scope, ValueLookup, NOT_COLUMNS};
use crate::schema::{ForeignKey, Schema, Table};
use sqlparser::ast::{BinaryOperator, Expr, GroupByExpr, ObjectName, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, Value, Visit, VisitMut, Visitor, VisitorMut};
use std::ops::ControlFlow;

pub(super) use crate::schema::on_search_path;

/// Whether a name written without its schema may be read as `t`: on the search path, or off it
/// with an owner the caller trusts (introspection's `owner_trusted`: a superuser, the database's
/// owner or the caller). Another role's table of the name
/// the model wrote (`mallory.customer` for `customers`) is never taken for it: she could plant
/// one. [`find_table`] reads bare names so for every rule.
pub(crate) fn may_stand_for(t: &Table) -> bool {
    !t.is_strangers()
}

/// The schema most of the statement's schema-qualified tables are in (ties: none).
fn main_schema(stmt: &Statement) -> Option<String> {
    struct Schemas(Vec<String>);
    impl Visitor for Schemas {
        type Break = ();
        fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, .. } = t {
                if let Some((Some(s), _)) = relation_name(name) {
                    self.0.push(s);
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut found = Schemas(Vec::new());
    let _ = Visit::visit(stmt, &mut found);
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in found.0 {
        match counts.iter_mut().find(|(x, _)| *x == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    match counts.as_slice() {
        [(s, n), rest @ ..] if rest.first().is_none_or(|(_, m)| m < n) => Some(s.clone()),
        _ => None,
    }
}

pub(super) fn fix_tables(schema: &Schema, stmt: &mut Statement, shown: &[String], fired: &mut Vec<String>) {
    let ctes = cte_names(stmt);
    struct Fix<'a> {
        schema: &'a Schema,
        ctes: &'a [String],
        preferred: Option<String>,
        shown: &'a [String],
        fired: &'a mut Vec<String>,
    }
    impl VisitorMut for Fix<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, args: None, .. } = t {
                let Some((qualifier, want)) = relation_name(name) else { return ControlFlow::Continue(()) };
                if self.ctes.contains(&want) && qualifier.is_none() {
                    return ControlFlow::Continue(());
                }
                if let Some(i) = find_table(self.schema, name) {
                    // Written without its schema, a table off the search path does not resolve:
                    // the one table of that name, or the one in the schema the statement's
                    // other tables are in (several schemas may hold a `singer`).
                    let same: Vec<&Table> = self.schema.tables.iter().filter(|x| x.name == want).collect();
                    // PostgreSQL resolves it when one of that name is on the search path.
                    if qualifier.is_some() || on_search_path(&self.schema.tables[i].ident) || same.iter().any(|x| on_search_path(&x.ident)) {
                        return ControlFlow::Continue(());
                    }
                    // find_table found a trusted one; an untrusted twin is never chosen.
                    let same: Vec<&Table> = same.into_iter().filter(|x| may_stand_for(x)).collect();
                    if let Some(t) = choose(&same, self.preferred.as_deref(), self.shown).filter(|t| !on_search_path(&t.ident)) {
                        requalify(name, t, self.fired);
                    }
                    return ControlFlow::Continue(());
                }
                // A name no table has (or only tables of owners not trusted, which find_table
                // skips): the closest name of the schema written, else of any the name may
                // stand for, and
                // of several tables of that name the one `choose` picks (the catalog's order
                // decides nothing: another owner may name a schema to sort first).
                let written = |t: &&Table| match &qualifier {
                    Some(q) => *q == t.schema,
                    None => may_stand_for(t),
                };
                let names = self.schema.tables.iter().filter(written).map(|t| t.name.as_str());
                if let Some(best) = closest(&want, names) {
                    let same: Vec<&Table> = self.schema.tables.iter().filter(written).filter(|t| t.name == best).collect();
                    if let Some(t) = choose(&same, self.preferred.as_deref(), self.shown) {
                        requalify(name, t, self.fired);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    // Twice: the first pass qualifies the names only one schema holds, so that the second knows
    // which schema the statement is in when a name is in several.
    // When the statement has no schema of its own, the tables the prompts showed decide.
    let _ = stmt.visit(&mut Fix { schema, ctes: &ctes, preferred: None, shown: &[], fired });
    let preferred = main_schema(stmt);
    let shown = if preferred.is_some() { &[][..] } else { shown };
    if preferred.is_some() || !shown.is_empty() {
        let _ = stmt.visit(&mut Fix { schema, ctes: &ctes, preferred, shown, fired });
    }
}

/// The names of the statement's CTEs, folded.
pub(super) fn cte_names<V: Visit>(node: &V) -> Vec<String> {
    let mut ctes = Vec::new();
    let _ = Visit::visit(node, &mut CteNames(&mut ctes));
    ctes
}

struct CteNames<'a>(&'a mut Vec<String>);

impl Visitor for CteNames<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if let Some(w) = &q.with {
            self.0.extend(w.cte_tables.iter().map(|c| fold(&c.alias.name)));
        }
        ControlFlow::Continue(())
    }
}

fn string_literal(e: &Expr) -> Option<&str> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

fn set_literal(e: &mut Expr, s: &str) {
    *e = Expr::Value(Value::SingleQuotedString(s.to_string()).with_empty_span());
}

/// Whether a stored value may go into a query as a string literal: not one holding a backslash,
/// which PostgreSQL reads as an escape where standard_conforming_strings is off (the session's
/// setting, which nl2sql's guard and the caller both parse with; sqlparser never does), so that
/// the value could end its literal early.
fn insertable(v: &str) -> bool {
    !v.contains('\\')
}

pub(super) fn fix_values(schema: &Schema, sc: &Scope, stmt: &mut Statement, values: &mut dyn ValueLookup, fired: &mut Vec<String>) {
    let mut lookup = |col: &Expr, lit: &mut Expr, fired: &mut Vec<String>| {
        let (Some((t, c)), Some(old)) = (resolve(schema, sc, col), string_literal(lit).map(str::to_string)) else { return };
        let table = &schema.tables[t];
        let column = &table.columns[c];
        // A stranger's stored values are her words: none is written into a query.
        if !matches!(column.category.as_str(), "S" | "E" | "") || table.is_strangers() {
            return;
        }
        // Every value of the column is known from the statistics: no index needed.
        if let Some(st) = column.stats.as_ref().filter(|s| s.complete && s.distinct as usize == s.values.len() && s.distinct > 0) {
            if st.values.contains(&old) {
                return;
            }
            let folded = crate::text::fold(&old);
            let same: Vec<&String> = st.values.iter().filter(|v| crate::text::fold(v) == folded).collect();
            if let [stored] = same.as_slice() {
                if !insertable(stored) {
                    return;
                }
                fired.push(format!("agent: value {}.{} '{old}' -> '{stored}'", table.ident, column.ident));
                set_literal(lit, stored);
                return;
            }
            // A column of one- or two-letter codes ('F', 'M') and the word spelled out
            // ('Female'): the one code the word starts with.
            if folded.len() > 2 && st.values.iter().all(|v| crate::text::fold(v).len() <= 2) {
                let codes: Vec<&String> = st.values.iter().filter(|v| {
                    let code = crate::text::fold(v);
                    !code.is_empty() && folded.starts_with(&code)
                }).collect();
                if let [code] = codes.as_slice() {
                    if !insertable(code) {
                        return;
                    }
                    fired.push(format!("agent: value {}.{} '{old}' -> '{code}' (a code)", table.ident, column.ident));
                    set_literal(lit, code);
                    return;
                }
            }
        }
        if let Some(stored) = values.closest_value(table.oid, &column.name, &old).filter(|v| insertable(v)) {
            if stored != old {
                fired.push(format!("agent: value {}.{} '{old}' -> '{stored}'", table.ident, column.ident));
                set_literal(lit, &stored);
            }
        }
    };
    let _ = sqlparser::ast::visit_expressions_mut(stmt, |e| {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::Eq | BinaryOperator::NotEq, right } => {
                if string_literal(right).is_some() {
                    lookup(left, right, fired);
                } else if string_literal(left).is_some() {
                    lookup(right, left, fired);
                }
            }
            Expr::InList { expr, list, .. } => {
                for item in list.iter_mut() {
                    lookup(expr, item, fired);
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Of tables of one name, the one meant: the one on the search path (PostgreSQL's); else, of
/// several, the one in the statement's schema (`preferred`); else the only one, or the only
/// one of them the prompts showed (`shown`, when they did not show every table). Never the
/// best ranked of several: retrieval ranks by the words of names and comments, which each
/// schema's owner writes, so another owner's table could outrank the one meant by naming
/// itself after the question. Left as written, the name fails and the correction round sees
/// why.
fn choose<'t>(same: &[&'t Table], preferred: Option<&str>, shown: &[String]) -> Option<&'t Table> {
    if let Some(visible) = same.iter().find(|t| on_search_path(&t.ident)) {
        return Some(visible);
    }
    if let [one] = same {
        return Some(*one);
    }
    if let Some(t) = same.iter().find(|x| preferred == Some(x.schema.as_str())) {
        return Some(*t);
    }
    let mut in_shown = same.iter().filter(|t| shown.contains(&t.ident));
    match (in_shown.next(), in_shown.next()) {
        (Some(t), None) => Some(*t),
        _ => None,
    }
}

/// `name` written as `t` is (its ident), with the rule's note.
fn requalify(name: &mut ObjectName, t: &Table, fired: &mut Vec<String>) {
    if let Some(fixed) = object_name(&t.ident) {
        fired.push(format!("agent: table {name} -> {}", t.ident));
        *name = fixed;
    }
}

/// The only one of `tables`; else the one of them the question was linked to, the best
/// linked when several were (`linked` comes best first).
pub(super) fn one_or_linked<'a>(tables: &[&'a Table], linked: &[String]) -> Option<&'a Table> {
    match tables {
        [one] => Some(*one),
        _ => linked.iter().find_map(|l| tables.iter().find(|t| t.ident == *l).copied()),
    }
}

/// A schema's name written as a table (`FROM sales` for sales.orders): the one table of that
/// schema holding every column the SELECT takes from it (the question's linked tables decide
/// between several). Left alone when it takes none.
pub(super) fn schema_as_table(schema: &Schema, stmt: &mut Statement, linked: &[String], fired: &mut Vec<String>) {
    struct Fix<'a> {
        schema: &'a Schema,
        linked: &'a [String],
        fired: &'a mut Vec<String>,
    }
    impl VisitorMut for Fix<'_> {
        type Break = ();
        fn pre_visit_select(&mut self, s: &mut Select) -> ControlFlow<()> {
            let used = own_columns(s);
            // The tables of this FROM that resolve, by the name the SELECT knows them by.
            let mut known: Vec<usize> = Vec::new();
            let mut schemas: Vec<(String, String)> = Vec::new();
            for f in s.from.iter().flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation))) {
                let TableFactor::Table { name, alias, args: None, .. } = f else { continue };
                if let Some(i) = find_table(self.schema, name) {
                    known.push(i);
                } else if let Some((None, want)) = relation_name(name) {
                    if self.schema.tables.iter().any(|t| t.schema == want) {
                        let by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| want.clone());
                        schemas.push((want, by));
                    }
                }
            }
            for (want, by) in schemas {
                // Its columns: those written with its name, and unqualified ones no other table has.
                let cols: Vec<&String> = used
                    .iter()
                    .filter(|(q, c)| match q {
                        Some(q) => *q == by,
                        None => !known.iter().any(|&k| self.schema.tables[k].has_column(c)),
                    })
                    .map(|(_, c)| c)
                    .collect();
                if cols.is_empty() {
                    continue;
                }
                let holds: Vec<&Table> = self
                    .schema
                    .tables
                    .iter()
                    .filter(|t| t.schema == want && may_stand_for(t) && cols.iter().all(|c| t.has_column(c)))
                    .collect();
                let Some(t) = one_or_linked(&holds, self.linked) else { continue };
                let Some(fixed) = object_name(&t.ident) else { continue };
                for f in s.from.iter_mut().flat_map(|t| std::iter::once(&mut t.relation).chain(t.joins.iter_mut().map(|j| &mut j.relation))) {
                    if let TableFactor::Table { name, alias, args: None, .. } = f {
                        let same_by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| want.clone()) == by;
                        if same_by && relation_name(name) == Some((None, want.clone())) {
                            self.fired.push(format!("agent: table {name} -> {} (a schema's name; the table with its columns)", t.ident));
                            *name = fixed.clone();
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = stmt.visit(&mut Fix { schema, linked, fired });
}

/// The column references of one SELECT (or ORDER BY), not of its subqueries: (qualifier,
/// column), folded.
pub(super) fn own_columns(node: &mut impl VisitMut) -> Vec<(Option<String>, String)> {
    let mut found = Vec::new();
    top_level_exprs(node, |e| match e {
        // `user` is a function; `"user"` a column.
        Expr::Identifier(i) if i.quote_style.is_some() || !NOT_COLUMNS.contains(&fold(i).as_str()) => found.push((None, fold(i))),
        Expr::CompoundIdentifier(p) if p.len() == 2 => found.push((Some(fold(&p[0])), fold(&p[1]))),
        _ => {}
    });
    found
}

/// Columns a one-table query takes that its table lacks and the one table a foreign key of it
/// points to has (`SELECT name FROM player` where the name is person's): that table joined on
/// the key and every column qualified. Many rows to one: the rows stay the rows of the table.
/// The statement and each of its subqueries (`... NOT IN (SELECT stuid FROM has_pet WHERE
/// pettype = 'cat')`, where the type is the pet's) on their own.
pub(super) fn join_for_columns(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    struct Each<'a> {
        schema: &'a Schema,
        sc: &'a Scope,
        fired: &'a mut Vec<String>,
        depth: usize,
    }
    impl VisitorMut for Each<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            join_one(self.schema, self.sc, q, self.depth > 0, self.fired);
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(q, &mut Each { schema, sc, fired, depth: 0 });
}

/// [`join_for_columns`] on one query: its `SELECT`, or each `SELECT` of its `UNION`,
/// `INTERSECT` or `EXCEPT` on its own (the statement's `ORDER BY` reads their output then).
fn join_one(schema: &Schema, sc: &Scope, q: &mut Query, nested: bool, fired: &mut Vec<String>) {
    match q.body.as_mut() {
        SetExpr::Select(s) => join_select(schema, sc, s, q.order_by.as_mut(), nested, fired),
        body @ SetExpr::SetOperation { .. } => {
            let mut sides: Vec<&mut SetExpr> = vec![body];
            // Each side a SELECT or another set operation; a parenthesised query is a query of
            // its own, which the walk visits.
            for _ in 0..64 {
                let Some(side) = sides.pop() else { break };
                match side {
                    SetExpr::SetOperation { left, right, .. } => sides.extend([left.as_mut(), right.as_mut()]),
                    SetExpr::Select(s) => join_select(schema, sc, s, None, nested, fired),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// [`join_for_columns`] on one `SELECT` (and the `ORDER BY` that reads its columns). In a
/// subquery (`nested`), a name that a table of the statement has may be a column of the
/// enclosing query, which PostgreSQL resolves there: then nothing is joined. A `*` becomes the
/// table's own (`by.*`): the rows are the table's, and so are the columns returned.
fn join_select(schema: &Schema, sc: &Scope, s: &mut Select, mut order_by: Option<&mut sqlparser::ast::OrderBy>, nested: bool, fired: &mut Vec<String>) {
    let [from] = s.from.as_slice() else { return };
    let TableFactor::Table { name, alias, args: None, .. } = &from.relation else { return };
    if !from.joins.is_empty() {
        return;
    }
    let Some(t) = find_table(schema, name) else { return };
    let table = &schema.tables[t];
    let by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| table.name.clone());
    let mut used = own_columns(&mut *s);
    if let Some(ob) = order_by.as_mut() {
        used.extend(own_columns(&mut **ob));
    }
    let mut missing: Vec<&str> = Vec::new();
    for (qualifier, c) in &used {
        match qualifier {
            Some(x) if *x != by => return,
            _ if table.has_column(c) || sc.other.contains(c) => {}
            None if nested && sc.tables.iter().any(|&u| u != t && schema.tables[u].has_column(c)) => return,
            _ => missing.push(c),
        }
    }
    if missing.is_empty() {
        return;
    }
    missing.sort_unstable();
    missing.dedup();
    let Some(parents) = parents_for(schema, table, &by, &missing) else { return };
    // Not a name of the statement's own (a CTE, an alias) the joined table's would stand for,
    // nor one its subqueries may read from an enclosing query that the join would capture.
    if parents.iter().any(|(_, p)| sc.other.contains(&p.name)) || captured(schema, s, &parents) {
        return;
    }
    // Nor where a name written alone that is not a column would read a joined table's column:
    // an output alias in this GROUP BY (GROUP BY prefers a column to an alias; ORDER BY does
    // not); in a subquery, any of the statement's names (an enclosing derived table's column).
    let would_read = |c: &str| parents.iter().any(|(_, p)| p.has_column(c));
    let hidden = if nested {
        used.iter().any(|(q, c)| q.is_none() && sc.other.contains(c) && would_read(c))
    } else {
        grouped_aliases(s).iter().any(|c| would_read(c))
    };
    if hidden {
        return;
    }
    let mut joins = Vec::new();
    for (fk, parent) in &parents {
        // A key's columns come as identifiers (quoted where needed), like tables' idents.
        let (key, referenced) = (&fk.columns[0], &fk.ref_columns[0]);
        let text = format!("SELECT 1 FROM x JOIN {} ON {}.{key} = {}.{referenced}", parent.ident, ident(&by), ident(&parent.name));
        let Some(join) = parsed_joins(&text).into_iter().next() else { return };
        joins.push(join);
    }
    // Every column now says its table: the tables may share names (the key's, for one).
    let mut qualify = |e: &mut Expr| {
        let (column, last) = match e {
            Expr::Identifier(i) => (fold(i), i.clone()),
            Expr::CompoundIdentifier(p) if p.len() == 2 => (fold(&p[1]), p[1].clone()),
            _ => return,
        };
        if (last.quote_style.is_none() && NOT_COLUMNS.contains(&column.as_str())) || (matches!(e, Expr::Identifier(_)) && sc.other.contains(&column)) {
            return;
        }
        let owner = if table.has_column(&column) {
            by.as_str()
        } else {
            parents.iter().find(|(_, p)| p.has_column(&column)).map_or(by.as_str(), |(_, p)| p.name.as_str())
        };
        *e = Expr::CompoundIdentifier(vec![ident(owner), last]);
    };
    top_level_exprs(&mut *s, &mut qualify);
    if let Some(ob) = order_by.as_mut() {
        top_level_exprs(&mut **ob, &mut qualify);
    }
    for p in s.projection.iter_mut() {
        if let SelectItem::Wildcard(options) = p {
            let kind = SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(vec![ident(&by)]));
            *p = SelectItem::QualifiedWildcard(kind, options.clone());
        }
    }
    for (fk, parent) in &parents {
        let read: Vec<&str> = missing.iter().copied().filter(|c| parent.has_column(c)).collect();
        fired.push(format!("agent: {} joined on {}.{} for {}", parent.ident, by, fk.columns[0], read.join(", ")));
    }
    s.from[0].joins.extend(joins);
}

/// The output aliases of `s` its GROUP BY names alone (in grouping sets, ROLLUP and CUBE too).
fn grouped_aliases(s: &Select) -> Vec<String> {
    let GroupByExpr::Expressions(keys, _) = &s.group_by else { return vec![] };
    let mut written = Vec::new();
    for key in keys {
        match key {
            Expr::Identifier(i) => written.push(fold(i)),
            Expr::Rollup(sets) | Expr::Cube(sets) | Expr::GroupingSets(sets) => {
                written.extend(sets.iter().flatten().filter_map(|e| if let Expr::Identifier(i) = e { Some(fold(i)) } else { None }));
            }
            _ => {}
        }
    }
    let aliases: Vec<String> = s
        .projection
        .iter()
        .filter_map(|p| if let SelectItem::ExprWithAlias { alias, .. } = p { Some(fold(alias)) } else { None })
        .collect();
    written.retain(|c| aliases.contains(c));
    written
}

/// Whether a subquery of `s` reads a name the tables joined for it would capture: a qualifier
/// that is one of their names (`concert.theme`, written for an enclosing query's `concert`), or
/// a column of theirs written alone that no table its subqueries read has (PostgreSQL takes it
/// from the nearest level that has it: after the join, `s`).
fn captured(schema: &Schema, s: &Select, parents: &[(&ForeignKey, &Table)]) -> bool {
    #[derive(Default)]
    struct Below {
        depth: usize,
        tables: Vec<ObjectName>,
        qualifiers: Vec<String>,
        alone: Vec<String>,
    }
    impl Visitor for Below {
        type Break = ();
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_relation(&mut self, r: &ObjectName) -> ControlFlow<()> {
            if self.depth > 0 {
                self.tables.push(r.clone());
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if self.depth > 0 {
                match e {
                    Expr::Identifier(i) => self.alone.push(fold(i)),
                    Expr::CompoundIdentifier(p) if p.len() >= 2 => self.qualifiers.push(fold(&p[p.len() - 2])),
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut below = Below::default();
    let _ = s.visit(&mut below);
    let read: Vec<&Table> = below.tables.iter().filter_map(|n| find_table(schema, n)).map(|t| &schema.tables[t]).collect();
    parents.iter().any(|(_, p)| {
        below.qualifiers.contains(&p.name) || below.alone.iter().any(|c| p.has_column(c) && !read.iter().any(|t| t.has_column(c)))
    })
}

/// The keys of `table` to join for the columns it lacks (`missing`): the one key whose table
/// has them all, or else, for each, the one key whose table has it (`SELECT make FROM
/// cars_data WHERE continent = ...` with `make` one parent's and `continent` another's), at
/// most three tables, none named as the query's table is (`by`) or as another of them. `None`
/// where a column no key or two keys reach.
fn parents_for<'s>(schema: &'s Schema, table: &Table, by: &str, missing: &[&str]) -> Option<Vec<(&'s ForeignKey, &'s Table)>> {
    let keys = schema.single_keys(table);
    let all: Vec<_> = keys.iter().filter(|(_, u)| missing.iter().all(|c| u.has_column(c))).copied().collect();
    let chosen = match all.as_slice() {
        [one] => vec![*one],
        [] => {
            let mut out: Vec<(&ForeignKey, &Table)> = Vec::new();
            for c in missing {
                let [one] = keys.iter().filter(|(_, u)| u.has_column(c)).collect::<Vec<_>>()[..] else { return None };
                if !out.iter().any(|(fk, _)| std::ptr::eq(*fk, one.0)) {
                    out.push(*one);
                }
            }
            out
        }
        _ => return None,
    };
    let mut names: Vec<&str> = vec![by];
    for (_, parent) in &chosen {
        if parent.oid == table.oid || names.contains(&parent.name.as_str()) {
            return None;
        }
        names.push(&parent.name);
    }
    (chosen.len() <= 3).then_some(chosen)
}
