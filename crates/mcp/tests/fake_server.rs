//! A deliberately badly behaved MCP server: a few lines of Node speaking JSON-RPC over
//! stdio, whose tools crash it, hang, return a megabyte, print its environment or change
//! its tool list. Every message it receives is appended to a log file (one `start` line
//! per launch).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use squidbot_types::config::McpServerConfig;

use crate::harness::node_server;

const SCRIPT: &str = r#"
const fs = require("fs");
const readline = require("readline");
const [toolsFile, log, mode] = process.argv.slice(2);
const tools = JSON.parse(fs.readFileSync(toolsFile, "utf8"));
const note = (text) => fs.appendFileSync(log, text + "\n");
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const reply = (id, result) => send({ jsonrpc: "2.0", id, result });
const text = (value) => ({ content: [{ type: "text", text: value }] });
note("start");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  note(message.method || "response");
  if (message.method === "initialize") {
    reply(message.id, {
      protocolVersion: "2025-06-18",
      capabilities: { tools: {} },
      serverInfo: { name: "fake", version: "1.0.0" },
    });
    if (mode === "exit-after-initialize") process.exit(3);
  } else if (message.method === "tools/list") {
    reply(message.id, { tools });
  } else if (message.method === "tools/call") {
    const name = message.params.name;
    if (name === "boom") process.exit(1);
    else if (name === "hang") {}
    else if (name === "huge") reply(message.id, text("x".repeat(1024 * 1024)));
    else if (name === "env") reply(message.id, text(JSON.stringify(process.env)));
    else if (name === "grow") {
      tools.push({ name: "grown", inputSchema: { type: "object" } });
      send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
      reply(message.id, text("grew"));
    }
    else if (name === "fail") reply(message.id, { content: [{ type: "text", text: "it went wrong" }], isError: true });
    else reply(message.id, text("pong " + JSON.stringify(message.params.arguments || {})));
  } else if (message.id !== undefined) {
    send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } });
  }
});
"#;

/// A fake server in `directory` offering `tools`.
pub struct FakeServer {
    /// Its messages, one per line.
    pub log: PathBuf,
    /// Its configuration.
    pub config: McpServerConfig,
}

impl FakeServer {
    /// Writes the script and the tool list; `mode` may be `exit-after-initialize`.
    pub fn new(directory: &Path, tools: Value, mode: &str) -> FakeServer {
        let script = directory.join("fake-server.cjs");
        std::fs::write(&script, SCRIPT).unwrap();
        let tools_file = directory.join(format!("tools-{}.json", uuid_like(directory)));
        std::fs::write(&tools_file, tools.to_string()).unwrap();
        let log = tools_file.with_extension("log");
        let config = node_server(
            &script.display().to_string(),
            &[&tools_file.display().to_string(), &log.display().to_string(), mode],
        );
        FakeServer { log, config }
    }

    /// Lines of its log.
    pub fn messages(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    /// How many times it was launched.
    pub fn launches(&self) -> usize {
        self.messages().iter().filter(|line| *line == "start").count()
    }
}

/// A tool with a simple object schema.
pub fn tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("The {name} tool."),
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
    })
}

/// A file name unique within `directory`.
fn uuid_like(directory: &Path) -> usize {
    std::fs::read_dir(directory).map(|entries| entries.count()).unwrap_or(0)
}
