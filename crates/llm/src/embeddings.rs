//! The OpenAI embeddings adapter (`POST {api_base}/embeddings`), for every OpenAI-compatible server.

mod response;

use std::future::Future;

use serde_json::{Map, Value, json};
use squidbot_core::memory::Embedder;
use squidbot_core::provider::ProviderError;

use crate::http::{self, Endpoint, KeyHeader, Transport};
use crate::router::backoff;

/// Most texts sent in one request; longer inputs are split into several requests.
pub const EMBEDDING_BATCH: usize = 64;

/// Retries per request on rate limits and transient failures.
pub const EMBEDDING_RETRIES: u32 = 2;

/// Turns text into vectors through `POST {api_base}/embeddings`.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    transport: Transport,
    /// `provider/model`, what [`Embedder::model`] reports.
    model: String,
    /// Model name as the server knows it.
    remote_model: String,
    dimensions: Option<u32>,
    max_retries: u32,
    /// Why every call fails before any request (a missing API key), reported at call time
    /// like the router does, so a broken embedder degrades recall instead of stopping startup.
    unusable: Option<String>,
}

impl OpenAiEmbedder {
    /// An embedder for `model` at `endpoint`, with its own HTTP client. [`Embedder::model`]
    /// reports `{endpoint.provider}/{model}`.
    pub fn new(endpoint: Endpoint, model: impl Into<String>) -> Result<Self, ProviderError> {
        Self::with_client(http::http_client()?, endpoint, model.into())
    }

    /// An embedder sharing `client` (and its connection pool) with others.
    pub(crate) fn with_client(
        client: reqwest::Client,
        endpoint: Endpoint,
        model: String,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            model: format!("{}/{model}", endpoint.provider),
            remote_model: model,
            transport: Transport::new(client, endpoint, KeyHeader::Bearer, &[])?,
            dimensions: None,
            max_retries: EMBEDDING_RETRIES,
            unusable: None,
        })
    }

    /// Asks the model for vectors of this size (models that support it); 0 keeps the
    /// model's own size.
    pub fn with_dimensions(mut self, dimensions: u32) -> Self {
        self.dimensions = (dimensions > 0).then_some(dimensions);
        self
    }

    /// Replaces the number of retries per request (default [`EMBEDDING_RETRIES`]).
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Makes every call fail with this configuration problem before sending anything.
    pub(crate) fn unusable_because(mut self, problem: String) -> Self {
        self.unusable = Some(problem);
        self
    }

    /// The vector size asked for, if any.
    pub fn dimensions(&self) -> Option<u32> {
        self.dimensions
    }

    async fn run(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(problem) = &self.unusable {
            return Err(ProviderError::Config { message: problem.clone() });
        }
        let mut vectors: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
        for batch in texts.chunks(EMBEDDING_BATCH) {
            let batch_vectors = self.embed_with_retries(batch).await?;
            if let (Some(first), Some(next)) = (vectors.first(), batch_vectors.first())
                && first.len() != next.len()
            {
                return Err(self.transport.invalid(format!(
                    "embeddings of one call have different lengths ({} and {})",
                    first.len(),
                    next.len()
                )));
            }
            vectors.extend(batch_vectors);
        }
        Ok(vectors)
    }

    async fn embed_with_retries(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        backoff::with_retries(self.max_retries, &self.model, "embedding call", || self.embed_batch(batch)).await
    }

    async fn embed_batch(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        let body = request_body(&self.remote_model, batch, self.dimensions);
        let response = self.transport.post("embeddings", &body).await?;
        let bytes = self.transport.read_body(response).await?;
        let value = self.transport.parse_json("the embeddings response", &bytes)?;
        response::parse_embeddings(&self.transport, &value, batch.len())
    }
}

impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, ProviderError>> + Send + 'a {
        self.run(texts)
    }
}

/// The JSON body of one embeddings request.
fn request_body(model: &str, texts: &[String], dimensions: Option<u32>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("input".into(), json!(texts));
    if let Some(dimensions) = dimensions {
        body.insert("dimensions".into(), json!(dimensions));
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_are_sent_only_when_configured() {
        let texts = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(request_body("m", &texts, None), json!({"model": "m", "input": ["a", "b"]}));
        assert_eq!(request_body("m", &texts, Some(256)), json!({"model": "m", "input": ["a", "b"], "dimensions": 256}));
    }

    #[tokio::test]
    async fn empty_input_and_unusable_embedders_send_nothing() {
        let endpoint = Endpoint::new("local", "http://127.0.0.1:1/v1");
        let embedder = OpenAiEmbedder::new(endpoint, "embed-small").unwrap().with_dimensions(0);
        assert_eq!(Embedder::model(&embedder), "local/embed-small");
        assert_eq!(embedder.dimensions(), None);
        assert_eq!(embedder.embed(&[]).await.unwrap(), Vec::<Vec<f32>>::new());
        let embedder = embedder.unusable_because("no API key for provider local".to_owned());
        let error = embedder.embed(&["text".to_owned()]).await.unwrap_err();
        assert_eq!(error, ProviderError::Config { message: "no API key for provider local".to_owned() });
    }
}
