//! What a failed homeserver request means: the HTTP status, Matrix error code and
//! retry hints turned into a [`ChannelError`] at the source.

use std::error::Error as _;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use squidbot_channels::ChannelError;

/// How long to wait after a 429 that gives no retry hint at all.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// Whether a request authenticates the bot (login, whoami), where a refusal means the
/// configured credentials are wrong, or is an ordinary request, where a 403 only
/// refuses that one action (not allowed to post in a room).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// Login or whoami.
    Authentication,
    /// Everything else.
    Ordinary,
}

/// The standard Matrix error body.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    errcode: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
}

/// Classifies a non-success response of the request described by `action` (as in
/// "can't <action>").
///
/// - 429 (`M_LIMIT_EXCEEDED`): rate limited for the `Retry-After` header's seconds, else
///   the body's `retry_after_ms`, else five seconds;
/// - 5xx: transient;
/// - 401 (`M_UNKNOWN_TOKEN`, `M_MISSING_TOKEN`): fatal, the token is refused;
/// - 403 on login or whoami: fatal, the credentials are refused;
/// - other 4xx: rejected, this request won't work but others may.
pub(crate) fn classify(
    action: &str,
    kind: RequestKind,
    status: StatusCode,
    retry_after_header: Option<&str>,
    body: &[u8],
) -> ChannelError {
    let parsed: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
    let reason = describe(status, &parsed, body);
    let message = format!("can't {action}: {reason}");
    if status == StatusCode::TOO_MANY_REQUESTS {
        let from_header =
            retry_after_header.and_then(|value| value.trim().parse::<u64>().ok()).map(Duration::from_secs);
        let from_body = parsed.retry_after_ms.map(Duration::from_millis);
        return ChannelError::rate_limited(from_header.or(from_body).unwrap_or(DEFAULT_RETRY_AFTER), message);
    }
    if status.is_server_error() {
        return ChannelError::transient(message);
    }
    if status == StatusCode::UNAUTHORIZED {
        return ChannelError::fatal(message);
    }
    match kind {
        RequestKind::Authentication if status.is_client_error() => ChannelError::fatal(message),
        RequestKind::Authentication | RequestKind::Ordinary if status.is_client_error() => {
            ChannelError::rejected(message)
        }
        // 1xx and 3xx aren't answers a homeserver gives to these requests; redirects
        // are followed by the HTTP client.
        RequestKind::Authentication | RequestKind::Ordinary => ChannelError::transient(message),
    }
}

/// A request that got no HTTP answer (connection refused, reset, timed out): transient.
pub(crate) fn network(action: &str, error: &reqwest::Error) -> ChannelError {
    ChannelError::transient(format!("can't {action}: {}", chain(error)))
}

/// A success response whose body isn't what the API promises: transient (a proxy or a
/// homeserver in trouble), the request may work again.
pub(crate) fn malformed(action: &str, reason: impl std::fmt::Display) -> ChannelError {
    ChannelError::transient(format!("can't {action}: unexpected response: {reason}"))
}

/// An error and its sources, joined, since reqwest's own message leaves out the cause.
pub(crate) fn chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn describe(status: StatusCode, parsed: &ErrorBody, body: &[u8]) -> String {
    match (&parsed.errcode, &parsed.error) {
        (Some(code), Some(error)) => format!("{status} {code}: {error}"),
        (Some(code), None) => format!("{status} {code}"),
        (None, Some(error)) => format!("{status}: {error}"),
        (None, None) => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(200).collect();
            if text.is_empty() { status.to_string() } else { format!("{status}: {text}") }
        }
    }
}

#[cfg(test)]
mod tests {
    use squidbot_channels::ChannelErrorKind;

    use super::*;

    fn ordinary(status: u16, header: Option<&str>, body: &str) -> ChannelError {
        classify("send", RequestKind::Ordinary, StatusCode::from_u16(status).unwrap(), header, body.as_bytes())
    }

    #[test]
    fn rate_limits_wait_what_the_server_asks() {
        let body = r#"{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":2500}"#;
        let from_body = ordinary(429, None, body);
        assert_eq!(from_body.kind, ChannelErrorKind::RateLimited { retry_after: Duration::from_millis(2500) });
        assert_eq!(from_body.message, "can't send: 429 Too Many Requests M_LIMIT_EXCEEDED: Too many requests");
        let from_header = ordinary(429, Some("7"), body);
        assert_eq!(from_header.kind, ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(7) });
        let no_hint = ordinary(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), "{}");
        assert_eq!(no_hint.kind, ChannelErrorKind::RateLimited { retry_after: DEFAULT_RETRY_AFTER });
    }

    #[test]
    fn server_errors_are_transient() {
        let error = ordinary(502, None, "<html>bad gateway</html>");
        assert_eq!(error.kind, ChannelErrorKind::Transient);
        assert_eq!(error.message, "can't send: 502 Bad Gateway: <html>bad gateway</html>");
    }

    #[test]
    fn refused_tokens_are_fatal() {
        let error = ordinary(401, None, r#"{"errcode":"M_UNKNOWN_TOKEN","error":"Invalid access token passed."}"#);
        assert_eq!(error.kind, ChannelErrorKind::Fatal);
        assert!(error.message.contains("M_UNKNOWN_TOKEN"), "{error}");
    }

    #[test]
    fn client_errors_reject_one_request_but_refused_credentials_are_fatal() {
        for status in [400, 403, 404, 413] {
            assert_eq!(ordinary(status, None, r#"{"errcode":"M_FORBIDDEN"}"#).kind, ChannelErrorKind::Rejected);
        }
        let login = classify(
            "log in",
            RequestKind::Authentication,
            StatusCode::FORBIDDEN,
            None,
            br#"{"errcode":"M_FORBIDDEN"}"#,
        );
        assert_eq!(login.kind, ChannelErrorKind::Fatal);
        let busy = classify("log in", RequestKind::Authentication, StatusCode::SERVICE_UNAVAILABLE, None, b"");
        assert_eq!(busy.kind, ChannelErrorKind::Transient);
        assert_eq!(busy.message, "can't log in: 503 Service Unavailable");
    }
}
