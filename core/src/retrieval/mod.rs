//! Finding what a question names: values, columns and examples by words and by meaning, and
//! ranking what was found.

pub mod coverage;
pub mod embed;
pub mod embedder;
pub mod forms;
pub mod instructions;
pub mod lookup;
pub mod minilm;
pub mod retrieve;
pub mod typos;

#[cfg(test)]
mod tests;
