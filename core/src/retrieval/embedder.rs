//! Which embedder turns text into vectors: the built-in one (no network) or any
//! OpenAI-compatible `/v1/embeddings` endpoint, called in batches with the same cancel,
//! timeout and error discipline as the model.

use crate::retrieval::embed;
use crate::model::http::{self, Endpoint, EndpointError, Service};
use serde_json::Value;

/// The embedder in use; its id is stored with every index so that vectors of different
/// embedders are never compared.
#[derive(Debug, Clone)]
pub enum Embedder {
    Builtin,
    Remote(Endpoint),
}

impl Embedder {
    /// "builtin-v1", or "<model>@<url>" for an endpoint ("<url>" without a model name).
    pub fn id(&self) -> String {
        match self {
            Embedder::Builtin => embed::BUILTIN_ID.to_string(),
            Embedder::Remote(ep) => match ep.model.as_deref().filter(|m| !m.is_empty()) {
                Some(m) => format!("{m}@{}", ep.display_url()),
                None => ep.display_url(),
            },
        }
    }
}

/// Embeds `texts` with the endpoint: `batch` inputs a request, up to `parallel` requests at a
/// time, `poll` called while waiting. Vectors come back in input order, all of one dimension.
pub fn embed_remote(
    ep: &Endpoint,
    texts: &[String],
    batch: usize,
    parallel: usize,
    poll: &mut dyn FnMut(),
) -> Result<Vec<Vec<f32>>, EndpointError> {
    debug_assert_eq!(ep.service, Service::Embeddings);
    let batches: Vec<Vec<String>> = texts.chunks(batch.max(1)).map(|c| c.to_vec()).collect();
    let mut out: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
    for wave in batches.chunks(parallel.max(1)) {
        let jobs: Vec<Box<dyn FnOnce() -> Result<Vec<Vec<f32>>, EndpointError> + Send>> = wave
            .iter()
            .map(|inputs| {
                let ep = ep.clone();
                let inputs = inputs.clone();
                let job: Box<dyn FnOnce() -> Result<Vec<Vec<f32>>, EndpointError> + Send> = Box::new(move || {
                    let mut body = serde_json::json!({ "input": inputs });
                    if let Some(m) = ep.model.as_deref().filter(|m| !m.is_empty()) {
                        body["model"] = Value::String(m.to_string());
                    }
                    let reply = http::post_json(&ep, &body.to_string())?;
                    parse_embeddings(&ep, &reply.text, inputs.len())
                });
                job
            })
            .collect();
        for r in http::run_concurrently(jobs, poll, || Err(ep.bad_response("the worker thread could not run", ""))) {
            out.extend(r?);
        }
    }
    if let Some(d) = out.first().map(Vec::len) {
        if out.iter().any(|v| v.len() != d) {
            return Err(ep.bad_response("the vectors differ in dimension", ""));
        }
    }
    Ok(out)
}

/// Reads `{"data": [{"embedding": [...], "index": i}, ...]}`, in input order.
pub fn parse_embeddings(ep: &Endpoint, text: &str, expected: usize) -> Result<Vec<Vec<f32>>, EndpointError> {
    let v: Value = ep.parse_json(text)?;
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| ep.bad_response("no data in the response", text))?;
    if data.len() != expected {
        return Err(ep.bad_response(format!("{} vectors for {} inputs", data.len(), expected), ""));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (pos, item) in data.iter().enumerate() {
        let i = item.get("index").and_then(Value::as_u64).map(|i| i as usize).unwrap_or(pos);
        let vec: Option<Vec<f32>> = item
            .get("embedding")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(|x| x.as_f64().map(|f| f as f32)).collect());
        match (vec, slots.get_mut(i)) {
            (Some(vec), Some(slot)) if !vec.is_empty() && vec.iter().all(|x| x.is_finite()) => *slot = Some(vec),
            _ => return Err(ep.bad_response(format!("embedding {i} is missing or not a list of numbers"), "")),
        }
    }
    slots.into_iter().map(|s| s.ok_or_else(|| ep.bad_response("an index is missing", ""))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::http::tests::{endpoint, serve};
    use crate::model::http::ErrorKind;

    fn body(vectors: &[(usize, Vec<f32>)]) -> String {
        let data: Vec<Value> =
            vectors.iter().map(|(i, v)| serde_json::json!({"object": "embedding", "index": i, "embedding": v})).collect();
        serde_json::json!({"data": data}).to_string()
    }

    #[test]
    fn batches_in_order() {
        // Two batches of two; the server answers each batch's items out of order.
        let (url, h) = serve(vec![
            (200, body(&[(1, vec![0.0, 1.0]), (0, vec![1.0, 0.0])]), 0),
            (200, body(&[(0, vec![0.5, 0.5]), (1, vec![0.2, 0.8])]), 0),
        ]);
        let texts: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let v = embed_remote(&endpoint(Service::Embeddings, url), &texts, 2, 1, &mut || {}).expect("vectors");
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.5, 0.5], vec![0.2, 0.8]]);
        let seen = h.join().expect("server");
        assert!(seen[0].starts_with("POST /v1/embeddings"));
        assert!(seen[0].contains("\"input\":[\"a\",\"b\"]"));
    }

    #[test]
    fn wrong_count_and_endpoint_down() {
        let (url, h) = serve(vec![(200, body(&[(0, vec![1.0])]), 0)]);
        let ep = endpoint(Service::Embeddings, url);
        let e = embed_remote(&ep, &["a".into(), "b".into()], 8, 1, &mut || {}).expect_err("one vector for two");
        assert!(matches!(e.kind, ErrorKind::BadResponse { .. }));
        h.join().expect("server");
        let down = endpoint(Service::Embeddings, "http://127.0.0.1:9/v1".into());
        let e = embed_remote(&down, &["a".into()], 8, 1, &mut || {}).expect_err("down");
        assert!(matches!(e.kind, ErrorKind::Connect { .. }));
        assert!(crate::error::Diagnostic::message(&e).starts_with("could not connect to the embedding endpoint"));
    }

    #[test]
    fn ids() {
        assert_eq!(Embedder::Builtin.id(), "builtin-v1");
        let ep = endpoint(Service::Embeddings, "http://k:s@127.0.0.1:8000/v1".into());
        assert_eq!(Embedder::Remote(ep).id(), "m@http://127.0.0.1:8000/v1/embeddings");
    }
}
