//! `web_search` against local fakes of SearXNG, the Brave Search API and DuckDuckGo's
//! HTML page, each serving its documented answer shape, plus their failures.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;
use squidbot_types::config::{SearchBackend, WebConfig};
use squidbot_types::secret::Secret;
use squidbot_web::WebSearchTool;

use crate::servers::{call, serve};

/// One request a fake received: its query parameters (or form fields) and headers.
type Request = (HashMap<String, String>, HeaderMap);

/// What a fake received.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Request>>>);

impl Seen {
    fn record(&self, parameters: HashMap<String, String>, headers: HeaderMap) {
        self.0.lock().unwrap().push((parameters, headers));
    }

    fn last(&self) -> Request {
        self.0.lock().unwrap().last().cloned().expect("the fake got a request")
    }
}

/// A fake answering every query with `status` and `body` as `content_type`.
async fn fake(path: &'static str, status: StatusCode, content_type: &'static str, body: String) -> (SocketAddr, Seen) {
    let seen = Seen::default();
    let answer = move |seen: Seen, parameters: HashMap<String, String>, headers: HeaderMap| {
        seen.record(parameters, headers);
        let body = body.clone();
        async move { (status, [(header::CONTENT_TYPE, content_type)], body).into_response() }
    };
    let get_answer = answer.clone();
    let router = Router::new()
        .route(
            path,
            get(
                move |State(seen): State<Seen>,
                      Query(parameters): Query<HashMap<String, String>>,
                      headers: HeaderMap| { get_answer(seen, parameters, headers) },
            )
            .merge(post(move |State(seen): State<Seen>, headers: HeaderMap, form: String| {
                let parameters = form_fields(&form);
                answer(seen, parameters, headers)
            })),
        )
        .with_state(seen.clone());
    (serve(router).await, seen)
}

fn form_fields(form: &str) -> HashMap<String, String> {
    let url = reqwest::Url::parse(&format!("http://form.test/?{form}")).unwrap();
    url.query_pairs().map(|(key, value)| (key.into_owned(), value.into_owned())).collect()
}

fn tool(config: WebConfig) -> WebSearchTool {
    WebSearchTool::from_config(&config, &|_| None).unwrap()
}

fn searxng_config(address: SocketAddr) -> WebConfig {
    WebConfig {
        search_backend: SearchBackend::Searxng,
        searxng_url: Some(format!("http://127.0.0.1:{}/", address.port())),
        ..WebConfig::default()
    }
}

fn searxng_answer() -> String {
    json!({
        "query": "squid hearts",
        "number_of_results": 0,
        "results": [
            {"url": "https://ocean.test/squid", "title": "Squid anatomy", "content": "Squids have <b>three</b> hearts.", "engine": "one", "score": 2.0},
            {"url": "https://ocean.test/squid", "title": "Duplicate", "content": "same page from another engine", "engine": "two", "score": 1.0},
            {"url": "https://wiki.test/Squid", "title": "Squid - Wiki", "content": "", "engine": "one"},
            {"url": "https://third.test/", "title": "Third", "content": "third"}
        ],
        "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []
    })
    .to_string()
}

#[tokio::test]
async fn searxng_results_are_numbered() {
    let (address, seen) = fake("/search", StatusCode::OK, "application/json", searxng_answer()).await;
    let text = call(&tool(searxng_config(address)), json!({ "query": "squid hearts", "count": 2 })).await.unwrap();
    assert_eq!(
        text,
        "Results for \"squid hearts\" (SearXNG):\n\n1. Squid anatomy\n   https://ocean.test/squid\n   Squids have three hearts.\n\n\
         2. Squid - Wiki\n   https://wiki.test/Squid\n"
    );
    let (parameters, _) = seen.last();
    assert_eq!(parameters.get("q").map(String::as_str), Some("squid hearts"));
    assert_eq!(parameters.get("format").map(String::as_str), Some("json"));
}

