//! What profiling reads of the database: the tables to profile, a bounded sample of each (as
//! the table's owner, running none of its code, in a restricted context, read-only, with a
//! timeout), and the checks the core's decisions ask for ([`Probe`]).

use crate::pg::{owner, sandbox, spi};
use nl2sql_core::relationships::{ColumnProfile, Probe, Sampling, TableProfile};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use serde::Deserialize;
use std::time::Duration;

const TABLES_SQL: &str = include_str!("../../../sql/queries/profile_tables.sql");

/// A table the listing found, before it is read.
pub struct Listed {
    pub oid: pg_sys::Oid,
    pub schema: String,
    pub name: String,
    pub row_estimate: f64,
    pub may_profile: bool,
    pub changes: Option<i64>,
    pub declared_key: bool,
    /// Row-level security is enabled: reading it may run its owner's policies.
    pub rls: bool,
    /// Its owner: relationships are inferred only between tables of one owner.
    pub owner: pg_sys::Oid,
    pub columns: Vec<ColumnProfile>,
}

/// The tables of `schemas` (all user schemas when None) with columns of the types keys are
/// made of, and whether `caller` may profile each.
pub fn tables(schemas: Option<&[String]>, caller: pg_sys::Oid) -> Vec<Listed> {
    let args = [DatumWithOid::from(schemas.map(<[String]>::to_vec)), DatumWithOid::from(caller)];
    spi::rows(TABLES_SQL, &args, |r| {
        let columns: Vec<ColumnProfile> = serde_json::from_str(&r.get::<String>(8).ok()??).ok()?;
        Some(Listed {
            oid: r.get::<pg_sys::Oid>(1).ok()??,
            schema: r.get::<String>(2).ok()??,
            name: r.get::<String>(3).ok()??,
            row_estimate: r.get::<f64>(4).ok()?.unwrap_or(-1.0),
            may_profile: r.get::<bool>(5).ok()?.unwrap_or(false),
            changes: r.get::<i64>(6).ok()?,
            declared_key: r.get::<bool>(7).ok()?.unwrap_or(false),
            rls: r.get::<bool>(9).ok()?.unwrap_or(true),
            owner: r.get::<pg_sys::Oid>(10).ok()??,
            columns,
        })
    })
}

#[derive(Deserialize)]
struct Sampled {
    rows: i64,
    columns: Vec<(i64, i64, Option<Vec<String>>)>,
}

/// Reads `t` as its owner; None (with the reason) when that failed or took longer than
/// `timeout` (a policy that raises, a lock): the table is left out.
/// `keep`: values kept per column (nl2sql_core::relationships::values_per_column).
pub fn profile(t: Listed, sampling: Sampling, wanted_rows: i32, keep: i32, timeout: Duration) -> Result<TableProfile, String> {
    let names: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
    let args = [
        DatumWithOid::from(t.oid),
        DatumWithOid::from(names),
        DatumWithOid::from(sampling.limit),
        DatumWithOid::from(sampling.percent),
        DatumWithOid::from(keep),
    ];
    let read = sandbox::isolated(timeout, || {
        owner::as_table_owner_running_no_code(t.oid, || {
            spi::read::<String>(
                "SELECT nl2sql._profile_table($1::pg_catalog.oid::pg_catalog.regclass, $2::pg_catalog.name[], $3, $4, $5)::pg_catalog.text",
                &args,
            )
        })
    });
    let json = match read {
        Ok(Some(j)) => j,
        Ok(None) => return Err("nothing was read".into()),
        Err(f) => return Err(failure_text(&f)),
    };
    let s: Sampled = serde_json::from_str(&json).map_err(|e| format!("unexpected profile: {e}"))?;
    let mut columns = t.columns;
    for (c, (nulls, distinct, values)) in columns.iter_mut().zip(s.columns) {
        c.nulls = nulls;
        c.distinct = distinct;
        c.values = values.unwrap_or_default();
    }
    Ok(TableProfile {
        oid: u32::from(t.oid),
        schema: t.schema,
        name: t.name,
        complete: sampling.whole(s.rows, wanted_rows),
        rows: s.rows,
        declared_key: t.declared_key,
        owner: u32::from(t.owner),
        columns,
    })
}

fn failure_text(f: &nl2sql_core::prompt::refine::Failure) -> String {
    match f {
        nl2sql_core::prompt::refine::Failure::Timeout { ms } => format!("reading it took longer than {ms} ms"),
        nl2sql_core::prompt::refine::Failure::Execution(r) | nl2sql_core::prompt::refine::Failure::Analysis(r) => r.message.clone(),
        other => format!("{other:?}"),
    }
}

/// The database answering the core's checks, each read as the checked table's owner,
/// read-only, within `timeout`.
pub struct Checks {
    pub timeout: Duration,
    pub max_rows: i32,
    /// The row estimate of each profiled table, by OID, to sample pairs as the profile did.
    pub estimates: std::collections::HashMap<u32, f64>,
}

impl Probe for Checks {
    fn found(&mut self, table: &TableProfile, column: &ColumnProfile, values: &[String]) -> Option<usize> {
        check_for_interrupts!();
        let oid = pg_sys::Oid::from(table.oid);
        let args = [
            DatumWithOid::from(oid),
            DatumWithOid::from(column.name.as_str()),
            DatumWithOid::from(values.to_vec()),
            DatumWithOid::from(column.type_name.as_str()),
        ];
        let n = sandbox::isolated(self.timeout, || {
            owner::as_table_owner_running_no_code(oid, || {
                spi::read::<i64>(
                    "SELECT nl2sql._profile_probe($1::pg_catalog.oid::pg_catalog.regclass, $2::pg_catalog.name, $3::pg_catalog.text[], $4::pg_catalog.name)",
                    &args,
                )
            })
        });
        n.ok().flatten().map(|n| n.max(0) as usize)
    }

    fn distinct_pairs(&mut self, table: &TableProfile, pairs: &[(usize, usize)]) -> Vec<Option<i64>> {
        check_for_interrupts!();
        let oid = pg_sys::Oid::from(table.oid);
        let estimate = self.estimates.get(&table.oid).copied().unwrap_or(-1.0);
        let sampling = Sampling::for_table(estimate, self.max_rows);
        let name = |c: usize| table.columns[c].name.clone();
        let args = [
            DatumWithOid::from(oid),
            DatumWithOid::from(pairs.iter().map(|p| name(p.0)).collect::<Vec<_>>()),
            DatumWithOid::from(pairs.iter().map(|p| name(p.1)).collect::<Vec<_>>()),
            DatumWithOid::from(sampling.limit),
            DatumWithOid::from(sampling.percent),
        ];
        let counts = sandbox::isolated(self.timeout, || {
            owner::as_table_owner_running_no_code(oid, || {
                spi::read::<Vec<Option<i64>>>(
                    "SELECT nl2sql._profile_pairs($1::pg_catalog.oid::pg_catalog.regclass, $2::pg_catalog.name[], $3::pg_catalog.name[], $4, $5)",
                    &args,
                )
            })
        });
        match counts {
            Ok(Some(c)) if c.len() == pairs.len() => c,
            _ => vec![None; pairs.len()],
        }
    }
}
