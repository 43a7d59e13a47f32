//! Windows of time the question bounds by the calendar: "the last 6 months, excluding the current
//! month", "last week (exclusive of the current week)", "last year", "the previous month".
//!
//! Such a window is whole periods that end where the current one starts. A small model writes
//! its end as today (`c < CURRENT_DATE`, `c <= NOW()`), forgets the end, or starts it in the
//! middle of a period (`c >= CURRENT_DATE - INTERVAL '6 months'`). Where the question says the
//! window this way and how many periods it spans, each `SELECT` (WITH queries and subqueries
//! included) whose `WHERE` starts a column that many periods before today is made to say it in
//! PostgreSQL's terms:
//!
//! - the start becomes the start of that period (`c >= date_trunc('month', CURRENT_DATE) -
//!   INTERVAL '6 months'`), when it was written as today minus an interval of that length
//!   (`INTERVAL '6 months'`, `'7 days'` for a week, `'3 months'` for a quarter);
//! - every end of that column computed from today (`<`, `<=`, a `BETWEEN`'s high end) becomes
//!   `c < date_trunc('month', CURRENT_DATE)`, and a missing end is added so.
//!
//! A column started at another length, or from a point not before today (`expires_at > NOW()`),
//! is another condition and is left as written; so are tests inside `OR`, `NOT` or a function,
//! parts of dates (`EXTRACT`), and bounds that are subqueries. A window the question counts in
//! days or as a span back from today ("the past 30 days", "in the last year") says nothing of
//! the calendar, and a question comparing periods or running up to now ("this year compared
//! with last year", "since last month") is not one window: neither is touched.

use super::fold;
use sqlparser::ast::{BinaryOperator, DataType, Expr, Query, Select, SetExpr, Value, VisitMut, VisitorMut};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

/// A calendar period PostgreSQL's `date_trunc` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    fn parse(word: &str) -> Option<Unit> {
        let w = word.to_lowercase();
        let w = w.strip_suffix('s').unwrap_or(&w);
        Some(match w {
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "quarter" => Unit::Quarter,
            "year" => Unit::Year,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Quarter => "quarter",
            Unit::Year => "year",
        }
    }

    /// Where the current period starts.
    fn start(self) -> String {
        match self {
            Unit::Day => "CURRENT_DATE".to_string(),
            other => format!("date_trunc('{}', CURRENT_DATE)", other.name()),
        }
    }

    /// `n` periods as an interval PostgreSQL reads (it has no quarter unit).
    fn interval(self, n: u32) -> String {
        match self {
            Unit::Quarter => format!("INTERVAL '{} months'", 3 * n),
            other => format!("INTERVAL '{n} {}{}'", other.name(), if n == 1 { "" } else { "s" }),
        }
    }
}

/// The window a question bounds by the calendar: whole periods of `unit` up to the start of the
/// current one, `count` of them when the question says how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    unit: Unit,
    count: Option<u32>,
}

