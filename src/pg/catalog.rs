//! The schema the calling role may see, from sql/introspect/*.sql, with sampled column
//! statistics cached per backend.

use crate::pg::{sandbox, spi};
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::prompt::refine::Failure;
use nl2sql_core::schema::{ColumnStats, Detail, Schema, Table};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const SCHEMA_SQL: &str = include_str!("../../sql/introspect/schema.sql");
const STATS_SQL: &str = "SELECT nl2sql._sample_columns($1::pg_catalog.oid::pg_catalog.regclass, $2)::text";
/// What the introspected schema depends on: DDL (the rows of nl2sql.ddl_log this snapshot
/// sees, sql/ddl_log.sql: one added by each DDL command, GRANT and REVOKE included, and by
/// profiling and the DBA's decisions on relationships; read before the catalog, so a DDL that
/// commits in between costs one more introspection, never a stale one), the roles the caller
/// acts with (memberships change without DDL in this database), the effective search path
/// (current_schemas: which names need qualifying; its "$user" follows a renamed role), and
/// whether inferred relationships are used ($1). Role commands fire no event trigger: after
/// REASSIGN OWNED a session keeps its schema until the next DDL (docs/operations.md).
const SCHEMA_KEY_SQL: &str = include_str!("../../sql/queries/catalog_schema_key.sql");
const TRIM_DDL_LOG_SQL: &str = include_str!("../../sql/queries/catalog_trim_ddl_log.sql");
/// Rows inserted, updated and deleted per table, read fresh: they tell when samples are stale.
const CHANGES_SQL: &str = "SELECT o::int8, pg_catalog.pg_stat_get_tuples_inserted(o) OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_tuples_updated(o)
        OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_tuples_deleted(o) FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS o";

/// Cached samples older than this are taken again even if the table shows no changes.
const STATS_MAX_AGE: Duration = Duration::from_secs(600);
/// Time allowed for sampling one table.
const STATS_TIMEOUT: Duration = Duration::from_secs(2);

struct Cached {
    /// The schema's key when it was taken: any DDL since (a policy, a view's new definition,
    /// a column renamed) takes it again, whatever the row counters say.
    version: String,
    changes: Option<i64>,
    sample_rows: i32,
    taken: Instant,
    columns: HashMap<String, ColumnStats>,
}

thread_local! {
    // Keyed by (role, custom settings, table): what one role may sample is not shown to another
    // after SET ROLE, nor to a client of a pooler that shares the role but not the settings its
    // row-level security policies read (session.rs).
    static STATS: RefCell<HashMap<(u32, u64, u32), Cached>> = RefCell::new(HashMap::new());
    // The last introspected schema (without samples) and the key it is valid for.
    static SCHEMA: RefCell<Option<(String, Schema)>> = const { RefCell::new(None) };
    // session::role_changes() when the caches were last checked.
    static SEEN_ROLE_CHANGES: Cell<u64> = const { Cell::new(0) };
}

/// Forgets the caches when the role changed since they were filled (a belt to the role in
/// their keys: nothing sampled as one role is ever shown to another).
fn forget_if_role_changed() {
    let now = crate::pg::session::role_changes();
    if SEEN_ROLE_CHANGES.with(|n| n.replace(now)) != now {
        reset_cache();
    }
}

#[derive(Deserialize)]
struct SampledTable {
    #[serde(default)]
    complete: bool,
    #[serde(default)]
    columns: HashMap<String, SampledColumn>,
}

#[derive(Deserialize)]
struct SampledColumn {
    #[serde(default)]
    distinct: i64,
    #[serde(default)]
    values: Option<Vec<String>>,
    min: Option<String>,
    max: Option<String>,
}

fn text_query(sql: &str, args: &[DatumWithOid]) -> Option<String> {
    Spi::connect(|client| {
        client.select(sql, Some(1), args).ok().and_then(|t| t.first().get::<String>(1).ok().flatten())
    })
}

/// Runs an introspection query with the Catalog policy: it runs under the caller's
/// search_path, and whatever operator or function that path might resolve to that is not a
/// system one is refused rather than run. Under read committed it reads the catalog as
/// committed now: a statement that asks for many rows (`SELECT nl2sql(q) FROM questions`) and
/// has no transaction ID runs read-only queries with the snapshot it began with, which does
/// not see a REVOKE committed since (privileges are checked as they are now), so the key would
/// keep serving the schema cached before it. (Under repeatable read nothing is cached.)
fn introspect(sql: &str, args: &[DatumWithOid]) -> Result<Option<String>, Report> {
    Ok(sandbox::catalog(|| if snapshot_isolation() { text_query(sql, args) } else { spi::now(|| text_query(sql, args)) }))
}

