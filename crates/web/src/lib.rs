//! squidbot's web tools: `web_fetch` (an SSRF-guarded fetcher that turns pages into
//! Markdown) and `web_search` (SearXNG, Brave or DuckDuckGo).

pub mod address;
pub mod boundary;
mod content;
pub mod fetch;
pub mod guard;
pub mod html;
mod schema;
pub mod search;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use squidbot_core::leaks::LeakScanner;
use squidbot_core::tool::{DynTool, ToolError, parse_arguments};
use squidbot_types::config::WebConfig;

pub use boundary::WebPolicy;
pub use fetch::{FetchLimits, WebFetchTool};
pub use guard::{Refusal, SsrfGuard};
pub use search::{SearchResult, WebSearchTool};

/// The web tools can't be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The HTTP client failed to initialise (TLS setup).
    #[error("can't set up the web tools' HTTP client: {0}")]
    Client(String),
}

/// `web_fetch` and `web_search` as configured by `[tools.web]`, or none when it is
/// disabled. `environment` looks up `brave_api_key_env`; `leaks` holds the configured
/// secrets no request may carry. Both tools share one request limit.
pub fn web_tools(
    config: &WebConfig,
    environment: &dyn Fn(&str) -> Option<String>,
    leaks: LeakScanner,
) -> Result<Vec<Arc<dyn DynTool>>, SetupError> {
    if !config.enabled {
        return Ok(Vec::new());
    }
    let policy = Arc::new(WebPolicy::from_config(config));
    Ok(vec![
        Arc::new(
            WebFetchTool::new(FetchLimits::from_config(config))
                .with_policy(policy.clone())
                .with_leak_scanner(leaks.clone()),
        ),
        Arc::new(WebSearchTool::from_config(config, environment)?.with_policy(policy).with_leak_scanner(leaks)),
    ])
}

/// Like [`parse_arguments`], but reads a missing (`null`) arguments value as `{}`.
pub(crate) fn parse<T: DeserializeOwned>(arguments: serde_json::Value) -> Result<T, ToolError> {
    let arguments = match arguments {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other,
    };
    parse_arguments(arguments)
}

/// The most specific message in an error's source chain ("Connection refused (os error
/// 111)" rather than "error sending request").
pub(crate) fn innermost_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    let innermost = current.to_string();
    if std::ptr::addr_eq(current, error) { innermost } else { format!("{error}: {innermost}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_tools_are_offered_and_neither_mutates() {
        let tools = web_tools(&WebConfig::default(), &|_| None, LeakScanner::default()).unwrap_or_default();
        let names: Vec<String> = tools.iter().map(|tool| tool.spec().name).collect();
        assert_eq!(names, ["web_fetch", "web_search"]);
        assert!(tools.iter().all(|tool| !tool.mutates()));
        for tool in &tools {
            let spec = tool.spec();
            println!(
                "{} ({} chars): {}",
                spec.name,
                spec.serialized_len(),
                serde_json::to_string(&spec).unwrap_or_default()
            );
        }
        let size: usize = tools.iter().map(|tool| tool.spec().serialized_len()).sum();
        assert!(size < 800, "web tool specs take {size} characters");
    }

    #[test]
    fn disabled_means_no_tools() {
        let config = WebConfig { enabled: false, ..WebConfig::default() };
        assert!(web_tools(&config, &|_| None, LeakScanner::default()).unwrap_or_default().is_empty());
    }
}
