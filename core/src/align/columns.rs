//! Agent alignments of column names, each fixed with the FROM items its SELECT may read, as
//! PostgreSQL resolves a name: a typo, a column written with the wrong table or with a name no
//! FROM item there declares, a column named by a part of its name.

use super::names::cte_names;
use super::levels::{qualified, walk_with, Item, Qualified, Walk, WalkingRule};
use super::{closest, fold, ident, Scope, NOT_COLUMNS};
use crate::text::name_made_of as made_of;
use crate::schema::Schema;
use sqlparser::ast::{BinaryOperator, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Query, Select, SelectItem, SetExpr, Statement, Visit, Visitor};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Column references a rewrite could turn into a comparison of a column with itself, or a join
/// condition into one table's: every column of a comparison whose operands hold more than one
/// (`a.x = b.y`, `a.x > b.y + 1`, `position(a.x IN b.y) > 0`, `a.x LIKE b.y`, `a.x IN (b.y)`,
/// BETWEEN, IS DISTINCT FROM, `= ANY`, `CASE a.x WHEN b.y`, any operator not known to combine
/// values), and columns of one name written differently in two operands of an operator,
/// function or CASE that combines values (`a.x - b.x`, `coalesce(a.x, b.x)`; not `t.x - lag(t.x)`). Columns of other names combined
/// (`t.high - t.low`) and conditions joined by AND/OR are not paired. And both sides of
/// `a.x = b.x` (a join on a column of that name).
pub(super) fn paired_columns(stmt: &Statement) -> (HashSet<String>, HashSet<String>) {
    let mut join_keys = HashSet::new();
    let mut compared = HashSet::new();
    let _ = sqlparser::ast::visit_expressions(stmt, |e| {
        let (operands, comparison) = operands(e);
        // A column compared with a subquery (`x IN (SELECT ...)`, `x = ANY (SELECT ...)`,
        // `x > (SELECT ...)`) that selects a column of its name: requalified, it could become
        // the very column a correlated reference there reads. (The subquery's own columns are
        // fixed with its own FROM items, never made an outer one.)
        let returned: Vec<(String, String)> = match e {
            Expr::InSubquery { subquery, .. } => query_columns(subquery),
            _ if comparison => operands.iter().flat_map(|o| selected_columns(o)).collect(),
            _ => Vec::new(),
        };
        if !returned.is_empty() {
            for o in &operands {
                compared.extend(columns_in(o).into_iter().filter(|(_, n)| returned.iter().any(|(_, m)| m == n)).map(|(w, _)| w));
            }
        }
        let columns: Vec<Vec<(String, String)>> = operands.into_iter().map(columns_in).filter(|c| !c.is_empty()).collect();
        if comparison && columns.iter().map(Vec::len).sum::<usize>() > 1 {
            compared.extend(columns.iter().flatten().map(|(w, _)| w.clone()));
        } else if columns.len() > 1 {
            // The same reference in two operands (`t.x - lag(t.x)`) is rewritten alike in both:
            // it pairs only with a column of its name written otherwise (`a.x - b.x`).
            for (i, own) in columns.iter().enumerate() {
                let elsewhere = |written: &str, name: &str| {
                    columns.iter().enumerate().any(|(j, c)| j != i && c.iter().any(|(w, n)| n == name && w != written))
                };
                compared.extend(own.iter().filter(|(w, name)| elsewhere(w, name)).map(|(w, _)| w.clone()));
            }
        }
        if let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = e {
            if let (Expr::CompoundIdentifier(l), Expr::CompoundIdentifier(r)) = (left.as_ref(), right.as_ref()) {
                if l.last().map(fold) == r.last().map(fold) {
                    join_keys.extend([spelled(left), spelled(right)]);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    (join_keys, compared)
}

/// (written, folded name) of the columns the subqueries in an operand select, in any form
/// (`(SELECT s.total ...) + 0`, `coalesce((SELECT ...), 0)`, each branch of a UNION).
fn selected_columns(e: &Expr) -> Vec<(String, String)> {
    struct Selected(Vec<(String, String)>);
    impl Visitor for Selected {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            self.0.extend(query_columns(q));
            ControlFlow::Continue(())
        }
    }
    let mut s = Selected(Vec::new());
    let _ = e.visit(&mut s);
    s.0
}

/// (written, folded name) of the columns a query's select lists read (every branch).
fn query_columns(q: &Query) -> Vec<(String, String)> {
    fn body(b: &SetExpr, out: &mut Vec<(String, String)>) {
        match b {
            SetExpr::Select(s) => {
                for p in &s.projection {
                    if let SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } = p {
                        out.extend(columns_in(x));
                    }
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                body(left, out);
                body(right, out);
            }
            SetExpr::Query(q) => body(&q.body, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    body(&q.body, &mut out);
    out
}

/// A column reference as the pair sets compare it: its qualifier and name, folded (`D.makeid`
/// and `public.d.makeid` are `d.makeid`).
fn spelled(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => fold(i),
        Expr::CompoundIdentifier(p) => p.iter().rev().take(2).rev().map(fold).collect::<Vec<_>>().join("."),
        _ => e.to_string(),
    }
}

/// (written, folded name) of each column reference in `e`, not in its subqueries (their
/// columns are fixed with their own FROM items, never made the outer ones).
fn columns_in(e: &Expr) -> Vec<(String, String)> {
    struct Columns {
        depth: usize,
        out: Vec<(String, String)>,
    }
    impl Visitor for Columns {
        type Break = ();
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, x: &Expr) -> ControlFlow<()> {
            match x {
                _ if self.depth > 0 => {}
                Expr::Identifier(i) => self.out.push((spelled(x), fold(i))),
                Expr::CompoundIdentifier(p) => self.out.extend(p.last().map(|i| (spelled(x), fold(i)))),
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = Columns { depth: 0, out: Vec::new() };
    let _ = e.visit(&mut c);
    c.out
}

/// The operands of an expression that compares or combines values, and whether it compares
/// them. An operator not known to combine values counts as a comparison (the side that blocks
/// a rewrite); AND/OR/XOR join conditions, each read on its own: no operands.
fn operands(e: &Expr) -> (Vec<&Expr>, bool) {
    use BinaryOperator::*;
    match e {
        Expr::BinaryOp { op: And | Or | Xor, .. } => (Vec::new(), false),
        Expr::BinaryOp { left, op, right } => {
            let combines = matches!(
                op,
                Plus | Minus | Multiply | Divide | Modulo | StringConcat | PGExp | BitwiseOr | BitwiseAnd | BitwiseXor | PGBitwiseXor
                    | PGBitwiseShiftLeft | PGBitwiseShiftRight | Arrow | LongArrow | HashArrow | HashLongArrow
            );
            (vec![left, right], !combines)
        }
        Expr::IsDistinctFrom(left, right)
        | Expr::IsNotDistinctFrom(left, right)
        | Expr::AnyOp { left, right, .. }
        | Expr::AllOp { left, right, .. }
        | Expr::Like { expr: left, pattern: right, .. }
        | Expr::ILike { expr: left, pattern: right, .. }
        | Expr::SimilarTo { expr: left, pattern: right, .. }
        | Expr::RLike { expr: left, pattern: right, .. } => (vec![left, right], true),
        Expr::InList { expr, list, .. } => (std::iter::once(expr.as_ref()).chain(list.iter()).collect(), true),
        Expr::InSubquery { expr, .. } => (vec![expr], true),
        Expr::Between { expr, low, high, .. } => (vec![expr, low, high], true),
        Expr::Case { operand: Some(operand), conditions, .. } => {
            (std::iter::once(operand.as_ref()).chain(conditions.iter().map(|w| &w.condition)).collect(), true)
        }
        Expr::Case { conditions, else_result, .. } => (conditions.iter().map(|w| &w.result).chain(else_result.as_deref()).collect(), false),
        Expr::Position { expr, r#in } => (vec![expr, r#in], false),
        Expr::Tuple(items) => (items.iter().collect(), false),
        Expr::Function(f) => (function_args(f), false),
        _ => (Vec::new(), false),
    }
}

fn function_args(f: &Function) -> Vec<&Expr> {
    let FunctionArguments::List(list) = &f.args else { return Vec::new() };
    list.args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Named { arg: FunctionArgExpr::Expr(e), .. }
            | FunctionArg::ExprNamed { arg: FunctionArgExpr::Expr(e), .. }
            | FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

/// The output names of unaliased function calls in the statement's select lists, folded:
/// `ORDER BY count` reads `count(*)`'s column.
fn function_outputs(stmt: &Statement) -> HashSet<String> {
    struct Outputs(HashSet<String>);
    impl Visitor for Outputs {
        type Break = ();
        fn pre_visit_select(&mut self, s: &Select) -> ControlFlow<()> {
            for item in &s.projection {
                if let SelectItem::UnnamedExpr(Expr::Function(f)) = item {
                    self.0.extend(f.name.0.last().and_then(|p| p.as_ident()).map(fold));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut o = Outputs(HashSet::new());
    let _ = stmt.visit(&mut o);
    o.0
}

pub(super) fn fix_columns(schema: &Schema, sc: &Scope, stmt: &mut Statement, fired: &mut Vec<String>) {
    let (join_keys, compared) = paired_columns(stmt);
    // A FROM item named as a CTE reads the CTE, whatever table has the name too.
    let ctes: HashSet<String> = cte_names(stmt).into_iter().collect();
    let outputs = function_outputs(stmt);
    let mut fixer = ColumnFixer { schema, sc, join_keys, compared, fired, outputs, walk: Walk::new(schema, ctes) };
    walk_with(stmt, &mut fixer);
}

/// Column names fixed where they are written: a reference may read the FROM items of its own
/// SELECT or of an enclosing one, as PostgreSQL resolves it, never those only a subquery, a
/// sibling subquery or another WITH block reads.
struct ColumnFixer<'a> {
    schema: &'a Schema,
    sc: &'a Scope,
    join_keys: HashSet<String>,
    compared: HashSet<String>,
    fired: &'a mut Vec<String>,
    /// Output names of unaliased function calls in any select list (`count` for `count(*)`).
    outputs: HashSet<String>,
    /// The FROM items visible where the walk is.
    walk: Walk<'a>,
}

impl<'a> WalkingRule<'a> for ColumnFixer<'a> {
    fn walk(&mut self) -> &mut Walk<'a> {
        &mut self.walk
    }

    fn expr(&mut self, e: &mut Expr) {
        self.fix(e);
    }
}

impl ColumnFixer<'_> {
    /// How to qualify the one FROM item of the reference's own level, other than `except`,
    /// holding `column` (its alias or name); never an enclosing level's, which would make a
    /// correlated reference of it. None when several do, or when an item whose columns are not
    /// known is visible.
    fn holder(&self, column: &str, except: Option<(usize, usize)>) -> Option<String> {
        if self.opaque_visible() {
            return None;
        }
        let l = self.walk.levels.len().checked_sub(1)?;
        let level = &self.walk.levels[l];
        let holders: Vec<&Item> = (0..level.len())
            .filter(|&i| Some((l, i)) != except)
            .map(|i| &level[i])
            .filter(|it| it.table.is_some_and(|t| self.schema.tables[t].has_column(column)))
            .collect();
        match holders.as_slice() {
            [one] => one.name.clone(),
            _ => None,
        }
    }

    fn opaque_visible(&self) -> bool {
        self.walk.levels.iter().flatten().any(|it| it.table.is_none())
    }

    /// The tables visible here (every level's), once per FROM item reading them.
    fn visible(&self) -> Vec<usize> {
        self.walk.levels.iter().flatten().filter_map(|it| it.table).collect()
    }

    fn requalify(&mut self, e: &mut Expr, owner: String, note: String) {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() == 2 && fold(&parts[0]) == owner {
                return;
            }
            self.fired.push(note);
            let n = parts.len();
            *parts = vec![ident(&owner), parts[n - 1].clone()];
        }
    }

    fn fix(&mut self, e: &mut Expr) {
        let schema = self.schema;
        let (qualifier, name) = match e {
            Expr::Identifier(i) => (None, i.clone()),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => (Some(fold(&parts[parts.len() - 2])), parts[parts.len() - 1].clone()),
            _ => return,
        };
        let want = fold(&name);
        // The grammar's name for "no column fits" is evidence for abstention, never a typo
        // (unless some table has a column of that name).
        let nothing_fits = want.starts_with(crate::grammar::NOTHING_FITS) && !schema.tables.iter().any(|t| t.has_column(&want));
        // Outside any SELECT, or where a FROM item's columns are not known: left as written.
        if self.walk.levels.is_empty() || self.sc.other.contains(&want) || NOT_COLUMNS.contains(&want.as_str()) || nothing_fits {
            return;
        }
        let written = spelled(e);
        let (tables, own) = match &qualifier {
            Some(q) => match qualified(&self.walk.levels, q) {
                Qualified::Table(l, i) => (self.walk.levels[l][i].table.into_iter().collect::<Vec<_>>(), Some((l, i))),
                Qualified::Opaque => return,
                // No FROM item there has that name (`employee.employee_id` with no employee in
                // FROM, an alias no FROM item declares): the one table there with a column of
                // that exact name, never a column paired with another (a rewrite could compare
                // a column with itself).
                Qualified::Undeclared => {
                    // Three parts: a schema's table, or a composite column's field
                    // (`c.info.city`): not a qualifier to replace.
                    let two_parts = matches!(e, Expr::CompoundIdentifier(p) if p.len() == 2);
                    if two_parts && !self.compared.contains(&written) {
                        if let Some(owner) = self.holder(&want, None) {
                            let note = format!("agent: column {q}.{name} -> {owner}.{name} ({q} is not in FROM)");
                            self.requalify(e, owner, note);
                        }
                    }
                    return;
                }
            },
            // Not where a FROM item's columns are not known, not a FROM item's own name (a
            // whole row: `to_json(stadium)`), not a function's output name (`ORDER BY count`).
            None => {
                let names_item = self.walk.levels.iter().flatten().any(|it| it.name.as_deref() == Some(want.as_str()));
                if self.opaque_visible() || names_item || self.outputs.contains(&want) {
                    return;
                }
                (self.visible(), None)
            }
        };
        // A table here has the column under this exact name (several: ambiguous, not wrong).
        if tables.iter().any(|&t| schema.tables[t].has_column(&want)) {
            return;
        }
        let names: Vec<&str> = tables.iter().flat_map(|&t| schema.tables[t].columns.iter().map(|c| c.name.as_str())).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        // A typo of one of its table's columns; else, written with the wrong table, the one
        // other table here that has it; else a longer name made of it.
        let best = closest(&want, unique.iter().copied());
        if best.is_none() && !self.join_keys.contains(&written) && !self.compared.contains(&written) {
            if let Some(q) = &qualifier {
                if let Some(owner) = self.holder(&want, own) {
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
