//! Facts read off a query's AST: which columns it compares with which string literals, and which
//! names it reads that the query does not define itself.

use sqlparser::ast::{BinaryOperator, Expr, Ident, JsonTableColumn, ObjectNamePart, Query, Select, SelectItem, TableAlias, TableFactor, Value, Visit, Visitor};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::collections::HashSet;
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
    match e {
        Expr::Identifier(i) => Some(pg_folded(i)),
        Expr::CompoundIdentifier(parts) => parts.last().map(pg_folded),
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

/// Most names [`unknown_names`] returns (a query of the model's may hold thousands).
pub const MAX_UNKNOWN_NAMES: usize = 64;

/// The names `sql` reads (columns, and tables in FROM: their last part) that neither `known`
/// holds (asked with the name folded as PostgreSQL folds it) nor the query defines (an alias, a
/// CTE, a column alias), each once as written (quotes left off), at most MAX_UNKNOWN_NAMES,
/// sorted; empty when it does not parse. A qualifier (`t` of `t.name`) is never one, nor is a
/// name in a value's place: compared with a known column (`country = "France"`), in the list of
/// one's `IN`, or a `LIKE` pattern.
pub fn unknown_names(sql: &str, known: &dyn Fn(&str) -> bool) -> Vec<String> {
    let Ok(statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else { return vec![] };
    let mut names = Names { known, read: Vec::new(), defined: HashSet::new(), values: HashSet::new() };
    let _ = statements.visit(&mut names);
    let mut seen = HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for (folded, written) in names.read {
        if out.len() >= MAX_UNKNOWN_NAMES {
            break;
        }
        if !known(&folded) && !names.defined.contains(&folded) && !names.values.contains(&folded) && seen.insert(folded) {
            out.push(written);
        }
    }
    out.sort();
    out
}

struct Names<'a> {
    known: &'a dyn Fn(&str) -> bool,
    /// Each name read: folded, and as written.
    read: Vec<(String, String)>,
    defined: HashSet<String>,
    /// Names in a value's place (folded).
    values: HashSet<String>,
}

/// The alias a FROM item is given, whatever its kind (`AS s(a, b)`).
pub(crate) fn table_alias(t: &TableFactor) -> Option<&TableAlias> {
    match t {
        TableFactor::Table { alias, .. }
        | TableFactor::Derived { alias, .. }
        | TableFactor::TableFunction { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::JsonTable { alias, .. }
        | TableFactor::XmlTable { alias, .. }
        | TableFactor::NestedJoin { alias, .. } => alias.as_ref(),
        _ => None,
    }
}

/// A name as PostgreSQL reads it: unquoted, its ASCII letters lowercased (in a multibyte
/// encoding, no other); quoted, as written. For matching names with the catalog.
pub(crate) fn pg_folded(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// A name lowercased whole (Unicode): an unquoted look-alike of a name folds to it (the
/// guard's safe side: `pg_advisory_loc\u{212A}` is refused as `pg_advisory_lock`).
pub(crate) fn folded(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

impl Names<'_> {
    /// `value`, a name the tables lack, compared with `other`: a value when `other` is a known
    /// column or one the query defines, or an expression that is neither a name nor a literal
    /// (`lower(name)`, `name::text`); compared with a name the tables lack or a literal
    /// (`salary > 1000`), it is a name.
    fn compared(&mut self, other: &Expr, value: &Expr) {
        let Some(v) = column(value) else { return };
        if (self.known)(&v) {
            return;
        }
        let other_is_value_side = match column(other) {
            Some(o) => (self.known)(&o) || self.defined.contains(&o),
            None => !matches!(other, Expr::Value(_)),
        };
        if other_is_value_side {
            self.values.insert(v);
        }
    }
}

impl Visitor for Names<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        for cte in q.with.iter().flat_map(|w| &w.cte_tables) {
            self.defined.insert(pg_folded(&cte.alias.name));
            self.defined.extend(cte.alias.columns.iter().map(|c| pg_folded(&c.name)));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, s: &Select) -> ControlFlow<()> {
        for item in &s.projection {
            if let SelectItem::ExprWithAlias { alias, .. } = item {
                self.defined.insert(pg_folded(alias));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args: None, .. } = t {
            if let Some(ObjectNamePart::Identifier(last)) = name.0.last() {
                self.read.push((pg_folded(last), last.value.clone()));
            }
        }
        if let Some(a) = table_alias(t) {
            self.defined.insert(pg_folded(&a.name));
            self.defined.extend(a.columns.iter().map(|c| pg_folded(&c.name)));
        }
        // The columns JSON_TABLE and XMLTABLE declare are the query's own, as an alias's are.
        match t {
            TableFactor::JsonTable { columns, .. } => json_columns(columns, &mut self.defined),
            TableFactor::XmlTable { columns, .. } => self.defined.extend(columns.iter().map(|c| pg_folded(&c.name))),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        match e {
            Expr::Identifier(i) => self.read.push((pg_folded(i), i.value.clone())),
            Expr::CompoundIdentifier(parts) if parts.len() > 1 => {
                self.read.extend(parts.last().map(|i| (pg_folded(i), i.value.clone())));
            }
            Expr::BinaryOp { left, op, right } if is_comparison(op) => {
                self.compared(left, right);
                self.compared(right, left);
            }
            Expr::InList { expr, list, .. } => {
                for item in list {
                    self.compared(expr, item);
                }
            }
            Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => self.compared(expr, pattern),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The names a JSON_TABLE's COLUMNS declare, nested paths' included (as deep as the parser
/// nested them).
fn json_columns(columns: &[JsonTableColumn], into: &mut HashSet<String>) {
    for c in columns {
        match c {
            JsonTableColumn::Named(n) => {
                into.insert(pg_folded(&n.name));
            }
            JsonTableColumn::ForOrdinality(i) => {
                into.insert(pg_folded(i));
            }
            JsonTableColumn::Nested(n) => json_columns(&n.columns, into),
        }
    }
}

fn is_comparison(op: &BinaryOperator) -> bool {
    use BinaryOperator::*;
    matches!(op, Eq | NotEq | Lt | LtEq | Gt | GtEq)
}

/// The relations `sql` names in FROM and JOIN clauses, each as PostgreSQL reads the name: its
/// schema when written, and its name (an unquoted part folded to lower case, a quoted one as it
/// is). CTE names are among them (the database tells them apart). None when `sql` is not one
/// statement sqlparser reads.
pub fn relations_named(sql: &str) -> Option<Vec<(Option<String>, String)>> {
    let stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?;
    let [stmt] = stmts.as_slice() else { return None };
    // PostgreSQL folds the ASCII letters of an unquoted name (in a multibyte encoding, no other)
    let part = |p: &ObjectNamePart| match p {
        ObjectNamePart::Identifier(i) if i.quote_style.is_some() => Some(i.value.clone()),
        ObjectNamePart::Identifier(i) => Some(i.value.to_ascii_lowercase()),
        _ => None,
    };
    let mut out = Vec::new();
    let _ = sqlparser::ast::visit_relations(stmt, |name| {
        let parts: Option<Vec<String>> = name.0.iter().map(part).collect();
        match parts.as_deref() {
            Some([n]) => out.push((None, n.clone())),
            Some([.., s, n]) => out.push((Some(s.clone()), n.clone())),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    out.sort();
    out.dedup();
    Some(out)
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

    #[test]
    fn names_the_query_reads_and_does_not_define() {
        let known = |n: &str| ["singer", "name", "age", "country"].contains(&n);
        let unknown = |sql: &str| unknown_names(sql, &known);
        assert_eq!(unknown("SELECT s.name, s.salary FROM singer AS s WHERE s.age > 40"), vec!["salary"]);
        assert_eq!(unknown("SELECT p.planet_name FROM planet p JOIN planet_rings pr ON p.id = pr.id"), vec!["id", "planet", "planet_name", "planet_rings"]);
        // Aliases, CTEs and their columns are the query's own; qualifiers are never names read.
        assert!(unknown("WITH t(n) AS (SELECT name FROM singer) SELECT n, count(*) AS total FROM t GROUP BY n ORDER BY total").is_empty());
        assert!(unknown("SELECT x.k FROM (SELECT age AS k FROM singer) AS x").is_empty());
        assert!(unknown("SELECT singer.name FROM public.singer").is_empty());
        // Quoted names keep their case; unquoted ones are given as written, once.
        assert_eq!(unknown("SELECT \"Salary\" FROM singer"), vec!["Salary"]);
        assert_eq!(unknown("SELECT Salary_Key, salary_key FROM singer"), vec!["Salary_Key"]);
        // A name in a value's place is a value written with the wrong quotes, not a name.
        assert!(unknown("SELECT name FROM singer WHERE country = \"France\" OR \"Spain\" = country").is_empty());
        assert!(unknown("SELECT name FROM singer WHERE country IN (\"France\", Spain) AND name LIKE \"Bob\"").is_empty());
        // So is one compared with a function or cast of a column, or with a column the query defines.
        assert!(unknown("SELECT name FROM singer WHERE lower(name) = \"bob\" OR name::text = \"Bob\"").is_empty());
        assert!(unknown("WITH t(c) AS (SELECT country FROM singer) SELECT c FROM t WHERE c = \"France\"").is_empty());
        // Compared with a literal or a name the tables lack, it is still read.
        assert_eq!(unknown("SELECT name FROM singer WHERE salary > 1000"), vec!["salary"]);
        assert_eq!(unknown("SELECT name FROM singer WHERE salary > bonus"), vec!["bonus", "salary"]);
        // Columns JSON_TABLE and XMLTABLE declare are the query's own (the name that is not
        // shows the query parsed).
        let json = "SELECT jt.title, jt.n, salary FROM singer, JSON_TABLE(singer.name, '$[*]' COLUMNS(title TEXT PATH '$.t', n FOR ORDINALITY, \
                    NESTED PATH '$.k[*]' COLUMNS(kid INT PATH '$.i'))) AS jt WHERE jt.kid > 1";
        assert_eq!(unknown(json), vec!["salary"]);
        assert_eq!(unknown("SELECT x.title, salary FROM singer, XMLTABLE('/r' PASSING singer.name COLUMNS title TEXT PATH 't') AS x"), vec!["salary"]);
        // At most MAX_UNKNOWN_NAMES.
        let many = (0..200).map(|i| format!("c{i}")).collect::<Vec<_>>().join(", ");
        assert_eq!(unknown(&format!("SELECT {many} FROM singer")).len(), MAX_UNKNOWN_NAMES);
        assert!(unknown("not sql").is_empty());
    }

    #[test]
    fn facts_fold_names_as_postgresql_folds_them() {
        // Unquoted, only the ASCII letters are lowercased (as in a multibyte encoding), as the
        // alignment folds them: `ÉTAT` is `État`, never `état`.
        assert_eq!(pairs("SELECT 1 FROM t WHERE ÉTAT = 'x'"), vec![("État".into(), "x".into())]);
        let known = |n: &str| ["singer", "État"].contains(&n);
        assert!(unknown_names("SELECT ÉTAT FROM singer", &known).is_empty());
        let lower = |n: &str| ["singer", "état"].contains(&n);
        assert_eq!(unknown_names("SELECT ÉTAT FROM singer", &lower), vec!["ÉTAT"]);
        assert_eq!(column(&Expr::CompoundIdentifier(vec![Ident::new("s"), Ident::new("ÉTAT")])), Some("État".into()));
    }

    #[test]
    fn relations_are_named_as_postgresql_reads_them() {
        let named = |sql: &str| relations_named(sql).unwrap_or_default();
        assert_eq!(
            named("SELECT * FROM Orders o JOIN sales.\"Q1\" q ON true WHERE o.id IN (SELECT id FROM \"sic\"\"\"\"x\")"),
            vec![(None, "orders".to_string()), (None, "sic\"\"x".to_string()), (Some("sales".to_string()), "Q1".to_string())]
        );
        assert_eq!(named("WITH t AS (SELECT 1) SELECT * FROM t, db.s.u"), vec![(None, "t".to_string()), (Some("s".to_string()), "u".to_string())]);
        assert_eq!(named("SELECT 1"), vec![]);
        assert!(relations_named("SELECT 1; SELECT 2").is_none());
        assert!(relations_named("SELEC").is_none());
    }
}
