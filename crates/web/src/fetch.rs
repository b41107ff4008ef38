//! `web_fetch`: one URL, fetched behind the SSRF guard (every hop resolved once, vetted,
//! and connected to by exactly the vetted addresses), read up to a byte cap within a
//! deadline, and returned as Markdown or text.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::redirect::Policy;
use reqwest::{Client, Response, Url};
use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::leaks::LeakScanner;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use squidbot_types::config::WebConfig;
use tokio::time::{Instant, timeout_at};

use crate::boundary::{WebPolicy, refuse_secrets};
use crate::content::{self, Kind, NotText};
use crate::guard::{NoLookups, SsrfGuard, Vetted};
use crate::{html, innermost_cause, parse, schema};

/// Characters returned when the model gives no `max_chars`.
pub const DEFAULT_MAX_CHARS: usize = 20_000;
/// The largest `max_chars` honoured.
pub const MAX_MAX_CHARS: usize = 100_000;
/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// Limit of establishing one connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `User-Agent` of every request; some sites refuse clients that send none.
const USER_AGENT: &str = concat!("Mozilla/5.0 (compatible; squidbot/", env!("CARGO_PKG_VERSION"), ")");

/// Fetch an http(s) URL as readable Markdown (JSON and plain text as they are).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebFetchArguments {
    /// Absolute http(s) URL.
    pub url: String,
    /// Default 20000.
    pub max_chars: Option<usize>,
}

/// Size and time limits of one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Bytes of body read at most.
    pub max_bytes: usize,
    /// Limit of the whole fetch: lookups, redirects, headers and body.
    pub total_timeout: Duration,
    /// Limit of establishing each connection.
    pub connect_timeout: Duration,
}

impl FetchLimits {
    /// Limits from `[tools.web]`.
    pub fn from_config(config: &WebConfig) -> Self {
        Self {
            max_bytes: config.fetch_max_bytes.max(1),
            total_timeout: Duration::from_secs(config.timeout_secs.max(1)),
            connect_timeout: CONNECT_TIMEOUT,
        }
    }
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self::from_config(&WebConfig::default())
    }
}

/// The `web_fetch` tool.
#[derive(Debug, Clone)]
pub struct WebFetchTool {
    guard: SsrfGuard,
    limits: FetchLimits,
    /// Finds secrets in URLs before they leave.
    leaks: LeakScanner,
    /// The request limit and host lists (shared with `web_search`).
    policy: Arc<WebPolicy>,
}

/// Why reading a body stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cut {
    /// The byte cap was reached.
    Size,
    /// The deadline passed while the server was still sending.
    Deadline,
    /// The connection failed part-way.
    Broken(String),
}

impl WebFetchTool {
    /// A `web_fetch` that reaches public addresses only.
    pub fn new(limits: FetchLimits) -> Self {
        Self { guard: SsrfGuard::public_only(), limits, leaks: LeakScanner::default(), policy: Arc::default() }
    }

    /// For tests against a local server: like [`WebFetchTool::new`] but `127.0.0.1:<port>`
    /// is reachable too, and no other loopback address or port. There is deliberately no
    /// configuration key for this.
    pub fn new_with_allowed_loopback_port(limits: FetchLimits, port: u16) -> Self {
        Self {
            guard: SsrfGuard::with_allowed_loopback_port(port),
            limits,
            leaks: LeakScanner::default(),
            policy: Arc::default(),
        }
    }

    /// Refuses URLs that carry one of these configured secrets (key shapes are refused
    /// without it).
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> Self {
        self.leaks = leaks;
        self
    }

    /// Applies `[tools.web]`'s request limit and host lists (shared with `web_search`).
    pub fn with_policy(mut self, policy: Arc<WebPolicy>) -> Self {
        self.policy = policy;
        self
    }

