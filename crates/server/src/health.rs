//! `GET /health`: liveness and what the gateway serves.

use std::sync::Arc;

use axum::Json;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{Gateway, Refusal};

/// Always 200 while the process serves; no auth, so supervisors can poll it.
pub async fn health(State(gateway): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_secs": gateway.started.elapsed().as_secs(),
        "model": gateway.agent.settings().model,
        "sessions_open": gateway.sessions.open_count(),
    }))
}

/// `GET /metrics`: Prometheus text format, behind the same bearer token as the API.
pub async fn metrics(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match gateway.authorize(&headers, peer.ip()) {
        Ok(()) => {}
        Err(Refusal::Unauthorized) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(Refusal::LockedOut(_)) => return StatusCode::TOO_MANY_REQUESTS.into_response(),
    }
    let text = gateway.metrics.render(gateway.sessions.open_count(), gateway.started.elapsed());
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}
