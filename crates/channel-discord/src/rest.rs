//! Discord's REST API as the adapter uses it: the gateway URL, messages (with files),
//! edits, typing and reactions; failures classified by status, 429s remembered per route.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, USER_AGENT};
use reqwest::multipart::{Form, Part};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_channels::{Attachment, ChannelError, OutboundMessage, ReadAttachment};
use squidbot_core::sync::lock;
use tokio::time::Instant;

use crate::settings::DiscordSettings;

/// The 👀 emoji, percent-encoded for the reaction route.
const ACKNOWLEDGE_EMOJI: &str = "%F0%9F%91%80";

/// How long to wait when a 429 names no delay.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Longest delay taken from a 429 (a larger one is taken as this): a bogus value must
/// not park the adapter for days.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// What `GET /gateway/bot` answers.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct GatewayBot {
    /// The WebSocket URL to connect to.
    pub url: String,
    /// How many more sessions may start before the limit resets.
    #[serde(default)]
    pub session_start_limit: Option<SessionStartLimit>,
}

/// The daily budget of IDENTIFYs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SessionStartLimit {
    /// Sessions left to start.
    pub remaining: u64,
    /// Milliseconds until the budget resets.
    pub reset_after: u64,
}

/// The REST client of one bot.
pub(crate) struct Rest {
    client: reqwest::Client,
    downloader: reqwest::Client,
    api_base: String,
    /// Until when a route (or every route, under `global`) is rate limited: requests
    /// before then fail at once instead of hitting Discord again.
    limited_until: Mutex<HashMap<String, Instant>>,
}

impl Rest {
    /// A client for `settings`' API base and token.
    pub(crate) fn new(settings: &DiscordSettings) -> Result<Self, ChannelError> {
        let mut authorization =
            HeaderValue::from_str(&format!("Bot {}", settings.token.expose())).map_err(|_invalid| {
                ChannelError::fatal(format!(
                    "can't set up Discord channel {}: the bot token is not a valid header",
                    settings.name
                ))
            })?;
        authorization.set_sensitive(true);
        // Discord asks bots to name themselves this way.
        let agent = format!("DiscordBot ({}, {})", env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_VERSION"));
        let agent = HeaderValue::from_str(&agent)
            .map_err(|_invalid| ChannelError::fatal("can't set up the Discord channel: bad user agent"))?;
        let mut headers = HeaderMap::new();
        headers.insert(USER_AGENT, agent);
        let downloader = http_client(headers.clone())?;
        headers.insert(AUTHORIZATION, authorization);
        let client = http_client(headers)?;
        Ok(Self {
            client,
            downloader,
            api_base: settings.api_base.trim_end_matches('/').to_owned(),
            limited_until: Mutex::default(),
        })
    }

    /// A client without the bot's token, for files on Discord's CDN: the token goes to
    /// the API only.
    pub(crate) fn downloader(&self) -> &reqwest::Client {
        &self.downloader
    }

    /// `GET /gateway/bot`: where to connect, and the IDENTIFY budget.
    pub(crate) async fn gateway_bot(&self) -> Result<GatewayBot, ChannelError> {
        let action = "ask Discord for the gateway URL";
        let request = self.client.get(format!("{}/gateway/bot", self.api_base));
        let response = self.execute("GET /gateway/bot", action, request).await?;
        response.json().await.map_err(|error| ChannelError::transient(format!("can't {action}: {error}")))
    }

    /// `POST /channels/{channel}/messages`: sends `message` (with its files as multipart)
    /// and returns the new message's id.
    pub(crate) async fn create_message(
        &self,
        channel: &str,
        message: &OutboundMessage,
    ) -> Result<String, ChannelError> {
        let action = format!("send a Discord message to channel {channel}");
        check_snowflake(channel, &action)?;
        let mut payload = json!({
            "content": message.text,
            // Never ping @everyone, roles or users from the model's text.
            "allowed_mentions": {"parse": []},
        });
        if let Some(reply_to) = &message.reply_to {
            check_snowflake(reply_to, &action)?;
            payload["message_reference"] = json!({"message_id": reply_to, "fail_if_not_exists": false});
        }
        let url = format!("{}/channels/{channel}/messages", self.api_base);
        let request = if message.attachments.is_empty() {
            self.client.post(url).json(&payload)
        } else {
            let descriptions: Vec<Value> = message
                .attachments
                .iter()
                .enumerate()
                .map(|(index, attachment)| json!({"id": index, "filename": safe_file_name(&attachment.name)}))
                .collect();
            payload["attachments"] = Value::Array(descriptions);
            let mut form = Form::new().text("payload_json", payload.to_string());
            for (index, attachment) in message.attachments.iter().enumerate() {
                form = form.part(format!("files[{index}]"), file_part(attachment, &action).await?);
            }
            self.client.post(url).multipart(form)
        };
        let route = format!("POST /channels/{channel}/messages");
        let response = self.execute(&route, &action, request).await?;
        let created: CreatedMessage =
            response.json().await.map_err(|error| ChannelError::transient(format!("can't {action}: {error}")))?;
        Ok(created.id)
    }

    /// `PATCH /channels/{channel}/messages/{message}`: replaces the text.
    pub(crate) async fn edit_message(&self, channel: &str, message: &str, text: &str) -> Result<(), ChannelError> {
        let action = format!("edit Discord message {message} in channel {channel}");
        check_snowflake(channel, &action)?;
        check_snowflake(message, &action)?;
        let request = self
            .client
            .patch(format!("{}/channels/{channel}/messages/{message}", self.api_base))
            .json(&json!({"content": text, "allowed_mentions": {"parse": []}}));
        self.execute(&format!("PATCH /channels/{channel}/messages"), &action, request).await.map(drop)
    }

    /// `POST /channels/{channel}/typing`: shows "typing…" for about ten seconds.
    pub(crate) async fn trigger_typing(&self, channel: &str) -> Result<(), ChannelError> {
        let action = format!("show typing in Discord channel {channel}");
        check_snowflake(channel, &action)?;
        let request = self.client.post(format!("{}/channels/{channel}/typing", self.api_base));
        self.execute(&format!("POST /channels/{channel}/typing"), &action, request).await.map(drop)
    }

    /// `PUT /channels/{channel}/messages/{message}/reactions/👀/@me`.
    pub(crate) async fn acknowledge(&self, channel: &str, message: &str) -> Result<(), ChannelError> {
        let action = format!("react to Discord message {message} in channel {channel}");
        check_snowflake(channel, &action)?;
        check_snowflake(message, &action)?;
        let url = format!("{}/channels/{channel}/messages/{message}/reactions/{ACKNOWLEDGE_EMOJI}/@me", self.api_base);
        let request = self.client.put(url);
        self.execute(&format!("PUT /channels/{channel}/reactions"), &action, request).await.map(drop)
    }

    /// Sends `request` unless `route` is still rate limited, and classifies failures.
    async fn execute(&self, route: &str, action: &str, request: RequestBuilder) -> Result<Response, ChannelError> {
        self.check_limit(route, action)?;
        let response =
            request.send().await.map_err(|error| ChannelError::transient(format!("can't {action}: {error}")))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let header_retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<f64>().ok());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let error = classify(status, &body, header_retry_after, action);
        if let squidbot_channels::ChannelErrorKind::RateLimited { retry_after } = error.kind {
            let global = body.get("global").and_then(Value::as_bool).unwrap_or(false);
            self.remember_limit(if global { "global" } else { route }, retry_after);
        }
        Err(error)
    }

