//! PostgreSQL's idioms where a rule on the query is sure (`crate::prompt::idioms` has the ones
//! told to the model instead):
//!
//! - integer division: `count(a) / count(b)` of two integers truncates to 0 or 1 in PostgreSQL;
//!   a division in a SELECT list item, reached from the item through arithmetic alone, whose
//!   both sides are known integers (columns of integer types, counts, sums of such, integer
//!   literals, CASE of them) becomes `(a)::numeric / NULLIF(b, 0)`. A divisor without a column
//!   (`age / 10`, `secs / (60 * 60)`: a bucket) is meant as it is and stays, and so does every
//!   division elsewhere (GROUP BY, WHERE, a function's argument, date arithmetic);
//! - unlabeled groups: a grouped SELECT whose list reads columns only inside aggregates returns
//!   one row per group with nothing saying which group it is. When the question asks per
//!   something ("each", "per", "by country", "monthly") the groups' expressions are put first in
//!   the list. When every group key is pinned to one value by the WHERE (`GROUP BY make` under
//!   `WHERE make = 'Toyota'`), the GROUP BY goes: the rows are the same, except that with no
//!   matching row the question's count is 0 (one row), not no row. Neither with HAVING,
//!   DISTINCT, a window, grouping sets, or groups referred to by position; the pinned case not
//!   under ORDER BY or LIMIT either.

use super::aggregates::{aggregate_name, has_aggregate};
use super::question::{positional, windowed};
use super::{body_select, fold, resolve, Scope};
use crate::prompt::idioms::asks_per;
use crate::schema::Schema;
use sqlparser::ast::{
    BinaryOperator, DataType, Expr, GroupByExpr, ObjectNamePart, Query, SelectItem, SetExpr, UnaryOperator, Value, Visit, Visitor,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

/// PostgreSQL's integer types by width: what an arithmetic result or a sum of them is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Int {
    Small,
    Int,
    Big,
}

fn int_type(name: &str) -> Option<Int> {
    match name.trim().to_lowercase().as_str() {
        "smallint" | "int2" | "smallserial" => Some(Int::Small),
        "integer" | "int" | "int4" | "serial" => Some(Int::Int),
        "bigint" | "int8" | "bigserial" => Some(Int::Big),
        _ => None,
    }
}

fn function_name(f: &sqlparser::ast::Function) -> Option<String> {
    f.name.0.last().and_then(ObjectNamePart::as_ident).map(fold)
}

fn only_arg(f: &sqlparser::ast::Function) -> Option<&Expr> {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(l) = &f.args else { return None };
    match l.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(e))] => Some(e),
        _ => None,
    }
}

/// The integer type an expression certainly has; None when it has another or is not known
/// (a column of a CTE or a subquery, a function other than a few).
fn integer(schema: &Schema, sc: &Scope, e: &Expr) -> Option<Int> {
    match e {
        Expr::Identifier(i) if sc.other.contains(&fold(i)) => None,
        // A CTE's or a derived table's column (its alias may also be a table's name).
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 && sc.other.contains(&fold(&parts[parts.len() - 2])) => None,
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
            let (t, c) = resolve(schema, sc, e)?;
            int_type(&schema.tables[t].columns[c].data_type)
        }
        Expr::Value(v) => match &v.value {
            // PostgreSQL reads a literal past int4 as bigint, then numeric: both are rare here.
            Value::Number(n, _) if n.chars().all(|c| c.is_ascii_digit()) => Some(Int::Int),
            _ => None,
        },
        Expr::Nested(inner) => integer(schema, sc, inner),
        Expr::UnaryOp { op: UnaryOperator::Minus | UnaryOperator::Plus, expr } => integer(schema, sc, expr),
        Expr::BinaryOp { left, op: BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply | BinaryOperator::Modulo | BinaryOperator::Divide, right } => {
            Some(integer(schema, sc, left)?.max(integer(schema, sc, right)?))
        }
        Expr::Cast { data_type, .. } => int_type(&data_type_name(data_type)?),
        Expr::Case { conditions, else_result, .. } => {
            let mut widest = None;
            for r in conditions.iter().map(|w| &w.result).chain(else_result.as_deref()) {
                if matches!(r, Expr::Value(v) if matches!(v.value, Value::Null)) {
                    continue;
                }
                widest = Some(integer(schema, sc, r)?.max(widest.unwrap_or(Int::Small)));
            }
            widest
        }
        Expr::Function(f) if f.over.is_none() => match function_name(f)?.as_str() {
            "count" => Some(Int::Big),
            // sum(bigint) is numeric; sum of a smaller integer is bigint.
            "sum" => match integer(schema, sc, only_arg(f)?)? {
                Int::Big => None,
                _ => Some(Int::Big),
            },
            "min" | "max" | "abs" => integer(schema, sc, only_arg(f)?),
            "length" | "char_length" | "character_length" => Some(Int::Int),
            _ => None,
        },
        _ => None,
    }
}

