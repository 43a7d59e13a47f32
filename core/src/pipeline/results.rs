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

/// Whether `predicted` has the same rows as `reference` with its columns in some order:
/// Spider's execution accuracy (a question asks for columns, rarely for their order). Each
/// predicted column is matched to a reference column with the same values (as a multiset, or
/// in row order when `ordered`); the rows are compared under each such matching, at most
/// [`MAX_MATCHINGS`] steps of that search (columns with equal values are rare).
pub fn same_rows_any_column_order(reference: &[Row], predicted: &[Row], ordered: bool) -> bool {
    if same_rows(reference, predicted, ordered) {
        return true;
    }
    let width = match (reference.first(), predicted.first()) {
        (Some(a), Some(b)) if a.len() == b.len() && reference.len() == predicted.len() => a.len(),
        _ => return false,
    };
    if reference.iter().chain(predicted).any(|r| r.len() != width) {
        return false;
    }
    let sig_a: Vec<Vec<&Option<String>>> = (0..width).map(|c| signature(reference, c, ordered)).collect();
    let sig_b: Vec<Vec<&Option<String>>> = (0..width).map(|c| signature(predicted, c, ordered)).collect();
    // The same columns, in some order: the same multiset of column values.
    let (mut sa, mut sb) = (sig_a.clone(), sig_b.clone());
    sa.sort();
    sb.sort();
    if sa != sb {
        return false;
    }
    // For each reference column, the predicted columns that could be it.
    let options: Vec<Vec<usize>> = sig_a.iter().map(|a| (0..width).filter(|&j| sig_b[j] == *a).collect()).collect();
    if options.iter().any(Vec::is_empty) {
        return false;
    }
    let mut perm = Vec::with_capacity(width);
    let mut used = vec![false; width];
    let mut budget = MAX_MATCHINGS;
    matches(reference, predicted, ordered, &options, &mut perm, &mut used, &mut budget)
}

/// Most steps of the search for a column matching in [`same_rows_any_column_order`].
pub const MAX_MATCHINGS: usize = 1000;

/// A column's values: sorted, unless the rows are ordered.
fn signature(rows: &[Row], col: usize, ordered: bool) -> Vec<&Option<String>> {
    let mut v: Vec<&Option<String>> = rows.iter().map(|r| &r[col]).collect();
    if !ordered {
        v.sort();
    }
    v
}

fn matches(
    reference: &[Row],
    predicted: &[Row],
    ordered: bool,
    options: &[Vec<usize>],
    perm: &mut Vec<usize>,
    used: &mut [bool],
    budget: &mut usize,
) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    crate::interrupt::every(*budget, 64);
    if perm.len() == options.len() {
        let moved: Vec<Row> = predicted.iter().map(|r| perm.iter().map(|&j| r[j].clone()).collect()).collect();
        return same_rows(reference, &moved, ordered);
    }
    for &j in &options[perm.len()] {
        if used[j] {
            continue;
        }
        used[j] = true;
        perm.push(j);
        let found = matches(reference, predicted, ordered, options, perm, used, budget);
        perm.pop();
        used[j] = false;
        if found {
            return true;
        }
    }
    false
}

/// The rows with their columns in a canonical order (by each column's values, then position),
/// so that results differing only in column order compare equal; the vote's key.
pub fn canonical_columns(rows: &[Row], ordered: bool) -> Vec<Row> {
    let width = rows.first().map_or(0, Vec::len);
    if width < 2 || rows.iter().any(|r| r.len() != width) {
        return rows.to_vec();
    }
    let mut order: Vec<usize> = (0..width).collect();
    let sigs: Vec<Vec<&Option<String>>> = (0..width).map(|c| signature(rows, c, ordered)).collect();
    order.sort_by(|&a, &b| sigs[a].cmp(&sigs[b]).then(a.cmp(&b)));
    rows.iter().map(|r| order.iter().map(|&c| r[c].clone()).collect()).collect()
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
    fn any_column_order_matches_columns_by_their_values() {
        let gold = rows(&[&["a", "1"], &["b", "2"]]);
        assert!(same_rows_any_column_order(&gold, &rows(&[&["2", "b"], &["1", "a"]]), false));
        // Each column must move with its row: the same values, paired otherwise, do not match.
        assert!(!same_rows_any_column_order(&gold, &rows(&[&["2", "a"], &["1", "b"]]), false));
        // Ordered: the rows' order still matters.
        assert!(same_rows_any_column_order(&gold, &rows(&[&["1", "a"], &["2", "b"]]), true));
        assert!(!same_rows_any_column_order(&gold, &rows(&[&["2", "b"], &["1", "a"]]), true));
        // Columns with equal values: either matching is tried.
        let twins = rows(&[&["1", "2", "x"], &["2", "1", "y"]]);
        assert!(same_rows_any_column_order(&twins, &rows(&[&["x", "2", "1"], &["y", "1", "2"]]), false));
        // Different widths or counts never match; empty results do.
        assert!(!same_rows_any_column_order(&gold, &rows(&[&["a"], &["b"]]), false));
        assert!(!same_rows_any_column_order(&gold, &rows(&[&["1", "a"]]), false));
        assert!(same_rows_any_column_order(&[], &[], false));
        // The vote's key: the same for both orders, different for different answers.
        let swapped = rows(&[&["1", "a"], &["2", "b"]]);
        assert_eq!(canonical_columns(&gold, false), canonical_columns(&swapped, false));
        assert_ne!(canonical_columns(&gold, false), canonical_columns(&rows(&[&["1", "b"], &["2", "a"]]), false));
    }

    #[test]
    fn many_equal_columns_stay_bounded() {
        // 12 columns of the same values: 12! matchings, at most MAX_MATCHINGS steps tried.
        let wide: Vec<Row> = (0..3).map(|i| (0..12).map(|_| Some(i.to_string())).collect()).collect();
        let mut other = wide.clone();
        other[0][0] = Some("z".into());
        assert!(same_rows_any_column_order(&wide, &wide, false));
        assert!(!same_rows_any_column_order(&wide, &other, false));
        // Same column values, rows paired otherwise: every matching fails, the search stops.
        let mut paired = wide.clone();
        paired[0].swap(0, 1);
        paired[0][0] = Some("1".into());
        paired[1][0] = Some("0".into());
        assert!(!same_rows_any_column_order(&wide, &paired, false));
    }

    #[test]
    fn column_order_and_nulls_matter() {
        assert!(!same_rows(&rows(&[&["a", "1"]]), &rows(&[&["1", "a"]]), false));
        assert!(!same_rows(&rows(&[&["NULL"]]), &rows(&[&[""]]), false));
        assert!(same_rows(&rows(&[&["NULL"]]), &rows(&[&["NULL"]]), true));
    }
}
