//! When two queries give the same answer: rows compared by the text form of their values, as
//! lists when the reference orders its rows, else as multisets. Used by the evaluation harness
//! (execution accuracy) and by the vote over candidates.

use sqlparser::ast::{OrderByKind, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// Whether the outermost query of `sql` orders its rows (a top-level ORDER BY).
/// None when `sql` is not a single parsable query.
pub fn orders_rows(sql: &str) -> Option<bool> {
    let stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?;
    match stmts.as_slice() {
        [Statement::Query(q)] => Some(match &q.order_by {
            Some(o) => match &o.kind {
                OrderByKind::Expressions(e) => !e.is_empty(),
                OrderByKind::All(_) => true,
            },
            None => false,
        }),
        _ => None,
    }
}

pub type Row = Vec<Option<String>>;

/// Whether `predicted` has the same rows as `reference`: in the same order when `ordered`,
/// else the same multiset. Column names do not matter; column order does.
pub fn same_rows(reference: &[Row], predicted: &[Row], ordered: bool) -> bool {
    if reference.len() != predicted.len() {
        return false;
    }
    if ordered {
        return reference == predicted;
    }
    let mut a: Vec<&Row> = reference.iter().collect();
    let mut b: Vec<&Row> = predicted.iter().collect();
    a.sort();
    b.sort();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[&[&str]]) -> Vec<Row> {
        v.iter().map(|r| r.iter().map(|c| if *c == "NULL" { None } else { Some(c.to_string()) }).collect()).collect()
    }

    #[test]
    fn detects_top_level_order_by_only() {
        assert_eq!(orders_rows("SELECT a FROM t ORDER BY a DESC"), Some(true));
        assert_eq!(orders_rows("SELECT a FROM t"), Some(false));
        assert_eq!(orders_rows("SELECT a FROM (SELECT a FROM t ORDER BY a) s"), Some(false));
        assert_eq!(orders_rows("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1"), Some(true));
        assert_eq!(orders_rows("SELECT 1; SELECT 2"), None);
        assert_eq!(orders_rows("not sql"), None);
    }

    #[test]
    fn multiset_comparison_counts_duplicates() {
        let a = rows(&[&["France"], &["France"], &["Netherlands"]]);
        let b = rows(&[&["Netherlands"], &["France"], &["France"]]);
        let c = rows(&[&["Netherlands"], &["France"]]);
        assert!(same_rows(&a, &b, false));
        assert!(!same_rows(&a, &b, true));
        assert!(!same_rows(&a, &c, false));
    }

    #[test]
    fn column_order_and_nulls_matter() {
        assert!(!same_rows(&rows(&[&["a", "1"]]), &rows(&[&["1", "a"]]), false));
        assert!(!same_rows(&rows(&[&["NULL"]]), &rows(&[&[""]]), false));
        assert!(same_rows(&rows(&[&["NULL"]]), &rows(&[&["NULL"]]), true));
    }
}