    fn check_limit(&self, route: &str, action: &str) -> Result<(), ChannelError> {
        let now = Instant::now();
        let mut limits = lock(&self.limited_until);
        limits.retain(|_route, until| *until > now);
        let until = [limits.get("global"), limits.get(route)].into_iter().flatten().max().copied();
        match until {
            Some(until) => {
                let wait = until.saturating_duration_since(now);
                Err(ChannelError::rate_limited(
                    wait,
                    format!("can't {action}: Discord rate limit still in force for {} ms", wait.as_millis()),
                ))
            }
            None => Ok(()),
        }
    }

    fn remember_limit(&self, key: &str, retry_after: Duration) {
        let mut limits = lock(&self.limited_until);
        limits.insert(key.to_owned(), Instant::now() + retry_after);
    }
}

fn http_client(headers: HeaderMap) -> Result<reqwest::Client, ChannelError> {
    reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|error| ChannelError::fatal(format!("can't set up the Discord HTTP client: {error}")))
}

/// The part of a created message the adapter needs.
#[derive(Deserialize)]
struct CreatedMessage {
    id: String,
}

/// What a failed response means: 429 rate limited (body `retry_after` in seconds,
/// else the `Retry-After` header), 401 fatal (token refused), 408 and 5xx transient,
/// anything else (400, 403, 404, 413…) rejected.
pub(crate) fn classify(
    status: StatusCode,
    body: &Value,
    header_retry_after: Option<f64>,
    action: &str,
) -> ChannelError {
    let detail = match (body.get("message").and_then(Value::as_str), body.get("code").and_then(Value::as_u64)) {
        (Some(message), Some(code)) => format!("Discord answered {status}: {message} (code {code})"),
        (Some(message), None) => format!("Discord answered {status}: {message}"),
        _ => format!("Discord answered {status}"),
    };
    let message = format!("can't {action}: {detail}");
    match status.as_u16() {
        429 => {
            let seconds = body.get("retry_after").and_then(Value::as_f64).or(header_retry_after);
            ChannelError::rate_limited(retry_after(seconds), message)
        }
        401 => ChannelError::fatal(format!("{message}; the bot token was refused")),
        408 | 500..=599 => ChannelError::transient(message),
        _ => ChannelError::rejected(message),
    }
}

