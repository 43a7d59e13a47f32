//! Stages every path shares: showing the schema, linking a wide one, finding values, and
//! evaluating one answer of the model (extract, guard, align, execute).

use super::trace::{detail_name, CandidateTrace, GrammarTrace, Trace};
use super::{Database, Question, Rejected, Settings, LINKED_COLUMNS};
use crate::grammar::{self, Form, NoGrammar};
use std::sync::Arc;
use crate::align::{self, Context, NoValues};
use crate::model::answer::extract_sql;
use crate::safety::guard::{self, GuardError};
use crate::prompt::refine::Failure;
use crate::retrieval::retrieve::{self, ValueHint};
use crate::schema::{Linking, Rendered, Schema};
use crate::Execution;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use std::collections::HashMap;

/// Renders the schema the generator sees and records it in the trace.
pub(super) fn show_schema(trace: &mut Trace, schema: &Schema, settings: &Settings) -> Rendered {
    shown(trace, schema.render(settings.schema_max_tokens))
}

/// Like show_schema, for Open-SQL's variable-length rendering of `schema` around `linking`.
pub(super) fn show_linked(trace: &mut Trace, schema: &Schema, linking: &Linking, settings: &Settings) -> Rendered {
    shown(trace, schema.render_linked(settings.schema_max_tokens, linking))
}

/// Records the schema the generator sees in the trace.
pub(super) fn shown(trace: &mut Trace, rendered: Rendered) -> Rendered {
    trace.schema = rendered.text.clone();
    trace.schema_tokens = rendered.tokens;
    trace.schema_detail = detail_name(rendered.detail);
    trace.tables_shown = rendered.tables_shown;
    trace.tables_omitted = rendered.tables_omitted;
    // A name's own line breaks and invisible characters shown escaped (the prompt shows U&"...").
    trace.schema_columns = rendered.columns.iter().map(|c| crate::render::visible(c, false)).collect();
    rendered
}

/// The grammar for a generation prompt that shows `columns` (of `schema`'s tables), where the
/// endpoint takes one (`on`: Llm::takes_grammar); what was built for the first prompt, or why
/// nothing was, goes in the trace (each model call's trace has the bytes it was sent).
pub(super) fn grammar_for(trace: &mut Trace, on: bool, schema: &Schema, columns: &[String], form: Form) -> Option<Arc<String>> {
    if !on {
        return None;
    }
    let first = trace.grammar.is_none();
    match grammar::build(schema, columns, form) {
        Ok(g) => {
            if first {
                trace.grammar = Some(GrammarTrace { bytes: g.text.len(), relations: g.relations, columns: g.columns, scoped: g.scoped, not_built: None });
            }
            Some(Arc::new(g.text))
        }
        Err(why) => {
            let not_built = match why {
                NoGrammar::NoRelations => "the prompt shows no relation".to_string(),
                NoGrammar::TooLarge(n) => format!("{n} bytes, over the limit of {}", grammar::MAX_BYTES),
            };
            if first {
                trace.grammar = Some(GrammarTrace { not_built: Some(not_built), ..Default::default() });
            }
            None
        }
    }
}

/// `schema` with the tables of `columns` sampled (see sampled_tables).
pub(super) fn sampled(schema: &Schema, columns: &[(usize, usize)], settings: &Settings, db: &mut dyn Database) -> Schema {
    sampled_tables(schema, columns.iter().map(|c| c.0).collect(), settings, db)
}

/// `schema` with `tables` sampled (a wide schema comes without samples; the database caches
/// them); as it is under nl2sql.privacy, which reads no rows for a prompt.
pub(super) fn sampled_tables(schema: &Schema, mut tables: Vec<usize>, settings: &Settings, db: &mut dyn Database) -> Schema {
    if settings.privacy {
        return schema.clone();
    }
    tables.sort_unstable();
    tables.dedup();
    let mut s = schema.clone();
    if !tables.is_empty() {
        db.sample(&mut s, &tables);
    }
    s
}

/// The (table, column) of `schema` that a column search found as (table OID, column name);
/// none in a stranger's table (see strangers_left_out).
pub(super) fn column_at(schema: &Schema, oid: u32, column: &str) -> Option<(usize, usize)> {
    let t = schema.tables.iter().position(|t| t.oid == oid && align::may_stand_for(t))?;
    schema.tables[t].columns.iter().position(|c| c.name == column).map(|c| (t, c))
}