    async fn fetch(
        &self,
        arguments: WebFetchArguments,
        session: &str,
        deadline: Instant,
    ) -> Result<ToolOutput, ToolError> {
        let shown = arguments.url.trim();
        let max_chars = arguments.max_chars.unwrap_or(DEFAULT_MAX_CHARS).clamp(1, MAX_MAX_CHARS);
        // Checked before the URL is parsed or shown anywhere: a refused URL is not echoed.
        refuse_secrets(&self.leaks, shown, "the URL")?;
        let mut url = Url::parse(shown)
            .map_err(|error| ToolError::RespondToModel(format!("can't fetch {shown}: not a valid URL ({error})")))?;
        refuse_secrets(&self.leaks, url.as_str(), "the URL")?;
        self.check_host(&url)?;
        self.policy.admit(session, "web_fetch")?;
        let mut chain = vec![url.clone()];
        let response = loop {
            let response = self.request(&url, deadline).await?;
            let status = response.status();
            let Some(location) = response.headers().get(LOCATION).filter(|_| status.is_redirection()) else {
                break response;
            };
            let location = location.to_str().unwrap_or_default();
            let next = url.join(location).map_err(|error| {
                ToolError::RespondToModel(format!(
                    "can't fetch {url}: it redirects to {location:?}, not a valid URL ({error})"
                ))
            })?;
            if chain.contains(&next) {
                chain.push(next);
                return Err(ToolError::RespondToModel(format!(
                    "can't fetch {shown}: redirect loop ({})",
                    describe_chain(&chain)
                )));
            }
            if chain.len() > MAX_REDIRECTS {
                return Err(ToolError::RespondToModel(format!(
                    "can't fetch {shown}: too many redirects ({MAX_REDIRECTS}); the last one pointed to {next}"
                )));
            }
            self.check_host(&next)?;
            chain.push(next.clone());
            url = next;
        };
        let status = response.status();
        let content_type =
            response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).map(str::to_owned);
        let (body, cut) = self.read_body(response, &url, deadline).await?;
        if !status.is_success() {
            let excerpt = render(&body, content_type.as_deref(), &url)
                .map(|(_, _, text)| html::collapse_whitespace(&text).chars().take(300).collect::<String>())
                .unwrap_or_default();
            let reason = status.canonical_reason().unwrap_or("");
            let mut message = format!("can't fetch {url}: HTTP {} {reason}", status.as_u16());
            if !excerpt.is_empty() {
                message.push_str(&format!(": {excerpt}"));
            }
            return Err(ToolError::RespondToModel(message));
        }
        let (media_type, title, text) = render(&body, content_type.as_deref(), &url).map_err(|refusal| {
            let message = match refusal {
                NotText::DeclaredBinary(media_type) => {
                    format!("can't fetch {url}: it is binary content ({media_type}), which web_fetch doesn't read")
                }
                NotText::LooksBinary(media_type) => format!(
                    "can't fetch {url}: it claims to be {media_type} but the body is binary (NUL bytes or invalid text)"
                ),
            };
            ToolError::RespondToModel(message)
        })?;
        Ok(ToolOutput::text(self.compose(&chain, &media_type, title, &text, cut.as_ref(), max_chars)))
    }

    /// The allow and block lists, for the first URL and every redirect.
    fn check_host(&self, url: &Url) -> Result<(), ToolError> {
        match url.host_str() {
            Some(host) => self.policy.check_host(host.trim_start_matches('[').trim_end_matches(']'), "web_fetch"),
            // The SSRF guard refuses a URL without a host.
            None => Ok(()),
        }
    }

    /// Vets `url` and sends one GET to exactly the vetted addresses.
    async fn request(&self, url: &Url, deadline: Instant) -> Result<Response, ToolError> {
        let vetted = timeout_at(deadline, self.guard.vet(url))
            .await
            .map_err(|_| self.timed_out(url, "resolving the host"))?
            .map_err(|refusal| ToolError::RespondToModel(refusal.to_string()))?;
        let client = self.client_for(&vetted)?;
        let accept = "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.9,*/*;q=0.5";
        timeout_at(deadline, client.get(url.clone()).header(ACCEPT, accept).send())
            .await
            .map_err(|_| self.timed_out(url, "waiting for a response"))?
            .map_err(|error| ToolError::RespondToModel(format!("can't fetch {url}: {}", innermost_cause(&error))))
    }

    /// A client for one hop: no redirects, no proxy (a proxy would connect to a host we
    /// never vetted), and name resolution pinned to the vetted addresses.
    fn client_for(&self, vetted: &Vetted) -> Result<Client, ToolError> {
        let mut builder = Client::builder()
            .redirect(Policy::none())
            .no_proxy()
            .connect_timeout(self.limits.connect_timeout)
            .user_agent(USER_AGENT)
            .dns_resolver(Arc::new(NoLookups));
        if let Some(domain) = &vetted.domain {
            builder = builder.resolve_to_addrs(domain, &vetted.addresses);
        }
        builder.build().map_err(|error| ToolError::Fatal(format!("can't set up the HTTP client: {error}")))
    }

    /// Reads at most `max_bytes` of the body before `deadline`.
    async fn read_body(
        &self,
        mut response: Response,
        url: &Url,
        deadline: Instant,
    ) -> Result<(Vec<u8>, Option<Cut>), ToolError> {
        let mut body = Vec::new();
        loop {
            let chunk = match timeout_at(deadline, response.chunk()).await {
                Err(_) if body.is_empty() => return Err(self.timed_out(url, "waiting for the body")),
                Err(_) => return Ok((body, Some(Cut::Deadline))),
                Ok(Err(error)) if body.is_empty() => {
                    return Err(ToolError::RespondToModel(format!(
                        "can't fetch {url}: the body broke off: {}",
                        innermost_cause(&error)
                    )));
                }
                Ok(Err(error)) => return Ok((body, Some(Cut::Broken(innermost_cause(&error))))),
                Ok(Ok(None)) => return Ok((body, None)),
                Ok(Ok(Some(chunk))) => chunk,
            };
            let room = self.limits.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                return Ok((body, Some(Cut::Size)));
            }
            body.extend_from_slice(&chunk);
        }
    }

    fn timed_out(&self, url: &Url, stage: &str) -> ToolError {
        ToolError::RespondToModel(format!(
            "can't fetch {url}: timed out after {}s {stage}",
            self.limits.total_timeout.as_secs_f64()
        ))
    }

    /// The result text: where it came from, what it is, the content, and notes on cuts.
    fn compose(
        &self,
        chain: &[Url],
        media_type: &str,
        title: Option<String>,
        text: &str,
        cut: Option<&Cut>,
        max_chars: usize,
    ) -> String {
        let mut output = String::new();
        if let Some(last) = chain.last() {
            output.push_str(&format!("URL: {last}\n"));
        }
        if chain.len() > 1 {
            output.push_str(&format!("Redirected from: {}\n", chain[0]));
        }
        if let Some(title) = title {
            output.push_str(&format!("Title: {title}\n"));
        }
        output.push_str(&format!("Content-Type: {media_type}\n\n"));
        let total = text.chars().count();
        if total > max_chars {
            output.extend(text.chars().take(max_chars));
            output.push_str(&format!(
                "\n\n[output cut at {max_chars} of {total} characters; call web_fetch with a larger max_chars (up to {MAX_MAX_CHARS}) to read more]"
            ));
        } else if text.trim().is_empty() {
            output.push_str("(no readable text: the page may need JavaScript)");
        } else {
            output.push_str(text);
        }
        match cut {
            None => {}
            Some(Cut::Size) => output.push_str(&format!(
                "\n\n[truncated: the body is larger than {} bytes; the rest was not downloaded]",
                self.limits.max_bytes
            )),
            Some(Cut::Deadline) => output.push_str(&format!(
                "\n\n[truncated: the server was still sending after {}s; the body was cut there]",
                self.limits.total_timeout.as_secs_f64()
            )),
            Some(Cut::Broken(reason)) => {
                output.push_str(&format!("\n\n[truncated: the connection broke off ({reason})]"))
            }
        }
        output
    }
}

