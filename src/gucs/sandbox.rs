//! What a generated query may do when it runs: time, rows, bytes, planner cost, which functions
//! and tables, and the role that stands in for a superuser.

use super::{ms, string};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;
use std::time::Duration;

settings! {
    STATEMENT_TIMEOUT_MS: int = 5_000,
        c"nl2sql.statement_timeout", Userset, GucFlags::UNIT_MS,
        c"Time allowed for executing one generated query.",
        c"",
        range(1, 3_600_000);
    MAX_ROWS: int = 1_000,
        c"nl2sql.max_rows", Userset, GucFlags::default(),
        c"Most rows fetched from a generated query.",
        c"",
        range(1, 10_000_000);
    MAX_RESULT_KB: int = 10_240,
        c"nl2sql.max_result_bytes", Userset, GucFlags::UNIT_KB,
        c"Most bytes of text a generated query may return; enforced while rows arrive.",
        c"",
        range(1, 1_048_576);
    MAX_COST: real = 0.0,
        c"nl2sql.max_cost", Userset, GucFlags::default(),
        c"Largest planner cost estimate of a generated query that is executed; 0 means no limit.",
        c"A candidate estimated above it is planned, not run, and the next candidate may win.",
        range(0.0, 1e300);
    ALLOWED_FUNCTIONS: text = None,
        c"nl2sql.allowed_functions", Suset, GucFlags::default(),
        c"Comma-separated volatile functions that generated SQL may call (besides random() and the like).",
        c"Administrative functions (pg_terminate_backend, set_config, pg_sleep, dblink, lo_*, pg_read_*, ...) stay forbidden. Settable only by superusers.";
    ALLOW_FOREIGN_TABLES: bool = false,
        c"nl2sql.allow_foreign_tables", Suset, GucFlags::default(),
        c"Whether generated SQL may read foreign tables (directly, or as partitions and inheritance children).",
        c"Reading one runs queries on another server as the user mapping says, and keeps its connection open. Settable only by superusers.";
    SUPERUSER_ROLE: text = Some(c"pg_read_all_data"),
        c"nl2sql.superuser_role", Suset, GucFlags::default(),
        c"Role whose rights a superuser's questions run with; generated SQL never runs as a superuser.",
        c"Default pg_read_all_data: reads every table and is not a superuser. It must not be a superuser itself.";
}

pub fn statement_timeout() -> Duration {
    ms(&STATEMENT_TIMEOUT_MS)
}

pub fn max_rows() -> usize {
    MAX_ROWS.get().max(1) as usize
}

pub fn max_result_bytes() -> usize {
    (MAX_RESULT_KB.get().max(1) as usize).saturating_mul(1024)
}

/// nl2sql.max_cost, None when 0.
pub fn max_cost() -> Option<f64> {
    Some(MAX_COST.get()).filter(|c| *c > 0.0)
}

pub fn allowed_functions() -> Vec<String> {
    string(&ALLOWED_FUNCTIONS)
        .map(|s| s.split(',').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect())
        .unwrap_or_default()
}

pub fn allow_foreign_tables() -> bool {
    ALLOW_FOREIGN_TABLES.get()
}

pub fn superuser_role() -> String {
    string(&SUPERUSER_ROLE).unwrap_or_else(|| "pg_read_all_data".into())
}
