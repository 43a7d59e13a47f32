//! Adapters between the pure pipeline and PostgreSQL: catalog, sandbox, model, errors.

pub mod catalog;
pub mod embedder;
pub mod errors;
pub mod model;
pub mod owner;
pub mod sandbox;
pub mod types;
pub mod values;
