//! Function alignment of AND and OR written without parentheses where a test of one column is
//! split between them. AND binds tighter than OR, so `kind = 'a' OR kind = 'b' AND year > 2000`
//! reads as `kind = 'a' OR (kind = 'b' AND year > 2000)`: the year bounds only one of the kinds.
//! Alternatives for one column are meant together: `(kind = 'a' OR kind = 'b') AND year > 2000`;
//! likewise `year > 2000 AND kind = 'a' OR kind = 'b'` becomes
//! `year > 2000 AND (kind = 'a' OR kind = 'b')`.
//!
//! Only where a run of ORs (read whole, from its top) is alternatives that all test the same
//! expression of columns (`=` a value, LIKE, ILIKE, IN, BETWEEN) and one AND chain at either end
//! whose nearest term tests it too; anywhere a condition is (WHERE, HAVING, ON, CASE,
//! subqueries). A group written in parentheses is read on its own.

use super::fold;
use sqlparser::ast::{BinaryOperator, Expr, VisitMut, VisitorMut};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Most terms one run of ORs may hold for the rule to look at it.
const MAX_TERMS: usize = 16;

pub(super) fn and_or_on_one_column(q: &mut sqlparser::ast::Query, fired: &mut Vec<String>) {
    let mut r = Regroup { inside: HashSet::new(), grouped: Vec::new(), visits: 0 };
    let _ = q.visit(&mut r);
    r.grouped.sort_unstable();
    r.grouped.dedup();
    for c in r.grouped {
        fired.push(format!("function: alternatives for {c} grouped before AND"));
    }
}

/// Visits each expression before its parts, so that a run of ORs is read whole from its top;
/// the ORs inside a run (not in parentheses) are noted so as not to be read as runs themselves.
struct Regroup {
    inside: HashSet<*const Expr>,
    grouped: Vec<String>,
    visits: usize,
}

impl VisitorMut for Regroup {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        self.visits += 1;
        crate::interrupt::every(self.visits, 256);
        if !matches!(e, Expr::BinaryOp { op: BinaryOperator::Or, .. }) {
            return ControlFlow::Continue(());
        }
        let top = !self.inside.remove(&(e as *const Expr));
        if top {
            if let Some(column) = regroup(e) {
                self.grouped.push(column);
                return ControlFlow::Continue(());
            }
        }
        if let Expr::BinaryOp { left, right, .. } = e {
            for part in [left.as_ref(), right.as_ref()] {
                if matches!(part, Expr::BinaryOp { op: BinaryOperator::Or, .. }) {
                    self.inside.insert(part as *const Expr);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Regroups a run of ORs `e` of one of the two shapes; the tested expression.
fn regroup(e: &mut Expr) -> Option<String> {
    let terms = or_terms(e)?;
    let last = terms.len() - 1;
    let ands: Vec<usize> = (0..terms.len()).filter(|&i| matches!(terms[i], Expr::BinaryOp { op: BinaryOperator::And, .. })).collect();
    let [at] = ands.as_slice() else { return None };
    let alternatives: Vec<&Expr> = terms.iter().enumerate().filter(|(i, _)| i != at).map(|(_, t)| *t).collect();
    let chain = terms[*at];
    let (nearest, before) = match *at {
        // `A OR B AND C`: the AND chain's first term joins the alternatives before it.
        i if i == last => (and_end(chain, true), true),
        // `A AND B OR C`: its last term joins the alternatives after it.
        0 => (and_end(chain, false), false),
        _ => return None,
    };
    let column = tested(nearest)?;
    if alternatives.is_empty() || !alternatives.iter().all(|a| tested(a).as_deref() == Some(column.as_str())) {
        return None;
    }
    let mut group: Vec<Expr> = alternatives.into_iter().cloned().collect();
    if before {
        group.push(nearest.clone());
    } else {
        group.insert(0, nearest.clone());
    }
    let ored = group.into_iter().reduce(|l, r| Expr::BinaryOp { left: Box::new(l), op: BinaryOperator::Or, right: Box::new(r) })?;
    let mut rebuilt = chain.clone();
    *and_end_mut(&mut rebuilt, before) = Expr::Nested(Box::new(ored));
    *e = rebuilt;
    Some(column)
}

/// The terms of a run of ORs written without parentheses, left to right; None past
/// [`MAX_TERMS`]. Walks the left spine in a loop (a long run is a deep left tree).
fn or_terms(e: &Expr) -> Option<Vec<&Expr>> {
    let mut rights = Vec::new();
    let mut at = e;
    while let Expr::BinaryOp { left, op: BinaryOperator::Or, right } = at {
        if rights.len() >= MAX_TERMS {
            return None;
        }
        rights.push(right.as_ref());
        at = left;
    }
    let mut terms = vec![at];
    while let Some(r) = rights.pop() {
        // An OR as a right operand is written without parentheses only in odd spellings.
        if matches!(r, Expr::BinaryOp { op: BinaryOperator::Or, .. }) {
            return None;
        }
        terms.push(r);
    }
    Some(terms)
}

/// The first (`first`) or last term of an AND chain written without parentheses.
fn and_end(e: &Expr, first: bool) -> &Expr {
    let mut at = e;
    while let Expr::BinaryOp { left, op: BinaryOperator::And, right } = at {
        at = if first { left } else { right };
    }
    at
}

fn and_end_mut(e: &mut Expr, first: bool) -> &mut Expr {
    let mut at = e;
    loop {
        match at {
            Expr::BinaryOp { left, op: BinaryOperator::And, right } => at = if first { left.as_mut() } else { right.as_mut() },
            other => return other,
        }
    }
}

/// The expression a test of one value compares (`x = 'a'`, `x LIKE 'a%'`, `x IN (...)`,
/// `x BETWEEN ...`): a column by its folded name, another expression of columns as written;
/// None for anything else.
fn tested(e: &Expr) -> Option<String> {
    let subject = match e {
        Expr::BinaryOp { left, op: BinaryOperator::Eq, right } if is_value(right) => left,
        Expr::Like { expr, negated: false, .. } | Expr::ILike { expr, negated: false, .. } => expr,
        Expr::InList { expr, negated: false, .. } => expr,
        Expr::Between { expr, negated: false, .. } => expr,
        _ => return None,
    };
    match subject.as_ref() {
        Expr::Identifier(i) => Some(fold(i)),
        Expr::CompoundIdentifier(parts) => Some(parts.iter().map(fold).collect::<Vec<_>>().join(".")),
        other if reads_columns_only(other) => Some(other.to_string()),
        _ => None,
    }
}

/// Whether `e` reads some column and holds no subquery.
fn reads_columns_only(e: &Expr) -> bool {
    let (mut column, mut subquery) = (false, false);
    let _ = sqlparser::ast::visit_expressions(e, |x| {
        match x {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => column = true,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => subquery = true,
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    column && !subquery
}

/// A literal, possibly cast or negated: what one alternative compares a column with.
fn is_value(e: &Expr) -> bool {
    match e {
        Expr::Value(_) | Expr::TypedString { .. } => true,
        Expr::Cast { expr, .. } | Expr::UnaryOp { expr, .. } | Expr::Nested(expr) => is_value(expr),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
