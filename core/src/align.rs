//! Alignments: rules on the sqlparser AST that fix what candidates commonly get wrong, with the
//! catalog and the value index instead of another model call.
//!
//! - agent (names.rs): names of tables and columns that do not exist become the real ones when
//!   exactly one is close (case, quoting, a typo, a plural, a schema's name for its table, the
//!   other table of a join, a part of a longer name); a column a CTE or subquery does not return
//!   is the one column it returns that matches it, read per query block (derived.rs); a one-table query's columns that only the
//!   table its foreign key points to has get that table joined; an inner join equating two keys
//!   that no foreign key links goes through the one table whose keys link both, and one equating
//!   a key with a column the other table lacks joins on the one foreign key between that key and
//!   that table (joins.rs); a
//!   foreign key compared with another column of the table it points to, of another type,
//!   is compared with the column it references (keys.rs); a bare column the inner joins equate
//!   across every table that has it is taken from the first (joins.rs); a one-table query
//!   reading columns its table lacks, all of which one other table has, reads that table when
//!   the question never names the written one (question.rs);
//!   string literals that are not
//!   stored in their column become the stored value the value index finds ('john' -> 'JOHN'),
//!   or the one code a spelled-out word starts with in a column of codes ('Female' -> 'F');
//! - function: an aggregate in WHERE without GROUP BY becomes a scalar subquery; an aggregate in
//!   ORDER BY without GROUP BY is unwrapped; nested aggregates become ORDER BY ... LIMIT 1; a
//!   key summed is counted, and a GROUP BY that splits a count of its own key's distinct values
//!   into ones goes (counts.rs); an inner join that only re-finds the row a NOT NULL foreign
//!   key PostgreSQL enforces points to, with no outer join before it, is dropped (drops.rs), and so
//!   is a one-to-many join the question never names in a SELECT that neither groups, aggregates
//!   nor uses a window (question.rs); a window the question bounds by the calendar ("the last 6
//!   months, excluding the current month", "last year") ends where the current period starts
//!   and starts at a period's start (windows.rs); alternatives for one column split by an
//!   unparenthesised AND are grouped (`k = 'a' OR k = 'b' AND y > 1`: precedence.rs);
//! - style: ORDER BY ... LIMIT on a nullable column gets IS NOT NULL (PostgreSQL sorts NULLs
//!   first in DESC order); id columns nobody asked for leave a SELECT list that the extraction
//!   said returns fewer things, or, with no extraction, where another column of their table
//!   stands for the row, and aggregates and plain columns are listed in the order the question
//!   names them (question.rs).
//!
//! Names are resolved over every table the statement reads (aliases included), which covers
//! correlated subqueries; an ambiguous name is left alone for PostgreSQL to reject.

use crate::text::closest_name as closest;
use crate::schema::Schema;
use crate::sqlinfo::pg_folded as fold;
use serde::Serialize;
use sqlparser::ast::{
    BinaryOperator, Expr, Ident, LimitClause, ObjectName, ObjectNamePart, OrderByKind, OrderBySort, Query, SelectItem, SetExpr, Statement,
    TableFactor, Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// Finds the stored spelling of a value; the value index in the database.
pub trait ValueLookup {
    /// The value of `table` (by OID) . `column` closest to `literal`, when `literal` itself is
    /// not stored there; None when it is stored or nothing is close.
    fn closest_value(&mut self, table: u32, column: &str, literal: &str) -> Option<String>;
}

/// A value lookup that finds nothing: under nl2sql.privacy, and where only the catalog and
/// the statistics speak.
pub struct NoValues;

impl ValueLookup for NoValues {
    fn closest_value(&mut self, _table: u32, _column: &str, _literal: &str) -> Option<String> {
        None
    }
}

/// Which families of rules run (serialized under their settings' names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rules {
    #[serde(rename = "align_agent")]
    pub agent: bool,
    #[serde(rename = "align_function")]
    pub function: bool,
    #[serde(rename = "align_style")]
    pub style: bool,
}

