//! HTTP plumbing shared by the wire adapters: endpoints, headers, timeouts, body and event reading.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use squidbot_core::provider::{Completion, ProviderError, StreamSink};
use squidbot_types::Secret;

use crate::fault::{self, Fault};
use crate::sse::{SseEvent, SseParser};

/// How long to wait for a TCP (and TLS) connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default wait for a response head and between stream chunks.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Largest non-streamed body we accept; a model reply is far smaller.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Largest error body we read; the message is in the first few hundred bytes.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Where and how to reach one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// Provider name used in errors and logs (`openrouter`, `local`).
    pub provider: String,
    /// Base URL such as `https://api.openai.com/v1` (a trailing `/` is ignored).
    pub api_base: String,
    /// Key sent with every request; no auth header when `None`.
    pub api_key: Option<Secret>,
    /// Extra headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Wait for the response head, and the longest silence allowed inside a stream.
    pub timeout: Duration,
    /// Whether the models behind it take images; when false, images are left out of
    /// requests (the message text still names the saved files).
    pub vision: bool,
}

impl Endpoint {
    /// An endpoint without key or extra headers and the default timeout.
    pub fn new(provider: impl Into<String>, api_base: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            api_base: api_base.into(),
            api_key: None,
            headers: BTreeMap::new(),
            timeout: DEFAULT_TIMEOUT,
            vision: false,
        }
    }

    /// Sets whether images are sent.
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, api_key: Secret) -> Self {
        self.api_key = Some(api_key);
        self
    }

    /// Sets the response and stream-idle timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Builds the HTTP client every adapter uses (connection pool, connect timeout, TLS roots).
pub(crate) fn http_client() -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).build().map_err(|error| ProviderError::Config {
        message: format!("can't build the HTTP client: {}", fault::describe_error(&error)),
    })
}

/// How an adapter presents its key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyHeader {
    /// `authorization: Bearer <key>` (OpenAI and compatibles).
    Bearer,
    /// The key as the whole value of a named header (`x-api-key`).
    Named(&'static str),
}

/// How one event stream ended.
#[derive(Debug)]
pub(crate) enum StreamEnd {
    /// The handler saw the wire's finish marker.
    Finished,
    /// The connection closed first; the adapter decides whether that was complete.
    Closed {
        /// Events delivered before the close.
        events: usize,
        /// First line that was not SSE at all, when any.
        unknown_line: Option<String>,
    },
}

/// What the event handler wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// The finish marker arrived; stop reading.
    Done,
}

/// One provider's HTTP side: client, base URL, headers and timeout.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    client: reqwest::Client,
    provider: String,
    api_base: String,
    headers: HeaderMap,
    timeout: Duration,
    vision: bool,
}

