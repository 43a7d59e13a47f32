//! Function alignments: aggregates where SQL does not take them. An aggregate in WHERE without
//! GROUP BY becomes a scalar subquery; one in ORDER BY without GROUP BY is unwrapped; nested
//! aggregates become ORDER BY ... LIMIT 1.

use super::{body_select, fold, top_level_exprs};
use sqlparser::ast::*;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

const AGGREGATES: &[&str] = &["count", "sum", "avg", "min", "max"];

pub(super) fn aggregate_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Function(f) if f.over.is_none() => {
            let name = f.name.0.last().and_then(ObjectNamePart::as_ident).map(fold)?;
            AGGREGATES.contains(&name.as_str()).then_some(name)
        }
        _ => None,
    }
}

/// Whether an expression holds an aggregate call (a subquery as a whole does not count).
pub(super) fn has_aggregate(e: &Expr) -> bool {
    struct Find(bool);
    impl Visitor for Find {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if aggregate_name(e).is_some() {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Find(false);
    let _ = e.visit(&mut f);
    f.0 && !matches!(e, Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. })
}

pub(super) fn no_group_by(s: &sqlparser::ast::Select) -> bool {
    matches!(&s.group_by, GroupByExpr::Expressions(e, _) if e.is_empty())
}

pub(super) fn aggregate_in_where(q: &mut Query, fired: &mut Vec<String>) {
    let Some(s) = body_select(q) else { return };
    if !no_group_by(s) || s.from.is_empty() {
        return;
    }
    let from: Vec<String> = s.from.iter().map(|f| f.to_string()).collect();
    let from = from.join(", ");
    let Some(selection) = s.selection.as_mut() else { return };
    // Aggregates of this WHERE only: one inside a subquery belongs to that subquery's FROM.
    top_level_exprs(selection, |e| {
        if aggregate_name(e).is_some() {
            let sub = format!("SELECT {e} FROM {from}");
            if let Ok(mut parsed) = Parser::parse_sql(&PostgreSqlDialect {}, &sub) {
                if let Some(Statement::Query(q)) = parsed.pop() {
                    fired.push(format!("function: aggregate {e} in WHERE -> scalar subquery"));
                    *e = Expr::Subquery(q);
                }
            }
        }
    });
}

/// Whether a SELECT groups, or its list calls an aggregate (outside subqueries).
pub(super) fn aggregated(s: &sqlparser::ast::Select) -> bool {
    !no_group_by(s)
        || s.projection.iter().any(|p| match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => has_aggregate(e),
            _ => false,
        })
}

pub(super) fn aggregate_in_order_by(q: &mut Query, fired: &mut Vec<String>) {
    let grouped_or_aggregated = match q.body.as_ref() {
        SetExpr::Select(s) => aggregated(s),
        _ => true,
    };
    if grouped_or_aggregated {
        return;
    }
    let Some(order) = q.order_by.as_mut() else { return };
    let OrderByKind::Expressions(exprs) = &mut order.kind else { return };
    for o in exprs.iter_mut() {
        if let Some(name) = aggregate_name(&o.expr).filter(|n| n != "count") {
            if let Some(arg) = single_arg(&o.expr) {
                fired.push(format!("function: {name}() in ORDER BY without GROUP BY -> {arg}"));
                o.expr = arg;
            }
        }
    }
}

pub(super) fn single_arg(e: &Expr) -> Option<Expr> {
    let Expr::Function(f) = e else { return None };
    let FunctionArguments::List(list) = &f.args else { return None };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(a))] => Some(a.clone()),
        _ => None,
    }
}

pub(super) fn nested_aggregates(q: &mut Query, fired: &mut Vec<String>) {
    let has_order = q.order_by.is_some() || q.limit_clause.is_some();
    let Some(s) = body_select(q) else { return };
    if no_group_by(s) {
        return;
    }
    // With an ORDER BY or LIMIT of its own, or two nested aggregates, no single ORDER BY ...
    // LIMIT 1 says the same: leave the query to PostgreSQL (and the correction round).
    let nested = s
        .projection
        .iter()
        .filter(|p| match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                aggregate_name(e).is_some_and(|n| n == "max" || n == "min")
                    && single_arg(e).is_some_and(|a| aggregate_name(&a).is_some())
            }
            _ => false,
        })
        .count();
    if has_order || nested != 1 {
        return;
    }
    let mut order: Option<(Expr, bool)> = None;
    for p in s.projection.iter_mut() {
        let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = p else { continue };
        let Some(outer) = aggregate_name(e).filter(|n| n == "max" || n == "min") else { continue };
        let Some(inner) = single_arg(e).filter(|a| aggregate_name(a).is_some()) else { continue };
        fired.push(format!("function: nested {outer}({inner}) -> {inner} ORDER BY ... LIMIT 1"));
        order = Some((inner.clone(), outer == "max"));
        *e = inner;
    }
    if let Some((expr, desc)) = order {
        let sql = format!("SELECT 1 ORDER BY {expr} {} LIMIT 1", if desc { "DESC" } else { "ASC" });
        if let Ok(mut parsed) = Parser::parse_sql(&PostgreSqlDialect {}, &sql) {
            if let Some(Statement::Query(p)) = parsed.pop() {
                q.order_by = p.order_by;
                q.limit_clause = p.limit_clause;
            }
        }
    }
}
