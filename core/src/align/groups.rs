//! Groups nobody asked for: `SELECT sum(s.price) FROM sales s ... GROUP BY s.car_id` lists one
//! figure for every group and nothing that names the group, so its rows cannot be told apart;
//! where the question asks for no groups ("What is the GPM for all car sales in 2023?"), it asked
//! for the one figure, and the GROUP BY goes.
//!
//! Only the statement's own query (a subquery's groups may be counted, averaged or compared),
//! where every column the SELECT list reads is inside one of PostgreSQL's aggregates, and
//! nothing else needs the groups: no HAVING, ORDER BY, LIMIT, OFFSET or FETCH (`ORDER BY count(*)
//! DESC LIMIT 1` is the largest group's), no window, grouping set, `DISTINCT ON`, WINDOW clause
//! or subquery in the list. The question must name no grouping: none of "each", "every", "per",
//! "by", "group", "respective(ly)", "breakdown", "distribution", "individual(ly)",
//! "separate(ly)", "split", "across"; a candidate aligned with no question is left as it is.

use super::aggregates::aggregate_name;
use sqlparser::ast::{Distinct, Expr, GroupByExpr, Query, SelectItem, SetExpr, Visit, Visitor};
use std::ops::ControlFlow;

/// The question's words that ask for groups (lowercased, whole words).
const GROUPING_WORDS: &[&str] = &[
    "each", "every", "per", "by", "group", "groups", "grouped", "grouping", "respective", "respectively", "breakdown", "distribution",
    "individual", "individually", "separate", "separately", "split", "across",
];

/// Whether the question names a grouping (or there is none to read).
fn asks_for_groups(question: &str) -> bool {
    let words: Vec<String> = question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    words.is_empty() || words.iter().any(|w| GROUPING_WORDS.contains(&w.as_str()))
}

/// Whether `e` calls an aggregate; None where it reads a column outside one, or holds a window or
/// a subquery.
fn only_aggregated(e: &Expr) -> Option<bool> {
    struct Walk {
        depth: usize,
        aggregates: usize,
    }
    impl Visitor for Walk {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Function(f) if f.over.is_some() => return ControlFlow::Break(()),
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => return ControlFlow::Break(()),
                Expr::Identifier(_) | Expr::CompoundIdentifier(_) if self.depth == 0 => return ControlFlow::Break(()),
                _ => {}
            }
            if aggregate_name(e).is_some() {
                self.depth += 1;
                self.aggregates += 1;
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if aggregate_name(e).is_some() {
                self.depth = self.depth.saturating_sub(1);
            }
            ControlFlow::Continue(())
        }
    }
    let mut w = Walk { depth: 0, aggregates: 0 };
    e.visit(&mut w).is_continue().then_some(w.aggregates > 0)
}