/// A delay from Discord's seconds (fractions allowed), within sane bounds.
fn retry_after(seconds: Option<f64>) -> Duration {
    match seconds {
        Some(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Duration::try_from_secs_f64(seconds).unwrap_or(MAX_RETRY_AFTER).min(MAX_RETRY_AFTER)
        }
        _ => DEFAULT_RETRY_AFTER,
    }
}

/// Discord ids are decimal snowflakes; anything else must not reach a URL path.
fn check_snowflake(id: &str, action: &str) -> Result<(), ChannelError> {
    if !id.is_empty() && id.len() <= 20 && id.bytes().all(|byte| byte.is_ascii_digit()) {
        Ok(())
    } else {
        Err(ChannelError::rejected(format!("can't {action}: `{id}` is not a Discord id")))
    }
}

/// A file name safe to put in a multipart header: the last path component, without
/// quotes or control characters.
fn safe_file_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned: String = last
        .chars()
        .map(|character| if character.is_control() || character == '"' { '_' } else { character })
        .collect();
    if cleaned.trim().is_empty() { "file".to_owned() } else { cleaned }
}

async fn file_part(attachment: &Attachment, action: &str) -> Result<Part, ChannelError> {
    let bytes = attachment
        .bytes()
        .await
        .map_err(|error| ChannelError::rejected(format!("can't {action}: {}", error.message)))?;
    Part::bytes(bytes)
        .file_name(safe_file_name(&attachment.name))
        .mime_str(media_type(&attachment.mime))
        .map_err(|error| ChannelError::rejected(format!("can't {action}: {error}")))
}

/// The attachment's media type when it looks like one (`type/subtype`), else generic
/// bytes: a sloppy type should not fail the whole message.
fn media_type(mime: &str) -> &str {
    let plausible = mime.split_once('/').is_some_and(|(kind, subtype)| !kind.is_empty() && !subtype.is_empty())
        && mime.bytes().all(|byte| byte.is_ascii_graphic() || byte == b' ');
    if plausible { mime } else { "application/octet-stream" }
}

#[cfg(test)]
mod tests {
    use squidbot_channels::ChannelErrorKind;

    use super::*;

    #[test]
    fn statuses_are_classified_at_the_source() {
        let body = json!({"message": "Missing Access", "code": 50001});
        assert_eq!(classify(StatusCode::FORBIDDEN, &body, None, "send").kind, ChannelErrorKind::Rejected);
        assert_eq!(classify(StatusCode::NOT_FOUND, &body, None, "send").kind, ChannelErrorKind::Rejected);
        assert_eq!(classify(StatusCode::BAD_REQUEST, &body, None, "send").kind, ChannelErrorKind::Rejected);
        assert_eq!(classify(StatusCode::UNAUTHORIZED, &body, None, "send").kind, ChannelErrorKind::Fatal);
        assert_eq!(classify(StatusCode::BAD_GATEWAY, &Value::Null, None, "send").kind, ChannelErrorKind::Transient);
        let error = classify(StatusCode::FORBIDDEN, &body, None, "send a message");
        assert_eq!(error.message, "can't send a message: Discord answered 403 Forbidden: Missing Access (code 50001)");
    }

    #[test]
    fn a_429_waits_the_body_s_retry_after_then_the_header_s() {
        let limited = |body: Value, header| classify(StatusCode::TOO_MANY_REQUESTS, &body, header, "send").kind;
        assert_eq!(
            limited(json!({"retry_after": 1.5, "global": false}), Some(2.0)),
            ChannelErrorKind::RateLimited { retry_after: Duration::from_millis(1500) }
        );
        assert_eq!(
            limited(json!({}), Some(3.0)),
            ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(3) }
        );
        assert_eq!(
            limited(json!({"retry_after": -4}), None),
            ChannelErrorKind::RateLimited { retry_after: DEFAULT_RETRY_AFTER }
        );
        assert_eq!(
            limited(json!({"retry_after": 1e12}), None),
            ChannelErrorKind::RateLimited { retry_after: MAX_RETRY_AFTER }
        );
    }

    #[test]
    fn only_snowflakes_reach_url_paths() {
        assert!(check_snowflake("1234567890123456789", "send").is_ok());
        assert!(check_snowflake("../gateway", "send").is_err());
        assert!(check_snowflake("", "send").is_err());
    }

    #[test]
    fn file_names_lose_paths_and_quotes() {
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name("a\"b\n.txt"), "a_b_.txt");
        assert_eq!(safe_file_name("dir\\"), "file");
    }
}
