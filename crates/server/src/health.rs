//! `GET /health`: liveness for anyone, the state of each component for the owner and
//! admins; `GET /metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::people::Door;
use crate::{Gateway, Refusal, metrics};

/// The component report shared by `/health` and the protocol's `health` method, with the
/// credentials in any URL it shows redacted.
pub(crate) async fn report(gateway: &Gateway) -> Value {
    let gauges = gateway.gauges();
    let memory = match &gateway.services.memories {
        None => json!({"status": "disabled"}),
        Some(memories) => match memories.stats(&gateway.services.memory_context).await {
            Ok(stats) => json!({"status": "ok", "mode": memories.mode().describe(), "count": stats.memories}),
            Err(error) => json!({"status": "error", "error": error.to_string()}),
        },
    };
    let views = crate::channels::views(gateway);
    let channels: serde_json::Map<String, Value> =
        views.iter().map(|channel| (channel.name.clone(), crate::channels::channel_json(channel))).collect();
    let channel_down = views.iter().any(|channel| !channel.is_up());
    let degraded = memory["status"] == "error" || channel_down;
    let mut report = json!({
        "status": if degraded { "degraded" } else { "ok" },
        "ok": !degraded,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_secs": gauges.uptime.as_secs(),
        "uptimeMs": gauges.uptime.as_millis() as u64,
        "model": gateway.runner.agent().settings().model,
        "sessions_open": gauges.open_sessions,
        "components": {
            "agent": {"status": "ok", "model": gateway.runner.agent().settings().model, "active_turns": gauges.active_runs},
            "providers": gateway.services.providers,
            "memory": memory,
            "websocket": {"status": "ok", "connections": gauges.ws_connections},
            "channels": channels,
        },
    });
    crate::redact::urls_in(&mut report);
    report
}

/// `{"status":"ok"}` while the process serves, without credentials, so supervisors can
/// poll it. The component report (providers, channels, …) names what runs where, so it
/// needs a bearer credential of the owner or an admin; a wrong one is refused and counted
/// like any other.
pub async fn health(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let liveness = || Json(json!({"status": "ok"})).into_response();
    if !headers.contains_key(header::AUTHORIZATION) {
        return liveness();
    }
    match gateway.authorize(&headers, peer.ip(), Door::Http("health")).await {
        Ok(caller) if caller.is_admin() => Json(report(&gateway).await).into_response(),
        Ok(_) => liveness(),
        Err(Refusal::Unauthorized) => StatusCode::UNAUTHORIZED.into_response(),
        Err(Refusal::LockedOut(wait)) => locked_out(wait),
    }
}

/// 429 with the wait in `retry-after`.
fn locked_out(wait: std::time::Duration) -> Response {
    let mut response = StatusCode::TOO_MANY_REQUESTS.into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait.as_secs().max(1)));
    response
}

/// `GET /metrics`: Prometheus text format, behind the same credentials as the API unless
/// `gateway.metrics_open`.
pub async fn metrics(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if !gateway.doors.metrics_open {
        match gateway.authorize(&headers, peer.ip(), Door::Http("metrics")).await {
            // Everyone's usage is there: a person who is not an admin reads their own elsewhere.
            Ok(caller) if !caller.is_admin() => return StatusCode::FORBIDDEN.into_response(),
            Ok(_) => {}
            Err(Refusal::Unauthorized) => return StatusCode::UNAUTHORIZED.into_response(),
            Err(Refusal::LockedOut(wait)) => return locked_out(wait),
        }
    }
    let gauges = metrics::Gauges { people: gateway.people_gauges(), ..gateway.gauges() };
    let text = gateway.metrics.render(&gauges);
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}
