//! The SQL surface: every #[pg_extern] lives here and only converts and delegates.

pub mod ask;
pub mod evaluate;
pub mod examples;
pub mod explain;
pub mod history;
pub mod inspect;
pub mod instructions;
pub mod relationships;
pub mod values;
