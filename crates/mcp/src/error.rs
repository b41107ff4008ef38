//! Why talking to an MCP server failed, classified where it happens. Every variant reaches
//! the model as a tool result it can read; none ends the turn or the gateway.

use std::time::Duration;

use rmcp::ServiceError;
use squidbot_core::tool::ToolError;

/// A failure of one server or one call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server died (or never came up) and may start again after a delay.
    #[error("MCP server {server} crashed ({reason}); restarting in {}s", whole_seconds(*.retry_in))]
    Crashed {
        /// Server name.
        server: String,
        /// What happened.
        reason: String,
        /// Time until the next start is allowed.
        retry_in: Duration,
    },
    /// A call ran past `timeout_secs` and was cancelled.
    #[error("MCP server {server} did not answer within {}s; the call was cancelled", whole_seconds(*.after))]
    TimedOut {
        /// Server name.
        server: String,
        /// The limit that passed.
        after: Duration,
    },
    /// The user stopped the turn while the call ran; the server was told to stop.
    #[error("cancelled by the user")]
    Cancelled,
    /// The model's arguments can't be sent (not a JSON object).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The server answered with a JSON-RPC error (unknown tool, invalid arguments…).
    #[error("the MCP server refused: {0}")]
    Refused(String),
    /// The tool ran and reported a failure; its own words.
    #[error("{0}")]
    ToolFailed(String),
    /// The server broke the protocol (unreadable or unexpected answer).
    #[error("the MCP server sent an unusable answer: {0}")]
    Protocol(String),
    /// The connection closed before the server answered.
    #[error("the connection to the MCP server closed")]
    ConnectionLost,
    /// The arguments carry a secret and the server is reached over HTTP: the call is not
    /// sent.
    #[error("Refused: the arguments carry a secret ({kind}); secrets never leave for the HTTP MCP server {server}")]
    SecretInArguments {
        /// Server name.
        server: String,
        /// What the secret looks like.
        kind: &'static str,
    },
    /// The server is configured with `enabled = false`.
    #[error("MCP server {0} is disabled in the configuration")]
    Disabled(String),
}

impl McpError {
    /// Classifies an rmcp failure.
    pub(crate) fn from_service(error: ServiceError) -> Self {
        match error {
            ServiceError::McpError(data) => Self::Refused(data.message.into_owned()),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => Self::ConnectionLost,
            other => Self::Protocol(other.to_string()),
        }
    }

    /// True for failures that mean the connection is gone.
    pub(crate) fn is_connection_loss(error: &ServiceError) -> bool {
        matches!(error, ServiceError::TransportClosed | ServiceError::TransportSend(_))
    }
}

impl From<McpError> for ToolError {
    fn from(error: McpError) -> Self {
        ToolError::RespondToModel(error.to_string())
    }
}

/// Seconds rounded to the nearest whole one, at least 1 so a short wait never reads "0s".
fn whole_seconds(duration: Duration) -> u64 {
    (duration.as_millis().saturating_add(500) / 1000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_happens_next() {
        let crashed = McpError::Crashed {
            server: "files".into(),
            reason: "the process exited".into(),
            retry_in: Duration::from_millis(1_050),
        };
        assert_eq!(crashed.to_string(), "MCP server files crashed (the process exited); restarting in 1s");
        let timed_out = McpError::TimedOut { server: "files".into(), after: Duration::from_secs(60) };
        assert_eq!(
            ToolError::from(timed_out),
            ToolError::RespondToModel("MCP server files did not answer within 60s; the call was cancelled".into())
        );
    }
}
