//! The calendar-window rule's unit tests.

use super::*;
use sqlparser::ast::Statement;

fn run(sql: &str, question: &str) -> (String, Vec<String>) {
    let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("test SQL parses");
    let Statement::Query(q) = &mut stmts[0] else { panic!("not a query") };
    let mut fired = Vec::new();
    calendar_windows(q, question, &mut fired);
    (stmts[0].to_string(), fired)
}

fn unchanged(sql: &str, question: &str) {
    let (out, fired) = run(sql, question);
    assert!(fired.is_empty(), "{question}: {fired:?}");
    assert_eq!(out, sql);
}

const SIX: &str = "How many sales in the last 6 months excluding the current month?";

#[test]
fn the_questions_window() {
    let w = |q| window(q);
    let month = |n| Some(Window { unit: Unit::Month, count: n });
    assert_eq!(w(SIX), month(Some(6)));
    assert_eq!(w("How many treatments in the last six months, not including the current month"), month(Some(6)));
    assert_eq!(w("Sales in the last 6 months, this month excluded"), month(Some(6)));
    assert_eq!(w("Sales in the last 6 full months, excluding the current calendar month"), month(Some(6)));
    assert_eq!(w("Orders per month, exclusive of this month"), month(None));
    assert_eq!(w("How many users last week (exclusive of the current week)?"), Some(Window { unit: Unit::Week, count: Some(1) }));
    assert_eq!(w("each of the last 8 calendar weeks (excluding the current week)"), Some(Window { unit: Unit::Week, count: Some(8) }));
    assert_eq!(w("Which customers spent most last year?"), Some(Window { unit: Unit::Year, count: Some(1) }));
    assert_eq!(w("What was the success rate in the previous month?"), month(Some(1)));
    assert_eq!(w("Visits in the past 7 days, excluding today"), Some(Window { unit: Unit::Day, count: Some(7) }));
    for q in [
        // Spans back from today, days, or nothing said of the calendar.
        "How many orders in the last year?",
        "Sales in the last month",
        "Revenue in the past 30 days, inclusive of 30 days ago",
        "What is the last name of the oldest singer?",
        "Which singers had their last concert this year?",
        "Users who joined in the current month",
        "How many songs were released last?",
        "Orders from the last 3 months",
        // Rows left out, not a window cut: without, except, before.
        "List products without sales this month",
        "Customers who joined before this year and ordered in the last 30 days",
        "Which drivers are without a delivery today?",
        "Every product except those sold this week",
        // Periods compared, or up to now.
        "Revenue this year compared with last year",
        "How many users signed up since last month?",
        "Sales growth over the previous month",
        "Orders last year vs this year",
        "Sales so far this year and last year",
        "Sales from last year to date",
    ] {
        assert_eq!(w(q), None, "{q}");
    }
    // Only the question itself: the hint or an earlier question follows its first line.
    assert_eq!(w("How many orders?\nlast year's orders are archived"), None);
}

#[test]
fn an_end_from_today_moves_to_the_current_periods_start() {
    let (out, fired) = run("SELECT count(*) FROM sales WHERE sale_date >= date_trunc('month', CURRENT_DATE - INTERVAL '6 months') AND sale_date < CURRENT_DATE", SIX);
    assert_eq!(out, "SELECT count(*) FROM sales WHERE sale_date >= date_trunc('month', CURRENT_DATE - INTERVAL '6 months') AND sale_date < date_trunc('month', CURRENT_DATE)");
    assert_eq!(fired, ["function: the window ends where the current month starts (date_trunc('month', CURRENT_DATE))"]);
    // <= NOW(), written the other way round, after a start in the middle of a month.
    let (out, _) = run("SELECT count(*) FROM sales AS s WHERE NOW() >= s.sale_date AND s.sale_date >= CURRENT_DATE - INTERVAL '6 months'", SIX);
    assert_eq!(out, "SELECT count(*) FROM sales AS s WHERE s.sale_date < date_trunc('month', CURRENT_DATE) AND s.sale_date >= date_trunc('month', CURRENT_DATE) - INTERVAL '6 months'");
    // A BETWEEN, ends past today or just before it, an end at the period's start that keeps
    // its first day, other spellings of the interval, a cast start, parentheses.
    for sql in [
        "SELECT count(*) FROM sales WHERE sale_date BETWEEN CURRENT_DATE - INTERVAL '6 months' AND CURRENT_DATE::date",
        "SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '6 months' AND sale_date < CURRENT_DATE + INTERVAL '1 day'",
        "SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '6' MONTH AND sale_date <= CURRENT_DATE - INTERVAL '1 day'",
        "SELECT count(*) FROM sales WHERE sale_date >= (CURRENT_DATE - '6 months'::interval)::date AND sale_date <= date_trunc('month', CURRENT_DATE)",
        "SELECT count(*) FROM sales WHERE (sale_date >= now() - INTERVAL '6 months' AND sale_date < now())",
    ] {
        let (out, fired) = run(sql, SIX);
        assert_eq!(out, "SELECT count(*) FROM sales WHERE sale_date >= date_trunc('month', CURRENT_DATE) - INTERVAL '6 months' AND sale_date < date_trunc('month', CURRENT_DATE)", "{sql}");
        assert_eq!(fired.len(), 1);
    }
}

