//! The `connect` request that opens every connection: its params as OpenClaw clients send
//! them, and the checks of protocol range, role and credentials, each refusal typed with
//! the error frame it answers and the close code that follows it.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use squidbot_types::people::Actor;

use super::frame::{ErrorCode, MethodError};
use super::params::{Lenient, ParamsError, decode};
use super::{Access, Connection, PROTOCOL_MAX, PROTOCOL_MIN};
use crate::people::{ADMIN_SCOPE, Caller, READ_SCOPE, WRITE_SCOPE};

/// `connect` params. Every field is read leniently (a value of the wrong type reads as
/// absent): clients fill them in many ways, and a connect has never been refused for a
/// mistyped one; what matters is checked below.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConnectParams {
    /// The oldest protocol the client speaks; the newest one here when absent.
    pub(crate) min_protocol: Lenient<u64>,
    /// The newest protocol the client speaks; `minProtocol` when absent.
    pub(crate) max_protocol: Lenient<u64>,
    /// Who is connecting, for the log.
    pub(crate) client: Lenient<ClientInfo>,
    /// Only `operator` is served.
    pub(crate) role: Lenient<String>,
    /// `operator.read`, `operator.write`, `operator.admin`; items that are not strings are
    /// skipped, and `operator.read` alone is granted when absent.
    pub(crate) scopes: Lenient<Vec<Lenient<String>>>,
    /// The gateway's shared token or password.
    pub(crate) auth: Lenient<ConnectAuth>,
}

/// `connect.client`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ClientInfo {
    /// `cli`, `openclaw-tui`, `openclaw-control-ui`, `webchat`, `test`, ...
    pub(crate) id: Lenient<String>,
    /// The client's version.
    pub(crate) version: Lenient<String>,
    /// `linux`, `darwin`, ...
    pub(crate) platform: Lenient<String>,
    /// `cli`, `ui`, `webchat`, `backend`, `node`, `worker`, `probe`, `test`.
    pub(crate) mode: Lenient<String>,
    /// One running copy of the client.
    pub(crate) instance_id: Lenient<String>,
}

/// `connect.auth`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ConnectAuth {
    /// The gateway token (token auth).
    pub(crate) token: Lenient<String>,
    /// The gateway password (password auth).
    pub(crate) password: Lenient<String>,
}

/// Which credential was wrong, as `error.details.code` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthFailure {
    TokenMissing,
    TokenMismatch,
    PasswordMissing,
    PasswordMismatch,
}

impl AuthFailure {
    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::TokenMissing => "AUTH_TOKEN_MISSING",
            Self::TokenMismatch => "AUTH_TOKEN_MISMATCH",
            Self::PasswordMissing => "AUTH_PASSWORD_MISSING",
            Self::PasswordMismatch => "AUTH_PASSWORD_MISMATCH",
        }
    }
}

/// Why a `connect` was refused; the connection closes after the error frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The first request was another method.
    #[error("the first request must be `connect`, not `{0}`")]
    NotConnect(String),
    /// The params could not be read.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// `minProtocol` above `maxProtocol`.
    #[error("minProtocol {min} is above maxProtocol {max}")]
    InvertedRange {
        /// `minProtocol`.
        min: u64,
        /// `maxProtocol`.
        max: u64,
    },
    /// No protocol in common.
    #[error("protocol {min}..{max} is not supported; this gateway speaks {PROTOCOL_MIN} to {PROTOCOL_MAX}")]
    ProtocolMismatch {
        /// `minProtocol`.
        min: u64,
        /// `maxProtocol`.
        max: u64,
    },
    /// A role other than `operator`.
    #[error("role {0:?} is not supported; connect as \"operator\"")]
    Role(String),
    /// Too many failed attempts from the peer's address; retry after the delay.
    #[error("too many failed attempts from this address")]
    LockedOut(Duration),
    /// Wrong or missing credentials.
    #[error("unauthorized: wrong or missing gateway credentials")]
    Unauthorized(AuthFailure),
}

impl ConnectError {
    /// The WebSocket close code and reason sent after the error frame.
    pub(crate) fn close(&self) -> (u16, &'static str) {
        match self {
            Self::NotConnect(_) => (1008, "connect first"),
            Self::Params(_) | Self::InvertedRange { .. } | Self::Role(_) => (1008, "bad connect"),
            Self::ProtocolMismatch { .. } => (1002, "protocol mismatch"),
            Self::LockedOut(_) => (1008, "rate limited"),
            Self::Unauthorized(_) => (1008, "unauthorized"),
        }
    }
}