/// `hints` without the values of a stranger's tables (Table::is_strangers), which the database
/// already searched without (Database::similar_values' `leave_out`): kept as a second line.
/// Her comments and her rows are her words: they never link her tables to a question, which
/// the prompt shows last, by name and columns only (introspection leaves her comments and enum
/// labels out, nothing samples her rows), so that a table named and described to echo the
/// question does not draw the model.
pub(super) fn strangers_left_out(schema: &Schema, mut hints: Vec<ValueHint>) -> Vec<ValueHint> {
    let strangers: Vec<&str> = schema.tables.iter().filter(|t| t.is_strangers()).map(|t| t.ident.as_str()).collect();
    if !strangers.is_empty() {
        hints.retain(|h| !strangers.iter().any(|s| h.column.strip_prefix(s).is_some_and(|rest| rest.starts_with('.'))));
    }
    hints
}

/// Schema linking before any model call, for a schema too wide to show whole: the columns whose
/// descriptions match the question (the schema embeddings) and those holding values it names
/// (the value index), tables ranked by their best match.
pub(super) fn link(q: &Question, schema: &Schema, settings: &Settings, db: &mut dyn Database, trace: &mut Trace) -> Linking {
    let mut linking = Linking::default();
    let add = |linking: &mut Linking, t: usize, c: usize| {
        if !linking.columns.contains(&(t, c)) {
            linking.columns.push((t, c));
        }
        if !linking.rank.contains(&t) {
            linking.rank.push(t);
        }
    };
    let columns = db.similar_columns(&q.text, 2 * settings.column_matches.max(LINKED_COLUMNS), &schema.strangers());
    for (n, (oid, column, _)) in columns.iter().enumerate() {
        let Some((t, c)) = column_at(schema, *oid, column) else { continue };
        // The best matches are linked; the rest only rank their tables.
        if n < settings.column_matches.max(LINKED_COLUMNS) {
            add(&mut linking, t, c);
        } else if !linking.rank.contains(&t) {
            linking.rank.push(t);
        }
    }
    // The question's values (none under nl2sql.privacy), kept in the trace: zero-shot shows them.
    if !settings.privacy {
        trace.values = similar_values(q, &[], schema, db);
        for (t, c) in value_columns(schema, &trace.values) {
            add(&mut linking, t, c);
        }
    }
    let name = |&(t, c): &(usize, usize)| crate::render::visible(&format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident), false);
    trace.linked = linking.columns.iter().map(name).collect();
    linking
}

/// The columns that hold `values`, as (table, column) of `schema`.
pub(super) fn value_columns(schema: &Schema, values: &[ValueHint]) -> Vec<(usize, usize)> {
    if values.is_empty() {
        return Vec::new();
    }
    let by_name: HashMap<String, (usize, usize)> = schema
        .tables
        .iter()
        .enumerate()
        .flat_map(|(t, table)| table.columns.iter().enumerate().map(move |(c, col)| (format!("{}.{}", table.ident, col.ident), (t, c))))
        .collect();
    values.iter().filter_map(|v| by_name.get(&v.column).copied()).collect()
}

/// Stored values similar to the question, its hint and `extra` texts, leaving out the words
/// that name the schema's tables and columns.
pub(super) fn similar_values(q: &Question, extra: &[String], schema: &Schema, db: &mut dyn Database) -> Vec<ValueHint> {
    let mut lookup = q.text.clone();
    let earlier = q.previous.as_ref().map(|p| &p.question);
    for text in q.hint.iter().chain(extra).chain(earlier) {
        lookup.push(' ');
        lookup.push_str(text);
    }
    strangers_left_out(schema, db.similar_values(&lookup, &retrieve::schema_words(schema.names()), &schema.strangers()))
}

