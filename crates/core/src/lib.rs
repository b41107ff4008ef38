//! squidbot's core: the agent loop, context assembly and session model, plus the ports
//! (traits) that adapters implement. No HTTP, SQLite or filesystem code lives here.

pub mod access;
pub mod agent;
pub mod attachments;
pub mod backoff;
pub mod clock;
pub mod compactor;
pub mod context;
pub mod delegation;
pub mod duration;
pub mod events;
pub mod freshness;
pub mod heartbeat;
pub mod hooks;
pub mod housekeeping;
pub mod html;
pub mod ids;
pub mod jobs;
pub mod leaks;
pub mod memory;
pub mod people;
pub mod provider;
pub mod random;
pub mod runs;
pub mod sandbox;
pub mod schedule;
pub mod scheduler;
#[cfg(test)]
mod scripted;
pub mod secrets;
pub mod session;
pub mod skill_use;
pub mod store;
pub mod sync;
pub mod text;
pub mod tool;
pub mod webhook;
pub mod workspace;

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future: what the object-safe companions of our async ports return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use squidbot_types as types;
