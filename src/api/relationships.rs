//! Relationships nobody declared, in schema nl2sql: profiling and the DBA's decisions. The
//! functions with regclass and name columns are SQL wrappers (sql/relationships_api.sql) around
//! the underscored ones here.

#[pgrx::pg_schema]
mod nl2sql {
    use crate::pg::relationships::{self, Decision};
    use pgrx::prelude::*;

    #[pg_extern(volatile, parallel_unsafe)]
    fn _profile_relationships(
        schemas: Option<Vec<String>>,
    ) -> TableIterator<'static, (
            name!(from_relation, pg_sys::Oid),
            name!(from_columns, Vec<String>),
            name!(to_relation, pg_sys::Oid),
            name!(to_columns, Vec<String>),
            name!(source, String),
            name!(score, Option<f32>),
            name!(evidence, Option<String>),
        )> {
        TableIterator::new(relationships::run(schemas))
    }

    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn _decide_relationship(from: pg_sys::Oid, from_columns: Vec<String>, to: pg_sys::Oid, to_columns: Vec<String>, decision: &str) {
        let d = match decision {
            "confirm" => Decision::Confirm,
            "reject" => Decision::Reject,
            "forget" => Decision::Forget,
            other => crate::pg::errors::fail(
                nl2sql_core::error::SqlState::InvalidParameterValue,
                format!("unknown decision \"{other}\""),
                None,
                Some("Use confirm, reject or forget."),
            ),
        };
        relationships::decide(from, from_columns, to, to_columns, d);
    }
}
