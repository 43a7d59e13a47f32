//! Value indexes and retrieval in schema nl2sql. The functions with regclass and name columns
//! are SQL wrappers (sql/values_api.sql) around the underscored ones here.

#[pgrx::pg_schema]
mod nl2sql {
    use crate::pg::values::{self, Built};
    use nl2sql_core::retrieval::embed;
    use pgrx::prelude::*;

    type BuiltRow = (pg_sys::Oid, String, String, i64, i64, i64, f64);

    fn rows(built: Vec<Built>) -> impl Iterator<Item = BuiltRow> {
        built.into_iter().map(|b| (b.relid, b.column, b.status, b.values, b.phrases, b.skipped, b.seconds))
    }

    /// Raises 22023 for a search text longer than a question may be.
    fn searchable(query: &str) {
        use nl2sql_core::error::{Report, SqlState};
        use nl2sql_core::pipeline::MAX_QUESTION_CHARS;
        if query.chars().nth(MAX_QUESTION_CHARS).is_some() {
            crate::pg::errors::raise(
                &Report::new(SqlState::InvalidParameterValue, format!("search text is too long (at most {MAX_QUESTION_CHARS} characters)"))
                    .hint("Search with the words of a question, not a document."),
            );
        }
    }

    /// The built-in embedder's 256-bit signature of a text.
    #[pg_extern(immutable, strict, parallel_safe)]
    fn signature(text: &str) -> crate::pg::types::Bits {
        crate::pg::types::Bits::from_words(&embed::signature(text))
    }

    /// A text as the value index compares it: lowercase, accents removed, words separated by one space.
    #[pg_extern(immutable, strict, parallel_safe)]
    fn fold(text: &str) -> String {
        nl2sql_core::text::fold(text)
    }

    /// The phrases a value is also indexed under (split retrieval), folded.
    #[pg_extern(immutable, strict, parallel_safe)]
    fn phrases(value: &str) -> Vec<String> {
        embed::phrases(value, 16)
    }

    /// The id of the embedder in use: 'builtin-v1', or '<model>@<url>' of nl2sql.embedding_url.
    /// Indexes built by another embedder are stale.
    #[pg_extern(stable, parallel_safe)]
    fn current_embedder() -> String {
        crate::pg::embedder::current().id()
    }

    /// The built-in embedder's id ('builtin-v1'): the one definition SQL and Rust share.
    #[pg_extern(immutable, parallel_safe)]
    fn builtin_embedder() -> &'static str {
        embed::BUILTIN_ID
    }

    /// The built-in embedder's dense vector of a text (256 dimensions, L2-normalised).
    #[pg_extern(immutable, strict, parallel_safe)]
    fn embedding(text: &str) -> Vec<f32> {
        embed::embed(text, embed::BUILTIN_DIMS)
    }

    #[pg_extern(volatile, parallel_unsafe)]
    fn _create_value_index(
        rel: pg_sys::Oid,
        col: Option<&str>,
        include_rls: bool,
    ) -> TableIterator<'static, (
            name!(relation, pg_sys::Oid),
            name!(column_name, String),
            name!(status, String),
            name!(values, i64),
            name!(phrases, i64),
            name!(skipped, i64),
            name!(seconds, f64),
        )> {
        TableIterator::new(rows(values::create(rel, col, include_rls, true)))
    }

    #[pg_extern(volatile, parallel_unsafe)]
    fn _create_value_indexes(
        schemas: Vec<String>,
        include_rls: bool,
    ) -> TableIterator<'static, (
            name!(relation, pg_sys::Oid),
            name!(column_name, String),
            name!(status, String),
            name!(values, i64),
            name!(phrases, i64),
            name!(skipped, i64),
            name!(seconds, f64),
        )> {
        TableIterator::new(rows(values::create_in_schemas(schemas, include_rls)))
    }

    #[pg_extern(volatile, parallel_unsafe)]
    fn _drop_value_index(rel: pg_sys::Oid, col: Option<&str>) -> SetOfIterator<'static, String> {
        SetOfIterator::new(values::drop(rel, col))
    }

    #[pg_extern(volatile, parallel_unsafe)]
    fn _refresh_value_indexes(
        rel: Option<pg_sys::Oid>,
    ) -> TableIterator<'static, (
            name!(relation, pg_sys::Oid),
            name!(column_name, String),
            name!(status, String),
            name!(values, i64),
            name!(phrases, i64),
            name!(skipped, i64),
            name!(seconds, f64),
        )> {
        let built = values::refresh(rel);
        // a profiled table that changed is profiled again (nothing when profiling never ran)
        crate::pg::relationships::refresh_if_changed();
        TableIterator::new(rows(built))
    }

    #[pg_extern(volatile, parallel_unsafe)]
    fn _search_values(
        query: &str,
        k: i32,
    ) -> TableIterator<'static, (name!(relation, pg_sys::Oid), name!(column_name, String), name!(value, String), name!(score, f32))> {
        searchable(query);
        let found = values::search_values(query, &[], values::Scope::Everything, k.max(0) as usize, crate::gucs::value_threshold());
        TableIterator::new(found.into_iter().map(|f| (f.relid, f.column, f.value, f.score)))
    }

    #[pg_extern(volatile, parallel_unsafe)]
    fn _search_columns(
        query: &str,
        k: i32,
    ) -> TableIterator<'static, (name!(relation, pg_sys::Oid), name!(column_name, String), name!(score, f32))> {
        searchable(query);
        let found = values::search_columns(query, k.max(0) as usize, &[]);
        TableIterator::new(found.into_iter().map(|f| (f.relid, f.column, f.score)))
    }
}
