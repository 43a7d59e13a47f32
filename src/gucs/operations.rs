//! Daily operation: privacy and the history (an audit trail).

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

settings! {
    PRIVACY: bool = false,
        c"nl2sql.privacy", Suset, GucFlags::default(),
        c"Whether no row data leaves the database: no samples, values, results or literals in any prompt.",
        c"Settable only by superusers (per role or database with ALTER ROLE/DATABASE ... SET): a role cannot turn it off.";
    HISTORY: bool = true,
        c"nl2sql.history", Suset, GucFlags::default(),
        c"Whether every call is recorded in nl2sql.history.",
        c"Settable only by superusers: the history is also an audit trail.";
    HISTORY_RETENTION_MIN: int = 30 * 24 * 60,
        c"nl2sql.history_retention", Suset, GucFlags::UNIT_MIN,
        c"How long nl2sql.purge_history() keeps history rows; 0 keeps them forever.",
        c"",
        range(0, i32::MAX);
}

pub fn privacy() -> bool {
    PRIVACY.get()
}

pub fn history() -> bool {
    HISTORY.get()
}

/// nl2sql.history_retention in minutes, None when 0 (forever).
pub fn history_retention_minutes() -> Option<i64> {
    Some(HISTORY_RETENTION_MIN.get()).filter(|m| *m > 0).map(i64::from)
}