impl Rules {
    pub const ALL: Rules = Rules { agent: true, function: true, style: true };
    pub const NONE: Rules = Rules { agent: false, function: false, style: false };

    /// Whether any rule runs.
    pub fn any(&self) -> bool {
        self.agent || self.function || self.style
    }
}

/// An aligned candidate and the rules that changed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aligned {
    pub sql: String,
    pub fired: Vec<String>,
}

/// Names that are SQL functions or keywords spelled as identifiers, never columns.
const NOT_COLUMNS: &[&str] = &[
    "current_date", "current_time", "current_timestamp", "localtime", "localtimestamp", "current_user",
    "session_user", "user", "current_role", "current_schema", "current_catalog", "system_user", "true", "false", "null",
];

/// PostgreSQL's reserved key words (both kinds: those that can name a function or a type and
/// those that cannot) not in [`NOT_COLUMNS`], which cannot name a table or begin a column
/// reference unquoted (`FROM order`, `order.id`).
const RESERVED: &[&str] = &[
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "authorization", "binary", "both", "case", "cast",
    "check", "collate", "collation", "column", "concurrently", "constraint", "create", "cross", "default", "deferrable", "desc",
    "distinct", "do", "else", "end", "except", "fetch", "for", "foreign", "freeze", "from", "full", "grant", "group", "having", "ilike",
    "in", "initially", "inner", "intersect", "into", "is", "isnull", "join", "lateral", "leading", "left", "like", "limit", "natural",
    "not", "notnull", "offset", "on", "only", "or", "order", "outer", "overlaps", "placing", "primary", "references", "returning",
    "right", "select", "similar", "some", "symmetric", "table", "tablesample", "then", "to", "trailing", "union", "unique", "using",
    "variadic", "verbose", "when", "where", "window", "with",
];

/// An identifier as PostgreSQL needs it written: quoted unless it is plain lowercase and not a
/// name PostgreSQL reads as something else (`current_user` unquoted is the function, `order` a
/// key word). Every rule
/// makes a catalog name an identifier through this one function; the tree holds the name itself
/// (sqlparser's printer quotes it, and [`reads_back_as`] checks that it quoted it right).
fn ident(name: &str) -> Ident {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !NOT_COLUMNS.contains(&name)
        && !RESERVED.contains(&name);
    if plain {
        Ident::new(name)
    } else {
        Ident::with_quote('"', name)
    }
}

/// The joins of `SELECT 1 FROM x <joins>`, parsed: how a rule builds a join from catalog
/// identifiers (quoted where needed) instead of assembling the syntax tree by hand. Empty when
/// the text does not parse.
fn parsed_joins(text: &str) -> Vec<sqlparser::ast::Join> {
    let Ok(parsed) = Parser::parse_sql(&PostgreSqlDialect {}, text) else { return Vec::new() };
    let Some(Statement::Query(helper)) = parsed.into_iter().next() else { return Vec::new() };
    let SetExpr::Select(hs) = *helper.body else { return Vec::new() };
    hs.from.into_iter().next().map(|f| f.joins).unwrap_or_default()
}

fn object_name(ident_text: &str) -> Option<ObjectName> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(ident_text).ok()?.parse_object_name(false).ok()
}

/// The tables a statement reads, by the name or alias it refers to them with.
struct Scope {
    /// alias or table name (folded) -> table index
    names: HashMap<String, usize>,
    tables: Vec<usize>,
    /// Output aliases, CTE and derived-table names and columns: names that are not columns.
    other: Vec<String>,
}

fn relation_name(name: &ObjectName) -> Option<(Option<String>, String)> {
    let parts: Vec<String> = name.0.iter().filter_map(ObjectNamePart::as_ident).map(fold).collect();
    match parts.as_slice() {
        [t] => Some((None, t.clone())),
        [.., s, t] => Some((Some(s.clone()), t.clone())),
        [] => None,
    }
}

