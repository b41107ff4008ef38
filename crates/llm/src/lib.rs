//! squidbot's LLM gateway: OpenAI and Anthropic adapters over HTTP + SSE, provider presets
//! as data, and the router that resolves `provider/model` ids, retries and falls back.

pub mod anthropic;
mod fault;
pub mod http;
pub mod openai;
pub mod presets;
pub mod router;
pub mod sse;

pub use anthropic::AnthropicProvider;
pub use http::Endpoint;
pub use openai::OpenAiProvider;
pub use presets::{Preset, preset, presets};
pub use router::{ConfigIssue, KeySource, ProviderInfo, Router, split_model_id};