#[tokio::test]
async fn brave_results_are_read_with_the_key_in_its_header() {
    let answer = json!({
        "type": "search",
        "query": {"original": "squid"},
        "web": {"type": "search", "results": [
            {"title": "Squid &amp; friends", "url": "https://ocean.test/friends", "description": "All about <strong>squid</strong>.", "age": "2 days"},
            {"title": "Cephalopods", "url": "https://ocean.test/cephalopods", "description": "Relatives."}
        ]}
    });
    let (address, seen) = fake("/res/v1/web/search", StatusCode::OK, "application/json", answer.to_string()).await;
    let config = WebConfig {
        search_backend: SearchBackend::Brave,
        brave_api_key: Some(Secret::new("brave-test-key")),
        brave_url: format!("http://127.0.0.1:{}/res/v1/web/search", address.port()),
        ..WebConfig::default()
    };
    let text = call(&tool(config), json!({ "query": "squid" })).await.unwrap();
    assert_eq!(
        text,
        "Results for \"squid\" (Brave):\n\n1. Squid & friends\n   https://ocean.test/friends\n   All about squid.\n\n\
         2. Cephalopods\n   https://ocean.test/cephalopods\n   Relatives.\n"
    );
    let (parameters, headers) = seen.last();
    assert_eq!(parameters.get("q").map(String::as_str), Some("squid"));
    assert_eq!(parameters.get("count").map(String::as_str), Some("5"));
    assert_eq!(headers.get("x-subscription-token").and_then(|value| value.to_str().ok()), Some("brave-test-key"));
}

