//! The web tools through the real binary: the scripted model searches with the SearXNG
//! backend pointed at a local fake and the numbered results reach it; a fetch of a
//! loopback address is refused and the refusal reaches it as a failed call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;
use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, offered_tools, tool_results};

/// The query parameters of every request a fake got.
type Queries = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// A fake SearXNG instance that records the queries it gets.
async fn fake_searxng() -> (String, Queries) {
    let queries = Arc::new(Mutex::new(Vec::new()));
    let router = Router::new()
        .route(
            "/search",
            get(
                |State(queries): State<Queries>, Query(parameters): Query<HashMap<String, String>>| async move {
                    queries.lock().unwrap().push(parameters);
                    axum::Json(json!({
                        "query": "squid hearts",
                        "results": [
                            {"url": "https://ocean.test/squid", "title": "Squid anatomy", "content": "Squids have three hearts.", "engine": "fake"},
                            {"url": "https://wiki.test/Squid", "title": "Squid", "content": "A cephalopod.", "engine": "fake"}
                        ]
                    }))
                },
            ),
        )
        .with_state(queries.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{address}"), queries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_searches_through_searxng_and_reads_the_results() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let (searxng, queries) = fake_searxng().await;
    home.append_config(&format!("[tools.web]\nsearch_backend = \"searxng\"\nsearxng_url = \"{searxng}\"\n"));
    server.push(Reply::tool_calls(vec![
        ("web_search", json!({ "query": "squid hearts", "count": 2 })),
        ("web_fetch", json!({ "url": format!("{searxng}/search?q=x&format=json") })),
    ]));
    server.push(Reply::text("Squids have three hearts."));
    let run = home.run(&["agent", "-m", "how many hearts does a squid have?"]).await.success();
    assert_eq!(run.stdout, "Squids have three hearts.\n");

    let requests = server.requests();
    let offered = offered_tools(&requests[0].body);
    assert!(offered.contains(&"web_search".to_owned()) && offered.contains(&"web_fetch".to_owned()), "{offered:?}");
    let results = tool_results(&requests[1].body);
    assert_eq!(
        results[0],
        "Results for \"squid hearts\" (SearXNG):\n\n1. Squid anatomy\n   https://ocean.test/squid\n   Squids have three hearts.\n\n\
         2. Squid\n   https://wiki.test/Squid\n   A cephalopod.\n"
    );
    assert_eq!(results[1], "refused: 127.0.0.1 is a loopback address", "the fetch guard holds in the real binary");
    let seen = queries.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only the search reached the fake: {seen:?}");
    assert_eq!(seen[0].get("q").map(String::as_str), Some("squid hearts"));
    assert_eq!(seen[0].get("format").map(String::as_str), Some("json"));
    server.assert_clean();

    let errors: Vec<bool> = home
        .session_lines("cli:local")
        .iter()
        .filter(|entry| entry["type"] == "tool_result")
        .map(|entry| entry["is_error"].as_bool().unwrap_or_default())
        .collect();
    assert_eq!(errors, [false, true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_web_tools_are_not_offered() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[tools.web]\nenabled = false\n");
    server.push(Reply::text("ok"));
    home.run(&["agent", "-m", "hi"]).await.success();
    let requests = server.requests();
    let offered = requests[0].body["tools"].to_string();
    assert!(!offered.contains("web_search") && !offered.contains("web_fetch"), "{offered}");
}