fn data_type_name(t: &DataType) -> Option<String> {
    match t {
        DataType::SmallInt(_) | DataType::Int2(_) => Some("smallint".into()),
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => Some("integer".into()),
        DataType::BigInt(_) | DataType::Int8(_) => Some("bigint".into()),
        _ => None,
    }
}

/// Whether an expression is an integer constant: integer literals and arithmetic of them (`10`,
/// `60 * 60`).
fn constant(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => matches!(&v.value, Value::Number(n, _) if n.chars().all(|c| c.is_ascii_digit())),
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => constant(inner),
        Expr::BinaryOp { left, right, .. } => constant(left) && constant(right),
        _ => false,
    }
}

fn parse_expr(text: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(text).ok()?.parse_expr().ok()
}

/// The divisions of two integers in `e` reached through arithmetic alone, innermost first.
fn fix_divisions(schema: &Schema, sc: &Scope, e: &mut Expr, fired: &mut Vec<String>) {
    match e {
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => fix_divisions(schema, sc, inner, fired),
        Expr::BinaryOp { left, op, right } if matches!(op, BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply | BinaryOperator::Divide) => {
            // Only through arithmetic of integers: beside a date, a text or a numeric, a
            // division made numeric would change the operator PostgreSQL picks, or find none.
            let numeric_side = |x: &Expr| constant(x) || integer(schema, sc, x).is_some();
            let (into_left, into_right) = (*op == BinaryOperator::Divide || numeric_side(right), *op == BinaryOperator::Divide || numeric_side(left));
            if into_left {
                fix_divisions(schema, sc, left, fired);
            }
            if into_right {
                fix_divisions(schema, sc, right, fired);
            }
            if *op != BinaryOperator::Divide || constant(right) || integer(schema, sc, left).is_none() || integer(schema, sc, right).is_none() {
                return;
            }
            if let Some(numeric) = parse_expr(&format!("({left})::numeric / NULLIF({right}, 0)")) {
                fired.push(format!("idiom: integer division {e} made numeric"));
                *e = numeric;
            }
        }
        _ => {}
    }
}

/// Divisions of two integers in the statement's SELECT list and its CTEs' become numeric ones
/// with the divisor guarded against zero. Not in subqueries of expressions (a `LIMIT (SELECT
/// …)`, an `IN (SELECT …)` take the type as it is), not under DISTINCT, and not in an item that
/// GROUP BY or ORDER BY repeat (they would no longer match it).
pub(super) fn integer_division(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    let mut bodies: Vec<(&mut SetExpr, Option<&sqlparser::ast::OrderBy>)> = Vec::new();
    if let Some(w) = q.with.as_mut() {
        for cte in w.cte_tables.iter_mut() {
            let cq = cte.query.as_mut();
            bodies.push((cq.body.as_mut(), None));
        }
    }
    let order = q.order_by.clone();
    bodies.push((q.body.as_mut(), order.as_ref()));
    for (seen, (body, order)) in bodies.into_iter().enumerate() {
        crate::interrupt::every(seen, 16);
        let SetExpr::Select(s) = body else { continue };
        if s.distinct.is_some() {
            continue;
        }
        let mut repeated: Vec<String> = match &s.group_by {
            GroupByExpr::Expressions(es, _) => es.iter().map(|e| e.to_string()).collect(),
            GroupByExpr::All(_) => continue,
        };
        if let Some(sqlparser::ast::OrderByKind::Expressions(es)) = order.map(|o| &o.kind) {
            repeated.extend(es.iter().map(|o| o.expr.to_string()));
        }
        for item in s.projection.iter_mut() {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                if !repeated.contains(&e.to_string()) {
                    fix_divisions(schema, sc, e, fired);
                }
            }
        }
    }
}

