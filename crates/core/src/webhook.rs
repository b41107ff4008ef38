//! The port of inbound webhooks: a platform or script posts to the gateway, the server
//! hands the request to a [`WebhookHandler`] as plain data (no HTTP library's types) and
//! sends back the status and JSON body it answers with.

use std::future::Future;

use serde_json::Value;

use crate::BoxFuture;

/// HTTP status codes the webhook handlers answer with, by name.
pub mod status {
    /// The reply is in the body.
    pub const OK: u16 = 200;
    /// Taken; the reply comes later (to the callback URL, if one was given).
    pub const ACCEPTED: u16 = 202;
    /// The body is not a message.
    pub const BAD_REQUEST: u16 = 400;
    /// The signature or its timestamp was refused.
    pub const UNAUTHORIZED: u16 = 401;
    /// No webhook of that name.
    pub const NOT_FOUND: u16 = 404;
    /// A message with the same id is being answered.
    pub const CONFLICT: u16 = 409;
    /// The body is larger than allowed.
    pub const PAYLOAD_TOO_LARGE: u16 = 413;
    /// Too many messages are waiting.
    pub const SERVICE_UNAVAILABLE: u16 = 503;
}

/// One request to `POST /webhook/<channel>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// The webhook channel it names.
    pub channel: String,
    /// Its headers, each name once (lower case) with its first value as text; headers
    /// whose first value is not text are left out.
    pub headers: Vec<(String, String)>,
    /// The request body, unread.
    pub body: Vec<u8>,
}

impl WebhookRequest {
    /// The value of header `name` (case doesn't matter), if the request has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(header, _)| header.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// The answer to a webhook request.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookResponse {
    /// The HTTP status code (see [`status`]).
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

impl WebhookResponse {
    /// Whether the status says the caller's request was at fault (4xx).
    pub fn is_client_error(&self) -> bool {
        (400..500).contains(&self.status)
    }
}

/// Takes webhook requests: checks who sent them, runs the turn and answers. Use
/// [`DynWebhookHandler`] where a trait object is needed.
pub trait WebhookHandler: Send + Sync {
    /// Handles one request.
    fn handle(&self, request: WebhookRequest) -> impl Future<Output = WebhookResponse> + Send + '_;
}

/// Object-safe companion of [`WebhookHandler`], implemented for every `WebhookHandler`.
pub trait DynWebhookHandler: Send + Sync {
    /// See [`WebhookHandler::handle`].
    fn handle_boxed(&self, request: WebhookRequest) -> BoxFuture<'_, WebhookResponse>;
}

impl<T: WebhookHandler> DynWebhookHandler for T {
    fn handle_boxed(&self, request: WebhookRequest) -> BoxFuture<'_, WebhookResponse> {
        Box::pin(self.handle(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_found_whatever_their_case() {
        let request = WebhookRequest {
            channel: "hook".to_owned(),
            headers: vec![("x-squidbot-timestamp".to_owned(), "12".to_owned())],
            body: Vec::new(),
        };
        assert_eq!(request.header("X-Squidbot-Timestamp"), Some("12"));
        assert_eq!(request.header("x-squidbot-signature"), None);
    }

    #[test]
    fn only_4xx_statuses_are_client_errors() {
        let response = |status| WebhookResponse { status, body: Value::Null };
        assert!(response(status::UNAUTHORIZED).is_client_error());
        assert!(!response(status::ACCEPTED).is_client_error());
        assert!(!response(status::SERVICE_UNAVAILABLE).is_client_error());
    }
}
