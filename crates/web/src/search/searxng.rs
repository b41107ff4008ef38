//! The SearXNG backend: `GET <base>/search?q=…&format=json` on an instance whose `json`
//! output format is enabled.

use reqwest::{Client, StatusCode, Url};
use serde::Deserialize;

use super::{SearchFailure, SearchResult, send, status_message};

const NAME: &str = "SearXNG";

/// The part of SearXNG's JSON answer we read.
#[derive(Debug, Deserialize)]
struct Answer {
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
    content: Option<String>,
}

/// Searches `query` on the instance at `base`.
pub(crate) async fn search(client: &Client, base: &Url, query: &str) -> Result<Vec<SearchResult>, SearchFailure> {
    let mut endpoint = base.clone();
    let path = format!("{}/search", endpoint.path().trim_end_matches('/'));
    endpoint.set_path(&path);
    endpoint.set_query(None);
    let request = client
        .get(endpoint)
        .query(&[("q", query), ("format", "json")])
        .header(reqwest::header::ACCEPT, "application/json");
    let (_, body) = send(NAME, request).await.map_err(|failure| {
        if failure.0 == status_message(NAME, StatusCode::FORBIDDEN) {
            SearchFailure(format!(
                "{}; an instance answers 403 when its `json` output format is off (add `json` to `search.formats` in its settings.yml)",
                failure.0
            ))
        } else {
            failure
        }
    })?;
    parse(&body).map_err(SearchFailure)
}

/// Results of a SearXNG JSON answer.
pub(crate) fn parse(body: &str) -> Result<Vec<SearchResult>, String> {
    let answer: Answer = super::json_answer(NAME, body)?;
    Ok(answer
        .results
        .into_iter()
        .filter_map(|result| super::hit(result.title.as_deref(), result.url, result.content.as_deref()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_read_and_broken_ones_skipped() {
        let body = r#"{"query": "rust", "number_of_results": 0, "results": [
            {"url": "https://lang.test/", "title": "Rust Programming Language", "content": "A language <b>empowering</b> everyone", "engine": "x", "score": 1.0},
            {"title": "no url"},
            {"url": "https://lang.test/book/", "title": "The Book", "content": null}
        ], "answers": [], "suggestions": ["rust lang"]}"#;
        let results = parse(body).unwrap_or_default();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].snippet, "A language empowering everyone");
        assert_eq!(results[1].snippet, "");
    }

    #[test]
    fn an_html_answer_is_a_clear_error() {
        let error = parse("<html>captcha</html>").err().unwrap_or_default();
        assert!(error.starts_with("can't search: SearXNG sent an answer that is not its JSON format"), "{error}");
    }
}
