//! Classifying provider failures (status, headers, error body fields) into `ProviderError`.

use std::error::Error;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;
use squidbot_core::provider::ProviderError;

/// Characters of a provider's own message we keep in an error.
const MESSAGE_LIMIT: usize = 300;

/// Longest `retry-after` we believe; larger values are treated as unparseable.
const RETRY_AFTER_LIMIT_SECS: f64 = 86_400.0;

/// Shortens text to [`MESSAGE_LIMIT`] characters, marking the cut.
pub(crate) fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MESSAGE_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// An error and its sources as one line (reqwest hides the useful part in the sources).
pub(crate) fn describe_error(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Classifies a failure to send a request or read its response. Body read errors count as
/// transient even when reqwest calls them "decode" errors: they are broken connections.
pub(crate) fn from_transport_error(provider: &str, error: &reqwest::Error) -> ProviderError {
    let message = truncate(&describe_error(error));
    if error.is_builder() {
        ProviderError::Config { message: format!("can't build the request for provider {provider}: {message}") }
    } else {
        ProviderError::Transient { provider: provider.to_owned(), message }
    }
}

/// What a provider reported about a failed request, before classification.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Fault {
    /// HTTP status, when the failure came as a response (not inside a stream).
    pub status: Option<u16>,
    /// The error `type` field (`invalid_request_error`, `overloaded_error`, …).
    pub error_type: Option<String>,
    /// The error `code` field (`context_length_exceeded`, or a number on some servers).
    pub code: Option<String>,
    /// The provider's own message, already truncated.
    pub message: String,
    /// Delay the provider asked for.
    pub retry_after: Option<Duration>,
}

impl Fault {
    /// Reads an error response body in any of the shapes providers use.
    pub(crate) fn from_response(status: u16, headers: &HeaderMap, body: &[u8]) -> Self {
        let mut fault = match serde_json::from_slice::<Value>(body) {
            Ok(value) => Self::from_error_value(&value),
            Err(_) => Self::default(),
        };
        if fault.message.is_empty() {
            fault.message = truncate(&String::from_utf8_lossy(body));
        }
        if fault.message.is_empty() {
            fault.message = "no error message".to_owned();
        }
        fault.status = Some(status);
        fault.retry_after = retry_after(headers);
        fault
    }

    /// Reads an error document: `{"error": {...}}`, `{"error": "text"}`, `{"message": ...}`,
    /// `{"detail": ...}`, or a list holding one of those.
    pub(crate) fn from_error_value(value: &Value) -> Self {
        let value = match value {
            Value::Array(items) => items.first().unwrap_or(&Value::Null),
            other => other,
        };
        let inner = value.get("error").unwrap_or(value);
        let text_field = |field: &str| match inner.get(field) {
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Number(number)) => Some(number.to_string()),
            _ => None,
        };
        let message = match inner {
            Value::String(text) => text.clone(),
            _ => text_field("message")
                .or_else(|| text_field("detail"))
                .or_else(|| value.get("message").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default(),
        };
        Self {
            status: None,
            error_type: text_field("type").filter(|kind| kind != "error"),
            code: text_field("code"),
            message: truncate(&message),
            retry_after: None,
        }
    }

    /// Decides what the failure means for the caller.
    pub(crate) fn classify(self, provider: &str) -> ProviderError {
        let provider = provider.to_owned();
        let status = self.status.or_else(|| self.numeric_code());
        let message = match self.status {
            Some(code) => format!("HTTP {code}: {}", self.message),
            None => match &self.error_type {
                Some(kind) => format!("{kind}: {}", self.message),
                None => self.message.clone(),
            },
        };
        let kind = self.error_type.as_deref().unwrap_or_default();
        let code = self.code.as_deref().unwrap_or_default();
        match status {
            Some(401 | 403) => ProviderError::Auth { provider, message },
            Some(429) => ProviderError::RateLimited { provider, retry_after: self.retry_after, message },
            Some(400 | 413) if self.is_context_overflow() => ProviderError::ContextOverflow { provider, message },
            Some(408 | 425 | 500..=599) => ProviderError::Transient { provider, message },
            Some(400..=499) => ProviderError::Rejected { provider, message },
            Some(_) => ProviderError::InvalidResponse { provider, message: format!("unexpected {message}") },
            None if matches!(kind, "authentication_error" | "permission_error") || code == "invalid_api_key" => {
                ProviderError::Auth { provider, message }
            }
            None if kind == "rate_limit_error" || code == "rate_limit_exceeded" => {
                ProviderError::RateLimited { provider, retry_after: self.retry_after, message }
            }
            None if self.is_context_overflow() => ProviderError::ContextOverflow { provider, message },
            None if matches!(kind, "invalid_request_error" | "not_found_error") => {
                ProviderError::Rejected { provider, message }
            }
            None => ProviderError::Transient { provider, message },
        }
    }

    /// OpenRouter and others put the upstream HTTP status in `code` of in-stream errors.
    fn numeric_code(&self) -> Option<u16> {
        self.code.as_deref().and_then(|code| code.parse::<u16>().ok()).filter(|code| (400..600).contains(code))
    }