const EXCLUDING: &[&str] = &["excluding", "exclude", "excludes", "exclusive"];
const NUMBERS: &[&str] = &["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
/// Words of a question that compares periods or runs up to now: "last year" there is not the
/// window of the answer.
const NOT_ONE_WINDOW: &[&str] = &[
    "since", "vs", "versus", "compared", "compare", "comparing", "comparison", "against", "growth", "change", "over", "until", "till",
];
/// Words that may stand between "current" or "last 6" and the unit.
const WHOLE: &[&str] = &["calendar", "full", "whole", "complete"];

fn number(word: &str) -> Option<u32> {
    word.parse::<u32>().ok().filter(|n| (1..=1000).contains(n)).or_else(|| NUMBERS.iter().position(|w| *w == word).map(|i| i as u32 + 1))
}

/// The unit at `i` or, past a word such as "calendar", at `i + 1`; with the index after it.
fn unit_at(w: &[&str], i: usize) -> Option<(Unit, usize)> {
    let i = if w.get(i).is_some_and(|x| WHOLE.contains(x)) { i + 1 } else { i };
    w.get(i).and_then(|x| Unit::parse(x)).map(|u| (u, i + 1))
}

/// The calendar window the question itself (its first line: a hint or an earlier question
/// follows) asks for, if any: "excluding the current month" (also "not including", "not
/// counting", "exclusive of" the current or this period, "this month excluded"; "excluding
/// today" is days), with the count from "the last 6 months"; or "last week", "previous month",
/// "prior year" (one whole period), but not "the last year" or "in the last month" (spans back
/// from today), nor in a question comparing periods or running up to now.
fn window(question: &str) -> Option<Window> {
    let asked = question.lines().next().unwrap_or_default().to_lowercase();
    let w: Vec<&str> = asked.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let excluded = |i: usize, after: usize| {
        // Up to four words back ("excluding the current", "not including this", "exclusive of
        // the current"), or the word after ("this month excluded").
        let back = &w[i.saturating_sub(4)..i];
        back.iter().any(|x| EXCLUDING.contains(x))
            || back.windows(2).any(|p| p[0] == "not" && matches!(p[1], "including" | "counting"))
            || w.get(after).is_some_and(|x| matches!(*x, "excluded" | "exclusive"))
    };
    // "the last 6 months": the count, when its unit is the window's.
    let count_of = |unit: Unit| {
        (0..w.len()).find_map(|j| match (w[j], w.get(j + 1).and_then(|x| number(x)), unit_at(&w, j + 2)) {
            ("last" | "past" | "previous" | "prior" | "preceding", Some(n), Some((u, _))) if u == unit => Some(n),
            _ => None,
        })
    };
    // The current period, named and not excluded: the question runs up to now.
    let mut current = false;
    for i in 0..w.len() {
        let (unit, after) = match (w[i], unit_at(&w, i + 1)) {
            ("current" | "this", Some((u, after))) => (u, after),
            ("today", _) => (Unit::Day, i + 1),
            _ => continue,
        };
        if !excluded(i, after) {
            current = true;
            continue;
        }
        let count = count_of(unit).or_else(|| {
            // "last week (exclusive of the current week)": one period.
            w.windows(2).any(|p| matches!(p[0], "last" | "previous" | "prior") && Unit::parse(p[1]) == Some(unit) && !p[1].ends_with('s')).then_some(1)
        });
        return Some(Window { unit, count });
    }
    let up_to_now = w.windows(2).any(|p| matches!(p, ["so", "far"] | ["to", "date"] | ["up", "to"]));
    if current || up_to_now || w.iter().any(|x| NOT_ONE_WINDOW.contains(x)) {
        return None;
    }
    // "last year", "the previous month": the one whole period before this one. "the last year"
    // and "in the last month" are spans back from today.
    for i in 0..w.len().saturating_sub(1) {
        let (Some(unit), true) = (Unit::parse(w[i + 1]), !w[i + 1].ends_with('s')) else { continue };
        let spans = i > 0 && matches!(w[i - 1], "the" | "this" | "a" | "one");
        let previous = match w[i] {
            "previous" | "prior" | "preceding" => true,
            "last" => !spans,
            _ => false,
        };
        if previous && unit != Unit::Day {
            return Some(Window { unit, count: Some(1) });
        }
    }
    None
}

/// Whether `e` is today or now: `CURRENT_DATE`, `NOW()`, `CURRENT_TIMESTAMP`, `LOCALTIMESTAMP`,
/// cast or truncated to the day.
fn today(e: &Expr) -> bool {
    match e {
        Expr::Nested(inner) => today(inner),
        Expr::Cast { expr, data_type, .. } => pointlike(data_type) && today(expr),
        // sqlparser reads CURRENT_DATE, CURRENT_TIMESTAMP and LOCALTIMESTAMP as functions too.
        Expr::Function(f) => match called(f).as_str() {
            "current_date" | "current_timestamp" | "localtimestamp" | "now" | "transaction_timestamp" | "statement_timestamp" => true,
            _ => truncation(e).is_some_and(|(unit, inner)| unit == "day" && today(inner)),
        },
        _ => false,
    }
}

/// A function's name as PostgreSQL folds it, without its schema.
fn called(f: &sqlparser::ast::Function) -> String {
    f.name.0.last().and_then(|p| p.as_ident()).map(fold).unwrap_or_default()
}

/// `date_trunc('unit', x)`: the unit, lowercased, and `x`.
fn truncation(e: &Expr) -> Option<(String, &Expr)> {
    let Expr::Function(f) = e else { return None };
    let args = function_args(f)?;
    match args.as_slice() {
        [unit, inner] if called(f) == "date_trunc" => Some((string(unit)?, inner)),
        _ => None,
    }
}

/// A type a point in time may be cast to (a date or a timestamp, not a time of day).
fn pointlike(t: &DataType) -> bool {
    let name = t.to_string().to_lowercase();
    name.starts_with("date") || name.starts_with("timestamp")
}

fn function_args(f: &sqlparser::ast::Function) -> Option<Vec<&Expr>> {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(l) = &f.args else { return None };
    l.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

fn string(e: &Expr) -> Option<String> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.to_lowercase()),
            _ => None,
        },
        _ => None,
    }
}

