//! What the gateway shows of its chat channels (`status`, `/health`, `/metrics`), and
//! `POST /webhook/<name>`, handed to core's webhook port as plain data.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use squidbot_core::webhook::{DynWebhookHandler, WebhookRequest};
use squidbot_types::channel::ChannelHealth;

use crate::Gateway;

/// One channel as `status` and `/health` show it (the wire names are the protocol's).
pub(crate) fn channel_json(channel: &ChannelHealth) -> Value {
    json!({
        "name": channel.name,
        "kind": channel.kind,
        "status": channel.state.describe(),
        "up": channel.is_up(),
        "lastError": channel.last_error,
        "restarts": channel.restarts,
        "received": channel.received,
        "answered": channel.answered,
        "denied": channel.denied,
        "duplicates": channel.duplicates,
        "sent": channel.sent,
        "sendFailures": channel.send_failures,
    })
}

/// Lists the channels' health now.
pub type ChannelLister = Arc<dyn Fn() -> Vec<ChannelHealth> + Send + Sync>;

/// The gateway's channels, for reports and webhooks.
#[derive(Clone)]
pub struct ChannelServices {
    /// Lists the channels.
    pub list: ChannelLister,
    /// Handles webhook requests; `None` when no webhook channel is configured.
    pub webhooks: Option<Arc<dyn DynWebhookHandler>>,
}

pub(crate) fn views(gateway: &Gateway) -> Vec<ChannelHealth> {
    gateway.services.channels.as_ref().map(|channels| (channels.list)()).unwrap_or_default()
}

/// The request as the webhook port takes it: each header once, with its first value
/// (headers whose first value is not text are left out, as if missing).
fn webhook_request(name: String, headers: &HeaderMap, body: Bytes) -> WebhookRequest {
    let headers = headers
        .keys()
        .filter_map(|header| {
            let value = headers.get(header)?.to_str().ok()?;
            Some((header.as_str().to_owned(), value.to_owned()))
        })
        .collect();
    WebhookRequest { channel: name, headers, body: body.to_vec() }
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
    let response = handler.handle_boxed(webhook_request(name, &headers, body)).await;
    if response.is_client_error() {
        gateway.metrics.error("webhook");
    }
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(response.body)).into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use squidbot_types::channel::ChannelState;

    use super::*;

    #[test]
    fn a_channel_renders_with_the_protocols_field_names() {
        let mut channel = ChannelHealth::new("work", "slack");
        channel.state = ChannelState::Restarting { attempt: 3, retry_in: Duration::from_secs(20) };
        channel.last_error = Some("can't connect: reset".to_owned());
        channel.send_failures = 2;
        assert_eq!(
            channel_json(&channel).to_string(),
            r#"{"answered":0,"denied":0,"duplicates":0,"kind":"slack","lastError":"can't connect: reset","name":"work","received":0,"restarts":0,"sendFailures":2,"sent":0,"status":"restarting (attempt 3, in 20 s)","up":false}"#
        );
    }

    #[test]
    fn the_webhook_port_gets_each_header_once_with_its_first_text_value() {
        let mut headers = HeaderMap::new();
        headers.append("x-squidbot-timestamp", "12".parse().unwrap());
        headers.append("x-squidbot-timestamp", "13".parse().unwrap());
        headers.insert("x-binary", axum::http::HeaderValue::from_bytes(b"\xff").unwrap());
        let request = webhook_request("hook".to_owned(), &headers, Bytes::from_static(b"{}"));
        assert_eq!(request.channel, "hook");
        assert_eq!(request.headers, vec![("x-squidbot-timestamp".to_owned(), "12".to_owned())]);
        assert_eq!(request.header("x-binary"), None);
        assert_eq!(request.body, b"{}");
    }
}
