//! The database as a question's run sees it (the core's `Database` and `ValueLookup`): SQL
//! run in the sandbox (sandbox.rs), the value index, sampled rows, the examples and the
//! instructions. pg/ask.rs runs the question with it.

use crate::gucs;
use crate::pg::{catalog, sandbox, values};
use nl2sql_core::align::ValueLookup;
use nl2sql_core::pipeline::{Database, Rejected};
use nl2sql_core::retrieval::retrieve::ValueHint;
use nl2sql_core::Execution;
use pgrx::prelude::*;

/// The database as the pipeline sees it: the sandbox (PostgreSQL's parse tree, the policy,
/// execution), the value index. It notes the relations whose rows reach the model (samples,
/// stored values, the rows of executed queries, which the agent and corrections are shown):
/// the call's history row keeps them for nl2sql.feedback().
#[derive(Default)]
pub struct Sandboxed {
    shown: Vec<pg_sys::Oid>,
}

impl Sandboxed {
    /// Notes relations by OID as the schema holds them.
    pub fn saw(&mut self, oids: impl IntoIterator<Item = u32>) {
        self.shown.extend(oids.into_iter().map(pg_sys::Oid::from));
    }

    /// Notes relations by OID (those a follow-up's earlier call showed the model).
    pub fn saw_relations(&mut self, oids: impl IntoIterator<Item = pg_sys::Oid>) {
        self.shown.extend(oids);
    }

    /// The relations noted, sorted, once each.
    pub fn shown(&self) -> Vec<pg_sys::Oid> {
        let mut v = self.shown.clone();
        v.sort_unstable_by_key(|o| u32::from(*o));
        v.dedup();
        v
    }
}

impl ValueLookup for Sandboxed {
    fn closest_value(&mut self, table: u32, column: &str, literal: &str) -> Option<String> {
        let found = values::closest_stored(pg_sys::Oid::from(table), column, literal);
        if found.is_some() {
            self.saw([table]);
        }
        found
    }
}

impl Database for Sandboxed {
    fn execute(&mut self, sql: &str) -> Result<Execution, Rejected> {
        sandbox::execute_noting(sql, sandbox::Limits::from_settings(), &mut self.shown)
    }

    fn similar_values(&mut self, text: &str, skip: &[String], leave_out: &[u32]) -> Vec<ValueHint> {
        if !gucs::use_values() || gucs::value_top_k() == 0 {
            return Vec::new();
        }
        let found = values::search_values(text, skip, values::Scope::Prompt(leave_out), gucs::value_top_k(), gucs::value_threshold());
        self.shown.extend(found.iter().map(|f| f.relid));
        found
            .into_iter()
            .map(|f| ValueHint {
                // The table as the schema prompt writes it (qualified only when not on the path).
                column: format!("{}.{}", values::visible_name(f.relid), pgrx::spi::quote_identifier(&f.column)),
                value: f.value,
                score: f.score,
            })
            .collect()
    }

    fn sample(&mut self, schema: &mut nl2sql_core::schema::Schema, tables: &[usize]) {
        catalog::sample_tables(schema, tables);
        let sampled = tables.iter().filter_map(|&t| schema.tables.get(t)).filter(|t| t.columns.iter().any(|c| c.stats.is_some()));
        self.saw(sampled.map(|t| t.oid).collect::<Vec<_>>());
    }

    fn skipped_value_columns(&mut self) -> Vec<String> {
        values::take_skipped()
    }

    fn similar_examples(&mut self, masked: &str, k: usize) -> Vec<nl2sql_core::prompt::examples::Example> {
        crate::pg::examples::similar(masked, k)
    }
    fn instructions(&mut self, question: &str) -> Vec<nl2sql_core::retrieval::instructions::Instruction> {
        crate::pg::instructions::candidates(question)
    }

    fn similar_columns(&mut self, text: &str, k: usize, leave_out: &[u32]) -> Vec<(u32, String, f32)> {
        values::search_columns(text, k, leave_out).into_iter().map(|c| (u32::from(c.relid), c.column, c.score)).collect()
    }

    fn resolve(&mut self, names: &[(Option<String>, String)]) -> Option<Vec<Option<u32>>> {
        let schemas: Vec<Option<String>> = names.iter().map(|(s, _)| s.clone()).collect();
        let relnames: Vec<String> = names.iter().map(|(_, n)| n.clone()).collect();
        // As the query ran: its role (whose "$user" the search_path may name), in a subtransaction;
        // one row a name, NULL where none is found. Any failure finds no name, which drops the
        // alignment: the check fails closed.
        let found = sandbox::savepoint(|| {
            crate::pg::role::as_exec_role(|| {
                crate::pg::spi::rows(RESOLVE_SQL, &[schemas.into(), relnames.into()], |r| Some(r.get::<pg_sys::Oid>(1).ok().flatten()))
            })
        })
        .unwrap_or_default();
        Some(if found.len() == names.len() { found.into_iter().map(|o| o.map(u32::from)).collect() } else { vec![None; names.len()] })
    }
}

/// Each (schema, name) pair as the query's own lookup finds it (to_regclass of the name quoted by
/// PostgreSQL: the search_path, pg_temp, a name's truncation to 63 bytes; called after the query
/// ran, so USAGE on a written schema is granted).
const RESOLVE_SQL: &str = "SELECT pg_catalog.to_regclass(CASE WHEN u.s IS NULL THEN pg_catalog.quote_ident(u.n)
                                  ELSE pg_catalog.quote_ident(u.s) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(u.n) END)::pg_catalog.oid
     FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) WITH ORDINALITY AS u(s, n, o)
     ORDER BY u.o";