/// Extracts, guards, aligns and executes one answer of the model. A query it cannot run is
/// [`Rejected`] as the database rejects one: refused (final) or failed (sent back for correction).
pub(super) fn evaluate(
    content: &str,
    settings: &Settings,
    db: &mut dyn Database,
    schema: &Schema,
    cx: Context,
    cand: &mut CandidateTrace,
) -> (Option<String>, Result<Execution, Rejected>) {
    let Some(text) = extract_sql(content) else {
        return (None, Err(Rejected::Failed(Failure::Syntax(GuardError::NoStatement))));
    };
    let guarded = match guard::check(&text) {
        Ok(g) => g,
        Err(e) if e.is_correctable() => return (Some(text), Err(Rejected::Failed(Failure::Syntax(e)))),
        Err(e) => return (Some(text), Err(Rejected::Refused(e))),
    };
    let written = guarded.sql.clone();
    let mut run = guarded;
    let rules = settings.alignment;
    if rules.any() && run.escaped {
        cand.rules = vec!["alignment skipped: the query writes a Unicode-escaped name".into()];
    } else if rules.any() {
        // Under nl2sql.privacy no stored value goes into a query: the query is kept (history)
        // and shown to the model again (a follow-up).
        let aligned = if settings.privacy { align::align(&run.sql, schema, cx, &mut NoValues, rules) } else { align::align(&run.sql, schema, cx, db, rules) };
        if !aligned.fired.is_empty() {
            // Alignment must not turn a safe query into an unsafe one: check it again.
            match guard::check(&aligned.sql) {
                Ok(g) => {
                    cand.aligned = Some(g.sql.clone());
                    cand.rules = aligned.fired;
                    run = g;
                }
                Err(_) => cand.rules = vec!["alignment dropped: its result did not pass the guard".into()],
            }
        }
    }
    let result = db.execute(&run.sql);
    if cand.aligned.is_some() && !reads_what_it_names(db, &run.sql, &result) {
        cand.aligned = None;
        cand.rules.push("alignment dropped: PostgreSQL read a relation its text does not name as the rules wrote it".into());
        return (Some(written.clone()), db.execute(&written));
    }
    (Some(written), result)
}

/// Whether the relations PostgreSQL resolved in an aligned query that ran (`result`) are those
/// its text names as sqlparser reads it, each looked up by that name in the catalog. Alignment
/// made sure the text reads back (in sqlparser) as the statement the rules built; this makes sure
/// PostgreSQL reads the same relations from it as sqlparser does (the two read some text
/// differently: Unicode escapes, backslashes). True where nothing ran or the database cannot
/// tell; false where sqlparser cannot read the text.
fn reads_what_it_names(db: &mut dyn Database, sql: &str, result: &Result<Execution, Rejected>) -> bool {
    let Ok(execution) = result else { return true };
    let Some(names) = crate::sqlinfo::relations_named(sql) else { return false };
    let Some(resolved) = db.resolve(&names) else { return true };
    let intended: std::collections::HashSet<u32> = resolved.into_iter().flatten().collect();
    execution.named.iter().all(|oid| intended.contains(oid))
}