/// An interval of whole periods: `INTERVAL '6 months'`, `INTERVAL '6' MONTH`, `'6 months'::interval`.
fn interval(e: &Expr) -> Option<(u32, Unit)> {
    let text = match e {
        Expr::Nested(inner) => return interval(inner),
        Expr::Interval(iv) if iv.last_field.is_none() => {
            let value = match iv.value.as_ref() {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(s) => s.clone(),
                    Value::Number(n, _) => n.clone(),
                    _ => return None,
                },
                _ => return None,
            };
            match &iv.leading_field {
                Some(f) => format!("{value} {f}"),
                None => value,
            }
        }
        Expr::Cast { expr, data_type: DataType::Interval { .. }, .. } => string(expr)?,
        _ => return None,
    };
    let parts: Vec<&str> = text.split_whitespace().collect();
    match parts.as_slice() {
        [n, unit] => Some((number(n)?, Unit::parse(unit)?)),
        _ => None,
    }
}

/// Whether `e` is a point in time computed from today: today, a period's start of such a point
/// (`date_trunc`), or such a point plus or minus an interval; never a number or a subquery.
fn relative(e: &Expr) -> bool {
    match e {
        Expr::Nested(inner) => relative(inner),
        Expr::Cast { expr, data_type, .. } => pointlike(data_type) && relative(expr),
        Expr::BinaryOp { left, op: BinaryOperator::Minus | BinaryOperator::Plus, right } => relative(left) && interval(right).is_some(),
        other => truncation(other).is_some_and(|(_, inner)| relative(inner)) || today(other),
    }
}

fn parse(text: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(text).ok()?.parse_expr().ok()
}

/// One bound of a column: `column op point`, turned so the column is on the left.
enum Bound {
    Low(Expr, Expr),
    High(Expr),
}

/// A column, or a column cast to a date or a timestamp (`d::date`).
fn is_column(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Cast { expr, data_type, .. } => pointlike(data_type) && matches!(expr.as_ref(), Expr::Identifier(_) | Expr::CompoundIdentifier(_)),
        _ => false,
    }
}

fn bound(e: &Expr) -> Option<Bound> {
    let Expr::BinaryOp { left, op, right } = e else { return None };
    let (col, op, point) = if is_column(left) && relative(right) {
        (left, op.clone(), right)
    } else if is_column(right) && relative(left) {
        let flipped = match op {
            BinaryOperator::Lt => BinaryOperator::Gt,
            BinaryOperator::LtEq => BinaryOperator::GtEq,
            BinaryOperator::Gt => BinaryOperator::Lt,
            BinaryOperator::GtEq => BinaryOperator::LtEq,
            _ => return None,
        };
        (right, flipped, left)
    } else {
        return None;
    };
    match op {
        BinaryOperator::Gt | BinaryOperator::GtEq => Some(Bound::Low(*col.clone(), *point.clone())),
        BinaryOperator::Lt | BinaryOperator::LtEq => Some(Bound::High(*col.clone())),
        _ => None,
    }
}

/// The top-level `AND`ed tests of a `WHERE`, in order.
fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner) if matches!(inner.as_ref(), Expr::BinaryOp { op: BinaryOperator::And, .. }) => conjuncts(*inner, out),
        other => out.push(other),
    }
}

/// `n` periods of `unit` in the question's unit (`'7 days'` is a week, `'3 months'` a quarter,
/// `'12 months'` a year).
fn periods(n: u32, unit: Unit, want: Unit) -> Option<u32> {
    match (unit, want) {
        (u, w) if u == w => Some(n),
        (Unit::Day, Unit::Week) if n % 7 == 0 => Some(n / 7),
        (Unit::Month, Unit::Quarter) if n % 3 == 0 => Some(n / 3),
        (Unit::Month, Unit::Year) if n % 12 == 0 => Some(n / 12),
        (Unit::Quarter, Unit::Year) if n % 4 == 0 => Some(n / 4),
        _ => None,
    }
}

/// A start the model wrote, as periods of the window's unit before today: `Some((n, false))`
/// for today minus an interval (the middle of a period), `Some((n, true))` for a period's start
/// (`date_trunc('month', CURRENT_DATE) - INTERVAL '6 months'`, `date_trunc('month',
/// CURRENT_DATE - INTERVAL '6 months')`); None for any other point.
fn start_of(point: &Expr, unit: Unit) -> Option<(u32, bool)> {
    // `date_trunc` to the window's unit: what it truncates.
    let truncated = |e: &Expr| truncation(e).filter(|(u, _)| u == unit.name()).map(|(_, inner)| inner.clone());
    match point {
        Expr::Nested(inner) => start_of(inner, unit),
        Expr::Cast { expr, data_type, .. } if pointlike(data_type) => start_of(expr, unit),
        Expr::BinaryOp { left, op: BinaryOperator::Minus, right } => {
            let (n, u) = interval(right)?;
            let n = periods(n, u, unit)?;
            if today(left) {
                return Some((n, false));
            }
            let mut base = left.as_ref();
            while let Expr::Nested(inner) = base {
                base = inner;
            }
            truncated(base).filter(today).map(|_| (n, true))
        }
        Expr::Function(_) => match truncated(point)? {
            inner @ Expr::BinaryOp { op: BinaryOperator::Minus, .. } => start_of(&inner, unit).map(|(n, _)| (n, true)),
            _ => None,
        },
        _ => None,
    }
}

