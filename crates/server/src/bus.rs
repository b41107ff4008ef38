//! The agent bus inside the gateway: the assistant's live route (a message starts a turn
//! on the main session, or on the session that spawned the worker sending it), the `user`
//! route (a message shown to the session's people and kept in the session), the running
//! workers as targets, the loop that keeps the routes' heartbeats and delivers trigger
//! files of live targets every second, and the `bus.send` / `bus.health` methods.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_bus::{Ack, Bus, Delivery, Priority, Route, RouteError, SendError, SendRequest, Sender, WorkerRoutes};
use squidbot_core::delegation::Delegator;
use squidbot_core::runs::{RunError, RunRequest, Runner, UserMessage};
use tokio_util::sync::CancellationToken;

use crate::Gateway;
use crate::ws::frame::{ErrorCode, MethodError};
use crate::ws::methods::MAIN_SESSION;
use crate::ws::params::NonBlank;

/// How often trigger files are read and the route's heartbeat is renewed.
const POLL: Duration = Duration::from_secs(1);

/// The assistant as a bus target. A delivery starts a turn with the envelope as the user
/// message, under the message's correlation id, on the assistant's main session (on the
/// session that spawned the worker, when a worker sends); the acknowledgement is the run
/// starting (queued behind a running turn of the session). An `[URGENT]` message first
/// aborts the session's running turn, which stops at its next safe point, so the urgent
/// one runs next.
pub struct AssistantRoute {
    runner: Arc<Runner>,
    delegation: Option<Arc<Delegator>>,
}

impl AssistantRoute {
    /// The route of the assistant run by `runner`, whose sub-agents (if any) `delegation`
    /// runs.
    pub fn new(runner: Arc<Runner>, delegation: Option<Arc<Delegator>>) -> Self {
        Self { runner, delegation }
    }
}

impl Route for AssistantRoute {
    async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
        let session_key = self
            .delegation
            .as_ref()
            .and_then(|delegation| delegation.pool().snapshot(&delivery.message.from))
            .map_or_else(|| MAIN_SESSION.to_owned(), |worker| worker.owner);
        if delivery.message.priority == Priority::Urgent {
            let stopped = self.runner.abort(&session_key, None);
            if !stopped.is_empty() {
                tracing::info!(runs = ?stopped, from = %delivery.message.from, "urgent bus message interrupts the running turn");
            }
        }
        let request = RunRequest {
            session_key,
            input: delivery.text.clone(),
            images: Vec::new(),
            origin: "bus".to_owned(),
            run_id: None,
            correlation_id: Some(delivery.message.correlation_id.clone()),
            actor: None,
        };
        match self.runner.start(request) {
            Ok(handle) => Ok(Ack { detail: Some(handle.run_id) }),
            Err(RunError::ShuttingDown) => Err(RouteError::Unavailable("the gateway is shutting down".to_owned())),
            Err(RunError::AlreadyRunning(id)) => Err(RouteError::Unavailable(format!("run {id} is already running"))),
            Err(RunError::Invalid(reason)) => Err(RouteError::Rejected(reason)),
        }
    }
}

/// The people of a session as a bus target (`user`): the message is shown to the clients
/// watching the session at once, as a `chat` event of its own, and kept in the session as
/// an entry of its own. It goes to the sender's conversation (a worker's owner session),
/// the main session when the sender has none. The acknowledgement is the event going out.
pub struct UserRoute {
    runner: Arc<Runner>,
}

impl UserRoute {
    /// The route to the people of `runner`'s sessions.
    pub fn new(runner: Arc<Runner>) -> Self {
        Self { runner }
    }
}

impl Route for UserRoute {
    async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
        let message = &delivery.message;
        let session_key = message.session.clone().unwrap_or_else(|| MAIN_SESSION.to_owned());
        self.runner.post_user_message(UserMessage {
            session_key: session_key.clone(),
            message_id: message.id.clone(),
            from: message.from.clone(),
            role: message.role.clone(),
            priority: message.priority.as_str().to_owned(),
            text: delivery.text.clone(),
            correlation_id: message.correlation_id.clone(),
        });
        Ok(Ack { detail: Some(format!("shown in session {session_key}")) })
    }
}

