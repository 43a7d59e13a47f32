//! Talking to the model: the HTTP client, the chat API, and reading the SQL out of an answer.

pub mod answer;
pub mod http;
pub mod llm;