#[test]
fn a_missing_end_is_added_and_a_start_mid_period_moves_to_its_start() {
    let (out, fired) = run(
        "SELECT date_trunc('week', t.created_at) AS week, count(*) FROM tx AS t WHERE t.status = 'ok' AND t.created_at >= NOW() - INTERVAL '8 weeks' GROUP BY 1",
        "How many transactions in each of the last 8 weeks excluding the current week?",
    );
    assert_eq!(out, "SELECT date_trunc('week', t.created_at) AS week, count(*) FROM tx AS t WHERE t.status = 'ok' AND t.created_at >= date_trunc('week', CURRENT_DATE) - INTERVAL '8 weeks' AND t.created_at < date_trunc('week', CURRENT_DATE) GROUP BY 1");
    assert_eq!(fired.len(), 1);
    // The brief's own example: last year is the calendar year before this one.
    let (out, _) = run(
        "SELECT c.name FROM customers AS c JOIN orders AS o ON o.customer_id = c.id WHERE o.ordered_at >= CURRENT_DATE - INTERVAL '1 year' GROUP BY c.name ORDER BY sum(o.total) DESC",
        "Which customers spent most last year?",
    );
    assert_eq!(out, "SELECT c.name FROM customers AS c JOIN orders AS o ON o.customer_id = c.id WHERE o.ordered_at >= date_trunc('year', CURRENT_DATE) - INTERVAL '1 year' AND o.ordered_at < date_trunc('year', CURRENT_DATE) GROUP BY c.name ORDER BY sum(o.total) DESC");
    // Lengths in other units: a week of 7 days, a quarter of 3 months, a year of 12 (a
    // quarter is 3 months to PostgreSQL's intervals).
    let (out, _) = run("SELECT count(*) FROM v WHERE d >= CURRENT_DATE - INTERVAL '7 days'", "the top seller last week");
    assert_eq!(out, "SELECT count(*) FROM v WHERE d >= date_trunc('week', CURRENT_DATE) - INTERVAL '1 week' AND d < date_trunc('week', CURRENT_DATE)");
    let (out, _) = run("SELECT count(*) FROM v WHERE d >= CURRENT_DATE - INTERVAL '3 months'", "Revenue last quarter");
    assert_eq!(out, "SELECT count(*) FROM v WHERE d >= date_trunc('quarter', CURRENT_DATE) - INTERVAL '3 months' AND d < date_trunc('quarter', CURRENT_DATE)");
    let (out, _) = run("SELECT count(*) FROM v WHERE d > NOW() - INTERVAL '12 months'", "orders of the previous year");
    assert_eq!(out, "SELECT count(*) FROM v WHERE d >= date_trunc('year', CURRENT_DATE) - INTERVAL '1 year' AND d < date_trunc('year', CURRENT_DATE)");
    // Days: excluding today ends at today's start.
    let (out, _) = run("SELECT count(*) FROM v WHERE d >= NOW() - INTERVAL '7 days' AND d <= NOW()", "visits in the past 7 days excluding today");
    assert_eq!(out, "SELECT count(*) FROM v WHERE d >= CURRENT_DATE - INTERVAL '7 days' AND d < CURRENT_DATE");
}

