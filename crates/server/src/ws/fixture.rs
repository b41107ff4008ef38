//! A bare gateway (no memory, scheduler, bus or sub-agents) and one connection to it, for
//! the unit tests of the request layer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::ws::Message;
use squidbot_core::agent::{Agent, AgentSettings};
use squidbot_core::clock::SystemClock;
use squidbot_core::events::EventHub;
use squidbot_core::provider::{Completion, CompletionRequest, DynLlmProvider, LlmProvider, ProviderError, StreamSink};
use squidbot_core::runs::Runner;
use squidbot_core::store::memory::MemorySessionStore;
use squidbot_core::tool::ToolRegistry;
use squidbot_core::workspace::MemoryWorkspace;
use tokio::sync::mpsc;

use super::outbox::{OUT_QUEUE, Outbox};
use super::{Access, Connection, PROTOCOL_MAX, translate};
use crate::{Auth, Gateway, Services};

/// A model that refuses every call; the request layer never reaches it.
pub(crate) struct Refusing;

impl LlmProvider for Refusing {
    async fn complete<'a>(
        &'a self,
        _request: &'a CompletionRequest,
        _sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        Err(ProviderError::Auth { provider: "fake".into(), message: "no model in this test".into() })
    }
}

/// The agent the server's tests run: `model` answering as `fake/model`, no tools, sessions
/// in memory, the owner's context.
pub(crate) fn test_agent(model: Arc<dyn DynLlmProvider>, max_turns: u32) -> Agent {
    let settings = AgentSettings {
        model: "fake/model".into(),
        max_turns,
        max_tokens: 100,
        temperature: None,
        context_window: 10_000,
        stream: true,
        workspace: PathBuf::from("/nonexistent"),
        runtime: squidbot_core::context::RuntimeInfo::default(),
        context: "owner".into(),
    };
    Agent::new(
        model,
        ToolRegistry::default(),
        Arc::new(MemorySessionStore::default()),
        Arc::new(MemoryWorkspace::new()),
        Arc::new(SystemClock),
        settings,
    )
}

/// A gateway guarded by `auth` with nothing but a runner.
pub(super) fn gateway(auth: Auth) -> Arc<Gateway> {
    let runner = Runner::new(Arc::new(test_agent(Arc::new(Refusing), 1)), EventHub::new());
    Gateway::new(runner, auth, vec!["fake/model".into()], Services::default())
}

/// A connection to `gateway` before its handshake, and the frames it queues.
pub(super) fn connection(gateway: Arc<Gateway>) -> (Connection, mpsc::Receiver<Message>) {
    let (sender, queue) = mpsc::channel(OUT_QUEUE);
    let connection = Connection {
        gateway,
        peer: SocketAddr::from(([127, 0, 0, 1], 40_000)),
        conn_id: "conn-1".into(),
        outbox: Outbox::new(sender),
        protocol: PROTOCOL_MAX,
        access: Access::Read,
        scopes: Vec::new(),
        caller: crate::people::Caller::Owner,
        watched: None,
        runs: translate::Runs::default(),
    };
    (connection, queue)
}