impl Transport {
    /// Prepares headers once; fails when the key or a header can't be sent over HTTP.
    pub(crate) fn new(
        client: reqwest::Client,
        endpoint: Endpoint,
        key_header: KeyHeader,
        fixed_headers: &[(&'static str, &'static str)],
    ) -> Result<Self, ProviderError> {
        let provider = endpoint.provider;
        let mut headers = HeaderMap::new();
        for (name, value) in fixed_headers {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        if let Some(api_key) = endpoint.api_key.filter(|key| !key.is_empty()) {
            let (name, value) = match key_header {
                KeyHeader::Bearer => (reqwest::header::AUTHORIZATION, format!("Bearer {}", api_key.expose())),
                KeyHeader::Named(name) => (HeaderName::from_static(name), api_key.expose().to_owned()),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| ProviderError::Config {
                message: format!(
                    "can't use the API key of provider {provider}: it holds characters not allowed in an HTTP header"
                ),
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        for (name, value) in &endpoint.headers {
            let header_name = HeaderName::from_bytes(name.as_bytes());
            let header_value = HeaderValue::from_str(value);
            let (Ok(header_name), Ok(header_value)) = (header_name, header_value) else {
                return Err(ProviderError::Config {
                    message: format!("can't send header {name:?} to provider {provider}: invalid header name or value"),
                });
            };
            headers.insert(header_name, header_value);
        }
        Ok(Self {
            client,
            api_base: endpoint.api_base.trim_end_matches('/').to_owned(),
            provider,
            headers,
            timeout: endpoint.timeout,
            vision: endpoint.vision,
        })
    }

    /// Provider name for errors.
    pub(crate) fn provider(&self) -> &str {
        &self.provider
    }

    /// Whether requests carry images.
    pub(crate) fn vision(&self) -> bool {
        self.vision
    }

    /// POSTs JSON to `{api_base}/{path}`; a non-2xx answer becomes a classified error.
    pub(crate) async fn post<Body: serde::Serialize + ?Sized>(
        &self,
        path: &str,
        body: &Body,
    ) -> Result<reqwest::Response, ProviderError> {
        let url = format!("{}/{path}", self.api_base);
        // Written as bytes directly (a `Value`'s `to_string` goes through `fmt`, slower).
        let body = serde_json::to_vec(body).map_err(|error| ProviderError::Config {
            message: format!("can't encode the request to {}: {error}", self.provider),
        })?;
        let request =
            self.client.post(url).headers(self.headers.clone()).header(CONTENT_TYPE, "application/json").body(body);
        let response = match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_) => {
                return Err(self.transient(format!("no response within {}", format_duration(self.timeout))));
            }
            Ok(Err(error)) => return Err(fault::from_transport_error(&self.provider, &error)),
            Ok(Ok(response)) => response,
        };
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = self.read_limited(response, MAX_ERROR_BODY_BYTES).await.unwrap_or_default();
        Err(Fault::from_response(status, &headers, &body).classify(&self.provider))
    }

    /// Reads the next piece of body, failing when the server goes quiet for too long.
    pub(crate) async fn next_chunk(&self, response: &mut reqwest::Response) -> Result<Option<Bytes>, ProviderError> {
        match tokio::time::timeout(self.timeout, response.chunk()).await {
            Err(_) => Err(self.transient(format!("no data for {}", format_duration(self.timeout)))),
            Ok(Err(error)) => Err(self.transient(format!(
                "the connection broke mid-response: {}",
                fault::truncate(&fault::describe_error(&error))
            ))),
            Ok(Ok(chunk)) => Ok(chunk),
        }
    }

    /// Reads a whole (non-streamed) body.
    pub(crate) async fn read_body(&self, response: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
        self.read_limited(response, MAX_BODY_BYTES).await
    }

    async fn read_limited(&self, mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            if body.len() + chunk.len() > limit {
                return Err(ProviderError::InvalidResponse {
                    provider: self.provider.clone(),
                    message: format!("response body larger than {limit} bytes"),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Feeds every server-sent event to `handle` until it says [`Flow::Done`] or the body ends.
    pub(crate) async fn read_events(
        &self,
        mut response: reqwest::Response,
        mut handle: impl FnMut(SseEvent) -> Result<Flow, ProviderError>,
    ) -> Result<StreamEnd, ProviderError> {
        let mut parser = SseParser::new();
        let mut events = 0;
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            let parsed = parser.push(&chunk).map_err(|error| ProviderError::InvalidResponse {
                provider: self.provider.clone(),
                message: error.to_string(),
            })?;
            for event in parsed {
                events += 1;
                if handle(event)? == Flow::Done {
                    return Ok(StreamEnd::Finished);
                }
            }
        }
        if let Some(event) = parser.finish() {
            events += 1;
            if handle(event)? == Flow::Done {
                return Ok(StreamEnd::Finished);
            }
        }
        Ok(StreamEnd::Closed { events, unknown_line: parser.first_unknown_line().map(str::to_owned) })
    }

    /// The error for a stream that closed before its finish marker: garbage when nothing
    /// in it was an event, a cut stream otherwise.
    pub(crate) fn closed_early(&self, events: usize, unknown_line: Option<String>, marker: &str) -> ProviderError {
        match unknown_line {
            Some(line) if events == 0 => ProviderError::InvalidResponse {
                provider: self.provider.clone(),
                message: format!("not an event stream: {}", fault::truncate(&line)),
            },
            _ => self.transient(format!("the stream ended before {marker}")),
        }
    }

    /// A failure that may go away on retry.
    pub(crate) fn transient(&self, message: String) -> ProviderError {
        ProviderError::Transient { provider: self.provider.clone(), message }
    }

    /// An answer we could not understand.
    pub(crate) fn invalid(&self, message: String) -> ProviderError {
        ProviderError::InvalidResponse { provider: self.provider.clone(), message }
    }

    /// Parses JSON from the provider, naming what failed and showing the start of it.
    /// Reads a whole (non-streamed) response, parses it with `parse` and hands its text
    /// to the sink in one piece.
    pub(crate) async fn read_completion(
        &self,
        response: reqwest::Response,
        sink: &dyn StreamSink,
        parse: impl FnOnce(&Transport, &Value) -> Result<Completion, ProviderError>,
    ) -> Result<Completion, ProviderError> {
        let body = self.read_body(response).await?;
        let value = self.parse_json("the response", &body)?;
        let completion = parse(self, &value)?;
        if !completion.content.is_empty() {
            sink.text_delta(&completion.content);
        }
        Ok(completion)
    }

    pub(crate) fn parse_json(&self, what: &str, text: &[u8]) -> Result<Value, ProviderError> {
        serde_json::from_slice(text).map_err(|error| {
            self.invalid(format!(
                "can't parse {what} as JSON ({error}): {}",
                fault::truncate(&String::from_utf8_lossy(text))
            ))
        })
    }
}

/// True when the response is an event stream (a server may answer JSON despite `stream`).
pub(crate) fn is_event_stream(response: &reqwest::Response) -> bool {
    match response.headers().get(CONTENT_TYPE) {
        Some(value) => {
            value.to_str().map(|text| text.to_ascii_lowercase().contains("text/event-stream")).unwrap_or(false)
        }
        None => true,
    }
}

/// `"30s"`, or milliseconds for short test timeouts.
pub(crate) fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn bad_keys_and_headers_are_config_errors_that_hide_the_key() {
        let client = http_client().unwrap();
        let endpoint = Endpoint::new("p", "http://127.0.0.1:1/v1").with_api_key(Secret::new("sk\nsecret"));
        let error = Transport::new(client.clone(), endpoint, KeyHeader::Bearer, &[]).unwrap_err();
        assert!(matches!(error, ProviderError::Config { .. }));
        assert!(!error.to_string().contains("secret"));
        let mut endpoint = Endpoint::new("p", "http://127.0.0.1:1/v1");
        endpoint.headers.insert("bad header".into(), "x".into());
        let error = Transport::new(client, endpoint, KeyHeader::Named("x-api-key"), &[]).unwrap_err();
        assert!(error.to_string().contains("bad header"));
    }

    #[test]
    fn cut_streams_and_garbage_are_told_apart() {
        let transport = Transport::new(
            http_client().unwrap(),
            Endpoint::new("p", "http://127.0.0.1:1/v1/"),
            KeyHeader::Bearer,
            &[],
        )
        .unwrap();
        assert_eq!(transport.api_base, "http://127.0.0.1:1/v1");
        assert!(matches!(
            transport.closed_early(0, Some("<html>".into()), "[DONE]"),
            ProviderError::InvalidResponse { .. }
        ));
        assert!(matches!(transport.closed_early(3, None, "[DONE]"), ProviderError::Transient { .. }));
        assert!(matches!(transport.closed_early(0, None, "[DONE]"), ProviderError::Transient { .. }));
    }
}
