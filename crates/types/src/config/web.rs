//! `[tools.web]`: the `web_fetch` and `web_search` tools.

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

/// Default for `tools.web.brave_url`: the Brave web search API.
pub const DEFAULT_BRAVE_URL: &str = "https://api.search.brave.com/res/v1/web/search";

/// Default for `tools.web.duckduckgo_url`: DuckDuckGo's JavaScript-free results page.
pub const DEFAULT_DUCKDUCKGO_URL: &str = "https://html.duckduckgo.com/html/";

/// Default for `tools.web.brave_api_key_env`.
pub const DEFAULT_BRAVE_API_KEY_ENV: &str = "BRAVE_API_KEY";

/// Default for `tools.web.fetch_max_bytes`: 1 MiB.
pub const DEFAULT_FETCH_MAX_BYTES: usize = 1024 * 1024;

/// Default for `tools.web.timeout_secs`.
pub const DEFAULT_WEB_TIMEOUT_SECS: u64 = 30;

/// Default for `tools.web.max_requests_per_minute`.
pub const DEFAULT_WEB_MAX_REQUESTS_PER_MINUTE: u32 = 30;

/// Which engine answers `web_search`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchBackend {
    /// DuckDuckGo's HTML results page: no key, no setup, but rate limited.
    #[default]
    Duckduckgo,
    /// A SearXNG instance's JSON API (`searxng_url`; its `json` format must be enabled).
    Searxng,
    /// The Brave Search API (`brave_api_key` or `brave_api_key_env`).
    Brave,
}

impl SearchBackend {
    /// Name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Duckduckgo => "duckduckgo",
            Self::Searxng => "searxng",
            Self::Brave => "brave",
        }
    }
}

/// `[tools.web]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// False leaves `web_fetch` and `web_search` out of the assistant's tools.
    pub enabled: bool,
    /// `duckduckgo`, `searxng` or `brave`.
    pub search_backend: SearchBackend,
    /// Base URL of the SearXNG instance, such as `http://127.0.0.1:8888`.
    pub searxng_url: Option<String>,
    /// The Brave Search API key itself.
    pub brave_api_key: Option<Secret>,
    /// Environment variable holding the Brave key when `brave_api_key` is unset.
    pub brave_api_key_env: String,
    /// Endpoint of the Brave web search API.
    pub brave_url: String,
    /// Endpoint of DuckDuckGo's HTML results page.
    pub duckduckgo_url: String,
    /// Bytes of a fetched body read at most; the rest is not downloaded.
    pub fetch_max_bytes: usize,
    /// Seconds one fetch (every redirect and the whole body) or one search may take.
    pub timeout_secs: u64,
    /// `web_fetch` and `web_search` calls one session may make in a minute (both count);
    /// 0 turns the limit off.
    pub max_requests_per_minute: u32,
    /// Host globs `web_fetch` may reach (`example.org`, `*.example.org`); empty allows
    /// every host. The SSRF guard applies either way.
    pub allow_hosts: Vec<String>,
    /// Host globs `web_fetch` never reaches; wins over `allow_hosts`.
    pub block_hosts: Vec<String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            search_backend: SearchBackend::default(),
            searxng_url: None,
            brave_api_key: None,
            brave_api_key_env: DEFAULT_BRAVE_API_KEY_ENV.to_owned(),
            brave_url: DEFAULT_BRAVE_URL.to_owned(),
            duckduckgo_url: DEFAULT_DUCKDUCKGO_URL.to_owned(),
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            timeout_secs: DEFAULT_WEB_TIMEOUT_SECS,
            max_requests_per_minute: DEFAULT_WEB_MAX_REQUESTS_PER_MINUTE,
            allow_hosts: Vec::new(),
            block_hosts: Vec::new(),
        }
    }
}
