//! The homeserver's client-server API over plain HTTP: authentication (a configured
//! token, or a password login whose token is kept in memory), JSON requests, media
//! upload and capped download, each failure classified where it happens.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, Url};
use serde_json::{Value, json};
use squidbot_channels::ChannelError;
use squidbot_types::Secret;

use crate::failure::{self, RequestKind};

/// How long an ordinary request may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a media upload or download may take.
const MEDIA_TIMEOUT: Duration = Duration::from_secs(120);

/// A request body.
pub(crate) enum Body<'a> {
    /// No body.
    Empty,
    /// A JSON document.
    Json(&'a Value),
    /// Raw bytes of a media type (uploads).
    Bytes { content_type: &'a str, bytes: Vec<u8> },
}

/// A downloaded file, or the size that kept it from being downloaded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Download {
    /// The file's bytes.
    Complete(Vec<u8>),
    /// The file is larger than the cap; `size` is at least this many bytes.
    TooLarge { size: u64 },
}

/// Who the bot is and how it proves it.
pub(crate) struct Credentials {
    /// The bot's user id (for password login).
    pub user_id: String,
    /// A configured access token.
    pub access_token: Option<Secret>,
    /// The password to log in with when there is no token.
    pub password: Option<Secret>,
    /// The device to log in as.
    pub device_id: Option<String>,
}

/// A client of one homeserver, authenticated as the bot.
pub(crate) struct Api {
    http: reqwest::Client,
    homeserver: Url,
    user_id: String,
    password: Option<Secret>,
    device_id: Option<String>,
    token: Mutex<Option<Secret>>,
    login: tokio::sync::Mutex<()>,
}

impl Api {
    /// A client of `homeserver` with the bot's `credentials`.
    pub(crate) fn new(homeserver: Url, credentials: Credentials) -> Result<Self, ChannelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("squidbot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ChannelError::fatal(format!("can't build the HTTP client: {}", failure::chain(&error))))?;
        let Credentials { user_id, access_token, password, device_id } = credentials;
        let access_token = access_token.filter(|token| !token.is_empty());
        Ok(Self {
            http,
            homeserver,
            user_id,
            password,
            device_id,
            token: Mutex::new(access_token),
            login: tokio::sync::Mutex::new(()),
        })
    }

    /// The URL of an API path given as segments, each percent-encoded (room and event
    /// ids hold `!`, `$`, `:` and, in old room versions, `/`).
    pub(crate) fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.homeserver.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// The client-server API v3 URL of `segments` after `/_matrix/client/v3/`.
    pub(crate) fn client_url(&self, segments: &[&str]) -> Url {
        let mut all = vec!["_matrix", "client", "v3"];
        all.extend_from_slice(segments);
        self.url(&all)
    }

    /// The access token, logging in with the password first when there is none yet.
    async fn access_token(&self) -> Result<Secret, ChannelError> {
        if let Some(token) = self.current_token()? {
            return Ok(token);
        }
        // One login at a time: requests racing at start-up share its token.
        let _only_login = self.login.lock().await;
        if let Some(token) = self.current_token()? {
            return Ok(token);
        }
        let token = self.log_in().await?;
        *self.token.lock().map_err(|_poisoned| ChannelError::fatal("can't log in: token lock poisoned"))? =
            Some(token.clone());
        Ok(token)
    }

    fn current_token(&self) -> Result<Option<Secret>, ChannelError> {
        let token = self.token.lock().map_err(|_poisoned| ChannelError::fatal("can't log in: token lock poisoned"))?;
        Ok(token.clone())
    }

    async fn log_in(&self) -> Result<Secret, ChannelError> {
        let Some(password) = &self.password else {
            return Err(ChannelError::fatal("can't log in: neither an access token nor a password is set"));
        };
        let mut request = json!({
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": self.user_id},
            "password": password.expose(),
            "initial_device_display_name": "squidbot",
        });
        if let (Some(device_id), Some(object)) = (&self.device_id, request.as_object_mut()) {
            object.insert("device_id".to_owned(), Value::String(device_id.clone()));
        }
        let action = format!("log in as {}", self.user_id);
        let response = self
            .http
            .post(self.client_url(&["login"]))
            .timeout(REQUEST_TIMEOUT)
            .json(&request)
            .send()
            .await
            .map_err(|error| failure::network(&action, &error))?;
        let answer = read_json(&action, RequestKind::Authentication, response).await?;
        match answer.get("access_token").and_then(Value::as_str) {
            Some(token) if !token.is_empty() => {
                tracing::info!(user_id = %self.user_id, device_id = ?answer.get("device_id"), "logged in to matrix");
                Ok(Secret::new(token))
            }
            Some(_) | None => Err(failure::malformed(&action, "no access_token")),
        }
    }

    /// Sends an authenticated request and returns its JSON answer.
    pub(crate) async fn call(
        &self,
        action: &str,
        kind: RequestKind,
        method: Method,
        url: Url,
        body: Body<'_>,
        timeout: Duration,
    ) -> Result<Value, ChannelError> {
        let token = self.access_token().await?;
        let mut request = self.http.request(method, url).bearer_auth(token.expose()).timeout(timeout);
        request = match body {
            Body::Empty => request,
            Body::Json(value) => request.json(value),
            Body::Bytes { content_type, bytes } => request.header(CONTENT_TYPE, content_type).body(bytes),
        };
        let response = request.send().await.map_err(|error| failure::network(action, &error))?;
        read_json(action, kind, response).await
    }

