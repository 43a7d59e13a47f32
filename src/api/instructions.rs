//! The instructions' SQL surface in schema nl2sql (sql/instructions.sql holds the table and the
//! view; sql/instructions_api.sql the typed add_instruction() around _add_instruction()).

#[pgrx::pg_schema]
mod nl2sql {
    use crate::pg::instructions;
    use pgrx::prelude::*;

    /// Stores an instruction about the relations `tables` (their OIDs; NULL: those its text
    /// names); its id. nl2sql.add_instruction(text, regclass[], text) in sql/instructions_api.sql.
    #[pg_extern(volatile, parallel_unsafe)]
    fn _add_instruction(instruction: Option<&str>, tables: Option<Vec<Option<pg_sys::Oid>>>, sql: Option<&str>) -> i64 {
        let Some(instruction) = instruction else {
            crate::pg::errors::fail(crate::pg::instructions::NULL_VALUE_NOT_ALLOWED, "instruction must not be null".into(), None, None)
        };
        instructions::add(instruction, tables, sql)
    }

    /// Removes an instruction; whether it existed.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn remove_instruction(id: i64) -> bool {
        instructions::remove(id)
    }

    /// Enables (or, with false, disables) an instruction; whether it exists.
    #[pg_extern(volatile, strict, parallel_unsafe)]
    fn enable_instruction(id: i64, enabled: default!(bool, true)) -> bool {
        instructions::set_enabled(id, enabled)
    }
}
