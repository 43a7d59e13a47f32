//! The prompts: one layout shared by every call on a database (so that a model server's cache
//! holds its start), and the tasks written on it: generation, extraction, correction, synthetic
//! pairs, examples.

mod layout;
pub use layout::*;

pub mod answerable;
pub mod examples;
pub mod extract;
pub mod generate;
pub mod ran;
pub mod refine;
pub mod scrub;
pub mod synthetic;
