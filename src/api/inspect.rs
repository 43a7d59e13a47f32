//! Functions in schema nl2sql that show what the pipeline sees and did.

#[pgrx::pg_schema]
mod nl2sql {
    use crate::api::ask;
    use crate::gucs;
    use crate::pg::{catalog, errors};
    use pgrx::prelude::*;

    /// The schema prompt the model would get now, as the calling role sees it (without
    /// samples and values under nl2sql.privacy).
    #[pg_extern(volatile, parallel_unsafe)]
    fn schema_prompt() -> String {
        let privacy = crate::pg::session::privacy();
        crate::pg::role::as_exec_role(|| {
            let samples = if privacy { 0 } else { gucs::sample_rows() };
            let schema = catalog::load_schema(samples, gucs::schema_max_tokens()).unwrap_or_else(|r| errors::raise(&r));
            let schema = if privacy { schema.without_data() } else { schema };
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