#[tokio::test]
async fn the_brave_key_can_come_from_the_environment() {
    let (address, seen) = fake("/search", StatusCode::OK, "application/json", r#"{"type":"search"}"#.to_owned()).await;
    let config = WebConfig {
        search_backend: SearchBackend::Brave,
        brave_api_key_env: "TEST_BRAVE_KEY".to_owned(),
        brave_url: format!("http://127.0.0.1:{}/search", address.port()),
        ..WebConfig::default()
    };
    let tool =
        WebSearchTool::from_config(&config, &|name| (name == "TEST_BRAVE_KEY").then(|| "from-env".to_owned())).unwrap();
    assert_eq!(call(&tool, json!({ "query": "nothing" })).await.unwrap(), "No results for \"nothing\" (Brave).");
    let (_, headers) = seen.last();
    assert_eq!(headers.get("x-subscription-token").and_then(|value| value.to_str().ok()), Some("from-env"));
}

const DUCKDUCKGO_PAGE: &str = r#"<!DOCTYPE html><html><head><title>squid at DuckDuckGo</title></head><body>
<div id="links" class="results">
  <div class="result results_links results_links_deep result--ad">
    <div class="links_main links_deep result__body">
      <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://redirector.test/y.js?ad_domain=shop.test&amp;ad_provider=x">Buy squid</a></h2>
      <a class="result__snippet" href="https://redirector.test/y.js?ad_domain=shop.test">Cheap <b>squid</b>.</a>
    </div>
  </div>
  <div class="result results_links results_links_deep web-result ">
    <div class="links_main links_deep result__body">
      <h2 class="result__title">
        <a rel="nofollow" class="result__a" href="//redirector.test/l/?uddg=https%3A%2F%2Focean.test%2Fsquid%3Flang%3Den&amp;rut=f00">Squid &ndash; Ocean facts</a>
      </h2>
      <div class="result__extras"><div class="result__extras__url">
        <a class="result__url" href="//redirector.test/l/?uddg=https%3A%2F%2Focean.test%2Fsquid%3Flang%3Den&amp;rut=f00">ocean.test/squid</a>
      </div></div>
      <a class="result__snippet" href="//redirector.test/l/?uddg=https%3A%2F%2Focean.test%2Fsquid%3Flang%3Den&amp;rut=f00">Squids have <b>three</b> hearts and blue blood.</a>
      <div class="clear"></div>
    </div>
  </div>
  <div class="result results_links results_links_deep web-result ">
    <div class="links_main links_deep result__body">
      <h2 class="result__title"><a rel="nofollow" class="result__a" href="//redirector.test/l/?uddg=https%3A%2F%2Fwiki.test%2FSquid&amp;rut=b4r">Squid - Wiki</a></h2>
      <a class="result__snippet" href="//redirector.test/l/?uddg=https%3A%2F%2Fwiki.test%2FSquid">Squid are cephalopods.</a>
    </div>
  </div>
</div></body></html>"#;

#[tokio::test]
async fn duckduckgo_html_results_are_parsed_and_redirect_links_decoded() {
    let (address, seen) = fake("/html/", StatusCode::OK, "text/html; charset=UTF-8", DUCKDUCKGO_PAGE.to_owned()).await;
    let config =
        WebConfig { duckduckgo_url: format!("http://127.0.0.1:{}/html/", address.port()), ..WebConfig::default() };
    let text = call(&tool(config), json!({ "query": "squid" })).await.unwrap();
    assert_eq!(
        text,
        "Results for \"squid\" (DuckDuckGo):\n\n1. Squid – Ocean facts\n   https://ocean.test/squid?lang=en\n   Squids have three hearts and blue blood.\n\n\
         2. Squid - Wiki\n   https://wiki.test/Squid\n   Squid are cephalopods.\n"
    );
    let (parameters, _) = seen.last();
    assert_eq!(parameters.get("q").map(String::as_str), Some("squid"));
}

#[tokio::test]
async fn a_duckduckgo_bot_check_is_explained() {
    let page =
        "<html><body><div class=\"anomaly-modal__title\">Unfortunately, bots use DuckDuckGo too.</div></body></html>";
    let (address, _) = fake("/html/", StatusCode::ACCEPTED, "text/html", page.to_owned()).await;
    let config =
        WebConfig { duckduckgo_url: format!("http://127.0.0.1:{}/html/", address.port()), ..WebConfig::default() };
    let error = call(&tool(config), json!({ "query": "squid" })).await.unwrap_err();
    assert!(error.starts_with("can't search: DuckDuckGo asked for a bot check"), "{error}");
}

#[tokio::test]
async fn backend_errors_are_clear() {
    let (limited, _) = fake("/search", StatusCode::TOO_MANY_REQUESTS, "text/plain", "slow down".to_owned()).await;
    let error = call(&tool(searxng_config(limited)), json!({ "query": "squid" })).await.unwrap_err();
    assert_eq!(
        error,
        "can't search: SearXNG is rate limiting (HTTP 429 Too Many Requests); wait before searching again"
    );

    let (broken, _) = fake("/search", StatusCode::INTERNAL_SERVER_ERROR, "text/plain", "oops".to_owned()).await;
    let error = call(&tool(searxng_config(broken)), json!({ "query": "squid" })).await.unwrap_err();
    assert_eq!(error, "can't search: SearXNG failed (HTTP 500 Internal Server Error); try again later");

    let (forbidden, _) = fake("/search", StatusCode::FORBIDDEN, "text/html", "Forbidden".to_owned()).await;
    let error = call(&tool(searxng_config(forbidden)), json!({ "query": "squid" })).await.unwrap_err();
    assert!(error.contains("`json` output format is off"), "{error}");

    let (garbled, _) = fake("/search", StatusCode::OK, "text/html", "<html>not json</html>".to_owned()).await;
    let error = call(&tool(searxng_config(garbled)), json!({ "query": "squid" })).await.unwrap_err();
    assert!(error.starts_with("can't search: SearXNG sent an answer that is not its JSON format"), "{error}");

    let (brave, _) = fake("/search", StatusCode::TOO_MANY_REQUESTS, "application/json", "{}".to_owned()).await;
    let config = WebConfig {
        search_backend: SearchBackend::Brave,
        brave_api_key: Some(Secret::new("k")),
        brave_url: format!("http://127.0.0.1:{}/search", brave.port()),
        ..WebConfig::default()
    };
    let error = call(&tool(config), json!({ "query": "squid" })).await.unwrap_err();
    assert_eq!(error, "can't search: Brave is rate limiting (HTTP 429 Too Many Requests); wait before searching again");

    let closed = serve(Router::new()).await;
    let unreachable = WebConfig {
        searxng_url: Some(format!("http://127.0.0.1:{}/nowhere/", closed.port())),
        ..searxng_config(closed)
    };
    let error = call(&tool(unreachable), json!({ "query": "squid" })).await.unwrap_err();
    assert_eq!(error, "can't search: SearXNG answered HTTP 404 Not Found");
}

#[tokio::test]
async fn bad_arguments_and_missing_configuration_are_explained() {
    let config = WebConfig { search_backend: SearchBackend::Searxng, ..WebConfig::default() };
    let error = call(&tool(config), json!({ "query": "squid" })).await.unwrap_err();
    assert_eq!(error, "web_search is not configured: search_backend is searxng but tools.web.searxng_url is not set");
    let (address, _) = fake("/search", StatusCode::OK, "application/json", searxng_answer()).await;
    let error = call(&tool(searxng_config(address)), json!({ "query": "   " })).await.unwrap_err();
    assert_eq!(error, "can't search: the query is empty");
    let error = call(&tool(searxng_config(address)), json!({ "count": 3 })).await.unwrap_err();
    assert!(error.starts_with("invalid arguments: missing field `query`"), "{error}");
    let text = call(&tool(searxng_config(address)), json!({ "query": "squid", "count": 500 })).await.unwrap();
    assert!(text.contains("\n3. Third"), "count is capped, not refused: {text}");
}
