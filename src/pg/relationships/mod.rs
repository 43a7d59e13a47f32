//! Profiling: keys and relationships nobody declared, found in the data by
//! nl2sql.profile_relationships() (and again by nl2sql.refresh_value_indexes() once a profiled
//! table changed), kept in sql/relationships.sql's stores, steered by the DBA's decisions
//! ([`decide`]). Each table is read as its owner in a restricted context, read-only, within
//! nl2sql.profile_timeout, at most nl2sql.profile_rows rows of it ([`read`]); the decisions are
//! the core's (nl2sql_core::relationships). Reads take only ACCESS SHARE locks, which DML never waits
//! on; the stores are written as the extension owner.

mod decide;
mod read;

pub use decide::{decide, Decision};

use crate::gucs;
use crate::pg::{owner, relation, spi};
use nl2sql_core::relationships::{self, Findings, TableProfile};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// NOTICEs on a long run: at most one this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// One row of profile_relationships(): a relationship stored for a profiled table.
pub type Row = (pg_sys::Oid, Vec<String>, pg_sys::Oid, Vec<String>, String, Option<f32>, Option<String>);

/// Profiles the tables of `schemas` (every user schema when None) the caller may profile, keeps
/// what was found, and returns the relationships now stored for them that the caller may see.
pub fn run(schemas: Option<Vec<String>>) -> Vec<Row> {
    require_primary("profile relationships");
    let caller = owner::caller();
    let mine = profilable(read::tables(schemas.as_deref(), caller), true);
    let oids = profile_tables(mine);
    stored(&oids)
}

/// The tables that may be read: the caller's own (or all, for a superuser), and none whose
/// read runs code its owner wrote (row-level security policies) or calls out (foreign
/// partitions); the others are named in NOTICEs when `tell`.
fn profilable(listed: Vec<read::Listed>, tell: bool) -> Vec<read::Listed> {
    let mut skipped: [Vec<String>; 3] = Default::default();
    let mut out = Vec::new();
    for t in listed {
        let why = if !t.may_profile {
            0
        } else if t.rls {
            1
        } else if crate::pg::policy::reaches_foreign(t.oid) {
            2
        } else {
            out.push(t);
            continue;
        };
        skipped[why].push(shown(&t.schema, &t.name));
    }
    let reasons = [
        "only their owners (and superusers) may profile them",
        "they have row-level security: reading them runs their owners' policies (confirm their relationships by hand)",
        "they are foreign tables or have foreign partitions",
    ];
    for (names, why) in skipped.iter().zip(reasons) {
        if tell && !names.is_empty() {
            note!("nl2sql: {} tables not profiled, {why}: {}", names.len(), names.iter().take(5).cloned().collect::<Vec<_>>().join(", "));
        }
    }
    out
}

/// Profiles again, from nl2sql.refresh_value_indexes(), the schemas of the tables profiled
/// before when one of those tables changed; nothing when profiling never ran. A table never
/// profiled (new, or left out by a timeout) does not count: otherwise one table that always
/// fails would profile every schema at every refresh.
pub fn refresh_if_changed() {
    let caller = owner::caller();
    let before: HashMap<u32, (String, Option<i64>)> = owner::as_owner(|| {
        spi::rows(
            "SELECT p.relation::pg_catalog.oid, n.nspname::pg_catalog.text, p.changes FROM nl2sql.profile_store p
             JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relation::pg_catalog.oid
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace",
            &[],
            |r| Some((u32::from(r.get::<pg_sys::Oid>(1).ok()??), (r.get::<String>(2).ok()??, r.get::<i64>(3).ok()?))),
        )
    })
    .into_iter()
    .collect();
    if before.is_empty() {
        return;
    }
    let mut schemas: Vec<String> = before.values().map(|(s, _)| s.clone()).collect();
    schemas.sort();
    schemas.dedup();
    let listed = profilable(read::tables(Some(&schemas), caller), false);
    let changed = listed.iter().any(|t| before.get(&u32::from(t.oid)).is_some_and(|(_, c)| *c != t.changes));
    if changed {
        let n = profile_tables(listed).len();
        note!("nl2sql: tables changed since they were profiled; {n} tables profiled again");
    }
}

/// Raises 25006 on a hot standby: the stores are written on the primary, standbys read them.
fn require_primary(what: &str) {
    // SAFETY: reads shared memory state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        crate::pg::errors::fail(
            nl2sql_core::error::SqlState::ReadOnlySqlTransaction,
            format!("cannot {what} on a hot standby"),
            Some("Relationships are profiled and decided on the primary; standbys read them.".into()),
            None,
        );
    }
}

