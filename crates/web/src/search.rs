//! `web_search`: a query sent to the configured backend (SearXNG, Brave or DuckDuckGo),
//! answered with numbered results (title, URL, snippet).
//!
//! The backend's address comes from the operator's config, not from the model, so it is
//! not put behind the SSRF guard: a SearXNG on the same machine is the common setup.

mod brave;
mod duckduckgo;
mod searxng;

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Client, StatusCode, Url};
use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::leaks::LeakScanner;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use squidbot_types::config::{SearchBackend, WebConfig};
use squidbot_types::secret::Secret;

use crate::boundary::{WebPolicy, refuse_secrets};
use crate::fetch::CONNECT_TIMEOUT;
use crate::{SetupError, innermost_cause, parse, schema};

/// Results returned when the model gives no `count`.
pub const DEFAULT_COUNT: usize = 5;
/// The most results one search returns.
pub const MAX_COUNT: usize = 20;
/// Characters kept of one snippet.
const MAX_SNIPPET_CHARS: usize = 400;

/// Search the web: numbered results with title, URL and snippet.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebSearchArguments {
    /// Search query.
    pub query: String,
    /// Results wanted (default 5, max 20).
    pub count: Option<usize>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    /// Page title.
    pub title: String,
    /// Page address.
    pub url: String,
    /// Text from or about the page.
    pub snippet: String,
}

/// Where queries go.
#[derive(Debug, Clone)]
enum Backend {
    Searxng {
        base: Url,
    },
    Brave {
        endpoint: Url,
        key: Secret,
    },
    Duckduckgo {
        endpoint: Url,
    },
    /// The configuration can't work; the model is told why on every call.
    Unusable(String),
}

impl Backend {
    fn from_config(config: &WebConfig, environment: &dyn Fn(&str) -> Option<String>) -> Backend {
        let parse_url = |key: &str, text: &str| {
            Url::parse(text).map_err(|error| format!("tools.web.{key} = {text:?} is not a valid URL ({error})"))
        };
        let backend = match config.search_backend {
            SearchBackend::Searxng => match &config.searxng_url {
                Some(text) => parse_url("searxng_url", text).map(|base| Backend::Searxng { base }),
                None => Err("search_backend is searxng but tools.web.searxng_url is not set".to_owned()),
            },
            SearchBackend::Brave => {
                let key =
                    config.brave_api_key.clone().filter(|key| !key.is_empty()).or_else(|| {
                        environment(&config.brave_api_key_env).filter(|key| !key.is_empty()).map(Secret::new)
                    });
                match key {
                    Some(key) => {
                        parse_url("brave_url", &config.brave_url).map(|endpoint| Backend::Brave { endpoint, key })
                    }
                    None => Err(format!(
                        "search_backend is brave but no API key is configured (set tools.web.brave_api_key or the {} environment variable)",
                        config.brave_api_key_env
                    )),
                }
            }
            SearchBackend::Duckduckgo => {
                parse_url("duckduckgo_url", &config.duckduckgo_url).map(|endpoint| Backend::Duckduckgo { endpoint })
            }
        };
        backend.unwrap_or_else(Backend::Unusable)
    }

    fn name(&self) -> &'static str {
        match self {
            Backend::Searxng { .. } => "SearXNG",
            Backend::Brave { .. } => "Brave",
            Backend::Duckduckgo { .. } => "DuckDuckGo",
            Backend::Unusable(_) => "none",
        }
    }
}

/// The `web_search` tool.
#[derive(Debug, Clone)]
pub struct WebSearchTool {
    backend: Backend,
    client: Client,
    /// Finds secrets in queries before they leave.
    leaks: LeakScanner,
    /// The request limit (shared with `web_fetch`).
    policy: Arc<WebPolicy>,
}

/// A failed search, already worded for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchFailure(pub(crate) String);