    /// A `GET` of a client API path.
    pub(crate) async fn get(&self, action: &str, segments: &[&str]) -> Result<Value, ChannelError> {
        self.call(action, RequestKind::Ordinary, Method::GET, self.client_url(segments), Body::Empty, REQUEST_TIMEOUT)
            .await
    }

    /// A `POST` or `PUT` of JSON to a client API path.
    pub(crate) async fn send_json(
        &self,
        action: &str,
        method: Method,
        segments: &[&str],
        body: &Value,
    ) -> Result<Value, ChannelError> {
        self.call(action, RequestKind::Ordinary, method, self.client_url(segments), Body::Json(body), REQUEST_TIMEOUT)
            .await
    }

    /// Uploads a file and returns its `mxc://` URI.
    pub(crate) async fn upload(&self, name: &str, mime: &str, bytes: Vec<u8>) -> Result<String, ChannelError> {
        let action = format!("upload {name}");
        let mut url = self.url(&["_matrix", "media", "v3", "upload"]);
        url.query_pairs_mut().append_pair("filename", name);
        let body = Body::Bytes { content_type: mime, bytes };
        let answer = self.call(&action, RequestKind::Ordinary, Method::POST, url, body, MEDIA_TIMEOUT).await?;
        answer
            .get("content_uri")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| failure::malformed(&action, "no content_uri"))
    }

    /// Downloads an `mxc://server/media-id` file, at most `cap` bytes: through the
    /// authenticated media API, or the older unauthenticated one on homeservers that
    /// answer the first with 404.
    pub(crate) async fn download(&self, mxc: &str, cap: u64) -> Result<Download, ChannelError> {
        let action = format!("download {mxc}");
        let Some((server, media_id)) = parse_mxc(mxc) else {
            return Err(ChannelError::rejected(format!("can't {action}: not an mxc:// URI")));
        };
        let token = self.access_token().await?;
        let authenticated = self.url(&["_matrix", "client", "v1", "media", "download", server, media_id]);
        let legacy = self.url(&["_matrix", "media", "v3", "download", server, media_id]);
        let mut response = None;
        for url in [authenticated, legacy] {
            let answer = self
                .http
                .get(url)
                .bearer_auth(token.expose())
                .timeout(MEDIA_TIMEOUT)
                .send()
                .await
                .map_err(|error| failure::network(&action, &error))?;
            let not_found = answer.status() == reqwest::StatusCode::NOT_FOUND;
            response = Some(answer);
            if !not_found {
                break;
            }
        }
        let Some(mut response) = response else {
            return Err(failure::malformed(&action, "no response"));
        };
        if !response.status().is_success() {
            return Err(error_of(&action, RequestKind::Ordinary, response).await);
        }
        if let Some(size) = response.content_length().filter(|size| *size > cap) {
            return Ok(Download::TooLarge { size });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| failure::network(&action, &error))? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > cap {
                return Ok(Download::TooLarge { size: bytes.len() as u64 });
            }
        }
        Ok(Download::Complete(bytes))
    }
}

/// The server name and media id of an `mxc://server/media-id` URI.
pub(crate) fn parse_mxc(uri: &str) -> Option<(&str, &str)> {
    let (server, media_id) = uri.strip_prefix("mxc://")?.split_once('/')?;
    let valid = !server.is_empty() && !media_id.is_empty() && !media_id.contains('/');
    valid.then_some((server, media_id))
}

async fn read_json(action: &str, kind: RequestKind, response: reqwest::Response) -> Result<Value, ChannelError> {
    if !response.status().is_success() {
        return Err(error_of(action, kind, response).await);
    }
    let bytes = response.bytes().await.map_err(|error| failure::network(action, &error))?;
    serde_json::from_slice(&bytes).map_err(|error| failure::malformed(action, error))
}

async fn error_of(action: &str, kind: RequestKind, response: reqwest::Response) -> ChannelError {
    let status = response.status();
    let retry_after = response.headers().get(RETRY_AFTER).and_then(|value| value.to_str().ok()).map(str::to_owned);
    match response.bytes().await {
        Ok(body) => failure::classify(action, kind, status, retry_after.as_deref(), &body),
        // The status alone still classifies it.
        Err(error) => {
            tracing::debug!(error = %failure::chain(&error), "can't read a matrix error body");
            failure::classify(action, kind, status, retry_after.as_deref(), b"")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(base: &str) -> Api {
        let credentials = Credentials {
            user_id: "@bot:localhost".to_owned(),
            access_token: Some(Secret::new("t")),
            password: None,
            device_id: None,
        };
        Api::new(Url::parse(base).unwrap(), credentials).unwrap()
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        let url = api("http://127.0.0.1:8008").client_url(&["rooms", "!room/x:localhost", "event", "$event?id"]);
        assert_eq!(url.as_str(), "http://127.0.0.1:8008/_matrix/client/v3/rooms/!room%2Fx:localhost/event/$event%3Fid");
    }

    #[test]
    fn a_homeserver_under_a_path_prefix_keeps_it() {
        let url = api("https://example.org/matrix/").client_url(&["sync"]);
        assert_eq!(url.as_str(), "https://example.org/matrix/_matrix/client/v3/sync");
    }

    #[test]
    fn mxc_uris_name_server_and_media() {
        assert_eq!(parse_mxc("mxc://localhost/AbC123"), Some(("localhost", "AbC123")));
        assert_eq!(parse_mxc("https://localhost/AbC123"), None);
        assert_eq!(parse_mxc("mxc://localhost/"), None);
        assert_eq!(parse_mxc("mxc://localhost/a/b"), None);
    }
}