/// The body as (media type, page title, text).
fn render(body: &[u8], content_type: Option<&str>, url: &Url) -> Result<(String, Option<String>, String), NotText> {
    let classified = content::classify(content_type, body)?;
    let mut text = content::decode(body, &classified.charset);
    let mut title = None;
    if classified.kind == Kind::Html {
        let document = html::to_markdown(&text, Some(url));
        title = document.title;
        text = document.markdown;
    }
    Ok((classified.media_type, title, text))
}

fn describe_chain(chain: &[Url]) -> String {
    chain.iter().map(Url::as_str).collect::<Vec<_>>().join(" → ")
}

impl Tool for WebFetchTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<WebFetchArguments>("web_fetch")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: WebFetchArguments = parse(arguments)?;
        let deadline = Instant::now() + self.limits.total_timeout;
        tokio::select! {
            () = context.cancel.cancelled() => Err(ToolError::RespondToModel("web_fetch was cancelled".to_owned())),
            result = self.fetch(arguments, &context.session_key, deadline) => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_use_exactly_the_vetted_addresses_and_nothing_else_resolves() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = axum::Router::new().route("/", axum::routing::get(|| async { "pinned" }));
        tokio::spawn(async move { axum::serve(listener, router).await });
        let tool = WebFetchTool::new(FetchLimits::default());
        // `.invalid` never resolves, so reaching the server proves the pin was used.
        let url = Url::parse(&format!("http://pinned.invalid:{}/", address.port())).unwrap();
        let vetted = Vetted { url: url.clone(), domain: Some("pinned.invalid".to_owned()), addresses: vec![address] };
        let client = tool.client_for(&vetted).unwrap();
        let body = client.get(url).send().await.unwrap().text().await.unwrap();
        assert_eq!(body, "pinned");
        let error = client.get("http://elsewhere.invalid/").send().await.unwrap_err();
        assert!(innermost_cause(&error).contains("elsewhere.invalid was not vetted by the SSRF guard"), "{error:?}");
    }

    #[test]
    fn output_is_capped_by_characters_with_a_note() {
        let tool = WebFetchTool::new(FetchLimits::default());
        let chain = [Url::parse("https://site.test/").unwrap()];
        let text = tool.compose(&chain, "text/plain", None, &"é".repeat(30), None, 10);
        assert_eq!(
            text,
            format!(
                "URL: https://site.test/\nContent-Type: text/plain\n\n{}\n\n[output cut at 10 of 30 characters; call web_fetch with a larger max_chars (up to 100000) to read more]",
                "é".repeat(10)
            )
        );
    }
}