impl WebSearchTool {
    /// The tool for `[tools.web]`; `environment` looks up `brave_api_key_env`.
    pub fn from_config(
        config: &WebConfig,
        environment: &dyn Fn(&str) -> Option<String>,
    ) -> Result<WebSearchTool, SetupError> {
        let client = Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(Duration::from_secs(config.timeout_secs.max(1)))
            .user_agent(concat!("Mozilla/5.0 (compatible; squidbot/", env!("CARGO_PKG_VERSION"), ")"))
            .build()
            .map_err(|error| SetupError::Client(error.to_string()))?;
        Ok(WebSearchTool {
            backend: Backend::from_config(config, environment),
            client,
            leaks: LeakScanner::default(),
            policy: Arc::default(),
        })
    }

    /// Refuses queries that carry one of these configured secrets (key shapes are refused
    /// without it).
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> Self {
        self.leaks = leaks;
        self
    }

    /// Applies `[tools.web]`'s request limit (shared with `web_fetch`).
    pub fn with_policy(mut self, policy: Arc<WebPolicy>) -> Self {
        self.policy = policy;
        self
    }

    async fn search(&self, arguments: WebSearchArguments, session: &str) -> Result<ToolOutput, ToolError> {
        let query = arguments.query.trim();
        if query.is_empty() {
            return Err(ToolError::RespondToModel("can't search: the query is empty".to_owned()));
        }
        // The query goes out in the URL (or the form body): what it carries leaves.
        refuse_secrets(&self.leaks, query, "the search query")?;
        self.policy.admit(session, "web_search")?;
        let count = arguments.count.unwrap_or(DEFAULT_COUNT).clamp(1, MAX_COUNT);
        let results = match &self.backend {
            Backend::Searxng { base } => searxng::search(&self.client, base, query).await,
            Backend::Brave { endpoint, key } => brave::search(&self.client, endpoint, key, query, count).await,
            Backend::Duckduckgo { endpoint } => duckduckgo::search(&self.client, endpoint, query).await,
            Backend::Unusable(reason) => Err(SearchFailure(format!("web_search is not configured: {reason}"))),
        }
        .map_err(|failure| ToolError::RespondToModel(failure.0))?;
        Ok(ToolOutput::text(format_results(query, self.backend.name(), &results, count)))
    }
}

/// Numbered results, at most `count`.
fn format_results(query: &str, backend: &str, results: &[SearchResult], count: usize) -> String {
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<&SearchResult> =
        results.iter().filter(|result| seen.insert(result.url.as_str())).take(count).collect();
    if unique.is_empty() {
        return format!("No results for {query:?} ({backend}).");
    }
    let mut output = format!("Results for {query:?} ({backend}):\n");
    for (index, result) in unique.iter().enumerate() {
        let title = if result.title.is_empty() { result.url.as_str() } else { result.title.as_str() };
        output.push_str(&format!("\n{}. {title}\n   {}\n", index + 1, result.url));
        if !result.snippet.is_empty() {
            let snippet: String = result.snippet.chars().take(MAX_SNIPPET_CHARS).collect();
            let ellipsis = if snippet.len() < result.snippet.len() { "…" } else { "" };
            output.push_str(&format!("   {snippet}{ellipsis}\n"));
        }
    }
    output
}

/// Sends `request` and returns the body of a successful answer.
pub(crate) async fn send(
    backend: &str,
    request: reqwest::RequestBuilder,
) -> Result<(StatusCode, String), SearchFailure> {
    let response = request.send().await.map_err(|error| {
        let reason = if error.is_timeout() { "timed out".to_owned() } else { innermost_cause(&error) };
        SearchFailure(format!("can't search: {backend} did not answer: {reason}"))
    })?;
    let status = response.status();
    let body = response.text().await.map_err(|error| {
        SearchFailure(format!("can't search: {backend}'s answer broke off: {}", innermost_cause(&error)))
    })?;
    if !status.is_success() {
        return Err(SearchFailure(status_message(backend, status)));
    }
    Ok((status, body))
}

