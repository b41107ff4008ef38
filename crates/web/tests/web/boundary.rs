//! What may leave through the web tools: URLs and queries carrying a secret are refused
//! and never requested, a session's requests are limited per minute, and the host lists
//! decide which sites `web_fetch` reaches.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;
use squidbot_core::leaks::LeakScanner;
use squidbot_types::config::{SearchBackend, WebConfig};
use squidbot_web::{FetchLimits, WebFetchTool, WebPolicy, WebSearchTool};

use crate::servers::call;

const SECRET: &str = "s3cret/horse+battery staple";

/// A server that counts every request it gets and answers each with a page.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let router = Router::new().fallback(get(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            ([("content-type", "text/plain")], "hello").into_response()
        }
    }));
    (crate::servers::serve(router).await, hits)
}

fn fetch_tool(address: SocketAddr, config: &WebConfig) -> WebFetchTool {
    WebFetchTool::new_with_allowed_loopback_port(FetchLimits::default(), address.port())
        .with_leak_scanner(LeakScanner::new([SECRET.to_owned()]))
        .with_policy(Arc::new(WebPolicy::from_config(config)))
}

fn base64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[tokio::test]
async fn a_url_carrying_a_secret_is_refused_and_never_requested() {
    let (address, hits) = counting_server().await;
    let tool = fetch_tool(address, &WebConfig::default());
    let base = format!("http://127.0.0.1:{}", address.port());
    let url_safe = base64(format!("user:{SECRET}").as_bytes()).replace('+', "-").replace('/', "_");
    for (url, kind) in [
        (format!("{base}/page?q={SECRET}"), "configured_secret"),
        (format!("{base}/page?q=s3cret%2Fhorse%2Bbattery%20staple"), "configured_secret"),
        (format!("{base}/page?q=s3cret%2fhorse%2bbattery+staple"), "configured_secret"),
        (format!("{base}/{}/page", base64(SECRET.as_bytes())), "configured_secret"),
        (format!("{base}/{url_safe}/page"), "configured_secret"),
        (format!("{base}/collect?key=sk-proj-abcdefghijklmnopqrstuvwx1234"), "openai_key"),
        (format!("{base}/{}", base64(b"ghp_abcdefghijklmnopqrstuvwxyz0123456789")), "github_token"),
        (format!("{base}/s3cret\u{200B}/horse+battery staple"), "configured_secret"),
    ] {
        let refusal = call(&tool, json!({ "url": url })).await.unwrap_err();
        assert_eq!(
            refusal,
            format!("Refused: the URL carries a secret ({kind}); secrets never leave through web requests"),
            "{url}"
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "no refused URL was requested");
    // An ordinary URL still goes through.
    assert!(call(&tool, json!({ "url": format!("{base}/docs?page=2") })).await.unwrap().contains("hello"));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_session_gets_a_limited_number_of_requests_per_minute() {
    let (address, hits) = counting_server().await;
    let tool = fetch_tool(address, &WebConfig { max_requests_per_minute: 2, ..WebConfig::default() });
    let url = format!("http://127.0.0.1:{}/page", address.port());
    assert!(call(&tool, json!({ "url": url })).await.is_ok());
    assert!(call(&tool, json!({ "url": url })).await.is_ok());
    let refusal = call(&tool, json!({ "url": url })).await.unwrap_err();
    assert!(
        refusal.starts_with("Refused: web_fetch is limited to 2 web requests per minute in this session")
            && refusal.contains("try again in "),
        "{refusal}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn host_lists_decide_where_web_fetch_goes_and_block_wins() {
    let (address, hits) = counting_server().await;
    let url = format!("http://127.0.0.1:{}/page", address.port());
    let lists = |allow: &[&str], block: &[&str]| WebConfig {
        allow_hosts: allow.iter().map(|host| (*host).to_owned()).collect(),
        block_hosts: block.iter().map(|host| (*host).to_owned()).collect(),
        ..WebConfig::default()
    };
    let not_allowed = call(&fetch_tool(address, &lists(&["example.org"], &[])), json!({ "url": url })).await;
    assert_eq!(
        not_allowed.unwrap_err(),
        "Refused: web_fetch may only reach the hosts in tools.web.allow_hosts (example.org), not 127.0.0.1"
    );
    let blocked = call(&fetch_tool(address, &lists(&["127.0.0.*"], &["127.0.0.1"])), json!({ "url": url })).await;
    assert_eq!(
        blocked.unwrap_err(),
        "Refused: web_fetch may not reach 127.0.0.1 (it matches \"127.0.0.1\" in tools.web.block_hosts)"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let allowed = call(&fetch_tool(address, &lists(&["127.0.0.*"], &["*.example.org"])), json!({ "url": url })).await;
    assert!(allowed.is_ok(), "{allowed:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // The SSRF guard still applies to allowed hosts.
    let guarded = call(&fetch_tool(address, &lists(&["10.*"], &[])), json!({ "url": "http://10.0.0.5/" })).await;
    assert_eq!(guarded.unwrap_err(), "refused: 10.0.0.5 is a private address");
}

#[tokio::test]
async fn a_search_query_carrying_a_secret_is_refused_and_never_sent() {
    let (address, hits) = counting_server().await;
    let config = WebConfig {
        search_backend: SearchBackend::Searxng,
        searxng_url: Some(format!("http://127.0.0.1:{}/", address.port())),
        ..WebConfig::default()
    };
    let tool = WebSearchTool::from_config(&config, &|_| None)
        .unwrap()
        .with_leak_scanner(LeakScanner::new([SECRET.to_owned()]));
    for query in [format!("is {SECRET} a good password"), "who owns sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUV".to_owned()] {
        let refusal = call(&tool, json!({ "query": query })).await.unwrap_err();
        assert!(refusal.starts_with("Refused: the search query carries a secret ("), "{refusal}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}
