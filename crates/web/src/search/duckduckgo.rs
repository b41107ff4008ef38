//! The DuckDuckGo backend: the query is POSTed to its JavaScript-free results page and
//! the results are read from the HTML (`result__a` title links, `result__snippet`
//! snippets, ads skipped); result links point at a redirector that carries the real
//! address in its `uddg` parameter.

use reqwest::{Client, StatusCode, Url};

use super::{SearchFailure, SearchResult, clean, send};
use squidbot_core::html::{Token, Tokenizer};

const NAME: &str = "DuckDuckGo";

/// Searches `query` on the results page at `endpoint`.
pub(crate) async fn search(client: &Client, endpoint: &Url, query: &str) -> Result<Vec<SearchResult>, SearchFailure> {
    let request = client.post(endpoint.clone()).form(&[("q", query), ("b", "")]);
    let (status, body) = send(NAME, request).await?;
    let results = parse(&body, endpoint);
    // It answers automated-looking traffic with 202 and a challenge page instead of results.
    if results.is_empty() && (status == StatusCode::ACCEPTED || body.contains("anomaly")) {
        return Err(SearchFailure(format!(
            "can't search: {NAME} asked for a bot check instead of answering; wait a while, or configure the searxng or brave backend in [tools.web]"
        )));
    }
    Ok(results)
}

/// What text is being collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Title,
    Snippet,
}

/// An element whose text is being collected.
#[derive(Debug)]
struct Capture {
    field: Field,
    element: String,
    depth: usize,
    text: String,
}

/// Results on a results page; relative links are resolved against `endpoint`.
pub(crate) fn parse(body: &str, endpoint: &Url) -> Vec<SearchResult> {
    let mut results: Vec<SearchResult> = Vec::new();
    let mut capture: Option<Capture> = None;
    let mut in_ad = false;
    // A title of an ad or an unreadable link: its snippet must not land on the result before.
    let mut current_skipped = false;
    for token in Tokenizer::new(body) {
        match token {
            Token::Start(tag) => {
                if let Some(open) = &mut capture {
                    if tag.name == open.element && !tag.self_closing {
                        open.depth += 1;
                    }
                    continue;
                }
                if tag.name == "div" && tag.has_class("result") {
                    in_ad = tag.has_class("result--ad");
                }
                if tag.name == "a" && (tag.has_class("result__a") || tag.has_class("result-link")) {
                    let target = tag.attribute("href").and_then(|href| target(endpoint, href));
                    current_skipped = in_ad || target.is_none();
                    if let Some(url) = target.filter(|_| !in_ad) {
                        results.push(SearchResult { title: String::new(), url, snippet: String::new() });
                    }
                    capture = Some(Capture { field: Field::Title, element: tag.name, depth: 1, text: String::new() });
                } else if tag.has_class("result__snippet") || tag.has_class("result-snippet") {
                    capture = Some(Capture { field: Field::Snippet, element: tag.name, depth: 1, text: String::new() });
                }
            }
            Token::End(name) => {
                let Some(open) = &mut capture else {
                    continue;
                };
                if name != open.element {
                    continue;
                }
                open.depth -= 1;
                if open.depth > 0 {
                    continue;
                }
                let Some(done) = capture.take() else {
                    continue;
                };
                if current_skipped {
                    continue;
                }
                if let Some(last) = results.last_mut() {
                    match done.field {
                        Field::Title => last.title = clean(&done.text),
                        Field::Snippet if last.snippet.is_empty() => last.snippet = clean(&done.text),
                        Field::Snippet => {}
                    }
                }
            }
            Token::Text(text) => {
                if let Some(open) = &mut capture {
                    open.text.push_str(text);
                }
            }
        }
    }
    results
}

/// The address a result link leads to: the `uddg` parameter of the redirector, or the
/// link itself when it is direct; `None` for ad links and non-web schemes.
fn target(endpoint: &Url, href: &str) -> Option<String> {
    let link = endpoint.join(href.trim()).ok()?;
    if let Some((_, destination)) = link.query_pairs().find(|(key, _)| key == "uddg") {
        let destination = Url::parse(&destination).ok()?;
        return matches!(destination.scheme(), "http" | "https").then(|| destination.to_string());
    }
    if link.path().ends_with("/y.js") || link.query_pairs().any(|(key, _)| key == "ad_domain") {
        return None;
    }
    matches!(link.scheme(), "http" | "https").then(|| link.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Url {
        Url::parse("http://127.0.0.1:9/html/").unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn redirector_links_are_decoded() {
        assert_eq!(
            target(&endpoint(), "//redirector.test/l/?uddg=https%3A%2F%2Fsite.test%2Fa%20b%3Fx%3D1%26y%3D2&rut=abc")
                .as_deref(),
            Some("https://site.test/a%20b?x=1&y=2")
        );
        assert_eq!(target(&endpoint(), "https://direct.test/page").as_deref(), Some("https://direct.test/page"));
        assert_eq!(target(&endpoint(), "/y.js?ad_domain=shop.test&u3=x"), None);
        assert_eq!(target(&endpoint(), "//redirector.test/l/?uddg=javascript%3Aalert(1)"), None);
    }

    #[test]
    fn a_results_page_is_read() {
        let page = r#"<html><body><div class="serp__results">
          <div class="result results_links results_links_deep result--ad">
            <div class="links_main"><h2 class="result__title"><a class="result__a" href="https://redirector.test/y.js?ad_domain=shop.test">Buy things</a></h2>
            <a class="result__snippet" href="https://redirector.test/y.js?ad_domain=shop.test">An <b>ad</b></a></div>
          </div>
          <div class="result results_links results_links_deep web-result ">
            <div class="links_main links_deep result__body">
              <h2 class="result__title"><a rel="nofollow" class="result__a" href="//redirector.test/l/?uddg=https%3A%2F%2Fone.test%2F&amp;rut=1">First &amp; <b>best</b></a></h2>
              <div class="result__extras"><a class="result__url" href="//redirector.test/l/?uddg=https%3A%2F%2Fone.test%2F">one.test</a></div>
              <a class="result__snippet" href="//redirector.test/l/?uddg=https%3A%2F%2Fone.test%2F">The <b>first</b>
                 result.</a>
            </div>
          </div>
          <div class="result results_links web-result">
            <h2 class="result__title"><a class="result__a" href="//redirector.test/l/?uddg=https%3A%2F%2Ftwo.test%2Fdocs">Second</a></h2>
          </div>
        </div></body></html>"#;
        assert_eq!(
            parse(page, &endpoint()),
            [
                SearchResult {
                    title: "First & best".to_owned(),
                    url: "https://one.test/".to_owned(),
                    snippet: "The first result.".to_owned()
                },
                SearchResult {
                    title: "Second".to_owned(),
                    url: "https://two.test/docs".to_owned(),
                    snippet: String::new()
                },
            ]
        );
    }

    #[test]
    fn a_page_without_results_gives_none() {
        assert!(parse("<div class=\"no-results\">No results.</div>", &endpoint()).is_empty());
        assert!(parse("", &endpoint()).is_empty());
    }
}
