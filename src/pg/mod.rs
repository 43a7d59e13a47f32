//! Adapters between the pure pipeline and PostgreSQL: catalog, sandbox, model, errors.

pub mod ask;
pub mod catalog;
pub mod compat;
pub mod curated;
pub mod embedder;
pub mod errors;
pub mod examples;
pub mod explain;
pub mod history;
pub mod hooks;
pub mod instructions;
pub mod minilm;
pub mod model;
pub mod owner;
pub mod planner_calls;
pub mod policy;
pub mod receiver;
pub mod relation;
pub mod relationships;
pub mod role;
pub mod sandbox;
pub mod secrets;
pub mod session;
pub mod spi;
pub mod types;
pub mod values;
