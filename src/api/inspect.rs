//! Functions in schema nl2sql that show what the pipeline sees and did.

#[pgrx::pg_schema]
mod nl2sql {
    use crate::api::ask;
    use crate::gucs;
    use crate::pg::{catalog, errors};
    use pgrx::prelude::*;

    /// The schema prompt the model would get now, as the calling role sees it.
    #[pg_extern(volatile, parallel_unsafe)]
    fn schema_prompt() -> String {
        crate::pg::role::as_exec_role(|| {
            let schema = catalog::load_schema(gucs::sample_rows(), gucs::schema_max_tokens()).unwrap_or_else(|r| errors::raise(&r));
            schema.render(gucs::schema_max_tokens()).text
        })
    }

    /// The trace of this session's last nl2sql() or nl2sql_run() call: LLM calls, tokens,
    /// latency, candidates and their outcomes. NULL before the first call, and for any role
    /// but the one that made it.
    #[pg_extern(volatile, parallel_unsafe)]
    fn last_trace() -> Option<pgrx::JsonB> {
        ask::last_trace().map(pgrx::JsonB)
    }

    /// Forgets the column samples this session cached.
    #[pg_extern(volatile, parallel_unsafe)]
    fn reset_cache() {
        catalog::reset_cache();
    }
}