/// The schema the current role may SELECT from, as the prompts show it (within
/// nl2sql.schema_max_tokens): sampled (nl2sql.sample_rows), or under nl2sql.privacy neither
/// sampled nor carrying enum labels. Errors are raised.
pub fn for_prompt(privacy: bool) -> Schema {
    let samples = if privacy { 0 } else { crate::gucs::sample_rows() };
    // Sampled whole when the extraction sees it whole (nl2sql.extraction_max_tokens).
    let budget = crate::gucs::schema_max_tokens().max(crate::gucs::extraction_max_tokens());
    let schema = load_schema(samples, budget).unwrap_or_else(|r| crate::pg::errors::raise(&r));
    if privacy {
        schema.without_data()
    } else {
        schema
    }
}

/// Tables, columns, keys and comments the current role may SELECT, with sampled statistics for
/// the tables that can fit in `max_tokens`. The introspection is reused until DDL, the
/// caller's roles or the search_path change.
pub fn load_schema(sample_rows: i32, max_tokens: usize) -> Result<Schema, Report> {
    forget_if_role_changed();
    let inferred = crate::gucs::use_inferred_relationships();
    let key = introspect(SCHEMA_KEY_SQL, &[DatumWithOid::from(inferred)])?.unwrap_or_default();
    // Under repeatable read or serializable the key reads the log with the transaction's
    // snapshot, which does not see a REVOKE (or a new table) committed since it began, while
    // privileges are read as they are now: the schema is read again at every call there.
    let snapshot = snapshot_isolation();
    let cached = SCHEMA.with_borrow(|c| c.as_ref().filter(|(k, _)| !snapshot && !key.is_empty() && *k == key).map(|(_, s)| s.clone()));
    let mut schema = match cached {
        Some(s) => s,
        None => {
            trim_ddl_log();
            let json = introspect(SCHEMA_SQL, &[DatumWithOid::from(inferred)])?
                .ok_or_else(|| Report::new(SqlState::InternalError, "catalog introspection returned nothing"))?;
            let s: Schema = serde_json::from_str(&json).map_err(|e| {
                Report::new(SqlState::InternalError, format!("catalog introspection returned bad JSON: {e}"))
            })?;
            SCHEMA.with_borrow_mut(|c| *c = Some((key, s.clone())));
            s
        }
    };
    // A stranger's tables only where they cost the others nothing, at every prompt's budget
    // (before and after samples).
    let mut budgets = vec![crate::gucs::schema_max_tokens(), crate::gucs::extraction_max_tokens(), max_tokens];
    budgets.sort_unstable();
    budgets.dedup();
    schema = schema.strangers_if_room(&budgets);
    // A schema that shows whole within the budget is sampled whole; a wider one is sampled
    // where the question links to it (sample_tables, from the pipeline).
    if sample_rows > 0 && schema.render(max_tokens).detail > Detail::Bare {
        refresh_changes(&mut schema.tables);
        attach_stats(&mut schema.tables, sample_rows);
        schema = schema.strangers_if_room(&budgets);
    }
    Ok(schema)
}

/// Keeps the catalog version's log short (sql/queries/catalog_trim_ddl_log.sql), for a reader
/// that read a new version: as the extension owner, in a subtransaction whose error is dropped
/// (a cancel is not), never on a standby, in a read-only transaction or under repeatable read or
/// serializable (a reader's deletes could fail its commit there).
fn trim_ddl_log() {
    // SAFETY: reads the recovery state and the transaction's read-only flag.
    let skip = unsafe { pg_sys::RecoveryInProgress() || pg_sys::XactReadOnly } || snapshot_isolation();
    if !skip {
        crate::pg::owner::as_owner(|| sandbox::savepoint(|| Spi::run(TRIM_DDL_LOG_SQL)));
    }
}

