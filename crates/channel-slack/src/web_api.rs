//! Slack's Web API over plain HTTP: calling methods with either token, reading
//! `{"ok":…}` answers, classifying failures at the source, and file transfers.

use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Response, StatusCode, Url};
use serde_json::Value;
use squidbot_channels::ChannelError;
use squidbot_types::Secret;

use crate::settings::SlackSettings;

/// How long a Web API call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a file download or upload may take.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

/// The wait assumed when Slack rate-limits without saying for how long (it always
/// says, in `Retry-After`; this only guards against hammering if it ever doesn't).
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// `ok: false` errors that mean the tokens or the app's set-up must change.
const FATAL_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "no_permission",
    "missing_scope",
    "not_allowed_token_type",
    "org_login_required",
    "ekm_access_denied",
    "team_access_not_granted",
    "team_not_found",
    "app_missing_action_url",
    "invalid_token",
];

/// `ok: false` errors that say Slack itself had a passing problem.
const TRANSIENT_ERRORS: &[&str] = &["internal_error", "fatal_error", "service_unavailable", "request_timeout"];

/// Which of the app's tokens a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    /// `xoxb-…`: every method except opening Socket Mode connections.
    Bot,
    /// `xapp-…`: `apps.connections.open` only.
    App,
}

/// Who the bot is, from `auth.test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The bot's user id (`U…`), as it appears in mentions and `user` fields.
    pub user_id: String,
    /// The bot's bot id (`B…`), as it appears in `bot_id` fields.
    pub bot_id: String,
}

/// Why a file download failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DownloadError {
    /// The file is larger than the cap (size in bytes, as far as known).
    TooLarge(u64),
    /// Anything else, as a short reason for the note left in the message.
    Failed(String),
}

/// A Web API client for one app.
#[derive(Debug, Clone)]
pub(crate) struct WebApi {
    client: reqwest::Client,
    api_base: String,
    api_host: Option<String>,
    app_token: Secret,
    bot_token: Secret,
}