    /// The provider says the prompt does not fit: OpenAI's `context_length_exceeded` code,
    /// Anthropic's `request_too_large` type, or the wording every server uses for it.
    fn is_context_overflow(&self) -> bool {
        if matches!(self.code.as_deref(), Some("context_length_exceeded" | "context_window_exceeded"))
            || self.error_type.as_deref() == Some("request_too_large")
        {
            return true;
        }
        let message = self.message.to_lowercase();
        [
            "prompt is too long",
            "context length",
            "context_length",
            "context window",
            "maximum context",
            "input is too long",
            "too many input tokens",
        ]
        .iter()
        .any(|phrase| message.contains(phrase))
    }
}

/// Reads `retry-after-ms`, then `retry-after` (seconds or an HTTP date).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(milliseconds) = header("retry-after-ms").and_then(parse_seconds) {
        // parse_seconds read the value as seconds; it was milliseconds.
        return Some(milliseconds / 1000);
    }
    header("retry-after").and_then(|value| parse_retry_after(value, jiff::Timestamp::now()))
}

/// Parses a `retry-after` value relative to `now`; a date in the past means "now".
pub(crate) fn parse_retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Some(delay) = parse_seconds(value) {
        return Some(delay);
    }
    let date = jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(value).ok()?;
    let seconds = date.as_second().saturating_sub(now.as_second());
    Some(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

fn parse_seconds(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && (0.0..=RETRY_AFTER_LIMIT_SECS).contains(&seconds)).then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;

    fn classify(status: u16, body: Value) -> ProviderError {
        Fault::from_response(status, &HeaderMap::new(), body.to_string().as_bytes()).classify("p")
    }

    #[test]
    fn statuses_map_to_policies() {
        let body = json!({"error": {"message": "nope", "type": "x"}});
        assert!(matches!(classify(401, body.clone()), ProviderError::Auth { .. }));
        assert!(matches!(classify(403, body.clone()), ProviderError::Auth { .. }));
        assert!(matches!(classify(429, body.clone()), ProviderError::RateLimited { .. }));
        assert!(matches!(classify(400, body.clone()), ProviderError::Rejected { .. }));
        assert!(matches!(classify(404, body.clone()), ProviderError::Rejected { .. }));
        assert!(matches!(classify(500, body.clone()), ProviderError::Transient { .. }));
        assert!(matches!(classify(529, body.clone()), ProviderError::Transient { .. }));
        assert!(matches!(classify(302, body), ProviderError::InvalidResponse { .. }));
    }

    #[test]
    fn openai_context_length_code_is_overflow() {
        let body = json!({"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}});
        assert!(matches!(classify(400, body), ProviderError::ContextOverflow { .. }));
    }

    #[test]
    fn anthropic_prompt_too_long_is_overflow() {
        let body = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}});
        let error = classify(400, body);
        assert!(matches!(error, ProviderError::ContextOverflow { .. }));
        assert!(error.to_string().contains("prompt is too long: 210000"));
    }

    #[test]
    fn provider_message_is_kept_and_truncated() {
        let long = "x".repeat(1000);
        let error = classify(400, json!({"error": {"message": long}}));
        let ProviderError::Rejected { message, .. } = error else {
            panic!("expected Rejected, got {error:?}");
        };
        assert!(message.starts_with("HTTP 400: xxx"));
        assert!(message.chars().count() < 320);
    }

    #[test]
    fn unusual_error_shapes_still_yield_a_message() {
        let plain = Fault::from_error_value(&json!({"error": "model not found"}));
        assert_eq!(plain.message, "model not found");
        let detail = Fault::from_error_value(&json!({"detail": "bad input"}));
        assert_eq!(detail.message, "bad input");
        let listed = Fault::from_error_value(&json!([{"error": {"message": "quota", "code": 429}}]));
        assert_eq!(listed.code.as_deref(), Some("429"));
        let raw = Fault::from_response(502, &HeaderMap::new(), b"<html>Bad Gateway</html>");
        assert_eq!(raw.message, "<html>Bad Gateway</html>");
        assert!(matches!(raw.classify("p"), ProviderError::Transient { .. }));
    }

    #[test]
    fn in_stream_errors_classify_by_type_or_code() {
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert!(matches!(Fault::from_error_value(&overloaded).classify("p"), ProviderError::Transient { .. }));
        let limited = json!({"error": {"type": "rate_limit_error", "message": "slow down"}});
        assert!(matches!(Fault::from_error_value(&limited).classify("p"), ProviderError::RateLimited { .. }));
        let upstream = json!({"error": {"code": 401, "message": "key revoked"}});
        assert!(matches!(Fault::from_error_value(&upstream).classify("p"), ProviderError::Auth { .. }));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now: jiff::Timestamp = "2024-11-06T08:49:30Z".parse().unwrap();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 1.5 ", now), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Wed, 06 Nov 2024 08:49:37 GMT", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 06 Nov 2024 08:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn retry_after_header_is_attached_to_rate_limits() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        let error = Fault::from_response(429, &headers, b"{}").classify("p");
        assert_eq!(
            error,
            ProviderError::RateLimited {
                provider: "p".into(),
                retry_after: Some(Duration::from_secs(3)),
                message: "HTTP 429: {}".into(),
            }
        );
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
    }
}