/// The catalog's table a name in a FROM reads: a schema-qualified name, that schema's table; a
/// bare name, the table PostgreSQL finds first on the search path (the one shown without its
/// schema), else the first of that name whose owner the caller trusts (written where none is
/// on the search path, it fails anyway, and the rules treat it as that table).
fn find_table(schema: &Schema, name: &ObjectName) -> Option<usize> {
    let (s, t) = relation_name(name)?;
    let tables = &schema.tables;
    match s {
        Some(s) => tables.iter().position(|x| x.name == t && x.schema == s),
        // On the search path, else off it where the name may stand for it (never another
        // role's table she could plant there).
        None => tables
            .iter()
            .position(|x| x.name == t && names::on_search_path(&x.ident))
            .or_else(|| tables.iter().position(|x| x.name == t && names::may_stand_for(x))),
    }
}

struct ScopeCollector<'a> {
    schema: &'a Schema,
    scope: Scope,
}

impl Visitor for ScopeCollector<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if let Some(w) = &q.with {
            for cte in &w.cte_tables {
                self.scope.other.push(fold(&cte.alias.name));
                self.scope.other.extend(cte.alias.columns.iter().map(|c| fold(&c.name)));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, s: &sqlparser::ast::Select) -> ControlFlow<()> {
        for item in &s.projection {
            if let SelectItem::ExprWithAlias { alias, .. } = item {
                self.scope.other.push(fold(alias));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
        match t {
            TableFactor::Table { name, alias, args: None, .. } => {
                if let Some(ti) = find_table(self.schema, name) {
                    self.scope.tables.push(ti);
                    self.scope.names.extend(relation_name(name).map(|(_, n)| (n, ti)));
                    if let Some(a) = alias {
                        self.scope.names.insert(fold(&a.name), ti);
                    }
                } else {
                    // Not the schema's (nor, next, a table function without an alias): by its alias, or its own name.
                    self.scope.other.extend(alias.as_ref().map(|a| fold(&a.name)).or_else(|| relation_name(name).map(|(_, n)| n)));
                }
            }
            TableFactor::Table { name, alias: None, .. } | TableFactor::Function { name, alias: None, .. } => self.scope.other.extend(relation_name(name).map(|(_, n)| n)),
            TableFactor::Derived { alias: Some(a), .. }
            | TableFactor::Function { alias: Some(a), .. }
            | TableFactor::Table { alias: Some(a), .. }
            | TableFactor::UNNEST { alias: Some(a), .. } => {
                self.scope.other.push(fold(&a.name));
                self.scope.other.extend(a.columns.iter().map(|c| fold(&c.name)));
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

fn scope<V: Visit>(schema: &Schema, stmt: &V) -> Scope {
    let mut c = ScopeCollector { schema, scope: Scope { names: HashMap::new(), tables: vec![], other: vec![] } };
    let _ = stmt.visit(&mut c);
    c.scope.tables.sort_unstable();
    c.scope.tables.dedup();
    c.scope
}

/// (table index, column index) of a column reference, when it resolves uniquely.
fn resolve(schema: &Schema, scope: &Scope, e: &Expr) -> Option<(usize, usize)> {
    let (table, column) = match e {
        Expr::Identifier(i) => (None, fold(i)),
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            (Some(fold(&parts[parts.len() - 2])), fold(&parts[parts.len() - 1]))
        }
        Expr::Nested(inner) => return resolve(schema, scope, inner),
        _ => return None,
    };
    let candidates: Vec<usize> = match table {
        Some(q) => scope.names.get(&q).copied().into_iter().collect(),
        None => scope.tables.clone(),
    };
    let hits: Vec<(usize, usize)> = candidates
        .iter()
        .filter_map(|&t| schema.tables[t].columns.iter().position(|c| c.name == column).map(|c| (t, c)))
        .collect();
    match hits.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// What earlier stages said of the question: what its SELECT list returns (the extraction),
/// the tables linked to it (the per-question schema's, by their idents, most relevant first),
/// the tables the prompts showed when not every table was (their idents; empty when all were)
/// and the question itself (empty when unknown: the rules that read it do not run).
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    pub select: &'a [String],
    pub linked: &'a [String],
    pub shown: &'a [String],
    pub question: &'a str,
}

/// Aligns one candidate; returns it unchanged (and no rule) when it does not parse.
pub fn align(sql: &str, schema: &Schema, cx: Context, values: &mut dyn ValueLookup, rules: Rules) -> Aligned {
    let unchanged = || Aligned { sql: sql.to_string(), fired: vec![] };
    let Ok(mut stmts) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else { return unchanged() };
    let [stmt] = stmts.as_mut_slice() else { return unchanged() };
    let mut fired = Vec::new();
    if rules.agent {
        schema_as_table(schema, stmt, cx.linked, &mut fired);
        fix_tables(schema, stmt, cx.shown, &mut fired);
        if let Statement::Query(q) = stmt {
            other_table(schema, q, cx.linked, cx.question, &mut fired);
        }
        derived::derived_columns(schema, stmt, &mut fired);
        let sc = scope(schema, stmt);
        fix_columns(schema, &sc, stmt, &mut fired);
        if let Statement::Query(q) = stmt {
            join_for_columns(schema, &sc, q, &mut fired);
            join_for_qualified(schema, &sc, q, &mut fired);
            bridge_joins(schema, &sc, q, &mut fired);
            ambiguous_columns(schema, &sc, q, &mut fired);
        }
        if let Statement::Query(q) = stmt {
            key_comparisons(schema, q, &mut fired);
        }
        let sc = scope(schema, stmt);
        fix_values(schema, &sc, stmt, values, &mut fired);
    }
    if let Statement::Query(q) = stmt {
        if rules.function {
            aggregate_in_where(q, &mut fired);
            aggregate_in_order_by(q, &mut fired);
            nested_aggregates(q, &mut fired);
            // Before the sums become counts: `sum(DISTINCT k) ... GROUP BY k` names its groups.
            counts::grouping_by_the_counted(q, &mut fired);
            counts::summed_keys(schema, q, &mut fired);
            precedence::and_or_on_one_column(q, &mut fired);
            dropped_joins(schema, q, cx.question, &mut fired);
            windows::calendar_windows(q, cx.question, &mut fired);
        }
        // Read again: a join the rules above dropped is no longer one of the statement's tables.
        let sc = scope(schema, &**q);
        if rules.style {
            nulls_under_limit(schema, &sc, q, &mut fired);
            select_list(schema, &sc, q, cx, &mut fired);
            question_order(q, cx.question, &mut fired);
            // The list trimmed to what was asked may now be count(DISTINCT k) ... GROUP BY k.
            if rules.function { counts::grouping_by_the_counted(q, &mut fired); }
        }
    }
    if fired.is_empty() {
        return unchanged();
    }
    let printed = stmt.to_string();
    // What the rules built is printed by sqlparser, which does not escape every quote a name or
    // a value may hold: it leaves a doubled quote and a quote after a backslash as they are, so
    // a table owner's `treatments""x` would print as `"treatments""x"`, which names her other
    // table `treatments"x`, and `a\" IS NULL JOIN ...` would end the identifier early and become
    // SQL. The text must read back as the very statement the rules built, or no rule applies.
    // The rules also print parts of the statement and read them back: none applies to one that
    // does not read back as itself to begin with (checked here, where a rule fired, rather than
    // for every candidate).
    if !reads_back_as(&printed, stmt) || !reads_back_itself(sql) {
        return unchanged();
    }
    Aligned { sql: printed, fired }
}

/// Whether `sql` is one statement that prints as text sqlparser reads back as that statement.
fn reads_back_itself(sql: &str) -> bool {
    match Parser::parse_sql(&PostgreSqlDialect {}, sql) {
        Ok(stmts) => matches!(stmts.as_slice(), [one] if reads_back_as(&one.to_string(), one)),
        Err(_) => false,
    }
}

/// Whether `sql` parses to one statement equal to `built` (names and values as they are, not as
/// printed), which prints as `sql` again.
fn reads_back_as(sql: &str, built: &Statement) -> bool {
    match Parser::parse_sql(&PostgreSqlDialect {}, sql) {
        Ok(stmts) => matches!(stmts.as_slice(), [one] if one == built && one.to_string() == sql),
        Err(_) => false,
    }
}

fn body_select(q: &mut Query) -> Option<&mut sqlparser::ast::Select> {
    match q.body.as_mut() {
        SetExpr::Select(s) => Some(s),
        _ => None,
    }
}

/// Calls `f` on the expressions of `node` that are not inside a subquery, children first.
fn top_level_exprs(node: &mut impl VisitMut, f: impl FnMut(&mut Expr)) {
    struct TopLevel<F> {
        depth: usize,
        f: F,
    }
    impl<F: FnMut(&mut Expr)> VisitorMut for TopLevel<F> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                (self.f)(e);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(node, &mut TopLevel { depth: 0, f });
}

/// Qualifiers (table names or aliases) and bare names an expression uses.
fn names_used(e: &impl Visit) -> (Vec<String>, Vec<String>) {
    struct Names(Vec<String>, Vec<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::CompoundIdentifier(p) if p.len() >= 2 => self.0.push(fold(&p[p.len() - 2])),
                Expr::Identifier(i) => self.1.push(fold(i)),
                Expr::QualifiedWildcard(n, _) => {
                    if let Some(q) = n.0.last().and_then(ObjectNamePart::as_ident) {
                        self.0.push(fold(q));
                    }
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_select(&mut self, s: &sqlparser::ast::Select) -> ControlFlow<()> {
            for p in &s.projection {
                if let SelectItem::QualifiedWildcard(k, _) = p {
                    self.0.push(fold(&Ident::new(k.to_string())));
                }
                if let SelectItem::Wildcard(_) = p {
                    self.0.push("*".into());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut n = Names(vec![], vec![]);
    let _ = e.visit(&mut n);
    (n.0, n.1)
}

/// Most passes of [`dropped_joins`]: each pass that fires drops a join.
const JOIN_PASSES: usize = 8;

/// Joins that only filter or repeat rows, dropped until none is left: dropping one may leave
/// another that only its ON condition used (`singer JOIN singer_in_concert ON … JOIN concert ON
/// …`, once `concert` goes), and changes which words the statement's other tables' names have.
/// Each pass reads the statement's tables as they are.
fn dropped_joins(schema: &Schema, q: &mut Query, question: &str, fired: &mut Vec<String>) {
    // A CTE named as a table is what `FROM` that name reads: the catalog's keys say nothing of it.
    let shadowed = q.with.as_ref().is_some_and(|w| {
        w.cte_tables.iter().any(|c| {
            let name = fold(&c.alias.name);
            schema.tables.iter().any(|t| t.name == name)
        })
    });
    if shadowed {
        return;
    }
    for _ in 0..JOIN_PASSES {
        crate::interrupt::check();
        let before = fired.len();
        let sc = scope(schema, &*q);
        redundant_joins(schema, &sc, q, fired);
        let sc = scope(schema, &*q);
        unmentioned_joins(schema, &sc, q, question, fired);
        if fired.len() == before {
            return;
        }
    }
}

fn nulls_under_limit(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    let limited = matches!(&q.limit_clause, Some(LimitClause::LimitOffset { limit: Some(_), .. }));
    let Some(order) = q.order_by.clone() else { return };
    let OrderByKind::Expressions(exprs) = &order.kind else { return };
    if !limited {
        return;
    }
    let Some(s) = body_select(q) else { return };
    for o in exprs {
        // PostgreSQL puts NULLs first in DESC order (unless NULLS LAST), last in ASC order.
        let desc = matches!(o.options.sort, Some(OrderBySort::Desc));
        if !o.options.nulls_first.unwrap_or(desc) {
            continue;
        }
        let Some((t, c)) = resolve(schema, sc, &o.expr) else { continue };
        if schema.tables[t].columns[c].not_null {
            continue;
        }
        let test = Expr::IsNotNull(Box::new(o.expr.clone()));
        let already = s.selection.as_ref().is_some_and(|w| w.to_string().contains(&test.to_string()));
        if already {
            continue;
        }
        fired.push(format!("style: {} IS NOT NULL under ORDER BY ... LIMIT", o.expr));
        s.selection = Some(match s.selection.take() {
            Some(w) => Expr::BinaryOp { left: Box::new(Expr::Nested(Box::new(w))), op: BinaryOperator::And, right: Box::new(test) },
            None => test,
        });
    }
}

/// Whether a column is an id: a key (primary or foreign) of its table, or named id / *_id.
fn is_key(schema: &Schema, t: usize, c: usize) -> bool {
    let table = &schema.tables[t];
    let column = &table.columns[c];
    table.primary_key.contains(&column.name)
        || schema.foreign_keys.iter().any(|fk| fk.table == table.ident && fk.columns.contains(&column.ident))
        || column.name.eq_ignore_ascii_case("id")
        || column.name.to_lowercase().ends_with("_id")
}

fn select_list(schema: &Schema, sc: &Scope, q: &mut Query, cx: Context, fired: &mut Vec<String>) {
    let select = cx.select;
    if select.is_empty() {
        unasked_keys(schema, sc, q, cx.question, fired);
        return;
    }
    if positional(q) {
        return;
    }
    let Some(s) = body_select(q) else { return };
    if s.projection.len() <= select.len() || s.distinct.is_some() {
        return;
    }
    // "student id", "stuid" and "stu_id" all name the same thing.
    let wanted: String = select.join(" ").to_lowercase().replace('_', " ");
    let words: Vec<&str> = wanted.split(|c: char| !c.is_alphanumeric()).collect();
    if words.iter().any(|w| matches!(*w, "id" | "ids" | "identifier" | "identifiers")) {
        return;
    }
    let is_key = |e: &Expr| -> Option<String> {
        let (t, c) = resolve(schema, sc, e)?;
        is_key(schema, t, c).then(|| schema.tables[t].columns[c].name.to_lowercase())
    };
    let unasked = |p: &SelectItem| -> bool {
        let SelectItem::UnnamedExpr(e @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_))) = p else { return false };
        is_key(e).is_some_and(|name| !wanted.contains(&name.replace('_', " ")) && !wanted.replace(' ', "").contains(&name.replace('_', "")))
    };
    let extra = s.projection.iter().filter(|p| unasked(p)).count();
    if extra > 0 && s.projection.len() - extra == select.len() {
        let dropped: Vec<String> = s.projection.iter().filter(|p| unasked(p)).map(|p| p.to_string()).collect();
        s.projection.retain(|p| !unasked(p));
        fired.push(format!("style: SELECT list trimmed to what was asked (dropped {})", dropped.join(", ")));
    }
}

mod aggregates;
mod columns;
mod counts;
mod derived;
mod drops;
mod joins;
mod keys;
mod levels;
mod names;
pub(crate) use names::may_stand_for;
mod precedence;
mod question;
mod reach;
mod windows;
use aggregates::{aggregate_in_order_by, aggregate_in_where, aggregate_name, aggregated, nested_aggregates};
use joins::{ambiguous_columns, bridge_joins};
use drops::redundant_joins;
use keys::key_comparisons;
use question::{other_table, positional, question_order, unasked_keys, unmentioned_joins};
use columns::fix_columns;
use names::{fix_tables, fix_values, join_for_columns, schema_as_table};
use reach::join_for_qualified;

#[cfg(test)]
mod tests;