#[test]
fn in_with_queries_subqueries_and_set_operations_too() {
    let (out, fired) = run(
        "WITH m AS (SELECT user_id FROM sessions WHERE started >= CURRENT_DATE - INTERVAL '2 months') SELECT count(*) FROM m WHERE user_id IN (SELECT id FROM users WHERE joined >= CURRENT_DATE - INTERVAL '2 months')",
        "How many users in the last 2 months excluding the current month?",
    );
    assert_eq!(fired.len(), 2, "{out}");
    assert_eq!(out.matches("< date_trunc('month', CURRENT_DATE)").count(), 2, "{out}");
    let (out, fired) = run(
        "SELECT a FROM x WHERE d >= CURRENT_DATE - INTERVAL '2 months' UNION SELECT a FROM y WHERE e >= CURRENT_DATE - INTERVAL '2 months'",
        "Which accounts in the last 2 months, excluding this month?",
    );
    assert_eq!(fired.len(), 2, "{out}");
}

#[test]
fn what_the_rule_leaves() {
    // Already right: nothing fires.
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= date_trunc('month', CURRENT_DATE) - INTERVAL '6 months' AND sale_date < date_trunc('month', CURRENT_DATE)", SIX);
    unchanged("SELECT count(*) FROM v WHERE d >= CURRENT_DATE - INTERVAL '7 days' AND d < CURRENT_DATE", "visits in the past 7 days excluding today");
    // Another length than the question's (days for months, 5 months for 6): not this window.
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '180 days'", SIX);
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '5 months' AND sale_date < CURRENT_DATE", SIX);
    // Other columns: a start not before today, an age, an end of another column.
    let (out, _) = run(
        "SELECT count(*) FROM m WHERE joined >= CURRENT_DATE - INTERVAL '1 month' AND expires_at > NOW() AND birth_date > CURRENT_DATE - INTERVAL '18 years' AND renewed < NOW()",
        "New members in the previous month",
    );
    assert_eq!(out, "SELECT count(*) FROM m WHERE joined >= date_trunc('month', CURRENT_DATE) - INTERVAL '1 month' AND expires_at > NOW() AND birth_date > CURRENT_DATE - INTERVAL '18 years' AND renewed < NOW() AND joined < date_trunc('month', CURRENT_DATE)");
    // No count in the question: nothing says where the window starts.
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '6 months'", "Orders per month, exclusive of this month");
    // No start from today: parts of dates, numbers, fixed dates, subqueries, ORs, NOT,
    // a time of day, the current period itself.
    for sql in [
        "SELECT count(*) FROM sales WHERE EXTRACT(MONTH FROM sale_date) = EXTRACT(MONTH FROM CURRENT_DATE) - 1",
        "SELECT count(*) FROM people WHERE age >= EXTRACT(YEAR FROM CURRENT_DATE) - 1990",
        "SELECT count(*) FROM sales WHERE sale_date >= '2023-01-01'",
        "SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - 180",
        "SELECT count(*) FROM sales WHERE sale_date >= (SELECT max(d) FROM cal WHERE d < CURRENT_DATE)",
        "SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '6 months' OR sale_date IS NULL",
        "SELECT count(*) FROM sales WHERE NOT (sale_date >= CURRENT_DATE - INTERVAL '6 months')",
        "SELECT count(*) FROM sales WHERE sale_date NOT BETWEEN CURRENT_DATE - INTERVAL '6 months' AND CURRENT_DATE",
        "SELECT count(*) FROM shifts WHERE starts_at >= now()::TIME - INTERVAL '6 months'",
        "SELECT count(*) FROM sales WHERE sale_date >= date_trunc('month', CURRENT_DATE)",
        "SELECT count(*) FROM sales AS s JOIN x ON x.d >= CURRENT_DATE - INTERVAL '6 months' AND x.id = s.id",
    ] {
        unchanged(sql, SIX);
    }
    // A rolling window the question asks for, a question saying nothing of one, and the rows
    // a question leaves out ("without") rather than a window it cuts.
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '30 days' AND sale_date <= CURRENT_DATE", "Sales in the past 30 days, inclusive of today");
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '1 year'", "How many sales in the last year?");
    unchanged("SELECT count(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '1 year'", "");
    unchanged(
        "SELECT name FROM products AS p WHERE p.id NOT IN (SELECT s.product_id FROM sales AS s WHERE s.sale_date >= date_trunc('month', CURRENT_DATE))",
        "List products without sales this month",
    );
}
