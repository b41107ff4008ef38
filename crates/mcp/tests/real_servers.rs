//! The reference servers from npm, over stdio and streamable HTTP.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot_mcp::ServerState;
use squidbot_types::Secret;
use squidbot_types::config::McpServerConfig;

use crate::fake_server::{FakeServer, tool};
use crate::harness::{call, find, free_port, manager, names, node, node_server, server_script, wait_for_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_tools_are_namespaced_filtered_and_callable() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("notes.txt"), "buy milk\n").unwrap();
    let mut files = node_server(&server_script("server-filesystem"), &[&root_path.display().to_string()]);
    files.allow = vec!["read_text_file".into(), "list_directory".into(), "no_such_tool".into()];
    let all = node_server(&server_script("server-filesystem"), &[&root_path.display().to_string()]);
    let mcp = manager(vec![("files", files), ("allfiles", all)], None);
    let tools = mcp.connect_all().await;
    let listed = names(&tools);
    let allowed: Vec<&String> = listed.iter().filter(|name| name.starts_with("files__")).collect();
    assert_eq!(allowed, ["files__list_directory", "files__read_text_file"]);
    assert!(listed.contains(&"allfiles__write_file".to_owned()), "{listed:?}");
    assert!(listed.iter().filter(|name| name.starts_with("allfiles__")).count() >= 10, "{listed:?}");

    let read = find(&tools, "files__read_text_file");
    let spec = read.spec();
    assert!(spec.description.starts_with("[files] "), "{}", spec.description);
    assert_eq!(spec.parameters["type"], "object");
    assert!(spec.parameters["properties"]["path"].is_object(), "{}", spec.parameters);
    assert!(!read.mutates(), "read_text_file is marked read-only");
    assert!(find(&tools, "allfiles__write_file").mutates());

    let path = root_path.join("notes.txt").display().to_string();
    assert_eq!(call(read, json!({ "path": path })).await.unwrap().trim_end(), "buy milk");
    let listing = call(find(&tools, "files__list_directory"), json!({ "path": root_path })).await.unwrap();
    assert!(listing.contains("[FILE] notes.txt"), "{listing}");
    let refused = call(read, json!({ "path": "/etc/passwd" })).await.unwrap_err();
    assert!(refused.to_lowercase().contains("denied") || refused.contains("outside"), "{refused}");
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_echoes_adds_and_summarizes_images() {
    let mcp = manager(vec![("everything", node_server(&server_script("server-everything"), &["stdio"]))], None);
    let tools = mcp.connect_all().await;
    assert!(names(&tools).contains(&"everything__get-tiny-image".to_owned()), "{:?}", names(&tools));
    let echoed = call(find(&tools, "everything__echo"), json!({"message": "hello over stdio"})).await.unwrap();
    assert!(echoed.contains("hello over stdio"), "{echoed}");
    let sum = call(find(&tools, "everything__get-sum"), json!({"a": 2, "b": 40})).await.unwrap();
    assert!(sum.contains("42"), "{sum}");
    let image = call(find(&tools, "everything__get-tiny-image"), json!({})).await.unwrap();
    assert!(image.contains("[image: image/png, "), "{image}");
    assert!(image.len() < 2_000, "the image data itself is not shown: {image}");
    let invalid = call(find(&tools, "everything__get-sum"), json!({"a": "two"})).await.unwrap_err();
    assert!(!invalid.is_empty());
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_long_operation_past_its_timeout_is_cancelled() {
    let config = McpServerConfig { timeout_secs: 1, ..node_server(&server_script("server-everything"), &["stdio"]) };
    let mcp = manager(vec![("everything", config)], None);
    let tools = mcp.connect_all().await;
    let began = Instant::now();
    let error = call(find(&tools, "everything__trigger-long-running-operation"), json!({"duration": 20, "steps": 4}))
        .await
        .unwrap_err();
    assert_eq!(error, "MCP server everything did not answer within 1s; the call was cancelled");
    assert!(began.elapsed() < Duration::from_secs(5));
    let echoed = call(find(&tools, "everything__echo"), json!({"message": "still here"})).await.unwrap();
    assert!(echoed.contains("still here"), "{echoed}");
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let port = free_port();
    let mut server = tokio::process::Command::new(node())
        .arg(server_script("server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_port(port).await;
    let mut config =
        McpServerConfig { url: Some(format!("http://127.0.0.1:{port}/mcp")), ..McpServerConfig::default() };
    config.headers.insert("X-Squidbot-Test".into(), Secret::new("yes"));
    config.allow = vec!["echo".into(), "get-sum".into()];
    let mcp = manager(vec![("remote", config)], None);
    assert_eq!(mcp.summaries()[0].transport, "http");
    let tools = mcp.connect_all().await;
    assert_eq!(names(&tools), ["remote__echo", "remote__get-sum"]);
    let echoed = call(find(&tools, "remote__echo"), json!({"message": "hello over http"})).await.unwrap();
    assert!(echoed.contains("hello over http"), "{echoed}");
    let sum = call(find(&tools, "remote__get-sum"), json!({"a": 1, "b": 2})).await.unwrap();
    assert!(sum.contains('3'), "{sum}");

    // The server goes away: calls fail with the crash message instead of hanging.
    server.kill().await.unwrap();
    let began = Instant::now();
    let error = call(find(&tools, "remote__echo"), json!({"message": "anyone?"})).await.unwrap_err();
    assert!(error.contains("MCP server remote"), "{error}");
    assert!(began.elapsed() < Duration::from_secs(20), "{:?}", began.elapsed());
    mcp.shutdown().await;
}

/// Variables planted in the parent of [`environment_probe`].
const PLANTED: [(&str, &str); 5] = [
    ("OPENAI_API_KEY", "sk-planted-must-not-leak"),
    ("MY_SERVICE_TOKEN", "planted-token"),
    ("LD_PRELOAD", "/nonexistent/planted-preload.so"),
    ("SQUIDBOT__PROVIDERS__LOCAL__API_KEY", "sk-planted-config"),
    ("LC_TIME", "C"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_servers_get_a_filtered_environment() {
    // The probe runs in a child test process whose environment carries the planted
    // secrets; changing this process's own environment would race other tests.
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["real_servers::environment_probe", "--exact", "--ignored", "--nocapture"])
        .envs(PLANTED)
        .env("SQUIDBOT_TEST_ENVIRONMENT_PROBE", "1")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "probe failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("1 passed"), "the probe ran: {stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by stdio_servers_get_a_filtered_environment with planted variables"]
async fn environment_probe() {
    assert_eq!(std::env::var("SQUIDBOT_TEST_ENVIRONMENT_PROBE").as_deref(), Ok("1"), "run through the parent test");
    let directory = tempfile::tempdir().unwrap();
    let fake = FakeServer::new(directory.path(), json!([tool("env")]), "normal");
    let mut fake_config = fake.config.clone();
    fake_config.env.insert("GREETING".into(), "hello".into());
    let everything = node_server(&server_script("server-everything"), &["stdio"]);
    let mcp = manager(vec![("fake", fake_config), ("everything", everything)], None);
    let tools = mcp.connect_all().await;
    let from_fake = call(find(&tools, "fake__env"), json!({})).await.unwrap();
    let from_everything = call(find(&tools, "everything__get-env"), json!({})).await.unwrap();
    let node_directory = std::path::Path::new(&node()).parent().unwrap().display().to_string();
    for (server, text) in [("fake", from_fake), ("everything", from_everything)] {
        let environment: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{server}: {text}"));
        for (name, value) in PLANTED.iter().take(4) {
            assert!(environment.get(name).is_none(), "{server} got {name}");
            assert!(!text.contains(value), "{server} saw the value of {name}");
        }
        assert_eq!(environment["PATH"], format!("{node_directory}:/usr/local/bin:/usr/bin:/bin"), "{server}");
        assert_eq!(environment["LC_TIME"], "C", "{server}: LC_* is passed");
        assert!(environment.get("HOME").is_some() || std::env::var_os("HOME").is_none(), "{server}: HOME");
    }
    let environment: Value = serde_json::from_str(&call(find(&tools, "fake__env"), json!({})).await.unwrap()).unwrap();
    assert_eq!(environment["GREETING"], "hello", "configured variables are passed");
    assert!(matches!(mcp.summaries()[0].state, ServerState::Ready { .. }));
    mcp.shutdown().await;
}
