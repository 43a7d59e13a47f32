//! Functions in schema nl2sql that show what the pipeline sees and did.

#[pgrx::pg_schema]
mod nl2sql {
    use crate::gucs;
    use crate::pg::{catalog, errors};
    use nl2sql_core::render;
    use pgrx::prelude::*;

    /// The schema prompt the model would get now, as the calling role sees it (without
    /// samples and values under nl2sql.privacy).
    #[pg_extern(volatile, parallel_unsafe)]
    fn schema_prompt() -> String {
        let privacy = crate::pg::session::privacy();
        crate::pg::role::as_exec_role(|| catalog::for_prompt(privacy).render(gucs::schema_max_tokens()).text)
    }

    /// The shortest chain of foreign keys joining two tables the calling role may read
    /// (Interactive-T2S's FindShortestPath), one join condition a row, in order from `from`;
    /// no rows when none joins them. nl2sql.join_path(regclass, regclass) in sql/inspect_api.sql.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn _join_path(
        from: pg_sys::Oid,
        to: pg_sys::Oid,
    ) -> TableIterator<'static, (name!(step, i32), name!(join_condition, String))> {
        // Names and keys only: nothing sampled.
        let schema = crate::pg::role::as_exec_role(|| catalog::for_prompt(true));
        let find = |oid: pg_sys::Oid| {
            schema.tables.iter().position(|t| t.oid == u32::from(oid)).unwrap_or_else(|| {
                errors::fail(
                    nl2sql_core::error::SqlState::UndefinedTable,
                    format!("relation with OID {} is not among the tables you may read", u32::from(oid)),
                    None,
                    Some("nl2sql.join_path() follows the foreign keys of tables the role may SELECT from."),
                )
            })
        };
        let (a, b) = (find(from), find(to));
        let steps = schema.join_path(a, b).unwrap_or_else(|| {
            note!("no foreign keys join {} and {}", render::ident(&schema.tables[a].ident), render::ident(&schema.tables[b].ident));
            Vec::new()
        });
        TableIterator::new(steps.into_iter().enumerate().map(|(i, s)| (i as i32 + 1, s)))
    }

    /// The sampled statistics of one relation's columns, read as the schema prompt reads them:
    /// in the sandbox, as the role that runs generated SQL, within nl2sql.statement_timeout.
    /// nl2sql.column_stats(regclass, int) in sql/inspect_api.sql.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn _column_stats(rel: pg_sys::Oid, sample_rows: i32) -> Option<String> {
        use nl2sql_core::error::SqlState;
        use nl2sql_core::prompt::refine::Failure;
        if sample_rows < 1 {
            errors::fail(SqlState::InvalidParameterValue, "sample_rows must be positive".into(), None, None);
        }
        if !catalog::samples_locally(rel) {
            errors::fail(
                SqlState::FeatureNotSupported,
                format!(
                    "relation {} reads a foreign table",
                    crate::pg::relation::display_name(rel).map_or_else(|| format!("with OID {}", u32::from(rel)), |n| render::ident(&n))
                ),
                None,
                Some("Sampling a foreign table calls its server: set nl2sql.allow_foreign_tables to allow it."),
            );
        }
        match crate::pg::role::as_exec_role(|| catalog::read_stats(rel, sample_rows, crate::gucs::statement_timeout())) {
            Ok(json) => json,
            Err(Failure::Timeout { ms }) => errors::fail(
                SqlState::QueryCanceled,
                format!("sampling ran longer than nl2sql.statement_timeout ({ms} ms)"),
                None,
                Some("Ask for fewer rows, or raise nl2sql.statement_timeout."),
            ),
            Err(Failure::Execution(r) | Failure::Analysis(r)) => errors::raise(&r),
            Err(_) => errors::fail(SqlState::InternalError, "sampling failed".into(), None, None),
        }
    }

    /// Whether nl2sql's own read of a user relation is running now (sandbox::inspect): the
    /// helpers those reads call (sql/introspect/) refuse to run anywhere else.
    #[pg_extern(volatile, parallel_unsafe)]
    fn _inspecting() -> bool {
        crate::pg::hooks::scope() == Some(nl2sql_core::safety::policy::Scope::Inspect)
    }

    /// The trace of this session's last nl2sql() or nl2sql_run() call: LLM calls, tokens,
    /// latency, candidates and their outcomes. NULL before the first call, and for any role
    /// but the one that made it.
    #[pg_extern(volatile, parallel_unsafe)]
    fn last_trace() -> Option<pgrx::JsonB> {
        crate::pg::session::last_trace().map(pgrx::JsonB)
    }

    /// Forgets the column samples this session cached.
    #[pg_extern(volatile, parallel_unsafe)]
    fn reset_cache() {
        catalog::reset_cache();
    }
}
