//! `GET /health`: liveness and what the gateway serves.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::Gateway;

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