/// Whether every column `e` reads is inside an aggregate (and it reads no subquery).
fn only_aggregated(e: &Expr) -> bool {
    struct Outside {
        depth: usize,
        bad: bool,
    }
    impl Visitor for Outside {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if aggregate_name(e).is_some() {
                self.depth += 1;
            } else if self.depth == 0 && matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }) {
                self.bad = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if aggregate_name(e).is_some() {
                self.depth -= 1;
            }
            ControlFlow::Continue(())
        }
    }
    let mut o = Outside { depth: 0, bad: false };
    let _ = e.visit(&mut o);
    !o.bad && has_aggregate(e)
}

/// A column reference as PostgreSQL folds it (`"NAME"` and `name` are two columns), qualifier
/// included; None for anything else.
fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(fold(i)),
        Expr::CompoundIdentifier(parts) => Some(parts.iter().map(fold).collect::<Vec<_>>().join(".")),
        Expr::Nested(inner) => column_name(inner),
        _ => None,
    }
}

/// The values the WHERE pins columns to: its top-level `AND`ed `column = literal` tests, by the
/// column as written.
fn pinned(selection: Option<&Expr>) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<&Expr> = selection.into_iter().collect();
    while let Some(e) = stack.pop() {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
                stack.push(left);
                stack.push(right);
            }
            Expr::Nested(inner) => stack.push(inner),
            Expr::BinaryOp { left, op: BinaryOperator::Eq, right } => {
                for (col, val) in [(left, right), (right, left)] {
                    if let (Some(name), Expr::Value(_)) = (column_name(col), val.as_ref()) {
                        out.push(name);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether the question itself (its first line: what follows is the hint and, for a follow-up,
/// the earlier question and query) asks per something and names a word of a group key ("per
/// country" for `GROUP BY country`, "monthly" for `date_trunc('month', d)`).
fn names_a_group(question: &str, keys: &[Expr]) -> bool {
    let asked = question.lines().next().unwrap_or_default();
    if !asks_per(asked) {
        return false;
    }
    let folded = asked.to_lowercase();
    let words: Vec<&str> = folded.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() >= 2).collect();
    keys.iter().any(|k| {
        let text = k.to_string().to_lowercase();
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 2 && !matches!(*w, "trunc" | "date" | "extract" | "from"))
            .any(|part| words.iter().any(|w| *w == part || (part.len() >= 3 && w.starts_with(part)) || (part.len() >= 4 && w.len() >= 4 && part.starts_with(w))))
    })
}

/// A grouped SELECT returning only aggregates: labelled when the question asks per something,
/// ungrouped when the WHERE pins every group to one value (see the module's comment).
pub(super) fn unlabeled_groups(q: &mut Query, question: &str, fired: &mut Vec<String>) {
    if question.is_empty() || positional(q) {
        return;
    }
    let ordered_or_limited = q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some();
    let Some(s) = body_select(q) else { return };
    let GroupByExpr::Expressions(groups, modifiers) = &s.group_by else { return };
    let plain = |k: &Expr| !matches!(k, Expr::Rollup(_) | Expr::Cube(_) | Expr::GroupingSets(_) | Expr::Tuple(_) | Expr::Value(_));
    if groups.is_empty() || !modifiers.is_empty() || !groups.iter().all(plain) {
        return;
    }
    if s.having.is_some() || s.distinct.is_some() || windowed(&s.projection) {
        return;
    }
    for p in &s.projection {
        match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } if only_aggregated(e) => {}
            _ => return,
        }
    }
    let keys: Vec<Expr> = groups.clone();
    let shown: Vec<String> = keys.iter().map(ToString::to_string).collect();
    let pins = pinned(s.selection.as_ref());
    if !ordered_or_limited && keys.iter().all(|k| column_name(k).is_some_and(|n| pins.contains(&n))) {
        s.group_by = GroupByExpr::Expressions(vec![], vec![]);
        fired.push(format!("idiom: GROUP BY {} dropped (the WHERE pins it to one value)", shown.join(", ")));
    } else if names_a_group(question, &keys) {
        for (i, k) in keys.into_iter().enumerate() {
            s.projection.insert(i, SelectItem::UnnamedExpr(k));
        }
        fired.push(format!("idiom: the groups ({}) listed first", shown.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{align, Context, Rules};
    use crate::prompt::idioms::Idioms;
    use crate::schema::Schema;

    use super::super::NoValues as Nothing;

    fn schema() -> Schema {
        let col = |n: &str, t: &str| serde_json::json!({"name": n, "ident": n, "data_type": t, "category": "N", "comment": null});
        let s: Schema = serde_json::from_value(serde_json::json!({"tables": [
            {"oid": 1, "schema": "public", "name": "tx", "ident": "tx", "kind": "r", "comment": null,
             "columns": [col("id", "integer"), col("status", "text"), col("amount", "numeric(10,2)"), col("shares", "bigint"),
                         col("qty", "smallint"), col("age", "integer"), col("price", "double precision"), col("created_at", "date"),
                         col("country", "text"), col("secs", "integer"), col("name", "text")]}
        ]}))
        .expect("the test schema parses");
        assert_eq!(s.tables[0].columns.len(), 11);
        s
    }

    fn run_with(sql: &str, question: &str, rules: Rules) -> (String, Vec<String>) {
        let a = align(sql, &schema(), Context { question, ..Context::default() }, &mut Nothing, rules);
        (a.sql, a.fired)
    }

    fn run(sql: &str, question: &str) -> (String, Vec<String>) {
        run_with(sql, question, Rules { idioms: Idioms::ALL, ..Rules::NONE })
    }

    fn unchanged(sql: &str, question: &str) {
        let (out, fired) = run(sql, question);
        assert!(fired.is_empty() && out == sql, "{sql} -> {out} {fired:?}");
    }

    #[test]
    fn ratio_of_counts_becomes_numeric() {
        let (sql, fired) = run("SELECT count(CASE WHEN status = 'success' THEN 1 END) / count(*) FROM tx", "success rate");
        assert_eq!(sql, "SELECT (count(CASE WHEN status = 'success' THEN 1 END))::NUMERIC / NULLIF(count(*), 0) FROM tx");
        assert_eq!(fired.len(), 1, "{fired:?}");
        let (sql, _) = run("SELECT SUM(CASE WHEN status = 'success' THEN 1 ELSE 0 END) * 100 / COUNT(id) AS pct FROM tx", "");
        assert!(sql.contains("::NUMERIC / NULLIF(COUNT(id), 0) AS pct"), "{sql}");
        let (sql, _) = run("SELECT sum(qty) / sum(age) FROM tx", "");
        assert!(sql.contains("::NUMERIC"), "{sql}");
        // two ratios compared
        let (_, fired) = run("SELECT count(id) / count(*) - sum(qty) / count(*) FROM tx", "");
        assert_eq!(fired.len(), 2, "{fired:?}");
        // in a CTE's list too
        let (sql, _) = run("WITH r AS (SELECT count(id) / count(*) AS rate FROM tx) SELECT rate FROM r", "");
        assert!(sql.contains("(count(id))::NUMERIC / NULLIF(count(*), 0) AS rate"), "{sql}");
    }

    #[test]
    fn divisions_that_are_not_of_two_integers_stay() {
        for sql in [
            "SELECT sum(amount) / count(*) FROM tx",                 // numeric numerator
            "SELECT count(*)::numeric / count(id) FROM tx",         // already cast
            "SELECT count(*) * 1.0 / count(id) FROM tx",            // 1.0 is numeric
            "SELECT price / age FROM tx",                           // double precision
            "SELECT sum(shares) / count(*) FROM tx",                // sum(bigint) is numeric
            "SELECT age / 10 FROM tx",                              // a literal divisor: a bucket
            "SELECT secs / (60 * 60) AS hours FROM tx",             // a constant divisor
            "WITH c AS (SELECT count(*) AS n FROM tx) SELECT n / n FROM c", // a CTE's column: unknown
            "WITH t AS (SELECT now() - created_at AS age FROM tx) SELECT sum(age) / count(*) FROM t", // shadowed by the CTE
            "SELECT avg(age) / count(*) FROM tx",                   // avg is numeric
            "SELECT count(*) FROM tx GROUP BY secs / qty",          // not in the SELECT list
            "SELECT left(name, length(name) / qty) FROM tx",        // a function's argument
            "SELECT created_at + age / qty FROM tx WHERE age / qty > 1", // date arithmetic, WHERE
            "SELECT amount * (age / qty) FROM tx",                  // beside a numeric
            "SELECT 1.5 * (age / qty) FROM tx",                     // beside a numeric literal
            "SELECT '2024-01-01'::DATE + age / qty FROM tx",        // beside a date literal
            "SELECT age / qty AS r, count(*) FROM tx GROUP BY age / qty", // GROUP BY repeats it
            "SELECT DISTINCT age / qty FROM tx ORDER BY age / qty",  // DISTINCT
            "SELECT name FROM tx LIMIT (SELECT count(*) / count(DISTINCT country) FROM tx)", // a subquery's
            "SELECT sum(tx.age) / count(*) FROM (SELECT now() - created_at AS age FROM tx) AS tx", // a derived table's column
        ] {
            unchanged(sql, "");
        }
    }

    #[test]
    fn nested_divisions_innermost_first() {
        let (sql, fired) = run("SELECT (count(id) / count(*)) / count(age) FROM tx", "");
        assert_eq!(sql, "SELECT ((count(id))::NUMERIC / NULLIF(count(*), 0)) / count(age) FROM tx", "{fired:?}");
        let (sql, fired) = run("SELECT count(id) / (count(*) / count(age)) FROM tx", "");
        assert_eq!(sql, "SELECT count(id) / ((count(*))::NUMERIC / NULLIF(count(age), 0)) FROM tx", "{fired:?}");
    }

    #[test]
    fn grouped_aggregates_the_question_wants_per_group_get_labels() {
        let (sql, fired) = run("SELECT count(*) FROM tx GROUP BY country", "How many transactions in each country?");
        assert_eq!(sql, "SELECT country, count(*) FROM tx GROUP BY country");
        assert_eq!(fired.len(), 1);
        let (sql, _) = run(
            "SELECT count(DISTINCT id) AS users FROM tx GROUP BY date_trunc('month', created_at)",
            "Monthly active users",
        );
        assert_eq!(sql, "SELECT date_trunc('month', created_at), count(DISTINCT id) AS users FROM tx GROUP BY date_trunc('month', created_at)");
        // "by" of a query's ORDER BY (a follow-up's earlier query is part of what was said) is no "per"
        unchanged("SELECT count(*) FROM tx GROUP BY country", "and in 2024?\nSELECT name FROM tx ORDER BY name");
    }

    #[test]
    fn a_group_the_where_pins_to_one_value_goes() {
        let (sql, fired) = run(
            "SELECT count(id) AS n, sum(amount) AS total FROM tx WHERE country = 'NL' AND status = 'sold' GROUP BY country",
            "How many sales in the Netherlands and what was the revenue?",
        );
        assert_eq!(sql, "SELECT count(id) AS n, sum(amount) AS total FROM tx WHERE country = 'NL' AND status = 'sold'");
        assert_eq!(fired.len(), 1);
        // not pinned: a question asking for one total keeps the groups (no sure rule)
        unchanged("SELECT avg(amount) FROM tx GROUP BY id", "What is the average amount?");
    }

    #[test]
    fn groups_left_alone() {
        let per = "How many in each country?";
        for (sql, question) in [
            ("SELECT country, count(*) FROM tx GROUP BY country", per),                 // labelled already
            ("SELECT count(*) FROM tx GROUP BY country HAVING count(*) > 2", per),      // HAVING
            ("SELECT count(*) FROM tx WHERE country = 'NL' GROUP BY country ORDER BY count(*) DESC LIMIT 1", "How many?"),
            ("SELECT count(*) FROM tx GROUP BY 1", per),                                // positional
            ("SELECT count(*), status FROM tx GROUP BY country", per),                  // not only aggregates
            ("SELECT count(*) + age FROM tx GROUP BY id", per),                         // a column outside the aggregate
            ("SELECT (SELECT max(age) FROM tx) + count(*) FROM tx GROUP BY country", per), // a subquery
            ("SELECT count(*) FROM tx GROUP BY country", ""),                           // question unknown
            ("SELECT count(*) FROM tx WHERE name = 'Jane' GROUP BY id", "How many cars were sold by Jane?"), // no group named
            ("SELECT count(*) FROM tx GROUP BY country", "How many?\nthe price_per_unit column"), // a hint's words
            ("SELECT sum(amount) FROM tx GROUP BY ROLLUP (country)", "Sum of sales by country"),
            ("SELECT sum(amount) FROM tx GROUP BY CUBE (country, status)", per),
            ("SELECT sum(amount) FROM tx GROUP BY GROUPING SETS ((country), ())", per),
        ] {
            unchanged(sql, question);
        }
    }

    #[test]
    fn labels_survive_the_style_rules() {
        // The id the groups are is put in the list after the style rules trim unasked ids.
        let (sql, fired) = run_with("SELECT count(*) FROM tx GROUP BY id", "How many rows per id?", Rules::ALL);
        assert_eq!(sql, "SELECT id, count(*) FROM tx GROUP BY id", "{fired:?}");
    }

    #[test]
    fn switched_off_idioms_do_nothing() {
        let (_, fired) = run_with("SELECT count(id) / count(*) FROM tx GROUP BY country", "rate per country", Rules::NONE);
        assert!(fired.is_empty());
    }
}