/// Reads, infers and keeps; the OIDs of the tables profiled.
fn profile_tables(listed: Vec<read::Listed>) -> Vec<pg_sys::Oid> {
    let started = Instant::now();
    let max_rows = gucs::profile_rows();
    let timeout = gucs::profile_timeout();
    let total = listed.len();
    if total > 0 {
        note!("nl2sql: profiling {total} tables (at most {max_rows} rows of each)");
    }
    let mut estimates = HashMap::new();
    let mut changes = HashMap::new();
    let mut tables: Vec<TableProfile> = Vec::with_capacity(total);
    let mut last_notice = Instant::now();
    let keep = relationships::values_per_column(listed.iter().map(|t| t.columns.len()).sum()) as i32;
    for (i, t) in listed.into_iter().enumerate() {
        check_for_interrupts!();
        let (oid, estimate, label) = (t.oid, t.row_estimate, shown(&t.schema, &t.name));
        changes.insert(u32::from(oid), t.changes);
        let sampling = relationships::Sampling::for_table(estimate, max_rows);
        match read::profile(t, sampling, max_rows, keep, timeout) {
            Ok(p) => {
                estimates.insert(u32::from(oid), estimate);
                tables.push(p);
            }
            // PostgreSQL's error may quote a name as stored.
            Err(why) => note!("nl2sql: table {label} not profiled: {}", nl2sql_core::render::visible(&why, false)),
        }
        if last_notice.elapsed() >= PROGRESS_EVERY {
            note!("nl2sql: profiled {} of {total} tables ({:.0} s)", i + 1, started.elapsed().as_secs_f64());
            last_notice = Instant::now();
        }
    }
    let mut checks = read::Checks { timeout, max_rows, estimates };
    let findings = relationships::infer(&tables, &mut checks);
    for ((f, fc), (t, tc)) in findings.unchecked.iter().take(5) {
        note!(
            "nl2sql: {}.{} may hold {}.{}, but its values could not be checked within nl2sql.profile_timeout; confirm it with nl2sql.confirm_relationship() if it does",
            shown(&tables[*f].schema, &tables[*f].name),
            relation::display_ident(&tables[*f].columns[*fc].name),
            shown(&tables[*t].schema, &tables[*t].name),
            relation::display_ident(&tables[*t].columns[*tc].name)
        );
    }
    save(&tables, &findings, &changes);
    if total > 0 {
        note!(
            "nl2sql: profiled {} tables in {:.1} s: {} relationships and {} keys inferred",
            tables.len(),
            started.elapsed().as_secs_f64(),
            findings.links.len(),
            findings.keys.len()
        );
    }
    tables.iter().map(|t| pg_sys::Oid::from(t.oid)).collect()
}

/// Takes ACCESS SHARE on `rel` until the transaction ends (what a SELECT takes: DML never waits
/// on it; a DROP waits for the commit) and says whether it still exists, so that nothing is
/// kept about a table dropped while it was profiled or decided on.
pub(crate) fn lock_existing(rel: pg_sys::Oid) -> bool {
    relation::lock_existing(rel, pg_sys::AccessShareLock)
}

/// Keeps the findings for the tables read and still there (nl2sql._profile_save, as the
/// extension owner). The tables are locked in OID order.
fn save(tables: &[TableProfile], f: &Findings, changes: &HashMap<u32, Option<i64>>) {
    let mut oids: Vec<u32> = tables.iter().map(|t| t.oid).collect();
    oids.sort_unstable();
    let gone: Vec<u32> = oids.into_iter().filter(|&o| !lock_existing(pg_sys::Oid::from(o))).collect();
    let kept = |t: usize| !gone.contains(&tables[t].oid);
    let tables_kept: Vec<&TableProfile> = tables.iter().filter(|t| !gone.contains(&t.oid)).collect();
    let column = |(t, c): (usize, usize)| (tables[t].oid, &tables[t].columns[c]);
    let links: Vec<serde_json::Value> = f
        .links
        .iter()
        .filter(|l| kept(l.from.0) && kept(l.to.0))
        .map(|l| {
            let ((from, fc), (to, tc)) = (column(l.from), column(l.to));
            json!({"from": from, "from_column": fc.name, "from_type": fc.type_oid, "to": to, "to_column": tc.name,
                   "to_type": tc.type_oid, "score": l.score, "evidence": l.evidence})
        })
        .collect();
    let keys: Vec<serde_json::Value> = f
        .keys
        .iter()
        .filter(|k| kept(k.table))
        .map(|k| {
            let t = &tables[k.table];
            let cols: Vec<&str> = k.columns.iter().map(|&c| t.columns[c].name.as_str()).collect();
            let types: Vec<u32> = k.columns.iter().map(|&c| t.columns[c].type_oid).collect();
            json!({"relation": t.oid, "columns": cols, "types": types, "score": k.score, "evidence": k.evidence})
        })
        .collect();
    let args = [
        DatumWithOid::from(tables_kept.iter().map(|t| pg_sys::Oid::from(t.oid)).collect::<Vec<_>>()),
        DatumWithOid::from(tables_kept.iter().map(|t| t.rows).collect::<Vec<i64>>()),
        DatumWithOid::from(tables_kept.iter().map(|t| t.complete).collect::<Vec<bool>>()),
        DatumWithOid::from(tables_kept.iter().map(|t| changes.get(&t.oid).copied().flatten()).collect::<Vec<Option<i64>>>()),
        DatumWithOid::from(pgrx::Json(serde_json::Value::Array(links))),
        DatumWithOid::from(pgrx::Json(serde_json::Value::Array(keys))),
    ];
    owner::as_owner(|| {
        spi::write(
            "SELECT nl2sql._profile_save($1::pg_catalog.oid[], $2::pg_catalog.int8[], $3::pg_catalog.bool[], $4::pg_catalog.int8[], $5, $6)",
            &args,
        )
    });
}

/// The relationships stored for `oids` that the caller may see (nl2sql.relationships, read as
/// the caller), inferred ones first by score.
fn stored(oids: &[pg_sys::Oid]) -> Vec<Row> {
    let args = [DatumWithOid::from(oids.to_vec())];
    spi::rows(
        include_str!("../../../sql/queries/profile_stored.sql"),
        &args,
        |r| {
            Some((
                r.get::<pg_sys::Oid>(1).ok()??,
                r.get::<Vec<String>>(2).ok()??,
                r.get::<pg_sys::Oid>(3).ok()??,
                r.get::<Vec<String>>(4).ok()??,
                r.get::<String>(5).ok()??,
                r.get::<f32>(6).ok()?,
                r.get::<String>(7).ok()?,
            ))
        },
    )
}

/// A table's name as NOTICEs show it: quoted and qualified, invisible characters written as
/// `U&"..."` escapes (a table owner chose the name).
fn shown(schema: &str, name: &str) -> String {
    format!("{}.{}", relation::display_ident(schema), relation::display_ident(name))
}
