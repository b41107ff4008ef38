//! A call whose arguments carry a secret is refused before it leaves for an HTTP MCP
//! server, against a few lines of Node answering streamable HTTP with plain JSON and
//! logging every JSON-RPC method it receives; a stdio server still gets its arguments.

use std::path::Path;

use serde_json::json;
use squidbot_core::leaks::LeakScanner;
use squidbot_types::config::McpServerConfig;

use crate::fake_server::{FakeServer, tool};
use crate::harness::{call, find, free_port, manager, node, wait_for_port};

const SCRIPT: &str = r#"
const fs = require("fs");
const http = require("http");
const [port, log] = process.argv.slice(2);
http.createServer((request, response) => {
  if (request.method !== "POST") { response.writeHead(405); response.end(); return; }
  let body = "";
  request.on("data", (chunk) => (body += chunk));
  request.on("end", () => {
    const message = JSON.parse(body);
    fs.appendFileSync(log, (message.method || "response") + " " + JSON.stringify(message.params || {}) + "\n");
    if (message.id === undefined) { response.writeHead(202); response.end(); return; }
    let result;
    if (message.method === "initialize") {
      result = { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "fake-http", version: "1.0.0" } };
    } else if (message.method === "tools/list") {
      result = { tools: [{ name: "lookup", inputSchema: { type: "object", properties: { text: { type: "string" } } } }] };
    } else if (message.method === "tools/call") {
      result = { content: [{ type: "text", text: "looked up " + JSON.stringify(message.params.arguments || {}) }] };
    }
    response.writeHead(200, { "content-type": "application/json", "mcp-session-id": "fake" });
    response.end(JSON.stringify(result ? { jsonrpc: "2.0", id: message.id, result }
      : { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } }));
  });
}).listen(Number(port), "127.0.0.1");
"#;

const SECRET: &str = "correct-horse-battery-staple";

/// Starts the fake HTTP server; returns its config and log file.
async fn http_server(directory: &Path) -> (McpServerConfig, std::path::PathBuf, tokio::process::Child) {
    let script = directory.join("fake-http-server.cjs");
    std::fs::write(&script, SCRIPT).unwrap();
    let log = directory.join("http.log");
    let port = free_port();
    let child = tokio::process::Command::new(node())
        .arg(&script)
        .arg(port.to_string())
        .arg(&log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_port(port).await;
    (McpServerConfig { url: Some(format!("http://127.0.0.1:{port}/mcp")), ..McpServerConfig::default() }, log, child)
}

#[tokio::test]
async fn an_http_servers_call_carrying_a_secret_is_refused_and_never_sent() {
    let directory = tempfile::tempdir().unwrap();
    let (config, log, _child) = http_server(directory.path()).await;
    let mcp = manager(vec![("remote", config)], None).with_leak_scanner(LeakScanner::new([SECRET.to_owned()]));
    let tools = mcp.connect_all().await;
    let lookup = find(&tools, "remote__lookup");
    for (arguments, kind) in [
        (json!({"text": format!("the password is {SECRET}")}), "configured_secret"),
        (json!({"nested": {"list": ["ok", "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ"]}}), "configured_secret"),
        (json!({"text": "key sk-proj-abcdefghijklmnopqrstuvwx1234"}), "openai_key"),
    ] {
        let refusal = call(lookup, arguments).await.unwrap_err();
        assert_eq!(
            refusal,
            format!(
                "Refused: the arguments carry a secret ({kind}); secrets never leave for the HTTP MCP server remote"
            )
        );
    }
    let answer = call(lookup, json!({"text": "squids"})).await.unwrap();
    assert!(answer.contains("squids"), "{answer}");
    let received = std::fs::read_to_string(&log).unwrap();
    assert_eq!(received.matches("tools/call").count(), 1, "only the clean call reached the server: {received}");
    assert!(!received.contains("horse") && !received.contains("sk-proj"), "{received}");
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_stdio_server_gets_its_arguments_locally() {
    let directory = tempfile::tempdir().unwrap();
    let server = FakeServer::new(directory.path(), json!([tool("echo")]), "normal");
    let mcp =
        manager(vec![("local", server.config.clone())], None).with_leak_scanner(LeakScanner::new([SECRET.to_owned()]));
    let tools = mcp.connect_all().await;
    let answer = call(find(&tools, "local__echo"), json!({"text": SECRET})).await.unwrap();
    assert!(answer.contains("pong"), "{answer}");
    mcp.shutdown().await;
}