/// A query's normal form, to find candidates that wrote the same thing.
/// Parsed and printed again (one layout), then tokenized: unquoted words (keywords and names,
/// which PostgreSQL folds) lowercased; string literals and quoted names kept as written.
pub fn normal_form(sql: &str) -> String {
    let printed = match Parser::parse_sql(&PostgreSqlDialect {}, sql) {
        Ok(s) => s.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("; "),
        Err(_) => sql.to_string(),
    };
    match Tokenizer::new(&PostgreSqlDialect {}, &printed).tokenize() {
        Ok(tokens) => tokens
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .map(|t| match t {
                Token::Word(w) if w.quote_style.is_none() => w.value.to_lowercase(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => printed.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// public.customers (trusted), mallory.customer (off the path, her own), sales.orders (off
    /// the path, the database owner's).
    fn with_a_stranger() -> Schema {
        let t = crate::schema::tests::table_json;
        let mut customers = t(1, "customers", &["id", "city"], &["id"]);
        customers["owner_trusted"] = true.into();
        let mut planted = t(2, "customer", &["id", "city"], &["id"]);
        planted["schema"] = "mallory".into();
        planted["ident"] = "mallory.customer".into();
        let mut orders = t(3, "orders", &["id", "city"], &["id"]);
        orders["schema"] = "sales".into();
        orders["ident"] = "sales.orders".into();
        orders["owner_trusted"] = true.into();
        serde_json::from_value(serde_json::json!({"tables": [customers, planted, orders], "foreign_keys": []})).unwrap()
    }

    #[test]
    fn a_strangers_table_is_never_found_by_its_description_or_values() {
        let s = with_a_stranger();
        assert_eq!(column_at(&s, 2, "city"), None);
        // Negative: the tables the caller trusts, on the path or off it.
        assert_eq!(column_at(&s, 1, "city"), Some((0, 1)));
        assert_eq!(column_at(&s, 3, "city"), Some((2, 1)));
        let hint = |column: &str| ValueHint { column: column.into(), value: "Oslo".into(), score: 1.0 };
        let kept = strangers_left_out(&s, vec![hint("mallory.customer.city"), hint("customers.city"), hint("sales.orders.city"), hint("mallory.customers.city")]);
        let kept: Vec<&str> = kept.iter().map(|h| h.column.as_str()).collect();
        // a name that only begins with hers is not hers
        assert_eq!(kept, ["customers.city", "sales.orders.city", "mallory.customers.city"]);
    }

    #[test]
    fn nothing_links_a_strangers_table_to_the_question_or_a_join() {
        let s = with_a_stranger();
        assert_eq!(s.strangers(), vec![2]);
        // The extraction's names, however written, never resolve to her table.
        let cols = crate::prompt::extract::Columns::new(&s);
        for name in ["city", "customer.city", "mallory.customer.city"] {
            let found = cols.resolve(&[name.into()]);
            assert!(!found.iter().any(|&(t, _)| t == 1), "{name}: {found:?}");
        }
        // Negative: the trusted tables' columns resolve as before.
        assert_eq!(cols.resolve(&["customers.city".into()]), vec![(0, 1)]);
        assert_eq!(cols.resolve(&["city".into()]), vec![(0, 1), (2, 1)]);
        // The agent's fallback column search by names: not hers, the others'.
        let matched = super::super::agent::matching_columns(&s, "customer city", 5);
        assert!(!matched.is_empty() && !matched.iter().any(|&(t, _)| t == 1), "{matched:?}");
        // No join path runs through her table; through a trusted owner's, as before.
        let joined = |trusted: bool| {
            let mut t = with_a_stranger();
            t.tables[1].owner_trusted = trusted;
            t.foreign_keys = serde_json::from_value(serde_json::json!([
                {"table": "customers", "columns": ["id"], "ref_table": "mallory.customer", "ref_columns": ["id"]},
                {"table": "sales.orders", "columns": ["id"], "ref_table": "mallory.customer", "ref_columns": ["id"]}]))
            .unwrap();
            t.focus(&[(0, 1), (2, 1)]).path_tables
        };
        assert!(joined(false).is_empty(), "{:?}", joined(false));
        assert_eq!(joined(true), vec!["mallory.customer"]);
    }

    #[test]
    fn a_strangers_names_decide_no_word_and_take_no_room() {
        let mut s = with_a_stranger();
        let weather: Vec<String> = (0..600).map(|i| format!("weather_{i}")).collect();
        let cols: Vec<&str> = std::iter::once("forecast").chain(weather.iter().map(String::as_str)).collect();
        let mut pad = crate::schema::tests::table_json(4, "atlantis", &cols, &[]);
        pad["schema"] = "mallory".into();
        pad["ident"] = "mallory.atlantis".into();
        s.tables.push(serde_json::from_value(pad).unwrap());
        // Her names are no words of the schema: not skipped by value searches, nor covering a
        // question's words (abstention); the trusted tables' are.
        assert!(!s.names().any(|n| n == "atlantis" || n == "forecast" || n == "customer"));
        assert!(s.names().any(|n| n == "customers"));
        let vocabulary = crate::retrieval::coverage::Vocabulary::of_schema(&s);
        assert!(crate::retrieval::coverage::coverage("the forecast for atlantis", &vocabulary).unrelated());
        assert!(!crate::retrieval::coverage::coverage("the city of customers", &vocabulary).unrelated());
        // Her wide table would make every table's layout shorter: her tables are left out, at
        // any of the budgets; where all fit in full at every budget, hers stay.
        let budget = 400;
        for budgets in [&[budget][..], &[100_000, budget]] {
            let own = s.clone().strangers_if_room(budgets);
            assert!(own.tables.iter().all(|t| !t.is_strangers()), "{:?}", own.tables.iter().map(|t| &t.ident).collect::<Vec<_>>());
            // ... and still left out of every search: a value of hers never reaches a prompt
            // her table is not in.
            assert_eq!(own.strangers(), vec![2, 4]);
            assert_eq!(own.focus(&[(0, 1)]).schema.strangers(), vec![2, 4]);
            assert!(own.render(budget).detail > s.render(budget).detail);
        }
        let small = with_a_stranger().strangers_if_room(&[budget]);
        assert_eq!(small.tables.len(), 3);
        assert!(small.tables.iter().any(|t| t.is_strangers()));
        // A schema of strangers' tables only (a caller who reads only other owners' schemas
        // off her path) is kept whole, however tight.
        let mut theirs = s.clone();
        theirs.tables.retain(|t| t.is_strangers());
        assert_eq!(theirs.clone().strangers_if_room(&[10]).tables.len(), theirs.tables.len());
    }
}