impl From<&ConnectError> for MethodError {
    fn from(error: &ConnectError) -> Self {
        let message = error.to_string();
        match error {
            ConnectError::NotConnect(_)
            | ConnectError::Params(_)
            | ConnectError::InvertedRange { .. }
            | ConnectError::Role(_) => MethodError::invalid(message),
            ConnectError::ProtocolMismatch { .. } => MethodError::invalid(message)
                .with_details(json!({"code": "PROTOCOL_MISMATCH", "min": PROTOCOL_MIN, "max": PROTOCOL_MAX})),
            ConnectError::LockedOut(wait) => MethodError::new(ErrorCode::RateLimited, message)
                .with_details(json!({"code": "RATE_LIMITED", "retryAfterMs": wait.as_millis() as u64})),
            ConnectError::Unauthorized(failure) => {
                MethodError::new(ErrorCode::Forbidden, message).with_details(json!({"code": failure.as_str()}))
            }
        }
    }
}

impl Connection {
    /// Checks a `connect` request: protocol range, role, credentials, scopes.
    pub(super) async fn connect(&mut self, params: Map<String, Value>) -> Result<(), ConnectError> {
        let params: ConnectParams = decode(params)?;
        let min = params.min_protocol.0.unwrap_or(PROTOCOL_MAX);
        let max = params.max_protocol.0.unwrap_or(min);
        if min > max {
            return Err(ConnectError::InvertedRange { min, max });
        }
        if max < PROTOCOL_MIN || min > PROTOCOL_MAX {
            return Err(ConnectError::ProtocolMismatch { min, max });
        }
        self.protocol = max.min(PROTOCOL_MAX);
        if let Some(role) = params.role.0
            && role != "operator"
        {
            return Err(ConnectError::Role(role));
        }
        let auth = params.auth.0.unwrap_or_default();
        let (token, password) = (auth.token.0.as_deref(), auth.password.0.as_deref());
        let caller = match self.gateway.authorize_connect(self.peer.ip(), token, password).await {
            Ok(caller) => caller,
            Err(crate::Refusal::LockedOut(wait)) => return Err(ConnectError::LockedOut(wait)),
            Err(crate::Refusal::Unauthorized) => {
                let failure = match (&self.gateway.auth, token, password) {
                    (crate::Auth::Token(_), None, _) => AuthFailure::TokenMissing,
                    (crate::Auth::Token(_), Some(_), _) => AuthFailure::TokenMismatch,
                    (_, _, None) => AuthFailure::PasswordMissing,
                    _ => AuthFailure::PasswordMismatch,
                };
                return Err(ConnectError::Unauthorized(failure));
            }
        };
        let requested: Vec<String> = match params.scopes.0 {
            Some(scopes) => scopes.into_iter().filter_map(|scope| scope.0).collect(),
            None => vec![READ_SCOPE.to_owned()],
        };
        // The owner's connection gets what it asks for, as always; a person's what their
        // role allows of it, never more.
        let scopes = match caller.person() {
            None => requested,
            Some(actor) => crate::people::granted_scopes(actor, &requested),
        };
        self.access = access(&scopes, &caller);
        self.scopes = scopes;
        if let Some(actor) = caller.person() {
            tracing::info!(peer = %self.peer, user = actor.user.as_deref().unwrap_or("?"), role = %actor.role, "a person logged in");
        }
        self.caller = caller;
        let client = params.client.0.unwrap_or_default();
        tracing::info!(
            peer = %self.peer,
            client = client.id.0.as_deref().unwrap_or("?"),
            client_version = client.version.0.as_deref().unwrap_or("?"),
            client_mode = client.mode.0.as_deref().unwrap_or("?"),
            client_platform = client.platform.0.as_deref().unwrap_or("?"),
            client_instance = client.instance_id.0.as_deref().unwrap_or("?"),
            protocol = self.protocol,
            "WebSocket client connected"
        );
        Ok(())
    }
}

/// What `scopes` let `caller` call: the admin methods only with `operator.admin` held by
/// an admin, writing with `operator.write` or `.admin`.
fn access(scopes: &[String], caller: &Caller) -> Access {
    if scopes.iter().any(|scope| scope == ADMIN_SCOPE) && caller.is_admin() {
        Access::Admin
    } else if scopes.iter().any(|scope| scope == WRITE_SCOPE || scope == ADMIN_SCOPE) {
        Access::Write
    } else {
        Access::Read
    }
}

impl Connection {
    /// Reads a person's user again (before each request and at each tick): false when
    /// they were disabled or removed, so the connection ends; a changed role takes effect
    /// at once (scopes only shrink: more needs a new login). The owner's is always fine.
    pub(super) fn still_allowed(&mut self) -> bool {
        let Some(actor) = self.caller.person() else { return true };
        let (Some(people), Some(id)) = (self.gateway.people(), actor.user.as_deref()) else { return true };
        match people.stores().directory.user(id) {
            Ok(Some(user)) if !user.disabled => {
                let fresh = Actor::of(&user);
                if fresh != *actor {
                    self.scopes = crate::people::granted_scopes(&fresh, &self.scopes);
                    self.caller = Caller::Person(fresh);
                    self.access = access(&self.scopes, &self.caller);
                }
                true
            }
            Ok(_) => {
                tracing::info!(peer = %self.peer, user = id, "closing a disabled user's connection");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "can't read a connected person's user again; keeping what they had");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests;
