//! Test doubles for squidbot: a scripted LLM server that speaks the real OpenAI and Anthropic wire formats and checks every request it receives, plus a deterministic fake embedding model on `POST /v1/embeddings`.
//!
//! ```no_run
//! # async fn example() {
//! use squidbot_testkit::{Reply, ScriptedLlm};
//! let llm = ScriptedLlm::start().await;
//! llm.push(Reply::tool_call("read_file", serde_json::json!({"path": "notes.md"})));
//! llm.push(Reply::text("The notes say hello."));
//! // point the client under test at llm.base_url(), run it, then:
//! llm.assert_clean();
//! # }
//! ```

mod anthropic;
mod embeddings;
mod exchange;
pub mod fake_discord;
pub mod fake_slack;
pub mod fake_telegram;
mod fixed_reply;
pub mod invariants;
pub mod mail;
mod openai;
mod script;
mod server;
mod sse;
pub mod synapse;

pub use embeddings::{DEFAULT_EMBEDDING_DIMENSIONS, fake_embedding};
pub use fixed_reply::FixedReply;
pub use script::{ErrorKind, RecordedRequest, Reply, ScriptedCall, Wire};
pub use server::{ScriptedLlm, ServerError, run_fixed_reply, run_fixed_reply_with};