/// Words an HTTP error status for the model.
fn status_message(backend: &str, status: StatusCode) -> String {
    let code = status.as_u16();
    let reason = status.canonical_reason().unwrap_or("");
    match code {
        429 => format!("can't search: {backend} is rate limiting (HTTP 429 {reason}); wait before searching again"),
        401 | 403 => format!(
            "can't search: {backend} refused the request (HTTP {code} {reason}); check its API key or access settings"
        ),
        500..=599 => format!("can't search: {backend} failed (HTTP {code} {reason}); try again later"),
        _ => format!("can't search: {backend} answered HTTP {code} {reason}"),
    }
}

/// A backend's JSON answer, or a message naming the backend when it sent something else.
pub(crate) fn json_answer<Answer: serde::de::DeserializeOwned>(backend: &str, body: &str) -> Result<Answer, String> {
    serde_json::from_str(body)
        .map_err(|error| format!("can't search: {backend} sent an answer that is not its JSON format ({error})"))
}

/// One result from a backend's optional fields; `None` without a URL.
pub(crate) fn hit(title: Option<&str>, url: Option<String>, snippet: Option<&str>) -> Option<SearchResult> {
    let url = url.filter(|url| !url.is_empty())?;
    Some(SearchResult { title: clean(title.unwrap_or("")), url, snippet: clean(snippet.unwrap_or("")) })
}

/// A snippet or title from HTML-flavoured text.
pub(crate) fn clean(text: &str) -> String {
    crate::html::to_text(text)
}

impl Tool for WebSearchTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<WebSearchArguments>("web_search")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: WebSearchArguments = parse(arguments)?;
        tokio::select! {
            () = context.cancel.cancelled() => Err(ToolError::RespondToModel("web_search was cancelled".to_owned())),
            result = self.search(arguments, &context.session_key) => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(index: usize) -> SearchResult {
        SearchResult {
            title: format!("Title {index}"),
            url: format!("https://site{index}.test/"),
            snippet: format!("snippet {index}"),
        }
    }

    #[test]
    fn results_are_numbered_deduplicated_and_capped() {
        let mut results: Vec<SearchResult> = (1..=4).map(result).collect();
        results.insert(1, result(1));
        let text = format_results("rust", "SearXNG", &results, 3);
        assert_eq!(
            text,
            "Results for \"rust\" (SearXNG):\n\n1. Title 1\n   https://site1.test/\n   snippet 1\n\n\
             2. Title 2\n   https://site2.test/\n   snippet 2\n\n3. Title 3\n   https://site3.test/\n   snippet 3\n"
        );
        assert_eq!(format_results("nothing", "Brave", &[], 5), "No results for \"nothing\" (Brave).");
    }

    #[test]
    fn statuses_read_as_advice() {
        assert_eq!(
            status_message("Brave", StatusCode::TOO_MANY_REQUESTS),
            "can't search: Brave is rate limiting (HTTP 429 Too Many Requests); wait before searching again"
        );
        assert_eq!(
            status_message("SearXNG", StatusCode::INTERNAL_SERVER_ERROR),
            "can't search: SearXNG failed (HTTP 500 Internal Server Error); try again later"
        );
    }

    #[test]
    fn misconfigured_backends_explain_themselves() {
        let config = WebConfig { search_backend: SearchBackend::Searxng, ..WebConfig::default() };
        let backend = Backend::from_config(&config, &|_| None);
        assert!(matches!(backend, Backend::Unusable(reason) if reason.contains("searxng_url is not set")));
        let config = WebConfig { search_backend: SearchBackend::Brave, ..WebConfig::default() };
        let backend = Backend::from_config(&config, &|_| None);
        assert!(matches!(backend, Backend::Unusable(reason) if reason.contains("BRAVE_API_KEY")));
        let backend = Backend::from_config(&config, &|name| (name == "BRAVE_API_KEY").then(|| "k-123".to_owned()));
        assert!(matches!(backend, Backend::Brave { key, .. } if key.expose() == "k-123"));
    }
}
