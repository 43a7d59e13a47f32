//! The model endpoint from the settings, waited on without ever ignoring an interrupt.

use crate::gucs;
use nl2sql_core::error::Secret;
use nl2sql_core::model::http::{Endpoint, EndpointError, ErrorKind, Service};
use nl2sql_core::model::llm::{self, ChatRequest, Completion, LlmError};
use nl2sql_core::pipeline::Llm;
use pgrx::prelude::*;

pub struct Model {
    endpoint: Endpoint,
}

impl Model {
    /// Reads nl2sql.llm_* settings; errors when no endpoint is configured.
    pub fn from_settings() -> Result<Model, LlmError> {
        let base_url =
            gucs::llm_url().ok_or(EndpointError { service: Service::Llm, kind: ErrorKind::NotConfigured })?;
        crate::pg::secrets::check_url_origin("nl2sql.llm_url").unwrap_or_else(|r| crate::pg::errors::raise(&r));
        Ok(Model {
            endpoint: Endpoint {
                service: Service::Llm,
                base_url,
                model: gucs::llm_model(),
                api_key: crate::pg::secrets::llm_api_key().unwrap_or_else(|r| crate::pg::errors::raise(&r)).map(Secret::new),
                timeout: gucs::llm_timeout(),
                max_retries: gucs::llm_max_retries(),
                max_body: gucs::max_answer_bytes(),
            },
        })
    }
}

impl Llm for Model {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        // Cancel and statement_timeout raise an ERROR from inside this callback.
        llm::chat(&self.endpoint, req, &mut || {
            check_for_interrupts!();
        })
    }

    fn chat_many(&mut self, reqs: Vec<ChatRequest>) -> Vec<Result<Completion, LlmError>> {
        // All requests in flight at once; a cancel interrupts the wait for every one.
        llm::chat_many(&self.endpoint, reqs, &mut || {
            check_for_interrupts!();
        })
    }

    fn chat_scored(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        llm::chat_scored(&self.endpoint, req, &mut || {
            check_for_interrupts!();
        })
    }

    fn can_score(&self) -> bool {
        llm::can_score(&self.endpoint)
    }

    fn sample(&mut self, req: ChatRequest, n: usize) -> Vec<Result<Completion, LlmError>> {
        llm::sample(&self.endpoint, req, n, gucs::llm_n(), &mut || {
            check_for_interrupts!();
        })
    }

    fn secret(&self) -> Option<&str> {
        self.endpoint.api_key.as_ref().map(|k| k.expose())
    }
}