/// Registers the assistant's and the user's routes and the running workers, and runs the
/// poll loop until `shutdown`; the routes are unregistered when the loop ends, so later
/// messages wait in trigger files.
pub(crate) fn start(gateway: &Arc<Gateway>, shutdown: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    let bus = gateway.services.bus.clone()?;
    let assistant = AssistantRoute::new(gateway.runner.clone(), gateway.delegation().cloned());
    let route = match bus.register("assistant", Arc::new(assistant)) {
        Ok(route) => route,
        Err(error) => {
            tracing::error!(%error, "can't register the assistant on the bus");
            return None;
        }
    };
    let user = match bus.register(squidbot_bus::USER, Arc::new(UserRoute::new(gateway.runner.clone()))) {
        Ok(route) => Some(route),
        Err(error) => {
            tracing::error!(%error, "can't register the user on the bus");
            None
        }
    };
    let workers = gateway.delegation().map(|delegation| {
        let workers = WorkerRoutes::new(bus.clone());
        delegation.observe(workers.clone());
        workers
    });
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    route.heartbeat();
                    if let Some(user) = &user {
                        user.heartbeat();
                    }
                    if let Some(workers) = &workers {
                        workers.heartbeat();
                    }
                    bus.ingest_live().await;
                }
            }
        }
        drop(route);
        drop(user);
        bus.drain().await;
    }))
}

/// A `bus.*` request.
#[derive(Debug)]
pub(crate) enum BusRequest {
    /// `bus.send`.
    Send(BusSendParams),
    /// `bus.health`.
    Health(BusHealthParams),
}

/// `bus.send` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BusSendParams {
    /// A role, alias or worker id.
    pub(crate) target: NonBlank,
    /// The message (empty when absent).
    pub(crate) message: Option<String>,
    /// `ack`, `urgent`, `fyi` or `task`; normal when absent.
    pub(crate) priority: Option<String>,
    /// `user` (the default) or a role the operator speaks for.
    pub(crate) from: Option<String>,
    /// Ties the message to earlier ones.
    pub(crate) correlation_id: Option<String>,
    /// Where a message to `user` shows (the main session by default).
    pub(crate) session_key: Option<String>,
}

/// `bus.health` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BusHealthParams {
    /// A role, alias or worker id.
    pub(crate) target: NonBlank,
}

/// Runs a `bus.*` request.
pub(crate) async fn call(gateway: &Gateway, request: BusRequest) -> Result<Value, MethodError> {
    match request {
        BusRequest::Send(params) => send(gateway, params).await,
        BusRequest::Health(params) => health(gateway, params),
    }
}

/// The agent bus, or why there is none.
pub(crate) fn bus(gateway: &Gateway) -> Result<&Arc<Bus>, MethodError> {
    gateway
        .services
        .bus
        .as_ref()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "the agent bus is not enabled on this gateway"))
}

/// A refused send as `bus.send` answers it: `details.status` holds the protocol's code.
pub(crate) fn error_json(error: &SendError) -> MethodError {
    let code = match error {
        SendError::Undeliverable { .. } | SendError::NoRoute { .. } => ErrorCode::Unavailable,
        SendError::InvalidTarget { .. }
        | SendError::OwnerBindingViolation { .. }
        | SendError::EmptyMessage
        | SendError::TooLong { .. }
        | SendError::Rejected { .. } => ErrorCode::InvalidRequest,
    };
    MethodError::new(code, error.to_string())
        .with_details(json!({"code": error.code().to_uppercase(), "status": error.code()}))
}

/// `bus.send {target, message, priority?, from?, correlationId?, sessionKey?}`: `from` is
/// `user` (the default) or a role the operator speaks for; `sessionKey` is where a message
/// to `user` shows (the main session by default).
async fn send(gateway: &Gateway, params: BusSendParams) -> Result<Value, MethodError> {
    let bus = bus(gateway)?;
    let priority = match params.priority.as_deref() {
        None => Priority::Normal,
        Some(name) => Priority::parse(name).ok_or_else(|| {
            MethodError::invalid(format!("unknown priority {name:?}; use ack, urgent, fyi or task"))
                .with_details(json!({"code": "INVALID_PRIORITY"}))
        })?,
    };
    let sender = match params.from.as_deref() {
        None => Sender::user(),
        Some(name) => match bus.directory().canonical(name) {
            Some(canonical) if canonical == squidbot_bus::USER => Sender::user(),
            Some(canonical) => Sender::role(canonical),
            None => {
                return Err(MethodError::invalid(format!("unknown sender {name:?}; use user or a role"))
                    .with_details(json!({"code": "INVALID_SENDER"})));
            }
        },
    };
    let request = SendRequest {
        target: params.target.0,
        body: params.message.unwrap_or_default(),
        priority,
        correlation_id: params.correlation_id,
        session: params.session_key,
    };
    bus.send(&sender, request).await.map(|result| result.to_json()).map_err(|error| error_json(&error))
}

/// `bus.health {target}`.
fn health(gateway: &Gateway, params: BusHealthParams) -> Result<Value, MethodError> {
    let bus = bus(gateway)?;
    let report = bus.health(params.target.as_str());
    Ok(json!({
        "target": report.target,
        "canonical": report.canonical,
        "health": report.health.as_str(),
        "lastSeenMs": report.last_seen_ms,
        "live": bus.live_targets(),
        "aliases": bus.live_aliases().into_iter().map(|(alias, target)| json!({"alias": alias, "target": target})).collect::<Vec<_>>(),
    }))
}
