//! The pure nl2sql pipeline: no PostgreSQL here. The extension crate supplies the database and
//! the interrupt check through the traits in [`pipeline`].

pub mod align;
pub mod error;
pub mod grammar;
pub mod interrupt;
pub mod library;
pub mod pipeline;
pub mod model;
pub mod prompt;
pub mod relationships;
pub mod render;
pub mod retrieval;
pub mod safety;
pub mod schema;
pub mod sqlinfo;
pub mod text;

use std::time::Duration;

/// A result column: its name and type OID.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    pub type_oid: u32,
}

/// The rows of one executed query, every value in its text form.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub columns: Vec<ColumnInfo>,
    pub rows: Vec<Vec<Option<String>>>,
    /// More rows existed than nl2sql.max_rows allowed, or than nl2sql.max_result_bytes held.
    pub truncated: bool,
    /// It was nl2sql.max_result_bytes that cut the rows.
    pub byte_limited: bool,
    pub elapsed: Duration,
    /// The planner's estimated total cost of the plan that ran (None where nothing planned it).
    pub cost: Option<f64>,
    /// The relations the statement names, as PostgreSQL resolved them (OIDs, sorted; before
    /// views are expanded); empty where no database analysed it.
    pub named: Vec<u32>,
}
