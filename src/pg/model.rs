//! The model endpoint from the settings. The client itself is the core's
//! (nl2sql_core::pipeline::Client), which waits with the interrupt check lib.rs registers.

use crate::gucs;
use nl2sql_core::error::Secret;
use nl2sql_core::model::http::{Endpoint, EndpointError, ErrorKind, Service};
use nl2sql_core::model::llm::LlmError;
pub use nl2sql_core::pipeline::Client as Model;

/// The model nl2sql.llm_* name; an error when no endpoint is configured.
pub fn from_settings() -> Result<Model, LlmError> {
    let base_url = gucs::llm_url().ok_or(EndpointError { service: Service::Llm, kind: ErrorKind::NotConfigured })?;
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
            grammar: gucs::grammar(),
        },
        use_n: gucs::llm_n(),
    })
}
