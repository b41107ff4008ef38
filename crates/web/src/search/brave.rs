//! The Brave Search API backend: `GET <endpoint>?q=…&count=N` with the key in
//! `X-Subscription-Token`; results under `web.results[]`.

use reqwest::{Client, Url};
use serde::Deserialize;
use squidbot_types::secret::Secret;

use super::{MAX_COUNT, SearchFailure, SearchResult, send};

const NAME: &str = "Brave";

#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    web: Option<Web>,
}

#[derive(Debug, Deserialize)]
struct Web {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Debug, Deserialize)]
struct Hit {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// Searches `query`, asking for `count` results.
pub(crate) async fn search(
    client: &Client,
    endpoint: &Url,
    key: &Secret,
    query: &str,
    count: usize,
) -> Result<Vec<SearchResult>, SearchFailure> {
    let count = count.min(MAX_COUNT).to_string();
    let request = client
        .get(endpoint.clone())
        .query(&[("q", query), ("count", count.as_str())])
        .header(reqwest::header::ACCEPT, "application/json")
        .header("X-Subscription-Token", key.expose());
    let (_, body) = send(NAME, request).await?;
    parse(&body).map_err(SearchFailure)
}

/// Results of a Brave web search answer.
pub(crate) fn parse(body: &str) -> Result<Vec<SearchResult>, String> {
    let answer: Answer = super::json_answer(NAME, body)?;
    Ok(answer
        .web
        .map(|web| web.results)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|result| super::hit(result.title.as_deref(), result.url, result.description.as_deref()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_results_are_read() {
        let body = r#"{"type": "search", "query": {"original": "rust"}, "web": {"type": "search", "results": [
            {"title": "Rust &amp; Cargo", "url": "https://lang.test/", "description": "A <strong>fast</strong> language", "age": "1 day"}
        ]}}"#;
        let results = parse(body).unwrap_or_default();
        assert_eq!(
            results,
            [SearchResult {
                title: "Rust & Cargo".to_owned(),
                url: "https://lang.test/".to_owned(),
                snippet: "A fast language".to_owned()
            }]
        );
    }

    #[test]
    fn an_answer_without_web_results_is_empty() {
        assert_eq!(parse(r#"{"type": "search", "query": {"original": "x"}}"#), Ok(Vec::new()));
    }
}
