//! Plain data types shared across squidbot: no IO, no async, serde only.

pub mod access;
pub mod channel;
pub mod config;
pub mod hooks;
pub mod memory;
pub mod message;
pub mod people;
pub mod sandbox;
#[cfg(feature = "schema")]
pub mod schema;
pub mod secret;
pub mod session;
pub mod skill;
pub mod tool;

pub use message::{ChatMessage, ImageRef, ToolCall, Usage};
pub use secret::Secret;
pub use tool::ToolSpec;
