//! The embedder from the settings, and endpoint calls that keep answering interrupts.

use crate::gucs;
use crate::pg::errors;
use nl2sql_core::retrieval::embedder::{self, Embedder};
use nl2sql_core::error::Secret;
use nl2sql_core::model::http::{Endpoint, Service};
use pgrx::prelude::*;

/// The built-in embedder, or the endpoint at nl2sql.embedding_url.
pub fn current() -> Embedder {
    match gucs::embedding_url() {
        None => Embedder::Builtin,
        Some(base_url) => Embedder::Remote(Endpoint {
            base_url: {
                crate::pg::secrets::check_url_origin("nl2sql.embedding_url").unwrap_or_else(|r| errors::raise(&r));
                base_url
            },
            service: Service::Embeddings,
            model: gucs::embedding_model(),
            api_key: crate::pg::secrets::embedding_api_key().unwrap_or_else(|r| errors::raise(&r)).map(Secret::new),
            timeout: gucs::embedding_timeout(),
            max_retries: gucs::llm_max_retries(),
            // Vectors are long: a batch of 2048 3072-dimensional ones is ~150 MB of JSON.
            max_body: 256 << 20,
            grammar: nl2sql_core::grammar::Mode::Off,
        }),
    }
}

/// The embedder for stored values (builds, refreshes, queued values): under nl2sql.privacy an
/// endpoint is refused, since it would receive the values.
pub fn for_stored_values() -> Embedder {
    let e = current();
    if crate::pg::session::privacy() && matches!(e, Embedder::Remote(_)) {
        errors::raise(
            &nl2sql_core::error::Report::new(
                nl2sql_core::error::SqlState::FeatureNotSupported,
                "cannot send stored values to nl2sql.embedding_url while nl2sql.privacy is on",
            )
            .detail("Building or refreshing a value index with an embedding endpoint sends it every indexed value.")
            .hint("Use the built-in embedder (RESET nl2sql.embedding_url) for the value index."),
        );
    }
    e
}

/// What embeds column descriptions (nl2sql.column_embedder).
pub enum Columns {
    /// The value index's embedder: signatures (built-in) or the endpoint's vectors.
    Values(Embedder),
    /// all-MiniLM-L6-v2 in this backend.
    MiniLm,
}

impl Columns {
    /// The id stored with each column's vector.
    pub fn id(&self) -> String {
        match self {
            Columns::Values(e) => e.id(),
            Columns::MiniLm => format!("{}@nl2sql", nl2sql_core::retrieval::minilm::ID),
        }
    }

    /// The vector of a question; None for the built-in embedder, and None with a WARNING when
    /// the in-database model cannot be loaded (search falls back to names: a missing model
    /// must not fail every role's questions).
    pub fn query_vector(&self, text: &str) -> Option<Vec<f32>> {
        let texts = [text.to_string()];
        match self {
            Columns::MiniLm => match crate::pg::minilm::try_embed(&texts) {
                Ok(v) => v.into_iter().next(),
                Err(r) => {
                    crate::pg::errors::warn(&r);
                    None
                }
            },
            _ => self.vectors(&texts).and_then(|v| v.into_iter().next()),
        }
    }

    /// Vectors of `texts`; None for the built-in embedder, which stores signatures.
    pub fn vectors(&self, texts: &[String]) -> Option<Vec<Vec<f32>>> {
        match self {
            Columns::Values(Embedder::Builtin) => None,
            Columns::Values(Embedder::Remote(ep)) => Some(embed(ep, texts)),
            Columns::MiniLm => Some(crate::pg::minilm::embed(texts)),
        }
    }
}

/// The embedder of column descriptions.
pub fn for_columns() -> Columns {
    match gucs::column_embedder() {
        gucs::ColumnEmbedder::Values => Columns::Values(current()),
        gucs::ColumnEmbedder::MiniLm => Columns::MiniLm,
    }
}

/// Embeds `texts` with the endpoint, in batches; raises the endpoint's error.
pub fn embed(ep: &Endpoint, texts: &[String]) -> Vec<Vec<f32>> {
    if texts.is_empty() {
        return vec![];
    }
    embedder::embed_remote(ep, texts, gucs::embedding_batch(), 4, &mut || {
        check_for_interrupts!();
    })
    .unwrap_or_else(|e| errors::raise(&e.report(ep.api_key.as_ref())))
}

/// pgvector's text form of a vector.
pub fn vector_literal(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}
