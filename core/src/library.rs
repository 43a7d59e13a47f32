//! The decisions of nl2sql.generate_examples() (synthetic pairs after QA-SQL), host-free: the
//! scopes asked about (every table, then every pair of tables a key joins), the request for
//! each, the pairs read from each answer, and which are kept. A pair is kept when its SQL is new
//! (by normal form), runs for the caller, reads some table, returns rows no kept pair returned
//! over the same relations, and the host accepts it (the host stores it).

use crate::interrupt;
use crate::model::llm::{ChatRequest, LlmError};
use crate::pipeline::{normal_form, Llm};
use crate::prompt::synthetic;
use crate::schema::Schema;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// A row of a query's result, values by their text form.
pub type Row = Vec<Option<String>>;

/// What the job needs from the database.
pub trait Library {
    /// Runs `sql` for the caller in the sandbox: its rows and the relations (by OID) it read;
    /// None when it was refused or failed.
    fn run(&mut self, sql: &str) -> Option<(Vec<Row>, Vec<u32>)>;
    /// Stores a pair; `reads` holds the relations it read and the tables of the scope the model
    /// was shown. False when the host will not keep it (a relation whose rows depend on the
    /// reader, a temporary one).
    fn keep(&mut self, question: &str, sql: &str, reads: Vec<u32>) -> bool;
    /// After each scope (a NOTICE).
    fn progress(&mut self, _done: usize, _of: usize, _row: &Generated) {}
    /// A scope whose request failed (a WARNING); the job goes on with the next.
    fn failed(&mut self, _scope: &str, _error: &LlmError) {}
}

/// One scope's account: the pairs the model wrote, how many ran, how many were kept, tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Generated {
    pub scope: String,
    pub written: i32,
    pub executed: i32,
    pub kept: i32,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// How the job asks.
pub struct Job {
    /// Pairs asked for per scope (1 to 20).
    pub per_table: usize,
    pub temperature: f32,
    /// The token budget of a scope's schema in the prompt.
    pub schema_max_tokens: usize,
}

/// The scopes of generation: every table, then every pair a foreign key joins.
pub fn scopes(schema: &Schema) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = (0..schema.tables.len()).map(|t| vec![t]).collect();
    let mut pairs = HashSet::new();
    for fk in &schema.foreign_keys {
        let a = schema.tables.iter().position(|t| t.ident == fk.table);
        let b = schema.tables.iter().position(|t| t.ident == fk.ref_table);
        if let (Some(a), Some(b)) = (a, b) {
            if a != b && pairs.insert((a.min(b), a.max(b))) {
                out.push(vec![a.min(b), a.max(b)]);
            }
        }
    }
    out
}

/// The tables of one scope and the foreign keys between them, as a schema of their own.
pub fn scope_schema(schema: &Schema, tables: &[usize]) -> Schema {
    let picked: Vec<_> = tables.iter().filter_map(|&t| schema.tables.get(t).cloned()).collect();
    let idents: HashSet<&str> = picked.iter().map(|t| t.ident.as_str()).collect();
    let fks = schema.foreign_keys.iter().filter(|f| idents.contains(f.table.as_str()) && idents.contains(f.ref_table.as_str())).cloned().collect();
    Schema { tables: picked, foreign_keys: fks, strangers_left_out: schema.strangers() }
}

fn result_key(reads: &[u32], rows: &[Row]) -> u64 {
    let mut h = DefaultHasher::new();
    reads.hash(&mut h);
    rows.hash(&mut h);
    h.finish()
}

/// Asks for pairs over each scope of `schema` and keeps the new ones that run and return rows.
/// `seen_sql`: the normal forms of the examples the library already holds. An error only when
/// every scope's request failed (the last error).
pub fn generate(job: &Job, schema: &Schema, mut seen_sql: HashSet<String>, llm: &mut dyn Llm, host: &mut dyn Library) -> Result<Vec<Generated>, LlmError> {
    let scopes = scopes(schema);
    let mut seen_results: HashSet<u64> = HashSet::new();
    let mut out = Vec::with_capacity(scopes.len());
    let (mut failures, mut last_error) = (0, None);
    for (i, scope) in scopes.iter().enumerate() {
        interrupt::check();
        let sub = scope_schema(schema, scope);
        let name = sub.tables.iter().map(|t| t.ident.as_str()).collect::<Vec<_>>().join(" + ");
        let req = ChatRequest {
            messages: synthetic::messages(&sub.render(job.schema_max_tokens).text, job.per_table),
            temperature: job.temperature,
            // About 150 tokens a pair.
            max_tokens: job.per_table as u32 * 150 + 100,
            grammar: None,
            reask: false,
        };
        let mut row = Generated { scope: name.clone(), ..Default::default() };
        match llm.chat(req) {
            Ok(c) => {
                row.prompt_tokens = c.prompt_tokens.unwrap_or(0) as i64;
                row.completion_tokens = c.completion_tokens.unwrap_or(0) as i64;
                let pairs = synthetic::parse(&c.content);
                row.written = pairs.len() as i32;
                let scope_oids: Vec<u32> = sub.tables.iter().map(|t| t.oid).collect();
                for (question, sql) in pairs.into_iter().take(job.per_table * 2) {
                    interrupt::check();
                    let form = normal_form(&sql);
                    if seen_sql.contains(&form) {
                        continue;
                    }
                    let Some((rows, mut reads)) = host.run(&sql) else { continue };
                    row.executed += 1;
                    // A query that reads no table is no example of this database's tables.
                    if reads.is_empty() || rows.is_empty() || !seen_results.insert(result_key(&reads, &rows)) {
                        continue;
                    }
                    // The model wrote the question after seeing the scope's tables and samples:
                    // only roles that may read all of them are to be shown it.
                    reads.extend(&scope_oids);
                    reads.sort_unstable();
                    reads.dedup();
                    if host.keep(&question, &sql, reads) {
                        seen_sql.insert(form);
                        row.kept += 1;
                    }
                }
            }
            Err(e) => {
                host.failed(&name, &e);
                failures += 1;
                last_error = Some(e);
            }
        }
        host.progress(i + 1, scopes.len(), &row);
        out.push(row);
    }
    match last_error {
        Some(e) if failures == scopes.len() => Err(e),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests;
