//! One configured server and its life: idle → starting → ready, and on a crash → crashed
//! until its backoff delay passes, after which the next use starts it again. Starts are
//! serialized; calls to a ready server run concurrently.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam, ClientRequest,
    RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use squidbot_core::leaks::LeakScanner;

use crate::backoff::Backoff;
use crate::connect::{Connection, connect, short};
use crate::content::render;
use crate::error::McpError;
use crate::listing::{RemoteTool, list_raw, sanitize_listing};
use crate::settings::ServerSettings;

/// Where a server is in its life, as `squidbot status` and tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// `enabled = false`.
    Disabled,
    /// Not started yet (servers start on first use).
    Idle,
    /// Spawning, handshaking or listing tools.
    Starting,
    /// Connected, offering this many tools.
    Ready {
        /// Tools offered to the model.
        tools: usize,
    },
    /// Died or failed to start; starts again on the first use after `retry_in`.
    Crashed {
        /// What happened.
        reason: String,
        /// Time left before a restart is allowed.
        retry_in: Duration,
        /// Consecutive failures so far.
        failures: u32,
    },
}

/// The mutable part of a server.
struct Inner {
    phase: Phase,
    /// Consecutive failures; reset by a successful call.
    failures: u32,
    /// The last good listing, kept while the server is down so its tools stay visible and
    /// calls to them get a clear error instead of "unknown tool".
    tools: Vec<RemoteTool>,
}

enum Phase {
    Idle,
    Starting,
    Ready(Arc<Connection>),
    Crashed { reason: String, retry_at: Instant },
}

/// One server.
pub struct Server {
    settings: ServerSettings,
    backoff: Backoff,
    /// Secrets its inherited environment may not carry.
    withheld: LeakScanner,
    inner: Mutex<Inner>,
    start_gate: tokio::sync::Mutex<()>,
}

impl Server {
    /// A server that starts on first use.
    pub fn new(settings: ServerSettings, backoff: Backoff) -> Self {
        Self {
            settings,
            backoff,
            withheld: LeakScanner::default(),
            inner: Mutex::new(Inner { phase: Phase::Idle, failures: 0, tools: Vec::new() }),
            start_gate: tokio::sync::Mutex::new(()),
        }
    }

    /// The same server, not started, whose inherited environment carries none of the
    /// secrets `withheld` knows.
    pub fn withholding(&self, withheld: LeakScanner) -> Self {
        Self { withheld, ..Self::new(self.settings.clone(), self.backoff) }
    }

    /// Its checked configuration.
    pub fn settings(&self) -> &ServerSettings {
        &self.settings
    }

    /// Where it is now; never starts anything.
    pub fn state(&self) -> ServerState {
        if !self.settings.enabled {
            return ServerState::Disabled;
        }
        let inner = self.lock();
        match &inner.phase {
            Phase::Idle => ServerState::Idle,
            Phase::Starting => ServerState::Starting,
            Phase::Ready(_) => ServerState::Ready { tools: inner.tools.len() },
            Phase::Crashed { reason, retry_at } => ServerState::Crashed {
                reason: reason.clone(),
                retry_in: retry_at.saturating_duration_since(Instant::now()),
                failures: inner.failures,
            },
        }
    }

    /// The tools to offer now, starting the server if it is due. A server that can't start
    /// offers the tools of its last good listing (none if it never started).
    pub async fn tools(&self) -> Vec<RemoteTool> {
        if !self.settings.enabled {
            return Vec::new();
        }
        match self.ready().await {
            Ok(connection) => {
                if connection.tools_changed.swap(false, Ordering::AcqRel) {
                    self.relist(&connection).await;
                }
            }
            Err(error) => tracing::debug!(server = %self.settings.name, %error, "MCP server unavailable"),
        }
        self.lock().tools.clone()
    }

