//! The embedded web UI: one page and its scripts and stylesheet, compiled into the binary.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const MARKDOWN_JS: &str = include_str!("../ui/markdown.js");
const CARDS_JS: &str = include_str!("../ui/cards.js");
const USAGE_JS: &str = include_str!("../ui/usage.js");
const TREE_JS: &str = include_str!("../ui/tree.js");
const APP_CSS: &str = include_str!("../ui/app.css");

/// Only our own files may load, and the page may only talk to its own origin (the
/// WebSocket included); no inline script, so injected markup can't run code.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// `GET /` without a WebSocket upgrade: the single page.
pub async fn index() -> Response {
    embedded(INDEX_HTML, "text/html; charset=utf-8")
}

/// `GET /ui/{name}`: the page's scripts and stylesheet; anything else is 404.
pub async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "app.js" => embedded(APP_JS, "text/javascript; charset=utf-8"),
        "markdown.js" => embedded(MARKDOWN_JS, "text/javascript; charset=utf-8"),
        "cards.js" => embedded(CARDS_JS, "text/javascript; charset=utf-8"),
        "usage.js" => embedded(USAGE_JS, "text/javascript; charset=utf-8"),
        "tree.js" => embedded(TREE_JS, "text/javascript; charset=utf-8"),
        "app.css" => embedded(APP_CSS, "text/css; charset=utf-8"),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

fn embedded(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The files change with the binary, so a browser must revalidate after an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn header_value(response: &Response, name: header::HeaderName) -> &str {
        response.headers().get(name).unwrap().to_str().unwrap()
    }

    fn assert_hardened(response: &Response) {
        assert_eq!(header_value(response, header::CACHE_CONTROL), "no-cache");
        assert_eq!(header_value(response, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        let policy = header_value(response, header::CONTENT_SECURITY_POLICY);
        assert!(policy.starts_with("default-src 'self';"), "{policy}");
        assert!(policy.contains("script-src 'self';"), "{policy}");
        assert!(policy.contains("connect-src 'self' ws: wss:;"), "{policy}");
        assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"), "{policy}");
    }

    #[tokio::test]
    async fn index_is_html_that_loads_the_assets() {
        let response = index().await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header_value(&response, header::CONTENT_TYPE), "text/html; charset=utf-8");
        assert_hardened(&response);
        let html = body_text(response).await;
        // In this order: app.js uses what markdown.js, cards.js, usage.js and tree.js define.
        let scripts: Vec<usize> = ["markdown.js", "cards.js", "usage.js", "tree.js", "app.js"]
            .iter()
            .map(|name| html.find(&format!(r#"<script src="/ui/{name}" defer></script>"#)).unwrap())
            .collect();
        assert!(scripts.is_sorted(), "{scripts:?}");
        assert!(html.contains(r#"<link rel="stylesheet" href="/ui/app.css">"#));
    }

    #[tokio::test]
    async fn index_has_no_inline_script_or_style() {
        let html = body_text(index().await).await;
        assert_eq!(html.matches("<script").count(), 5, "only the external scripts");
        assert_eq!(html.matches("<script src=").count(), 5, "only the external scripts");
        assert!(!html.contains("<style"));
        assert!(!html.contains(" style="));
        assert!(!html.contains(" onclick=") && !html.contains(" onload="));
    }

    #[tokio::test]
    async fn script_and_stylesheet_have_their_content_types() {
        let script = asset(Path("app.js".to_owned())).await;
        assert_eq!(script.status(), StatusCode::OK);
        assert_eq!(header_value(&script, header::CONTENT_TYPE), "text/javascript; charset=utf-8");
        assert_hardened(&script);
        assert_eq!(body_text(script).await, APP_JS);
        for (name, body) in
            [("markdown.js", MARKDOWN_JS), ("cards.js", CARDS_JS), ("usage.js", USAGE_JS), ("tree.js", TREE_JS)]
        {
            let script = asset(Path(name.to_owned())).await;
            assert_eq!(header_value(&script, header::CONTENT_TYPE), "text/javascript; charset=utf-8");
            assert_hardened(&script);
            assert_eq!(body_text(script).await, body);
        }

        let stylesheet = asset(Path("app.css".to_owned())).await;
        assert_eq!(stylesheet.status(), StatusCode::OK);
        assert_eq!(header_value(&stylesheet, header::CONTENT_TYPE), "text/css; charset=utf-8");
        assert_hardened(&stylesheet);
        assert_eq!(body_text(stylesheet).await, APP_CSS);
    }

    #[tokio::test]
    async fn other_names_are_not_found() {
        for name in ["index.html", "app.js.map", "../src/ui.rs", "", "APP.JS"] {
            let response = asset(Path(name.to_owned())).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{name}");
        }
    }

    #[test]
    fn scripts_never_parse_server_data_as_markup() {
        let sinks = [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "DOMParser",
            "createContextualFragment",
        ];
        for (name, script) in [
            ("app.js", APP_JS),
            ("markdown.js", MARKDOWN_JS),
            ("cards.js", CARDS_JS),
            ("usage.js", USAGE_JS),
            ("tree.js", TREE_JS),
        ] {
            for sink in sinks {
                assert!(!script.contains(sink), "{name} uses {sink}");
            }
        }
    }

    #[test]
    fn markdown_never_names_an_active_or_loading_tag() {
        // Its allowlist is the only place tags come from; images stay links.
        for tag in ["'img'", "'script'", "'iframe'", "'svg'", "'style'", "'object'", "'embed'", "'form'"] {
            assert!(!MARKDOWN_JS.contains(tag), "markdown.js names {tag}");
        }
        assert!(MARKDOWN_JS.contains("rel: 'noopener noreferrer'"));
    }
}