impl WebApi {
    /// A client for the app `settings` describe (already validated).
    pub(crate) fn new(settings: &SlackSettings) -> Result<Self, ChannelError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(CALL_TIMEOUT)
            .user_agent(concat!("squidbot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ChannelError::fatal(format!("can't build the Slack HTTP client: {error}")))?;
        let api_base = settings.api_base.trim().trim_end_matches('/').to_owned();
        let api_host = Url::parse(&api_base).ok().and_then(|url| url.host_str().map(str::to_owned));
        Ok(Self {
            client,
            api_base,
            api_host,
            app_token: settings.app_token.clone(),
            bot_token: settings.bot_token.clone(),
        })
    }

    fn token(&self, token: Token) -> &str {
        match token {
            Token::Bot => self.bot_token.expose(),
            Token::App => self.app_token.expose(),
        }
    }

    /// Calls `method` with form-encoded `params` (every method accepts this encoding).
    pub(crate) async fn call_form(
        &self,
        method: &str,
        token: Token,
        params: &[(&str, &str)],
    ) -> Result<Value, ChannelError> {
        let request =
            self.client.post(format!("{}/{method}", self.api_base)).bearer_auth(self.token(token)).form(params);
        read_answer(method, request.send().await).await
    }

    /// Calls `method` with a JSON body and the bot token.
    pub(crate) async fn call_json(&self, method: &str, body: &Value) -> Result<Value, ChannelError> {
        self.call_json_tolerating(method, body, &[]).await
    }

    /// Calls `method` with a JSON body and the bot token, taking the `ok: false` error
    /// codes in `tolerated` as success (`already_reacted`).
    pub(crate) async fn call_json_tolerating(
        &self,
        method: &str,
        body: &Value,
        tolerated: &[&str],
    ) -> Result<Value, ChannelError> {
        let request =
            self.client.post(format!("{}/{method}", self.api_base)).bearer_auth(self.token(Token::Bot)).json(body);
        read_answer_tolerating(method, request.send().await, tolerated).await
    }

    /// `auth.test`: checks the bot token and learns the bot's ids.
    pub(crate) async fn auth_test(&self) -> Result<Identity, ChannelError> {
        let answer = self.call_form("auth.test", Token::Bot, &[]).await?;
        let user_id = string_field(&answer, "user_id");
        let bot_id = string_field(&answer, "bot_id");
        match (user_id, bot_id) {
            (Some(user_id), Some(bot_id)) => Ok(Identity { user_id, bot_id }),
            // A user token passes auth.test but has no bot id; the adapter can't tell
            // its own messages apart without one.
            _ => Err(ChannelError::fatal(
                "can't start Slack: auth.test answered without user_id and bot_id (is the bot token a bot token?)",
            )),
        }
    }

    /// `apps.connections.open`: a fresh Socket Mode URL (single use, valid briefly).
    pub(crate) async fn open_connection(&self) -> Result<String, ChannelError> {
        let answer = self.call_form("apps.connections.open", Token::App, &[]).await?;
        string_field(&answer, "url").ok_or_else(|| {
            ChannelError::transient("can't open a Socket Mode connection: apps.connections.open answered without url")
        })
    }

    /// Sends `bytes` to an upload URL from `files.getUploadURLExternal` (no token: the
    /// URL itself is the credential).
    pub(crate) async fn upload(&self, upload_url: &str, bytes: Vec<u8>) -> Result<(), ChannelError> {
        let response = self
            .client
            .post(upload_url)
            .timeout(TRANSFER_TIMEOUT)
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(bytes)
            .send()
            .await
            // The upload URL is a credential of sorts; it stays out of the message.
            .map_err(|error| {
                ChannelError::transient(format!("can't upload a file to Slack: {}", error.without_url()))
            })?;
        match failed_status("upload a file to Slack", &response) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Downloads a private file with the bot token, refusing more than `cap` bytes.
    pub(crate) async fn download(&self, url: &str, expected_mime: &str, cap: u64) -> Result<Vec<u8>, DownloadError> {
        let parsed = Url::parse(url).map_err(|_invalid| DownloadError::Failed("its URL is not valid".to_owned()))?;
        if !self.is_slack_host(&parsed) {
            // The bot token must never leave for a host that isn't Slack.
            return Err(DownloadError::Failed(format!(
                "its URL is not on Slack ({})",
                parsed.host_str().unwrap_or("?")
            )));
        }
        let mut response = self
            .client
            .get(parsed)
            .timeout(TRANSFER_TIMEOUT)
            .bearer_auth(self.bot_token.expose())
            .send()
            .await
            .map_err(|error| DownloadError::Failed(format!("the download failed: {error}")))?;
        if !response.status().is_success() {
            return Err(DownloadError::Failed(format!("Slack answered HTTP {}", response.status().as_u16())));
        }
        if let Some(length) = header_number(&response, CONTENT_LENGTH.as_str())
            && length > cap
        {
            return Err(DownloadError::TooLarge(length));
        }
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
        // Without the files:read scope (or with a wrong token) Slack answers 200 with its
        // sign-in page instead of the file.
        if content_type.starts_with("text/html") && !expected_mime.starts_with("text/html") {
            return Err(DownloadError::Failed(
                "Slack sent a sign-in page instead (does the bot token have the files:read scope?)".to_owned(),
            ));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) =
            response.chunk().await.map_err(|error| DownloadError::Failed(format!("the download broke off: {error}")))?
        {
            let total = bytes.len() as u64 + chunk.len() as u64;
            if total > cap {
                return Err(DownloadError::TooLarge(total));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    fn is_slack_host(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        let on_slack = url.scheme() == "https" && (host == "slack.com" || host.ends_with(".slack.com"));
        on_slack || self.api_host.as_deref() == Some(host)
    }
}

/// Reads a Web API answer, classifying every failure.
async fn read_answer(method: &str, sent: Result<Response, reqwest::Error>) -> Result<Value, ChannelError> {
    read_answer_tolerating(method, sent, &[]).await
}

/// Reads a Web API answer, taking the error codes in `tolerated` as success.
async fn read_answer_tolerating(
    method: &str,
    sent: Result<Response, reqwest::Error>,
    tolerated: &[&str],
) -> Result<Value, ChannelError> {
    let response = sent.map_err(|error| ChannelError::transient(format!("can't call Slack's {method}: {error}")))?;
    if let Some(error) = failed_status(&format!("call Slack's {method}"), &response) {
        return Err(error);
    }
    let retry_after = retry_after(&response);
    let answer: Value = response
        .json()
        .await
        .map_err(|error| ChannelError::transient(format!("can't read Slack's answer to {method}: {error}")))?;
    if answer.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(answer);
    }
    let code = answer.get("error").and_then(Value::as_str).unwrap_or("unknown_error");
    if tolerated.contains(&code) {
        return Ok(answer);
    }
    Err(classify_error(method, code, retry_after))
}

/// The error an HTTP status means, or `None` for success.
fn failed_status(action: &str, response: &Response) -> Option<ChannelError> {
    let status = response.status();
    if status.is_success() {
        return None;
    }
    Some(match status {
        StatusCode::TOO_MANY_REQUESTS => {
            let wait = retry_after(response).unwrap_or(DEFAULT_RETRY_AFTER);
            ChannelError::rate_limited(wait, format!("can't {action}: rate limited for {} s", wait.as_secs()))
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            ChannelError::fatal(format!("can't {action}: Slack refused the credentials (HTTP {})", status.as_u16()))
        }
        status if status.is_server_error() => {
            ChannelError::transient(format!("can't {action}: Slack answered HTTP {}", status.as_u16()))
        }
        status => ChannelError::rejected(format!("can't {action}: Slack answered HTTP {}", status.as_u16())),
    })
}

/// What an `ok: false` answer's `error` code means.
pub(crate) fn classify_error(method: &str, code: &str, retry_after: Option<Duration>) -> ChannelError {
    let message = format!("can't call Slack's {method}: {code}");
    if code == "ratelimited" || code == "rate_limited" {
        return ChannelError::rate_limited(retry_after.unwrap_or(DEFAULT_RETRY_AFTER), message);
    }
    if FATAL_ERRORS.contains(&code) {
        return ChannelError::fatal(message);
    }
    if TRANSIENT_ERRORS.contains(&code) {
        return ChannelError::transient(message);
    }
    // channel_not_found, msg_too_long, cant_update_message, message_not_found,
    // not_in_channel, is_archived…: this request can't work, others may.
    ChannelError::rejected(message)
}

fn retry_after(response: &Response) -> Option<Duration> {
    header_number(response, RETRY_AFTER.as_str()).map(Duration::from_secs)
}

fn header_number(response: &Response, name: &str) -> Option<u64> {
    response.headers().get(name)?.to_str().ok()?.trim().parse().ok()
}

/// A non-empty string field of an answer.
pub(crate) fn string_field(answer: &Value, name: &str) -> Option<String> {
    answer.get(name).and_then(Value::as_str).filter(|value| !value.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use squidbot_channels::ChannelErrorKind;

    use super::*;

    #[test]
    fn error_codes_are_classified_by_what_they_mean() {
        let kind = |code: &str| classify_error("chat.postMessage", code, Some(Duration::from_secs(7))).kind;
        assert_eq!(kind("ratelimited"), ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(7) });
        for fatal in ["invalid_auth", "not_authed", "account_inactive", "token_revoked", "missing_scope"] {
            assert_eq!(kind(fatal), ChannelErrorKind::Fatal, "{fatal}");
        }
        for rejected in ["channel_not_found", "msg_too_long", "cant_update_message", "message_not_found"] {
            assert_eq!(kind(rejected), ChannelErrorKind::Rejected, "{rejected}");
        }
        assert_eq!(kind("internal_error"), ChannelErrorKind::Transient);
        let message = classify_error("chat.update", "message_not_found", None).message;
        assert_eq!(message, "can't call Slack's chat.update: message_not_found");
    }

    #[test]
    fn a_rate_limit_without_a_wait_still_waits() {
        let error = classify_error("reactions.add", "ratelimited", None);
        assert_eq!(error.kind, ChannelErrorKind::RateLimited { retry_after: DEFAULT_RETRY_AFTER });
    }
}
