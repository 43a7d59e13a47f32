//! Facts read off a query's AST: which columns it compares with which string literals.

use sqlparser::ast::{BinaryOperator, Expr, Ident, Value, Visit, Visitor};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

/// A column compared with a string literal: `column = 'x'`, `'x' = column`, `column IN ('x', 'y')`,
/// or `column LIKE 'x'` without wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The column's name as PostgreSQL folds it (its last part when qualified).
    pub column: String,
    pub literal: String,
}

/// Every column-to-string-literal comparison in `sql`; empty when it does not parse.
pub fn string_comparisons(sql: &str) -> Vec<Comparison> {
    let Ok(statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else { return vec![] };
    let mut v = Collect(Vec::new());
    let _ = statements.visit(&mut v);
    let mut out = v.0;
    out.dedup();
    out
}

struct Collect(Vec<Comparison>);

/// The column an expression reads (`t.name` → name), folded as PostgreSQL folds unquoted names.
pub(crate) fn column(e: &Expr) -> Option<String> {
    let fold = |i: &Ident| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() };
    match e {
        Expr::Identifier(i) => Some(fold(i)),
        Expr::CompoundIdentifier(parts) => parts.last().map(fold),
        Expr::Nested(inner) => column(inner),
        _ => None,
    }
}

fn literal(e: &Expr) -> Option<String> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(s.clone()),
            _ => None,
        },
        Expr::Nested(inner) => literal(inner),
        _ => None,
    }
}

impl Visitor for Collect {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        let mut push = |c: Option<String>, l: Option<String>| {
            if let (Some(column), Some(literal)) = (c, l) {
                self.0.push(Comparison { column, literal });
            }
        };
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::Eq | BinaryOperator::NotEq, right } => {
                push(column(left), literal(right));
                push(column(right), literal(left));
            }
            Expr::InList { expr, list, .. } => {
                for item in list {
                    push(column(expr), literal(item));
                }
            }
            Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
                if let Some(p) = literal(pattern).filter(|p| !p.contains(['%', '_'])) {
                    push(column(expr), Some(p));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(sql: &str) -> Vec<(String, String)> {
        string_comparisons(sql).into_iter().map(|c| (c.column, c.literal)).collect()
    }

    #[test]
    fn finds_comparisons_everywhere() {
        assert_eq!(pairs("SELECT count(*) FROM singer WHERE country = 'France'"), vec![("country".into(), "France".into())]);
        assert_eq!(
            pairs("SELECT T1.name FROM a AS T1 JOIN b AS T2 ON T1.id = T2.id WHERE 'Ford' = T2.\"Maker\" AND T1.x IN ('a', 'b')"),
            vec![("Maker".into(), "Ford".into()), ("x".into(), "a".into()), ("x".into(), "b".into())]
        );
        assert_eq!(
            pairs("SELECT name FROM t WHERE id IN (SELECT id FROM u WHERE kind != 'cat') AND name LIKE 'Bob' AND city LIKE '%ber%'"),
            vec![("kind".into(), "cat".into()), ("name".into(), "Bob".into())]
        );
        assert!(pairs("SELECT count(*) FROM t WHERE year = 2014").is_empty());
        assert!(pairs("not sql").is_empty());
    }
}
