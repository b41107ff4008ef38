//! What the gateway shows of its chat channels (`status`, `/health`, `/metrics`), and
//! `POST /webhook/<name>`, handed to the webhook channel of that name.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use squidbot_core::BoxFuture;

use crate::Gateway;

/// One channel as the gateway reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelView {
    /// The channel's name (`[channels.<name>]`).
    pub name: String,
    /// Its platform (`telegram`, ...).
    pub kind: String,
    /// `starting`, `running`, `restarting`, `failed` or `stopped`.
    pub state: String,
    /// Whether its receive loop runs.
    pub up: bool,
    /// The last failure.
    pub last_error: Option<String>,
    /// Restarts after failures.
    pub restarts: u32,
    /// Messages received, duplicates not counted.
    pub received: u64,
    /// Messages answered with a turn.
    pub answered: u64,
    /// Messages not answered under the access policy.
    pub denied: u64,
    /// Redelivered messages dropped.
    pub duplicates: u64,
    /// Messages and edits sent.
    pub sent: u64,
    /// Sends that failed for good.
    pub send_failures: u64,
}

impl ChannelView {
    pub(crate) fn json(&self) -> Value {
        json!({
            "name": self.name,
            "kind": self.kind,
            "status": self.state,
            "up": self.up,
            "lastError": self.last_error,
            "restarts": self.restarts,
            "received": self.received,
            "answered": self.answered,
            "denied": self.denied,
            "duplicates": self.duplicates,
            "sent": self.sent,
            "sendFailures": self.send_failures,
        })
    }
}

/// Lists the channels now.
pub type ChannelLister = Arc<dyn Fn() -> Vec<ChannelView> + Send + Sync>;

/// The answer to a webhook request.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookResponse {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON body.
    pub body: Value,
}

/// Takes `POST /webhook/<name>` requests (checks their signature, runs the turn).
pub trait WebhookHandler: Send + Sync {
    /// Handles one request to the webhook `name`.
    fn handle(&self, name: String, headers: HeaderMap, body: Bytes) -> BoxFuture<'static, WebhookResponse>;
}

/// The gateway's channels, for reports and webhooks.
#[derive(Clone)]
pub struct ChannelServices {
    /// Lists the channels.
    pub list: ChannelLister,
    /// Handles webhook requests; `None` when no webhook channel is configured.
    pub webhooks: Option<Arc<dyn WebhookHandler>>,
}

pub(crate) fn views(gateway: &Gateway) -> Vec<ChannelView> {
    gateway.services.channels.as_ref().map(|channels| (channels.list)()).unwrap_or_default()
}

/// `POST /webhook/{name}`: authenticated by the webhook's own signature, not the
/// gateway's credentials, so the platforms that call it need no gateway token.
pub async fn webhook(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(handler) = gateway.services.channels.as_ref().and_then(|channels| channels.webhooks.clone()) else {
        return (StatusCode::NOT_FOUND, axum::Json(json!({"error": format!("no webhook named {name}")})))
            .into_response();
    };
    let response = handler.handle(name, headers, body).await;
    if response.status.is_client_error() {
        gateway.metrics.error("webhook");
    }
    (response.status, axum::Json(response.body)).into_response()
}
