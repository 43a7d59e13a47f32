//! Agent alignments of column names, each fixed with the tables its SELECT may read: a typo,
//! a column written with the wrong table or with a name the statement never declares, a column
//! named by a part of its name.

use super::{closest, find_table, fold, ident, relation_name, resolve, Scope, NOT_COLUMNS};
use crate::schema::Schema;
use sqlparser::ast::{BinaryOperator, Expr, OrderBy, Query, Select, SetExpr, Statement, TableFactor, Visit, VisitMut, Visitor, VisitorMut};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Every name the statement declares for a relation, folded: each FROM item's alias, and the
/// name of each table, view or CTE it reads (schema-qualified or not, shown to the model or
/// not). A qualifier outside this set is one PostgreSQL rejects (missing FROM-clause entry).
fn declared_names(stmt: &Statement) -> HashSet<String> {
    struct Declared(HashSet<String>);
    impl Visitor for Declared {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            for cte in q.with.iter().flat_map(|w| &w.cte_tables) {
                self.0.insert(fold(&cte.alias.name));
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, .. } = t {
                if let Some((_, n)) = relation_name(name) {
                    self.0.insert(n);
                }
            }
            let alias = match t {
                TableFactor::Table { alias, .. }
                | TableFactor::Derived { alias, .. }
                | TableFactor::Function { alias, .. }
                | TableFactor::UNNEST { alias, .. }
                | TableFactor::NestedJoin { alias, .. } => alias.as_ref(),
                _ => None,
            };
            // Any other kind of FROM item (a pivot, a JSON table): nothing is known undeclared.
            let known = matches!(
                t,
                TableFactor::Table { .. } | TableFactor::Derived { .. } | TableFactor::Function { .. } | TableFactor::UNNEST { .. } | TableFactor::NestedJoin { .. }
            );
            if !known {
                self.0.insert(String::new());
            }
            self.0.extend(alias.map(|a| fold(&a.name)));
            ControlFlow::Continue(())
        }
    }
    let mut d = Declared(HashSet::new());
    let _ = stmt.visit(&mut d);
    d.0
}