fn rebuild(tests: Vec<Expr>) -> Option<Expr> {
    tests.into_iter().reduce(|a, b| Expr::BinaryOp { left: Box::new(a), op: BinaryOperator::And, right: Box::new(b) })
}

/// The window's bounds in one `SELECT`'s `WHERE` (see the module's comment); the `WHERE` as it
/// was unless a bound changes.
fn fix_select(s: &mut Select, unit: Unit, count: u32, fired: &mut Vec<String>) {
    let Some(selection) = s.selection.as_ref() else { return };
    let (Some(end), Some(first)) = (parse(&unit.start()), parse(&format!("{} - {}", unit.start(), unit.interval(count)))) else {
        return;
    };
    let before = selection.to_string();
    let mut tests = Vec::new();
    conjuncts(selection.clone(), &mut tests);
    // BETWEEN two points computed from today: a start and an end.
    let mut split = Vec::with_capacity(tests.len() + 1);
    for t in tests {
        match t {
            Expr::Between { expr, negated: false, low, high } if is_column(&expr) && relative(&low) && relative(&high) => {
                split.push(Expr::BinaryOp { left: expr.clone(), op: BinaryOperator::GtEq, right: low });
                split.push(Expr::BinaryOp { left: expr, op: BinaryOperator::LtEq, right: high });
            }
            other => split.push(other),
        }
    }
    // Each test's bound, and for a start, where it is in periods before today.
    let bounds: Vec<(Expr, Option<Bound>, Option<(u32, bool)>)> = split
        .into_iter()
        .map(|t| {
            let b = bound(&t);
            let start = match &b {
                Some(Bound::Low(_, point)) => start_of(point, unit).filter(|(n, _)| *n == count),
                _ => None,
            };
            (t, b, start)
        })
        .collect();
    // The columns the window starts on: `count` periods before today.
    let started: Vec<Expr> = bounds
        .iter()
        .filter_map(|(_, b, start)| match (b, start) {
            (Some(Bound::Low(col, _)), Some(_)) => Some(col.clone()),
            _ => None,
        })
        .collect();
    if started.is_empty() {
        return;
    }
    let mut out = Vec::with_capacity(bounds.len() + started.len());
    let mut ended: Vec<Expr> = Vec::new();
    for (t, b, start) in bounds {
        match b {
            Some(Bound::Low(col, _)) if started.contains(&col) && start == Some((count, false)) => {
                out.push(Expr::BinaryOp { left: Box::new(col), op: BinaryOperator::GtEq, right: Box::new(first.clone()) })
            }
            Some(Bound::High(col)) if started.contains(&col) => {
                out.push(Expr::BinaryOp { left: Box::new(col.clone()), op: BinaryOperator::Lt, right: Box::new(end.clone()) });
                ended.push(col);
            }
            _ => out.push(t),
        }
    }
    for col in started {
        if !ended.contains(&col) {
            ended.push(col.clone());
            out.push(Expr::BinaryOp { left: Box::new(col), op: BinaryOperator::Lt, right: Box::new(end.clone()) });
        }
    }
    let Some(after) = rebuild(out) else { return };
    if after.to_string() != before {
        fired.push(format!("function: the window ends where the current {} starts ({})", unit.name(), unit.start()));
        s.selection = Some(after);
    }
}

/// Every `SELECT` of the statement (its WITH queries and subqueries too) bounded by the
/// question's calendar window (see the module's comment).
pub(super) fn calendar_windows(q: &mut Query, question: &str, fired: &mut Vec<String>) {
    let Some(win) = window(question) else { return };
    // How many periods: without a count, nothing says where the window starts.
    let Some(count) = win.count else { return };
    struct Selects<'a> {
        unit: Unit,
        count: u32,
        fired: &'a mut Vec<String>,
    }
    impl VisitorMut for Selects<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            crate::interrupt::check();
            let mut stack: Vec<&mut SetExpr> = vec![q.body.as_mut()];
            while let Some(body) = stack.pop() {
                match body {
                    SetExpr::Select(s) => fix_select(s, self.unit, self.count, self.fired),
                    SetExpr::SetOperation { left, right, .. } => {
                        stack.push(left.as_mut());
                        stack.push(right.as_mut());
                    }
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(q, &mut Selects { unit: win.unit, count, fired });
}

#[cfg(test)]
mod tests;