    /// Calls one of its tools; the text of the result, or why there is none.
    pub async fn call(
        &self,
        remote_name: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<String, McpError> {
        let arguments = match arguments {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => return Err(McpError::InvalidArguments(format!("expected a JSON object, got {other}"))),
        };
        let connection = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(McpError::Cancelled),
            connection = self.ready() => connection?,
        };
        let mut params = CallToolRequestParams::new(remote_name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let peer = connection.service.peer().clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await {
            Ok(handle) => handle,
            Err(error) if McpError::is_connection_loss(&error) => {
                return Err(self.crash_of(&connection, "the connection closed during a call".into()));
            }
            Err(error) => return Err(McpError::from_service(error)),
        };
        let id = handle.id.clone();
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            outcome = tokio::time::timeout(self.settings.call_timeout, handle.await_response()) => outcome.ok(),
        };
        let Some(outcome) = outcome else {
            // The server is told before the caller hears back, so the next call cannot
            // overtake the cancellation on the wire.
            tell_cancelled(&peer, id).await;
            if cancel.is_cancelled() {
                return Err(McpError::Cancelled);
            }
            tracing::info!(server = %self.settings.name, tool = remote_name, "MCP call timed out and was cancelled");
            return Err(McpError::TimedOut { server: self.settings.name.clone(), after: self.settings.call_timeout });
        };
        match outcome {
            Err(error) if McpError::is_connection_loss(&error) => {
                Err(self.crash_of(&connection, "the connection closed during a call".into()))
            }
            Err(error) => Err(McpError::from_service(error)),
            Ok(ServerResult::CallToolResult(result)) => {
                self.lock().failures = 0;
                match render(&result) {
                    (text, false) => Ok(text),
                    (text, true) => Err(McpError::ToolFailed(text)),
                }
            }
            Ok(ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_)) => Err(McpError::Protocol(
                "the server wants more input or started a background task, which squidbot does not support".into(),
            )),
            Ok(_) => Err(McpError::Protocol("the server answered a tool call with something else".into())),
        }
    }

    /// Closes the connection, if any, giving the server a moment to exit on its own.
    pub async fn shutdown(&self) {
        let connection = {
            let mut inner = self.lock();
            match std::mem::replace(&mut inner.phase, Phase::Idle) {
                Phase::Ready(connection) => Some(connection),
                other => {
                    inner.phase = other;
                    None
                }
            }
        };
        if let Some(connection) = connection
            && let Ok(mut connection) = Arc::try_unwrap(connection)
            && let Err(error) = connection.service.close_with_timeout(Duration::from_secs(5)).await
        {
            tracing::debug!(server = %self.settings.name, %error, "MCP server did not close cleanly");
        }
    }

    /// A live connection, starting the server when it is due.
    async fn ready(&self) -> Result<Arc<Connection>, McpError> {
        if !self.settings.enabled {
            return Err(McpError::Disabled(self.settings.name.clone()));
        }
        if let Some(connection) = self.current()? {
            return Ok(connection);
        }
        let _gate = self.start_gate.lock().await;
        // Another caller may have started it (or failed to) while this one waited.
        if let Some(connection) = self.current()? {
            return Ok(connection);
        }
        self.lock().phase = Phase::Starting;
        // A caller that gives up mid-start (the user stopped the turn) leaves it idle, due
        // to start again, rather than "starting" forever.
        let mut abandoned = AbandonedStart(Some(self));
        tracing::info!(server = %self.settings.name, transport = self.settings.transport.kind(), "starting MCP server");
        let started = tokio::time::timeout(self.settings.startup_timeout, self.start()).await;
        abandoned.0 = None;
        match started {
            Ok(Ok((connection, tools))) => {
                tracing::info!(server = %self.settings.name, tools = tools.len(), "MCP server ready");
                let mut inner = self.lock();
                inner.phase = Phase::Ready(connection.clone());
                inner.tools = tools;
                Ok(connection)
            }
            Ok(Err(reason)) => Err(self.fail(reason)),
            Err(_) => Err(self.fail(format!("it did not start within {}s", self.settings.startup_timeout.as_secs()))),
        }
    }

    /// Spawns or connects, then lists the tools.
    async fn start(&self) -> Result<(Arc<Connection>, Vec<RemoteTool>), String> {
        let connection = connect(&self.settings, &self.withheld).await?;
        let raw =
            list_raw(connection.service.peer()).await.map_err(|error| format!("can't list its tools: {error}"))?;
        let tools = sanitize_listing(&self.settings.name, &raw, &self.settings.allow);
        Ok((Arc::new(connection), tools))
    }

    /// Reads the tool list again after the server said it changed.
    async fn relist(&self, connection: &Connection) {
        let listed = tokio::time::timeout(self.settings.startup_timeout, list_raw(connection.service.peer())).await;
        match listed {
            Ok(Ok(raw)) => self.lock().tools = sanitize_listing(&self.settings.name, &raw, &self.settings.allow),
            Ok(Err(error)) => {
                tracing::warn!(server = %self.settings.name, %error, "can't list the MCP server's tools again")
            }
            Err(_) => tracing::warn!(server = %self.settings.name, "MCP server did not list its tools again in time"),
        }
    }

    /// `Ok(Some)` when ready, `Ok(None)` when a start is due, `Err` while backing off. A
    /// connection found closed counts as a crash.
    fn current(&self) -> Result<Option<Arc<Connection>>, McpError> {
        let closed = {
            let inner = self.lock();
            match &inner.phase {
                Phase::Ready(connection) if !connection.is_closed() => return Ok(Some(connection.clone())),
                Phase::Ready(connection) => connection.clone(),
                Phase::Idle | Phase::Starting => return Ok(None),
                Phase::Crashed { reason, retry_at } => {
                    let retry_in = retry_at.saturating_duration_since(Instant::now());
                    if retry_in.is_zero() {
                        return Ok(None);
                    }
                    return Err(McpError::Crashed {
                        server: self.settings.name.clone(),
                        reason: reason.clone(),
                        retry_in,
                    });
                }
            }
        };
        Err(self.crash_of(&closed, "the connection closed".into()))
    }

    /// Records that `connection` died. Only the first report about it counts; later ones
    /// (concurrent calls on the same dead connection) get the state it left.
    fn crash_of(&self, connection: &Arc<Connection>, reason: String) -> McpError {
        let mut inner = self.lock();
        let retry_in = match &inner.phase {
            Phase::Ready(current) if Arc::ptr_eq(current, connection) => {
                return self.record_failure(&mut inner, reason);
            }
            Phase::Crashed { retry_at, .. } => retry_at.saturating_duration_since(Instant::now()),
            Phase::Idle | Phase::Starting | Phase::Ready(_) => Duration::ZERO,
        };
        McpError::Crashed { server: self.settings.name.clone(), reason: short(&reason), retry_in }
    }

    /// Records a failure (a crash or a failed start) and schedules the restart.
    fn fail(&self, reason: String) -> McpError {
        let mut inner = self.lock();
        self.record_failure(&mut inner, reason)
    }

    fn record_failure(&self, inner: &mut Inner, reason: String) -> McpError {
        let reason = short(&reason);
        inner.failures = inner.failures.saturating_add(1);
        let retry_in = self.backoff.delay(inner.failures);
        inner.phase = Phase::Crashed { reason: reason.clone(), retry_at: Instant::now() + retry_in };
        tracing::warn!(
            server = %self.settings.name,
            failures = inner.failures,
            retry_in_ms = retry_in.as_millis() as u64,
            "MCP server crashed: {reason}"
        );
        McpError::Crashed { server: self.settings.name.clone(), reason, retry_in }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        squidbot_core::sync::lock(&self.inner)
    }
}

/// Resets a server whose start was abandoned (its future dropped) from starting to idle.
struct AbandonedStart<'a>(Option<&'a Server>);

impl Drop for AbandonedStart<'_> {
    fn drop(&mut self) {
        if let Some(server) = self.0.take() {
            let mut inner = server.lock();
            if matches!(inner.phase, Phase::Starting) {
                inner.phase = Phase::Idle;
            }
        }
    }
}

/// Sends `notifications/cancelled` for a request nobody waits for any more, and waits (a
/// little) until it is written.
async fn tell_cancelled(peer: &Peer<RoleClient>, id: RequestId) {
    let notification = CancelledNotification::new(CancelledNotificationParam::new(
        Some(id),
        Some("the caller stopped waiting".into()),
    ));
    let sent = tokio::time::timeout(Duration::from_secs(2), peer.send_notification(notification.into())).await;
    if !matches!(sent, Ok(Ok(()))) {
        tracing::debug!("MCP cancellation could not be delivered");
    }
}
