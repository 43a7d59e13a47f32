//! The examples library's SQL surface in schema nl2sql (sql/examples.sql holds the table and
//! the view).

#[pgrx::pg_schema]
mod nl2sql {
    use crate::pg::examples;
    use pgrx::prelude::*;

    /// An example's masked question and the built-in embedder's vector of it (as text), from
    /// its question and SQL; used to load the built-in examples.
    #[pg_extern(immutable, strict, parallel_safe)]
    fn _example_key(question: &str, sql: &str) -> TableIterator<'static, (name!(masked, String), name!(embedding, String))> {
        let (masked, v) = examples::key(question, sql);
        TableIterator::once((masked, crate::pg::embedder::vector_literal(&v)))
    }

    /// Adds an example after running its SQL in the sandbox with the caller's rights; its id.
    #[pg_extern(volatile, parallel_unsafe)]
    fn add_example(question: &str, sql: &str, hint: default!(Option<&str>, "NULL")) -> i64 {
        examples::add(question, sql, hint)
    }

    /// Removes an example; whether it existed.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn remove_example(id: i64) -> bool {
        examples::remove(id)
    }

    /// Enables (or, with false, disables) an example; whether it exists.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn enable_example(id: i64, enabled: default!(bool, true)) -> bool {
        examples::set_enabled(id, enabled)
    }

    /// Asks the model for question/SQL pairs per table and per joined pair of tables (QA-SQL),
    /// keeps those that run and return rows.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn generate_examples(
        per_table: default!(i32, 5),
    ) -> TableIterator<'static, (
        name!(scope, String),
        name!(written, i32),
        name!(executed, i32),
        name!(kept, i32),
        name!(prompt_tokens, i64),
        name!(completion_tokens, i64),
    )> {
        TableIterator::new(
            examples::generate(per_table)
                .into_iter()
                .map(|g| (g.scope, g.written, g.executed, g.kept, g.prompt_tokens, g.completion_tokens)),
        )
    }

    /// Writes the missing chains of thought of up to `max` examples; how many were written.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn write_example_thoughts(max: default!(i32, 100)) -> i64 {
        examples::write_thoughts(max)
    }
}
