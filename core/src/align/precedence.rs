//! Function alignment of AND and OR written without parentheses where a test of one column is
//! split between them. AND binds tighter than OR, so `kind = 'a' OR kind = 'b' AND year > 2000`
//! reads as `kind = 'a' OR (kind = 'b' AND year > 2000)`: the year bounds only one of the kinds.
//! Alternatives for one column are meant together: `(kind = 'a' OR kind = 'b') AND year > 2000`;
//! likewise `year > 2000 AND kind = 'a' OR kind = 'b'` becomes
//! `year > 2000 AND (kind = 'a' OR kind = 'b')`.
//!
//! Only where every alternative the OR joins tests the same expression of columns (`=` a value,
//! LIKE, ILIKE, IN, BETWEEN) and the AND's nearest term tests it too; written parentheses are
//! kept as they are.

use super::fold;
use sqlparser::ast::{BinaryOperator, Expr};
use std::ops::ControlFlow;

/// Most tests one run of ORs may hold for the rule to look at it.
const MAX_ALTERNATIVES: usize = 16;

pub(super) fn and_or_on_one_column(q: &mut sqlparser::ast::Query, fired: &mut Vec<String>) {
    let mut grouped = Vec::new();
    let _ = sqlparser::ast::visit_expressions_mut(q, |e| {
        crate::interrupt::every(grouped.len(), 64);
        if let Some(column) = regroup(e) {
            grouped.push(column);
        }
        ControlFlow::<()>::Continue(())
    });
    grouped.sort_unstable();
    grouped.dedup();
    for c in grouped {
        fired.push(format!("function: alternatives for {c} grouped before AND"));
    }
}

/// Regroups `e` when it is one of the two shapes; the tested expression, folded.
fn regroup(e: &mut Expr) -> Option<String> {
    let Expr::BinaryOp { left, op: BinaryOperator::Or, right } = e else { return None };
    // `A OR B AND C`: the ORed tests on the left, the AND chain's first term on the right.
    if let Some(column) = same_tested(left, leftmost_of_and(right)) {
        let (left, right) = (std::mem::replace(left.as_mut(), Expr::Value(sqlparser::ast::Value::Null.into())), take(right));
        let mut chain = right;
        let first = leftmost_of_and_mut(&mut chain);
        let b = std::mem::replace(first, Expr::Value(sqlparser::ast::Value::Null.into()));
        *first = Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(left), op: BinaryOperator::Or, right: Box::new(b) }));
        *e = chain;
        return Some(column);
    }
    // `A AND B OR C`: the AND chain's last term on the left, the ORed tests on the right.
    if let Some(column) = same_tested(right, rightmost_of_and(left)) {
        let (left, right) = (take(left), take(right));
        let mut chain = left;
        let last = rightmost_of_and_mut(&mut chain);
        let b = std::mem::replace(last, Expr::Value(sqlparser::ast::Value::Null.into()));
        *last = Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(b), op: BinaryOperator::Or, right: Box::new(right) }));
        *e = chain;
        return Some(column);
    }
    None
}

fn take(b: &mut Box<Expr>) -> Expr {
    std::mem::replace(b.as_mut(), Expr::Value(sqlparser::ast::Value::Null.into()))
}

/// When `ors` is a run of ORed tests of one expression and `and_term` (an AND chain's term
/// next to them; None when there is no AND) tests it too: that expression, folded.
fn same_tested(ors: &Expr, and_term: Option<&Expr>) -> Option<String> {
    let column = tested(and_term?)?;
    let mut alternatives = Vec::new();
    or_terms(ors, &mut alternatives);
    if alternatives.is_empty() || alternatives.len() > MAX_ALTERNATIVES {
        return None;
    }
    alternatives.iter().all(|a| tested(a).as_deref() == Some(column.as_str())).then_some(column)
}

/// The terms of a run of ORs written without parentheses (none when it is too long).
fn or_terms<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    if out.len() > MAX_ALTERNATIVES {
        return;
    }
    match e {
        Expr::BinaryOp { left, op: BinaryOperator::Or, right } => {
            or_terms(left, out);
            or_terms(right, out);
        }
        other => out.push(other),
    }
}

/// The expression a test of one value compares (`x = 'a'`, `x LIKE 'a%'`, `x IN (...)`,
/// `x BETWEEN ...`), folded; None for anything else.
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
        // An expression of columns (`lower(name)`), compared as printed.
        other if reads_columns_only(other) => Some(other.to_string().to_lowercase()),
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

/// The first term of an AND chain written without parentheses; None when `e` is no AND.
fn leftmost_of_and(e: &Expr) -> Option<&Expr> {
    let Expr::BinaryOp { left, op: BinaryOperator::And, .. } = e else { return None };
    leftmost_of_and(left).or(Some(left))
}

fn leftmost_of_and_mut(e: &mut Expr) -> &mut Expr {
    match e {
        Expr::BinaryOp { left, op: BinaryOperator::And, .. } => leftmost_of_and_mut(left),
        other => other,
    }
}

/// The last term of an AND chain written without parentheses; None when `e` is no AND.
fn rightmost_of_and(e: &Expr) -> Option<&Expr> {
    let Expr::BinaryOp { right, op: BinaryOperator::And, .. } = e else { return None };
    rightmost_of_and(right).or(Some(right))
}

fn rightmost_of_and_mut(e: &mut Expr) -> &mut Expr {
    match e {
        Expr::BinaryOp { right, op: BinaryOperator::And, .. } => rightmost_of_and_mut(right),
        other => other,
    }
}
