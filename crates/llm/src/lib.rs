//! squidbot's LLM gateway: OpenAI and Anthropic adapters over HTTP + SSE, the OpenAI
//! embeddings adapter, provider presets as data, and the router that resolves
//! `provider/model` ids, retries and falls back.

pub mod anthropic;
pub mod embeddings;
mod fault;
pub mod http;
pub mod images;
pub mod openai;
pub mod presets;
pub mod router;
pub mod sse;

pub use anthropic::AnthropicProvider;
pub use embeddings::OpenAiEmbedder;
pub use http::Endpoint;
pub use openai::OpenAiProvider;
pub use presets::{Preset, preset, presets};
pub use router::{ConfigIssue, KeySource, ProviderInfo, Router, embedder_from_config, split_model_id};