pub(super) fn fix_columns(schema: &Schema, sc: &Scope, stmt: &mut Statement, fired: &mut Vec<String>) {
    let declared = declared_names(stmt);
    // Both sides of `a.x = b.x`: a join on a column of that name, whose tables stay as written
    // (given the other table, `a.x` would become `b.x = b.x`); and any column compared with
    // another column.
    let mut join_keys: HashSet<String> = HashSet::new();
    let mut compared: HashSet<String> = HashSet::new();
    let _ = sqlparser::ast::visit_expressions(&*stmt, |e| {
        if let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = e {
            if let (Expr::CompoundIdentifier(l), Expr::CompoundIdentifier(r)) = (left.as_ref(), right.as_ref()) {
                if l.last().map(fold) == r.last().map(fold) {
                    join_keys.extend([left.to_string(), right.to_string()]);
                }
                compared.extend([left.to_string(), right.to_string()]);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    let mut fixer = ColumnFixer { schema, sc, declared, join_keys, compared, fired, levels: Vec::new(), bodies: Vec::new() };
    let _ = stmt.visit(&mut fixer);
}

/// The tables a SELECT's own FROM reads (not its subqueries').
fn level_tables(schema: &Schema, s: &Select) -> Vec<usize> {
    fn factor(schema: &Schema, t: &TableFactor, out: &mut Vec<usize>) {
        match t {
            TableFactor::Table { name, args: None, .. } => out.extend(find_table(schema, name)),
            TableFactor::NestedJoin { table_with_joins, .. } => {
                factor(schema, &table_with_joins.relation, out);
                for j in &table_with_joins.joins {
                    factor(schema, &j.relation, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for twj in &s.from {
        factor(schema, &twj.relation, &mut out);
        for j in &twj.joins {
            factor(schema, &j.relation, &mut out);
        }
    }
    out
}

/// Column names fixed where they are written: a reference may take a column of its own
/// SELECT's tables or of an enclosing one's, as PostgreSQL resolves it, never of a table only
/// a subquery or a sibling block reads.
struct ColumnFixer<'a> {
    schema: &'a Schema,
    sc: &'a Scope,
    declared: HashSet<String>,
    join_keys: HashSet<String>,
    compared: HashSet<String>,
    fired: &'a mut Vec<String>,
    /// The FROM tables of each enclosing SELECT (or query's ORDER BY), outermost first.
    levels: Vec<Vec<usize>>,
    /// The FROM tables of each enclosing query's body, for its ORDER BY.
    bodies: Vec<Vec<usize>>,
}

impl VisitorMut for ColumnFixer<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        let tables = match q.body.as_ref() {
            SetExpr::Select(s) => level_tables(self.schema, s),
            _ => Vec::new(),
        };
        self.bodies.push(tables);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.bodies.pop();
        ControlFlow::Continue(())
    }

    // A query's ORDER BY reads its body's tables (its CTEs never see them).
    fn pre_visit_order_by(&mut self, _: &mut OrderBy) -> ControlFlow<()> {
        self.levels.push(self.bodies.last().cloned().unwrap_or_default());
        ControlFlow::Continue(())
    }

    fn post_visit_order_by(&mut self, _: &mut OrderBy) -> ControlFlow<()> {
        self.levels.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, s: &mut Select) -> ControlFlow<()> {
        self.levels.push(level_tables(self.schema, s));
        ControlFlow::Continue(())
    }

    fn post_visit_select(&mut self, _: &mut Select) -> ControlFlow<()> {
        self.levels.pop();
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        self.fix(e);
        ControlFlow::Continue(())
    }
}

impl ColumnFixer<'_> {
    /// The tables a reference here may read: its SELECT's and the enclosing ones'.
    fn visible(&self) -> Vec<usize> {
        if self.levels.is_empty() {
            return self.sc.tables.clone();
        }
        let mut v: Vec<usize> = self.levels.iter().flatten().copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn requalify(&mut self, e: &mut Expr, owner: String, note: String) {
        if let Expr::CompoundIdentifier(parts) = e {
            self.fired.push(note);
            let n = parts.len();
            *parts = vec![ident(&owner), parts[n - 1].clone()];
        }
    }

    fn fix(&mut self, e: &mut Expr) {
        let (schema, sc) = (self.schema, self.sc);
        let (qualifier, name) = match e {
            Expr::Identifier(i) => (None, i.clone()),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => (Some(fold(&parts[parts.len() - 2])), parts[parts.len() - 1].clone()),
            _ => return,
        };
        let want = fold(&name);
        // The grammar's name for "no column fits" is evidence for abstention, never a typo
        // (unless some table has a column of that name).
        let nothing_fits = want.starts_with(crate::grammar::NOTHING_FITS) && !schema.tables.iter().any(|t| t.has_column(&want));
        if resolve(schema, sc, e).is_some() || sc.other.contains(&want) || NOT_COLUMNS.contains(&want.as_str()) || nothing_fits {
            return;
        }
        let visible = self.visible();
        let written = e.to_string();
        let tables: Vec<usize> = match &qualifier {
            Some(q) => match sc.names.get(q) {
                Some(t) => vec![*t],
                // A qualifier the statement never declares (`employee.employee_id` with no
                // employee in FROM): the one table here with a column of that exact name,
                // never one of a CTE or derived table, never a column compared with another
                // (`ON x.a = t.b` would join a table to itself).
                None => {
                    if !self.declared.contains(q) && !self.declared.contains("") && !self.compared.contains(&written) {
                        if let Some(owner) = other_holder(schema, sc, &visible, q, &want) {
                            let note = format!("agent: column {q}.{name} -> {owner}.{name} ({q} is not in FROM)");
                            self.requalify(e, owner, note);
                        }
                    }
                    return;
                }
            },
            None => visible.clone(),
        };
        // A table here has the column under this exact name (several: ambiguous, not wrong).
        if qualifier.is_none() && tables.iter().any(|&t| schema.tables[t].has_column(&want)) {
            return;
        }
        let names: Vec<&str> = tables.iter().flat_map(|&t| schema.tables[t].columns.iter().map(|c| c.name.as_str())).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        // A typo of one of its table's columns; else, written with the wrong table, the one
        // other table here that has it; else a longer name made of it.
        let best = closest(&want, unique.iter().copied());
        if best.is_none() && !self.join_keys.contains(&written) {
            if let Some(q) = &qualifier {
                if let Some(owner) = other_holder(schema, sc, &visible, q, &want) {
                    let note = format!("agent: column {q}.{name} -> {owner}.{name}");
                    self.requalify(e, owner, note);
                    return;
                }
            }
        }
        if let Some(best) = best.or_else(|| made_of(&want, unique.iter().copied())) {
            // Unqualified, and the fix would be ambiguous itself: leave it to PostgreSQL.
            if qualifier.is_none() && names.iter().filter(|n| **n == best).count() > 1 {
                return;
            }
            let fixed = ident(best);
            self.fired.push(format!("agent: column {name} -> {fixed}"));
            match e {
                Expr::Identifier(i) => *i = fixed,
                Expr::CompoundIdentifier(parts) => {
                    if let Some(last) = parts.last_mut() {
                        *last = fixed;
                    }
                }
                _ => {}
            }
        }
    }
}

/// How the statement refers to the one table of `visible`, other than `qualifier`'s, that has
/// `column`: its alias, or its name when it has none. None when no table or several do.
fn other_holder(schema: &Schema, sc: &Scope, visible: &[usize], qualifier: &str, column: &str) -> Option<String> {
    let own = sc.names.get(qualifier).copied();
    let holders: Vec<usize> =
        visible.iter().copied().filter(|&t| Some(t) != own && schema.tables[t].has_column(column)).collect();
    let [t] = holders.as_slice() else { return None };
    let refs: Vec<&String> = sc.names.iter().filter(|(_, i)| **i == *t).map(|(n, _)| n).collect();
    // An aliased table is known by its alias only.
    let aliases: Vec<&String> = refs.iter().copied().filter(|n| **n != schema.tables[*t].name).collect();
    match (aliases.as_slice(), refs.as_slice()) {
        ([a], _) => Some((*a).clone()),
        ([], [n]) => Some((*n).clone()),
        _ => None,
    }
}

/// The one name among `names` whose words (split at underscores) contain all of `want`'s in a
/// row: `age` for pet_age, `first name` never (one name, not two).
fn made_of<'a>(want: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let words: Vec<&str> = want.split('_').filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return None;
    }
    let found: Vec<&str> = names
        .filter(|n| {
            let parts: Vec<&str> = n.split('_').collect();
            parts.len() > words.len() && parts.windows(words.len()).any(|w| w == words.as_slice())
        })
        .collect();
    match found.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}