/// The GROUP BY keys (as written) of a statement's own query whose list names no group, where
/// nothing else needs the groups.
fn unnamed_groups(q: &Query) -> Option<String> {
    if q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let GroupByExpr::Expressions(keys, modifiers) = &s.group_by else { return None };
    let sets = keys.iter().any(|k| matches!(k, Expr::Rollup(_) | Expr::Cube(_) | Expr::GroupingSets(_)));
    if keys.is_empty() || sets || !modifiers.is_empty() || s.having.is_some() || matches!(s.distinct, Some(Distinct::On(_))) {
        return None;
    }
    if !s.named_window.is_empty() || s.qualify.is_some() || s.projection.is_empty() {
        return None;
    }
    let mut aggregated = false;
    for p in &s.projection {
        let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = p else { return None };
        aggregated |= only_aggregated(e)?;
    }
    aggregated.then(|| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "))
}

/// Drops the GROUP BY of the statement's own query whose SELECT lists nothing but aggregates
/// (no group's name) where the question asks for no groups: one figure, not one per group.
pub(super) fn unasked_groups(q: &mut Query, question: &str, fired: &mut Vec<String>) {
    if asks_for_groups(question) {
        return;
    }
    let Some(keys) = unnamed_groups(q) else { return };
    if let SetExpr::Select(s) = q.body.as_mut() {
        s.group_by = GroupByExpr::Expressions(vec![], vec![]);
        fired.push(format!("function: GROUP BY {keys} lists one unnamed figure a group; the question asks for no groups -> one figure"));
    }
}

/// Whether a word is one of the words above.
#[cfg(test)]
fn is_grouping_word(w: &str) -> bool {
    GROUPING_WORDS.contains(&w)
}

#[cfg(test)]
mod tests {
    use super::super::{align, Context, NoValues, Rules};
    use super::is_grouping_word;
    use crate::schema::tests::star_schema;

    /// The SQL `sql` aligns to for `question`, and whether this module's rule fired.
    fn grouped(question: &str, sql: &str) -> (String, bool) {
        let cx = Context { question, ..Context::default() };
        let a = align(sql, &star_schema(), cx, &mut NoValues, Rules::ALL);
        let ours = a.fired.iter().any(|f| f.contains("asks for no groups"));
        (a.sql, ours)
    }

    #[test]
    fn a_figure_split_into_unnamed_groups_is_one_figure() {
        let q = "What is the average age of singers from France?";
        assert_eq!(
            grouped(q, "SELECT avg(s.age) FROM singer AS s WHERE s.country = 'France' GROUP BY s.singer_id"),
            ("SELECT avg(s.age) FROM singer AS s WHERE s.country = 'France'".into(), true)
        );
        // Arithmetic of aggregates, an alias, several keys, FILTER, a constant.
        let sql = "SELECT (sum(s.age) - min(s.age)) * 100 / sum(s.age) AS share, count(*) FILTER (WHERE s.age > 30), 1 FROM singer AS s GROUP BY s.country, s.name";
        assert_eq!(grouped("How large is the share of all singers?", sql), (
            "SELECT (sum(s.age) - min(s.age)) * 100 / sum(s.age) AS share, count(*) FILTER (WHERE s.age > 30), 1 FROM singer AS s".into(),
            true
        ));
    }

    #[test]
    fn groups_the_question_or_the_query_needs_stay() {
        let sql = "SELECT count(*) FROM singer GROUP BY country";
        for q in ["How many singers are there in each country?", "Count singers per country", "the number of singers by country", "",
                  "What is the distribution of singers?", "Count the singers of every country separately"] {
            assert!(!grouped(q, sql).1, "{q}");
        }
        let q = "How many singers are there?";
        for sql in [
            "SELECT country, count(*) FROM singer GROUP BY country",
            "SELECT count(*) + age FROM singer GROUP BY age",
            "SELECT count(*) FROM singer GROUP BY country HAVING count(*) > 1",
            "SELECT count(*) FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1",
            "SELECT count(*) FROM singer GROUP BY country LIMIT 3",
            "SELECT count(*) FROM singer GROUP BY ROLLUP (country)",
            "SELECT count(*) OVER () FROM singer GROUP BY country",
            "SELECT DISTINCT ON (count(*)) count(*) FROM singer GROUP BY country",
            "SELECT count(*), (SELECT max(age) FROM singer) FROM singer GROUP BY country",
            "SELECT * FROM singer GROUP BY singer_id",
            "SELECT count(*) FROM singer GROUP BY country UNION SELECT 1",
            "SELECT count(*) FROM singer",
            "SELECT 1 FROM singer GROUP BY country",
            // A subquery's groups are counted.
            "SELECT count(*) FROM (SELECT count(*) FROM singer GROUP BY country) AS t",
        ] {
            assert!(!grouped(q, sql).1, "{sql}");
        }
    }

    #[test]
    fn the_grouping_words_are_whole_words() {
        assert!(is_grouping_word("each") && is_grouping_word("per") && !is_grouping_word("bypass"));
        // "bypass", "personal", "everyone" name no grouping.
        assert!(grouped("How many bypass singers are personal to everyone?", "SELECT count(*) FROM singer GROUP BY country").1);
    }
}
