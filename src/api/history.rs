//! The history's SQL surface in schema nl2sql (sql/history.sql holds the table).

#[pgrx::pg_schema]
mod nl2sql {
    use crate::pg::history;
    use pgrx::prelude::*;

    /// Says whether a call's answer was right; a right answer, or a corrected query that runs
    /// for the caller, is offered to the examples library (disabled until a curator enables
    /// it). The example's id, or NULL.
    #[pg_extern(volatile, parallel_unsafe)]
    fn feedback(history_id: i64, correct: bool, corrected_sql: default!(Option<&str>, "NULL")) -> Option<i64> {
        history::feedback(history_id, correct, corrected_sql)
    }

    /// Deletes history rows older than `older_than` (nl2sql.history_retention when NULL); how
    /// many. For members of nl2sql_admin and superusers, by hand or from a scheduler.
    #[pg_extern(volatile, parallel_unsafe)]
    fn purge_history(older_than: default!(Option<pgrx::datum::Interval>, "NULL")) -> i64 {
        history::purge(older_than)
    }
}