/// Whether the transaction reads with one snapshot (repeatable read, serializable): the key's
/// version is then the snapshot's, older than the privileges and policies in force.
fn snapshot_isolation() -> bool {
    // SAFETY: reads the transaction's isolation level.
    unsafe { pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// Samples `tables` of `schema` (nl2sql.sample_rows; nothing under nl2sql.privacy), for a
/// schema too wide to be sampled whole.
pub fn sample_tables(schema: &mut Schema, tables: &[usize]) {
    let sample_rows = crate::gucs::sample_rows();
    if sample_rows == 0 || crate::pg::session::privacy() {
        return;
    }
    // One read of the change counters for all of them, not one per table.
    let picked: Vec<usize> = tables.iter().copied().filter(|&t| t < schema.tables.len()).collect();
    let mut some: Vec<Table> = picked.iter().map(|&t| schema.tables[t].clone()).collect();
    refresh_changes(&mut some);
    attach_stats(&mut some, sample_rows);
    for (t, table) in picked.into_iter().zip(some) {
        schema.tables[t] = table;
    }
}

/// Reads the tables' current row-change counters (the cached schema has old ones).
fn refresh_changes(tables: &mut [Table]) {
    let oids: Vec<pg_sys::Oid> = tables.iter().map(|t| pg_sys::Oid::from(t.oid)).collect();
    let args = [DatumWithOid::from(oids)];
    let changes: HashMap<i64, i64> = sandbox::catalog(|| {
        Spi::connect(|c| {
            c.select(CHANGES_SQL, None, &args)
                .map(|t| t.filter_map(|r| Some((r.get::<i64>(1).ok()??, r.get::<i64>(2).ok()??))).collect())
                .unwrap_or_default()
        })
    });
    for t in tables.iter_mut() {
        t.changes = changes.get(&(t.oid as i64)).copied();
    }
}

fn attach_stats(tables: &mut [Table], sample_rows: i32) {
    forget_if_role_changed();
    // SAFETY: reads the current role's OID.
    let role: u32 = unsafe { pg_sys::GetUserId() }.into();
    let settings = crate::pg::session::fingerprint();
    // The key's version is the snapshot's under snapshot isolation (see load_schema): no
    // sample is reused there.
    let version = if snapshot_isolation() { String::new() } else { SCHEMA.with_borrow(|c| c.as_ref().map(|(k, _)| k.clone())).unwrap_or_default() };
    for table in tables.iter_mut() {
        if table.kind == "f" {
            continue; // foreign tables: sampling means remote calls
        }
        if table.is_strangers() {
            continue; // her rows are her words: a stranger's table is shown by name and columns
        }
        let key = (role, settings, table.oid);
        let fresh = STATS.with_borrow(|c| {
            c.get(&key).is_some_and(|s| {
                !version.is_empty() && s.version == version && s.changes == table.changes && s.sample_rows == sample_rows && s.taken.elapsed() < STATS_MAX_AGE
            })
        });
        if !fresh {
            let columns = sample(table.oid, sample_rows).unwrap_or_default();
            STATS.with_borrow_mut(|c| {
                c.insert(key, Cached { version: version.clone(), changes: table.changes, sample_rows, taken: Instant::now(), columns })
            });
        }
        STATS.with_borrow(|c| {
            if let Some(s) = c.get(&key) {
                for col in table.columns.iter_mut() {
                    col.stats = s.columns.get(&col.name).cloned();
                }
            }
        });
    }
}

/// Whether sampling `rel` stays on this server, or nl2sql.allow_foreign_tables lets it leave:
/// partitions, children or a view's relations that are foreign tables mean remote calls.
pub fn samples_locally(rel: pg_sys::Oid) -> bool {
    crate::gucs::allow_foreign_tables() || !crate::pg::policy::reaches_foreign(rel)
}

/// One relation's statistics as JSON text (sql/introspect/column_stats.sql), read in the
/// sandbox, where every function a view or a policy runs is judged like generated SQL's, as the
/// caller, within `timeout`: the schema prompt's samples and nl2sql.column_stats().
pub fn read_stats(rel: pg_sys::Oid, sample_rows: i32, timeout: Duration) -> Result<Option<String>, Failure> {
    let args = [DatumWithOid::from(u32::from(rel) as i64), DatumWithOid::from(sample_rows)];
    sandbox::inspect(timeout, || text_query(STATS_SQL, &args))
}

/// Samples one table ([`read_stats`]); None when it fails or takes too long (a broken view, say).
fn sample(oid: u32, sample_rows: i32) -> Option<HashMap<String, ColumnStats>> {
    let rel = pg_sys::Oid::from(oid);
    if !samples_locally(rel) {
        return None;
    }
    let json = read_stats(rel, sample_rows, STATS_TIMEOUT).ok().flatten()?;
    let t: SampledTable = serde_json::from_str(&json).ok()?;
    Some(
        t.columns
            .into_iter()
            .map(|(name, c)| {
                let stats = ColumnStats {
                    values: c.values.unwrap_or_default(),
                    distinct: c.distinct,
                    complete: t.complete,
                    min: c.min,
                    max: c.max,
                };
                (name, stats)
            })
            .collect(),
    )
}

/// Forgets every cached sample and the cached schema of this backend.
pub fn reset_cache() {
    STATS.with_borrow_mut(|c| c.clear());
    SCHEMA.with_borrow_mut(|c| *c = None);
}
