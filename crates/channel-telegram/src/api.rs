//! The Bot API over HTTP: method calls with JSON or multipart bodies, file downloads,
//! and what a failed call means ([`Failure`], classified into a `ChannelError`).

use std::time::Duration;

use reqwest::multipart::Form;
use serde::de::DeserializeOwned;
use serde_json::Value;
use squidbot_channels::ChannelError;
use squidbot_types::Secret;

use crate::wire::Envelope;

/// How long an ordinary call (send, edit, getFile) may take.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a file transfer (download or upload) may take.
pub(crate) const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The wait asked for by a 429 that names none.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A failed Bot API call, as much as the adapter needs to decide what to do.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No answer: connection refused or reset, timeout.
    Network(String),
    /// Telegram answered with an error envelope (or a non-JSON error page).
    Api {
        /// The `error_code`, which Telegram keeps equal to the HTTP status.
        status: u16,
        /// Telegram's `description`.
        description: String,
        /// `parameters.retry_after` (or the `Retry-After` header) of a 429.
        retry_after: Option<Duration>,
        /// `parameters.migrate_to_chat_id`: the group became a supergroup.
        migrate_to_chat_id: Option<i64>,
    },
    /// A successful status with a body that isn't the documented JSON.
    Malformed(String),
}

impl Failure {
    /// The HTTP status Telegram answered with, if it answered.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Failure::Api { status, .. } => Some(*status),
            Failure::Network(_) | Failure::Malformed(_) => None,
        }
    }

    /// A 400 whose description says so. Telegram's only way to tell these 400s apart is
    /// the description text, so this is matched here, where the answer is read.
    fn is_bad_request_saying(&self, words: &str) -> bool {
        match self {
            Failure::Api { status: 400, description, .. } => description.to_lowercase().contains(words),
            Failure::Api { .. } | Failure::Network(_) | Failure::Malformed(_) => false,
        }
    }

    /// The HTML of a text or caption was refused ("can't parse entities").
    pub(crate) fn is_unparsable_html(&self) -> bool {
        self.is_bad_request_saying("can't parse entities")
    }

    /// An edit that changes nothing ("message is not modified").
    pub(crate) fn is_not_modified(&self) -> bool {
        self.is_bad_request_saying("message is not modified")
    }

    /// What the failure means for the caller, as `can't <action>: <reason>`.
    pub(crate) fn into_channel_error(self, action: &str) -> ChannelError {
        match self {
            Failure::Network(detail) => ChannelError::transient(format!("can't {action}: {detail}")),
            Failure::Malformed(detail) => {
                ChannelError::transient(format!("can't {action}: Telegram's answer is malformed: {detail}"))
            }
            Failure::Api { status, description, retry_after, migrate_to_chat_id } => {
                let mut message = format!("can't {action}: Telegram answered {status} ({description})");
                if let Some(chat_id) = migrate_to_chat_id {
                    tracing::warn!(chat_id, "the group was upgraded to a supergroup; its new id is {chat_id}");
                    message.push_str(&format!("; the group's new id is {chat_id}"));
                }
                match status {
                    429 => ChannelError::rate_limited(retry_after.unwrap_or(DEFAULT_RETRY_AFTER), message),
                    // 401 is a refused token; Telegram answers 404 to a token it can't
                    // even parse (our method names always exist).
                    401 | 404 => ChannelError::fatal(message),
                    400..=499 => ChannelError::rejected(message),
                    _ => ChannelError::transient(message),
                }
            }
        }
    }
}

/// Outcome of a download that respects a size cap.
#[derive(Debug)]
pub(crate) enum Download {
    /// The whole file.
    Complete(Vec<u8>),
    /// The file is larger than the cap (at least this many bytes).
    TooLarge(u64),
}

/// A Bot API client for one bot token.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl Api {
    /// A client for `base` (`https://api.telegram.org`) and the bot's token.
    pub(crate) fn new(base: &str, token: Secret) -> Result<Self, ChannelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| ChannelError::fatal(format!("can't build the Telegram HTTP client: {error}")))?;
        Ok(Self { http, base: base.trim_end_matches('/').to_owned(), token })
    }

    fn method_url(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.base, self.token.expose())
    }

    /// Calls `method` with JSON parameters and decodes its `result`.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        parameters: &Value,
        timeout: Duration,
    ) -> Result<T, Failure> {
        let request = self.http.post(self.method_url(method)).timeout(timeout).json(parameters);
        decode(request.send().await).await
    }

    /// Calls `method` with a multipart body (file uploads) and decodes its `result`.
    pub(crate) async fn call_multipart<T: DeserializeOwned>(&self, method: &str, form: Form) -> Result<T, Failure> {
        let request = self.http.post(self.method_url(method)).timeout(TRANSFER_TIMEOUT).multipart(form);
        decode(request.send().await).await
    }

    /// Downloads a file by the `file_path` `getFile` gave, stopping past `cap` bytes.
    pub(crate) async fn download(&self, file_path: &str, cap: u64) -> Result<Download, Failure> {
        let url = format!("{}/file/bot{}/{file_path}", self.base, self.token.expose());
        let mut response =
            self.http.get(url).timeout(TRANSFER_TIMEOUT).send().await.map_err(|error| network(&error))?;
        let status = response.status();
        if !status.is_success() {
            return Err(Failure::Api {
                status: status.as_u16(),
                description: format!("the file download was refused ({status})"),
                retry_after: None,
                migrate_to_chat_id: None,
            });
        }
        if let Some(length) = response.content_length()
            && length > cap
        {
            return Ok(Download::TooLarge(length));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| network(&error))? {
            bytes.extend_from_slice(&chunk);
            let received = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            if received > cap {
                return Ok(Download::TooLarge(received));
            }
        }
        Ok(Download::Complete(bytes))
    }
}

/// A network error without its URL, which holds the token.
fn network(error: &reqwest::Error) -> Failure {
    let mut detail = error.to_string();
    if let Some(url) = error.url() {
        detail = detail.replace(url.as_str(), "<bot API URL>");
    }
    let detail = if error.is_timeout() { format!("no answer in time ({detail})") } else { detail };
    Failure::Network(detail)
}

/// Reads an answer: the `result` of an `ok` envelope, or the failure it describes.
async fn decode<T: DeserializeOwned>(sent: Result<reqwest::Response, reqwest::Error>) -> Result<T, Failure> {
    let response = sent.map_err(|error| network(&error))?;
    let status = response.status();
    let retry_after_header = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    let body = response.bytes().await.map_err(|error| network(&error))?;
    let envelope = match serde_json::from_slice::<Envelope>(&body) {
        Ok(envelope) => envelope,
        Err(error) if status.is_success() => return Err(Failure::Malformed(error.to_string())),
        Err(_not_json) => {
            return Err(Failure::Api {
                status: status.as_u16(),
                description: status.canonical_reason().unwrap_or("no description").to_owned(),
                retry_after: retry_after_header.map(Duration::from_secs),
                migrate_to_chat_id: None,
            });
        }
    };
    if !envelope.ok || !status.is_success() {
        let parameters = envelope.parameters.unwrap_or_default();
        return Err(Failure::Api {
            status: envelope.error_code.unwrap_or(status.as_u16()),
            description: envelope.description.unwrap_or_else(|| "no description".to_owned()),
            retry_after: parameters.retry_after.or(retry_after_header).map(Duration::from_secs),
            migrate_to_chat_id: parameters.migrate_to_chat_id,
        });
    }
    let result = envelope.result.unwrap_or(Value::Null);
    serde_json::from_value(result).map_err(|error| Failure::Malformed(error.to_string()))
}
