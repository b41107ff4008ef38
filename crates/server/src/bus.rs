//! The agent bus inside the gateway: the assistant's live route (a message starts a turn
//! on the main session), the loop that keeps the route's heartbeat and delivers trigger
//! files of live targets every second, and the `bus.send` / `bus.health` methods.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use squidbot_bus::{Ack, Bus, Delivery, Priority, Route, RouteError, SendError, SendRequest, Sender};
use squidbot_core::runs::{RunError, RunRequest, Runner};
use tokio_util::sync::CancellationToken;

use crate::Gateway;
use crate::ws::frame::{ErrorCode, MethodError, optional_str, required_str};
use crate::ws::methods::MAIN_SESSION;

/// How often trigger files are read and the route's heartbeat is renewed.
const POLL: Duration = Duration::from_secs(1);

/// The assistant as a bus target. A delivery starts a turn on the assistant's main
/// session with the envelope as the user message; the acknowledgement is the run starting
/// (queued behind a running turn of the session). An `[URGENT]` message first aborts the
/// session's running turn, which stops at its next safe point, so the urgent one runs next.
pub struct AssistantRoute {
    runner: Arc<Runner>,
}

impl AssistantRoute {
    /// The route of the assistant run by `runner`.
    pub fn new(runner: Arc<Runner>) -> Self {
        Self { runner }
    }
}

impl Route for AssistantRoute {
    async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
        if delivery.message.priority == Priority::Urgent {
            let stopped = self.runner.abort(MAIN_SESSION, None);
            if !stopped.is_empty() {
                tracing::info!(runs = ?stopped, from = %delivery.message.from, "urgent bus message interrupts the running turn");
            }
        }
        let request = RunRequest {
            session_key: MAIN_SESSION.to_owned(),
            input: delivery.text.clone(),
            origin: "bus".to_owned(),
            run_id: None,
        };
        match self.runner.start(request) {
            Ok(handle) => Ok(Ack { detail: Some(handle.run_id) }),
            Err(RunError::ShuttingDown) => Err(RouteError::Unavailable("the gateway is shutting down".to_owned())),
            Err(RunError::AlreadyRunning(id)) => Err(RouteError::Unavailable(format!("run {id} is already running"))),
            Err(RunError::Invalid(reason)) => Err(RouteError::Rejected(reason)),
        }
    }
}

/// Registers the assistant's route and runs the poll loop until `shutdown`; the route is
/// unregistered when the loop ends, so later messages wait in trigger files.
pub(crate) fn start(gateway: &Arc<Gateway>, shutdown: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    let bus = gateway.services.bus.clone()?;
    let route = match bus.register("assistant", Arc::new(AssistantRoute::new(gateway.runner.clone()))) {
        Ok(route) => route,
        Err(error) => {
            tracing::error!(%error, "can't register the assistant on the bus");
            return None;
        }
    };
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    route.heartbeat();
                    bus.ingest_live().await;
                }
            }
        }
        drop(route);
        bus.drain().await;
    }))
}

fn bus(gateway: &Gateway) -> Result<&Arc<Bus>, MethodError> {
    gateway
        .services
        .bus
        .as_ref()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "the agent bus is not enabled on this gateway"))
}

/// A refused send as `bus.send` answers it: `details.status` holds the protocol's code.
pub(crate) fn error_json(error: &SendError) -> MethodError {
    let code = match error {
        SendError::Undeliverable { .. } => ErrorCode::Unavailable,
        SendError::InvalidTarget { .. }
        | SendError::OwnerBindingViolation { .. }
        | SendError::EmptyMessage
        | SendError::TooLong { .. }
        | SendError::Rejected { .. } => ErrorCode::InvalidRequest,
    };
    MethodError::new(code, error.to_string())
        .with_details(json!({"code": error.code().to_uppercase(), "status": error.code()}))
}

/// `bus.send {target, message, priority?, from?, correlationId?}`: `from` is `user` (the
/// default) or a role the operator speaks for.
pub(crate) async fn send(gateway: &Gateway, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let bus = bus(gateway)?;
    let target = required_str(params, "target")?;
    let body = optional_str(params, "message")?.unwrap_or_default();
    let priority = match optional_str(params, "priority")? {
        None => Priority::Normal,
        Some(name) => Priority::parse(name).ok_or_else(|| {
            MethodError::invalid(format!("unknown priority {name:?}; use ack, urgent, fyi or task"))
                .with_details(json!({"code": "INVALID_PRIORITY"}))
        })?,
    };
    let sender = match optional_str(params, "from")? {
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
        target: target.to_owned(),
        body: body.to_owned(),
        priority,
        correlation_id: optional_str(params, "correlationId")?.map(str::to_owned),
    };
    bus.send(&sender, request).await.map(|result| result.to_json()).map_err(|error| error_json(&error))
}

/// `bus.health {target}`.
pub(crate) fn health(gateway: &Gateway, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let bus = bus(gateway)?;
    let target = required_str(params, "target")?;
    let report = bus.health(target);
    Ok(json!({
        "target": report.target,
        "canonical": report.canonical,
        "health": report.health.as_str(),
        "lastSeenMs": report.last_seen_ms,
        "live": bus.live_targets(),
    }))
}
