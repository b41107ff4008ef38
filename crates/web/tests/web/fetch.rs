//! `web_fetch` against a local website: conversion, passthrough, binary refusal,
//! redirects, the SSRF guard end to end, the byte cap and the deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use squidbot_web::{FetchLimits, WebFetchTool};

use crate::servers::{bind, call, serve, start};

const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>Squid Facts</title><style>.x { color: red }</style>
<script>document.write("tracking")</script></head>
<body><h1>Squids</h1><p>Squids have <em>three</em> hearts. See <a href="/more">more facts</a>.</p>
<h2>Habitat</h2><ul><li>Oceans</li><li>Aquariums</li></ul></body></html>"#;

/// One redirect to `location`.
fn redirect(location: String) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

fn with_type(content_type: &'static str, body: impl Into<Body>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.into()).into_response()
}

/// The website: `own` is its address, `other` another live local server.
fn site(own: SocketAddr, other: SocketAddr) -> Router {
    let port = own.port();
    Router::new()
        .route("/page", get(|| async { with_type("text/html; charset=utf-8", PAGE) }))
        .route("/data.json", get(|| async { with_type("application/json", r#"{"squid":{"hearts":3}}"#) }))
        .route("/notes.txt", get(|| async { with_type("text/plain", "plain   text\n  stays as it is\n") }))
        .route("/image.png", get(|| async { with_type("image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()) }))
        .route("/liar", get(|| async { with_type("text/html", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01".to_vec()) }))
        .route(
            "/redirect/{remaining}",
            get(|axum::extract::Path(remaining): axum::extract::Path<u32>| async move {
                match remaining {
                    0 => redirect("/page".to_owned()),
                    more => redirect(format!("/redirect/{}", more - 1)),
                }
            }),
        )
        .route("/loop/a", get(|| async { redirect("/loop/b".to_owned()) }))
        .route("/loop/b", get(|| async { redirect("/loop/a".to_owned()) }))
        .route(
            "/to-other-port",
            get(move || async move { redirect(format!("http://127.0.0.1:{}/page", other.port())) }),
        )
        .route("/to-127-0-0-2", get(move || async move { redirect(format!("http://127.0.0.2:{port}/page")) }))
        .route("/to-localhost", get(move || async move { redirect(format!("http://localhost:{}/page", other.port())) }))
        .route("/to-metadata", get(|| async { redirect("http://169.254.169.254/latest/meta-data/".to_owned()) }))
        .route("/to-file", get(|| async { redirect("file:///etc/passwd".to_owned()) }))
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, with_type("text/html", "<h1>Not here</h1>")) }))
        .route("/huge", get(|| async { with_type("text/plain", "x".repeat(2 * 1024 * 1024 + 17)) }))
        .route("/forever", get(|| async { with_type("text/plain", Body::from_stream(trickle())) }))
        .route("/silent", get(|| async { with_type("text/plain", Body::from_stream(silence())) }))
        .route("/agent", get(|headers: HeaderMap| async move { format!("{:?}", headers.get(header::USER_AGENT)) }))
}

/// A body that sends a line every 50 ms and never ends.
fn trickle() -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    futures_util::stream::unfold(0u64, |count| async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some((Ok(bytes::Bytes::from(format!("line {count}\n"))), count + 1))
    })
}

/// A body that never sends a byte.
fn silence() -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    futures_util::stream::pending()
}

/// The website, a second live server, and a tool allowed to reach the website only.
async fn fixture() -> (SocketAddr, SocketAddr, WebFetchTool) {
    let other = serve(Router::new().route("/page", get(|| async { "the other server" }))).await;
    let (listener, own) = bind().await;
    start(listener, site(own, other));
    let limits = FetchLimits { total_timeout: Duration::from_secs(5), ..FetchLimits::default() };
    (own, other, WebFetchTool::new_with_allowed_loopback_port(limits, own.port()))
}

async fn fetch(tool: &WebFetchTool, url: String) -> Result<String, String> {
    call(tool, json!({ "url": url })).await
}

#[tokio::test]
async fn html_becomes_markdown_with_title_headings_and_links() {
    let (own, _, tool) = fixture().await;
    let text = fetch(&tool, format!("http://127.0.0.1:{}/page", own.port())).await.unwrap();
    let base = format!("http://127.0.0.1:{}", own.port());
    assert_eq!(
        text,
        format!(
            "URL: {base}/page\nTitle: Squid Facts\nContent-Type: text/html\n\n# Squids\n\n\
             Squids have three hearts. See [more facts]({base}/more).\n\n## Habitat\n\n- Oceans\n- Aquariums"
        )
    );
    assert!(!text.contains("tracking") && !text.contains("color"), "scripts and styles are dropped");
}

#[tokio::test]
async fn json_and_plain_text_pass_through() {
    let (own, _, tool) = fixture().await;
    let text = fetch(&tool, format!("http://127.0.0.1:{}/data.json", own.port())).await.unwrap();
    assert!(text.ends_with("Content-Type: application/json\n\n{\"squid\":{\"hearts\":3}}"), "{text}");
    let text = fetch(&tool, format!("http://127.0.0.1:{}/notes.txt", own.port())).await.unwrap();
    assert!(text.ends_with("Content-Type: text/plain\n\nplain   text\n  stays as it is\n"), "{text}");
}

#[tokio::test]
async fn binary_content_is_refused_and_so_is_a_lying_content_type() {
    let (own, _, tool) = fixture().await;
    let base = format!("http://127.0.0.1:{}", own.port());
    let error = fetch(&tool, format!("{base}/image.png")).await.unwrap_err();
    assert_eq!(
        error,
        format!("can't fetch {base}/image.png: it is binary content (image/png), which web_fetch doesn't read")
    );
    let error = fetch(&tool, format!("{base}/liar")).await.unwrap_err();
    assert_eq!(
        error,
        format!(
            "can't fetch {base}/liar: it claims to be text/html but the body is binary (NUL bytes or invalid text)"
        )
    );
}

#[tokio::test]
async fn redirects_are_followed_up_to_five_and_loops_are_refused() {
    let (own, _, tool) = fixture().await;
    let base = format!("http://127.0.0.1:{}", own.port());
    let text = fetch(&tool, format!("{base}/redirect/4")).await.unwrap();
    assert!(
        text.starts_with(&format!("URL: {base}/page\nRedirected from: {base}/redirect/4\nTitle: Squid Facts")),
        "{text}"
    );
    let error = fetch(&tool, format!("{base}/redirect/5")).await.unwrap_err();
    assert_eq!(
        error,
        format!("can't fetch {base}/redirect/5: too many redirects (5); the last one pointed to {base}/page")
    );
    let error = fetch(&tool, format!("{base}/loop/a")).await.unwrap_err();
    assert_eq!(
        error,
        format!("can't fetch {base}/loop/a: redirect loop ({base}/loop/a → {base}/loop/b → {base}/loop/a)")
    );
}

#[tokio::test]
async fn redirects_are_vetted_at_every_hop() {
    let (own, other, tool) = fixture().await;
    let base = format!("http://127.0.0.1:{}", own.port());
    let cases = [
        (
            "/to-other-port",
            format!(
                "refused: 127.0.0.1:{} is a loopback address (only port {} is allowed in this test setup)",
                other.port(),
                own.port()
            ),
        ),
        (
            "/to-127-0-0-2",
            format!(
                "refused: 127.0.0.2:{} is a loopback address (only port {} is allowed in this test setup)",
                own.port(),
                own.port()
            ),
        ),
        ("/to-metadata", "refused: 169.254.169.254 is a cloud metadata address".to_owned()),
        ("/to-file", "refused: only http and https URLs can be fetched, not file:".to_owned()),
    ];
    for (path, expected) in cases {
        let error = fetch(&tool, format!("{base}{path}")).await.unwrap_err();
        assert_eq!(error, expected, "{path}");
    }
    let error = fetch(&tool, format!("{base}/to-localhost")).await.unwrap_err();
    assert!(error.starts_with("refused: localhost resolves to "), "{error}");
    assert!(error.ends_with("a loopback address"), "{error}");
}

#[tokio::test]
async fn forbidden_addresses_are_refused_before_connecting() {
    let (own, other, tool) = fixture().await;
    let error = fetch(&tool, format!("http://127.0.0.1:{}/page", other.port())).await.unwrap_err();
    assert!(error.starts_with(&format!("refused: 127.0.0.1:{} is a loopback address", other.port())), "{error}");
    let error = fetch(&tool, format!("http://localhost:{}/page", other.port())).await.unwrap_err();
    assert!(error.starts_with("refused: localhost resolves to "), "{error}");
    let public_only = WebFetchTool::new(FetchLimits::default());
    for (url, expected) in [
        (format!("http://127.0.0.1:{}/page", own.port()), "refused: 127.0.0.1 is a loopback address".to_owned()),
        (format!("http://[::1]:{}/page", own.port()), "refused: ::1 is a loopback address".to_owned()),
        ("http://10.0.0.5/".to_owned(), "refused: 10.0.0.5 is a private address".to_owned()),
        ("http://192.168.1.1/".to_owned(), "refused: 192.168.1.1 is a private address".to_owned()),
        ("http://100.64.0.1/".to_owned(), "refused: 100.64.0.1 is a shared (carrier-grade NAT) address".to_owned()),
        (
            "http://169.254.169.254/latest/".to_owned(),
            "refused: 169.254.169.254 is a cloud metadata address".to_owned(),
        ),
        ("http://[fd00:ec2::254]/".to_owned(), "refused: fd00:ec2::254 is a cloud metadata address".to_owned()),
        ("http://[::ffff:10.0.0.5]/".to_owned(), "refused: ::ffff:10.0.0.5 is a private address".to_owned()),
        ("http://[fe80::1]/".to_owned(), "refused: fe80::1 is a link-local address".to_owned()),
        ("http://0.0.0.0/".to_owned(), "refused: 0.0.0.0 is an unspecified address".to_owned()),
        ("http://2130706433/".to_owned(), "refused: 127.0.0.1 is a loopback address".to_owned()),
        (
            "http://metadata.google.internal/".to_owned(),
            "refused: metadata.google.internal is a cloud metadata host".to_owned(),
        ),
        ("ftp://127.0.0.1/".to_owned(), "refused: only http and https URLs can be fetched, not ftp:".to_owned()),
    ] {
        assert_eq!(fetch(&public_only, url.clone()).await.unwrap_err(), expected, "{url}");
    }
    let error = fetch(&public_only, format!("http://localhost:{}/page", own.port())).await.unwrap_err();
    assert!(error.starts_with("refused: localhost resolves to "), "{error}");
    let error = fetch(&public_only, "not a url".to_owned()).await.unwrap_err();
    assert!(error.starts_with("can't fetch not a url: not a valid URL"), "{error}");
}

#[tokio::test]
async fn a_body_over_the_cap_is_truncated_and_said_so() {
    let (own, _, tool) = fixture().await;
    let text = call(&tool, json!({ "url": format!("http://127.0.0.1:{}/huge", own.port()), "max_chars": 100_000 }))
        .await
        .unwrap();
    assert!(text.contains("[output cut at 100000 of 1048576 characters;"), "{}", &text[text.len() - 300..]);
    assert!(
        text.ends_with("[truncated: the body is larger than 1048576 bytes; the rest was not downloaded]"),
        "{}",
        &text[text.len() - 300..]
    );
    let default = fetch(&tool, format!("http://127.0.0.1:{}/huge", own.port())).await.unwrap();
    assert!(default.contains(&format!("{}\n\n[output cut at 20000 of", "x".repeat(100))), "default max_chars is 20000");
}

#[tokio::test]
async fn a_body_that_never_ends_is_cut_at_the_deadline() {
    let other = serve(Router::new()).await;
    let (listener, own) = bind().await;
    start(listener, site(own, other));
    let limits = FetchLimits { total_timeout: Duration::from_millis(600), ..FetchLimits::default() };
    let tool = WebFetchTool::new_with_allowed_loopback_port(limits, own.port());
    let started = Instant::now();
    let text = fetch(&tool, format!("http://127.0.0.1:{}/forever", own.port())).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert!(text.contains("line 0\nline 1\n"), "{text}");
    assert!(text.ends_with("[truncated: the server was still sending after 0.6s; the body was cut there]"), "{text}");
    let error = fetch(&tool, format!("http://127.0.0.1:{}/silent", own.port())).await.unwrap_err();
    assert!(error.ends_with("timed out after 0.6s waiting for the body"), "{error}");
}

#[tokio::test]
async fn http_errors_come_back_with_an_excerpt() {
    let (own, _, tool) = fixture().await;
    let url = format!("http://127.0.0.1:{}/missing", own.port());
    assert_eq!(
        fetch(&tool, url.clone()).await.unwrap_err(),
        format!("can't fetch {url}: HTTP 404 Not Found: # Not here")
    );
}

#[tokio::test]
async fn requests_identify_themselves() {
    let (own, _, tool) = fixture().await;
    let text = fetch(&tool, format!("http://127.0.0.1:{}/agent", own.port())).await.unwrap();
    assert!(text.contains("compatible; squidbot/"), "{text}");
}
