//! nl2sql: natural language to safe, read-only SQL, inside PostgreSQL.
//!
//! `api/` is the SQL surface, `pg/` adapts PostgreSQL to the pure pipeline in `nl2sql-core`,
//! `gucs/` holds every setting, each declared once in its group's table.

use pgrx::prelude::*;

// nl2sql's NOTICE (note!) and WARNING (alert!): the text on one line, with no unsafe character
// (src/pg/errors.rs, send). Every module uses these, never pgrx's notice! and warning!
// (scripts/layout.py fails on those).
macro_rules! note {
    ($($arg:tt)*) => { $crate::pg::errors::send(::pgrx::PgLogLevel::NOTICE, format!($($arg)*)) };
}
macro_rules! alert {
    ($($arg:tt)*) => { $crate::pg::errors::send(::pgrx::PgLogLevel::WARNING, format!($($arg)*)) };
}

mod api;
mod gucs;
mod pg;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
extension_sql_file!("../sql/may_read.sql", name = "may_read", requires = ["bootstrap"]);
extension_sql_file!("../sql/render.sql", name = "render", requires = ["bootstrap"]);
extension_sql_file!("../sql/introspect/column_stats.sql", name = "column_stats", requires = ["may_read"]);
extension_sql_file!("../sql/introspect/value_exists.sql", name = "value_exists", requires = ["bootstrap"]);
// Before values.sql: its event triggers call nl2sql._ddl_changed from the next command on.
extension_sql_file!("../sql/ddl_log.sql", name = "ddl_log", requires = ["render"]);
extension_sql_file!("../sql/column_description.sql", name = "column_description", requires = ["may_read"]);
extension_sql_file!("../sql/values.sql", name = "values", requires = ["may_read", "render", "ddl_log", "column_description"]);
extension_sql_file!("../sql/values_saved.sql", name = "values_saved", requires = ["values"]);
extension_sql_file!("../sql/examples.sql", name = "examples", requires = ["may_read"]);
extension_sql_file!("../sql/examples_builtin.sql", name = "examples_builtin", requires = ["examples", _example_key]);
extension_sql_file!("../sql/instructions.sql", name = "instructions", requires = ["may_read"]);
extension_sql_file!("../sql/instructions_api.sql", name = "instructions_api", requires = ["instructions", _add_instruction]);
extension_sql_file!("../sql/history.sql", name = "history", requires = ["bootstrap"]);
extension_sql_file!("../sql/inspect_api.sql", name = "inspect_api", requires = [_join_path, _column_stats]);
extension_sql_file!("../sql/relationships.sql", name = "relationships", requires = ["may_read", "ddl_log"]);
extension_sql_file!(
    "../sql/relationships_api.sql",
    name = "relationships_api",
    requires = ["relationships", _profile_relationships, _decide_relationship]
);
extension_sql_file!("../sql/values_api.sql", name = "values_api", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    // Prompts name the server's major version.
    nl2sql_core::prompt::set_server_version(&(pg_sys::PG_VERSION_NUM / 10_000).to_string());
    pg::hooks::install();
    pg::sandbox::install();
    // Loops of the pure core over model output honour cancel and statement_timeout.
    nl2sql_core::interrupt::register(check_interrupts);
}

fn check_interrupts() {
    pgrx::check_for_interrupts!();
}
