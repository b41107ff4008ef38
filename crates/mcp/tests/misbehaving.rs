//! Servers that crash, hang, lie about their schemas or return too much: each gives the
//! model a clear error or a capped result, and nothing hangs.

use std::time::{Duration, Instant};

use serde_json::json;
use squidbot_mcp::{MAX_RESULT_BYTES, MAX_SCHEMA_BYTES, ServerState};
use squidbot_types::config::McpServerConfig;

use crate::fake_server::{FakeServer, tool};
use crate::harness::{call, context, find, manager, names};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_starts_before_the_tools_are_needed() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("ping")]), "normal");
    let disabled = McpServerConfig { enabled: false, ..server.config.clone() };
    let mcp = manager(vec![("lazy", server.config.clone()), ("off", disabled)], None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.launches(), 0, "building the manager spawns nothing");
    let states: Vec<ServerState> = mcp.summaries().into_iter().map(|summary| summary.state).collect();
    assert_eq!(states, [ServerState::Idle, ServerState::Disabled]);
    let tools = mcp.connect_all().await;
    assert_eq!(names(&tools), ["lazy__ping"], "a disabled server offers nothing");
    assert_eq!(server.launches(), 1);
    assert_eq!(mcp.summaries()[0].state, ServerState::Ready { tools: 1 });
    assert_eq!(call(&tools[0], json!({"text": "hi"})).await.unwrap(), r#"pong {"text":"hi"}"#);
    mcp.connect_all().await;
    assert_eq!(server.launches(), 1, "later turns reuse the connection");
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_server_gives_an_error_and_restarts_with_backoff() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("boom"), tool("ping")]), "normal");
    let mcp = manager(vec![("crashy", server.config.clone())], None);
    let tools = mcp.connect_all().await;
    let boom = find(&tools, "crashy__boom");

    let error = call(boom, json!({})).await.unwrap_err();
    assert_eq!(error, "MCP server crashy crashed (the connection closed during a call); restarting in 1s");
    // While backing off, calls fail at once and nothing is spawned.
    let began = Instant::now();
    let error = call(find(&tools, "crashy__ping"), json!({})).await.unwrap_err();
    assert!(error.contains("crashed") && error.contains("restarting in 1s"), "{error}");
    assert!(began.elapsed() < Duration::from_millis(500), "no waiting during backoff");
    assert_eq!(server.launches(), 1);
    let ServerState::Crashed { failures: 1, retry_in, .. } = mcp.summaries()[0].state.clone() else {
        panic!("crashed: {:?}", mcp.summaries()[0].state)
    };
    assert!(retry_in <= Duration::from_millis(1_100), "{retry_in:?}");
    // The tools stay listed while the server is down.
    assert_eq!(names(&mcp.connect_all().await), ["crashy__boom", "crashy__ping"]);

    // After the delay the next use restarts it; a second crash doubles the delay.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let error = call(boom, json!({})).await.unwrap_err();
    assert!(error.ends_with("restarting in 2s"), "{error}");
    assert_eq!(server.launches(), 2);
    let ServerState::Crashed { failures: 2, .. } = mcp.summaries()[0].state else { panic!("crashed twice") };

    // A good call after a restart resets the backoff.
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(call(find(&tools, "crashy__ping"), json!({})).await.unwrap(), "pong {}");
    assert_eq!(server.launches(), 3);
    let error = call(boom, json!({})).await.unwrap_err();
    assert!(error.ends_with("restarting in 1s"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_after_initialize_offers_no_tools_and_backs_off() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("ping")]), "exit-after-initialize");
    let healthy = FakeServer::new(directory.path(), json!([tool("ping")]), "normal");
    let mcp = manager(vec![("dies", server.config.clone()), ("fine", healthy.config.clone())], None);
    let began = Instant::now();
    let tools = mcp.connect_all().await;
    assert!(began.elapsed() < Duration::from_secs(10), "a dying server doesn't hold up the others");
    assert_eq!(names(&tools), ["fine__ping"]);
    let summaries = mcp.summaries();
    let ServerState::Crashed { reason, failures: 1, .. } = &summaries[0].state else {
        panic!("crashed: {:?}", summaries[0].state)
    };
    assert!(!reason.is_empty());
    mcp.connect_all().await;
    assert_eq!(server.launches(), 1, "no restart before the backoff delay");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    mcp.connect_all().await;
    assert_eq!(server.launches(), 2, "restarted after the delay");
    let ServerState::Crashed { failures: 2, .. } = mcp.summaries()[0].state else { panic!("crashed again") };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_call_times_out_and_is_cancelled_on_the_server() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("hang"), tool("ping")]), "normal");
    let config = McpServerConfig { timeout_secs: 1, ..server.config.clone() };
    let mcp = manager(vec![("slow", config)], None);
    let tools = mcp.connect_all().await;
    let began = Instant::now();
    let error = call(find(&tools, "slow__hang"), json!({})).await.unwrap_err();
    assert_eq!(error, "MCP server slow did not answer within 1s; the call was cancelled");
    assert!(began.elapsed() < Duration::from_secs(3), "{:?}", began.elapsed());
    // The server heard about the cancellation before the next call, and still serves it.
    assert_eq!(call(find(&tools, "slow__ping"), json!({})).await.unwrap(), "pong {}");
    let messages = server.messages();
    let cancelled = messages.iter().position(|message| message == "notifications/cancelled");
    let last_call = messages.iter().rposition(|message| message == "tools/call");
    assert!(cancelled.is_some() && cancelled < last_call, "{messages:?}");
    assert_eq!(server.launches(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_user_stops_is_cancelled_on_the_server_before_the_stop_returns() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("hang"), tool("ping")]), "normal");
    let mcp = manager(vec![("slow", server.config.clone())], None);
    let tools = mcp.connect_all().await;
    let workspace = std::env::temp_dir();
    let context = context(&workspace);
    let stop = context.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.cancel();
    });
    let began = Instant::now();
    let error = find(&tools, "slow__hang").call_boxed(json!({}), &context).await.unwrap_err();
    assert!(began.elapsed() < Duration::from_secs(5), "{:?}", began.elapsed());
    assert!(error.to_string().contains("cancelled"), "{error}");
    // Told before the stop returned: the next call cannot overtake it.
    assert_eq!(call(find(&tools, "slow__ping"), json!({})).await.unwrap(), "pong {}");
    let messages = server.messages();
    let cancelled = messages.iter().position(|message| message == "notifications/cancelled");
    let last_call = messages.iter().rposition(|message| message == "tools/call");
    assert!(cancelled.is_some() && cancelled < last_call, "{messages:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_result_is_capped_with_a_note() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("huge"), tool("fail")]), "normal");
    let mcp = manager(vec![("big", server.config.clone())], None);
    let tools = mcp.connect_all().await;
    let output = call(find(&tools, "big__huge"), json!({})).await.unwrap();
    assert!(output.len() <= MAX_RESULT_BYTES + 200, "{} bytes", output.len());
    assert!(output.starts_with("xxxx"));
    assert!(
        output.contains(&format!("[result cut at {MAX_RESULT_BYTES} of 1048576 bytes")),
        "{}",
        &output[MAX_RESULT_BYTES..]
    );
    // A result the server flags as an error reaches the model as an error.
    assert_eq!(call(find(&tools, "big__fail"), json!({})).await.unwrap_err(), "it went wrong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_with_lying_schemas_are_skipped_and_the_rest_work() {
    let directory = tempfile::tempdir().unwrap();
    let huge_schema = json!({"type": "object", "properties": {"x": {"description": "y".repeat(MAX_SCHEMA_BYTES)}}});
    let listing = json!([
        {"name": "not_an_object", "inputSchema": "string"},
        {"name": "array_schema", "inputSchema": {"type": "array"}},
        {"name": "huge_schema", "inputSchema": huge_schema},
        {"name": "bad name!", "inputSchema": {"type": "object"}},
        {"name": "no_schema"},
        tool("ping"),
        42,
    ]);
    let server = FakeServer::new(directory.path(), listing, "normal");
    let mcp = manager(vec![("liar", server.config.clone())], None);
    let tools = mcp.connect_all().await;
    assert_eq!(names(&tools), ["liar__ping"]);
    assert_eq!(call(&tools[0], json!({"text": "still works"})).await.unwrap(), r#"pong {"text":"still works"}"#);
    // Arguments that aren't an object are refused before they reach the server.
    assert_eq!(
        call(&tools[0], json!([1, 2])).await.unwrap_err(),
        "invalid arguments: expected a JSON object, got [1,2]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_is_a_start_failure_not_a_panic() {
    let config = McpServerConfig { command: Some("/nonexistent/mcp-server".into()), ..McpServerConfig::default() };
    let mcp = manager(vec![("ghost", config)], None);
    assert!(mcp.connect_all().await.is_empty());
    let ServerState::Crashed { reason, .. } = mcp.summaries()[0].state.clone() else { panic!("crashed") };
    assert!(reason.contains("can't start /nonexistent/mcp-server"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_read_again() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("grow")]), "normal");
    let mcp = manager(vec![("growing", server.config.clone())], None);
    let tools = mcp.connect_all().await;
    assert_eq!(names(&tools), ["growing__grow"]);
    assert_eq!(call(&tools[0], json!({})).await.unwrap(), "grew");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(names(&mcp.connect_all().await), ["growing__grow", "growing__grown"]);
    assert_eq!(server.launches(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_name_is_looked_up_on_the_safe_path() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("ping")]), "normal");
    let absolute = server.config.clone();
    let command_line: Vec<String> =
        std::iter::once(absolute.command.clone().unwrap()).chain(absolute.args.clone()).collect();
    let config = McpServerConfig {
        command: Some("sh".into()),
        args: vec![
            "-c".into(),
            format!("exec {}", command_line.iter().map(|part| format!("'{part}'")).collect::<Vec<_>>().join(" ")),
        ],
        ..McpServerConfig::default()
    };
    let mcp = manager(vec![("wrapped", config)], None);
    let tools = mcp.connect_all().await;
    assert_eq!(names(&tools), ["wrapped__ping"], "{:?}", mcp.summaries());
    assert_eq!(call(&tools[0], json!({})).await.unwrap(), "pong {}");
}
