//! MCP servers through the real binary: the scripted model calls tools of the npm
//! reference servers (installed by scripts/test under `SQUIDBOT_TEST_MCP_DIR`) and the
//! results, the filtered environment and a timeout reach the model; the gateway starts
//! servers on the first turn only; status lists the servers; a secret in a server's `env`
//! is refused.

use std::path::PathBuf;

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{gateway_home, start};
use crate::harness::{Home, offered_tools, tool_results};

/// Entry script of an installed server package.
fn server_script(package: &str) -> String {
    let directory = std::env::var("SQUIDBOT_TEST_MCP_DIR")
        .expect("SQUIDBOT_TEST_MCP_DIR must name the folder holding the npm MCP servers; scripts/test installs them");
    let script =
        PathBuf::from(directory).join("node_modules/@modelcontextprotocol").join(package).join("dist/index.js");
    assert!(script.is_file(), "{} is missing; run scripts/test", script.display());
    script.display().to_string()
}

/// Absolute path of `node` from `PATH`.
fn node() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|directory| directory.join("node"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/node"))
        .display()
        .to_string()
}

/// A home whose config adds the filesystem server (allowlisted) and the everything server.
fn home_with_servers(server: &ScriptedLlm) -> Home {
    let home = Home::with_minimal_config(server);
    std::fs::create_dir_all(home.workspace()).unwrap();
    let workspace = home.workspace().canonicalize().unwrap();
    home.append_config(&format!(
        "[mcp.servers.files]\ncommand = {node:?}\nargs = [{files:?}, {workspace:?}]\nallow = [\"read_text_file\", \"list_directory\"]\n\n\
         [mcp.servers.everything]\ncommand = {node:?}\nargs = [{everything:?}, \"stdio\"]\ntimeout_secs = 1\n\
         allow = [\"get-env\", \"trigger-long-running-operation\"]\nenv = {{ GREETING = \"hello\" }}\n",
        node = node(),
        files = server_script("server-filesystem"),
        everything = server_script("server-everything"),
        workspace = workspace.display().to_string(),
    ));
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_mcp_tools_and_gets_their_results() {
    let server = ScriptedLlm::start().await;
    let home = home_with_servers(&server);
    let notes = home.workspace().canonicalize().unwrap().join("notes.txt");
    std::fs::write(&notes, "the launch code is 4711\n").unwrap();
    server.push(Reply::tool_calls(vec![
        ("files__read_text_file", json!({ "path": notes.display().to_string() })),
        ("everything__get-env", json!({})),
        ("everything__trigger-long-running-operation", json!({ "duration": 10, "steps": 2 })),
    ]));
    server.push(Reply::text("The code is 4711."));
    let planted = [("OPENAI_API_KEY", "sk-planted-must-not-leak"), ("LD_PRELOAD", "/nonexistent/planted.so")];
    let run = home.run_with(&["agent", "-m", "what is the launch code?"], &planted).await.success();
    assert_eq!(run.stdout, "The code is 4711.\n");

    let requests = server.requests();
    let offered = offered_tools(&requests[0].body);
    for name in ["files__read_text_file", "files__list_directory", "everything__get-env", "read_file", "exec"] {
        assert!(offered.contains(&name.to_owned()), "{name} not offered: {offered:?}");
    }
    assert!(!offered.contains(&"files__write_file".to_owned()), "the allowlist holds: {offered:?}");
    let description = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "files__read_text_file")
        .map(|tool| tool["function"]["description"].as_str().unwrap_or_default().to_owned())
        .unwrap();
    assert!(description.starts_with("[files] "), "{description}");

    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0].trim_end(), "the launch code is 4711", "the file's text reached the model");
    let environment: Value = serde_json::from_str(&results[1]).expect("get-env prints JSON");
    assert!(environment.get("OPENAI_API_KEY").is_none() && environment.get("LD_PRELOAD").is_none(), "{environment}");
    assert!(!results[1].contains("sk-planted-must-not-leak"));
    assert_eq!(environment["GREETING"], "hello");
    assert!(environment["PATH"].as_str().unwrap().ends_with(":/usr/local/bin:/usr/bin:/bin"), "{environment}");
    assert_eq!(results[2], "MCP server everything did not answer within 1s; the call was cancelled");
    server.assert_clean();

    let entries = home.session_lines("cli:local");
    let errors: Vec<bool> = entries
        .iter()
        .filter(|entry| entry["type"] == "tool_result")
        .map(|entry| entry["is_error"].as_bool().unwrap_or_default())
        .collect();
    assert_eq!(errors, [false, false, true], "the timeout is recorded as a failed call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_mcp_servers_without_starting_them() {
    let server = ScriptedLlm::start().await;
    let home = home_with_servers(&server);
    home.append_config("[mcp.servers.remote]\nurl = \"http://127.0.0.1:9/mcp?key=hidden\"\nenabled = false\n");
    let run = home.run(&["status", "--json"]).await.success();
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let servers = report["mcp"]["servers"].as_array().unwrap();
    let summary: Vec<(String, String, bool)> = servers
        .iter()
        .map(|server| {
            (
                server["name"].as_str().unwrap().to_owned(),
                server["transport"].as_str().unwrap().to_owned(),
                server["enabled"] == true,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("everything".to_owned(), "stdio".to_owned(), true),
            ("files".to_owned(), "stdio".to_owned(), true),
            ("remote".to_owned(), "http".to_owned(), false),
        ]
    );
    assert!(!run.stdout.contains("hidden"), "a URL's query string is not printed");
    let run = home.run(&["status"]).await.success();
    assert!(run.stdout.contains("mcp        files (stdio, enabled)"), "{}", run.stdout);
    assert!(run.stdout.contains("mcp        remote (http, disabled) http://127.0.0.1:9/mcp\n"), "{}", run.stdout);
    assert_eq!(server.requests().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_an_mcp_servers_env_is_a_config_error() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[mcp.servers.leaky]\ncommand = \"npx\"\nenv = { OPENAI_API_KEY = \"sk-nope\" }\n");
    let run = home.run(&["agent", "-m", "hello"]).await.failure();
    assert!(run.stderr.contains("mcp.servers.leaky.env.OPENAI_API_KEY: refused"), "{}", run.stderr);
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(
        run.stdout.contains("OPENAI_API_KEY") || run.stderr.contains("OPENAI_API_KEY"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(server.requests().len(), 0, "nothing was sent to the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_starts_mcp_servers_on_the_first_turn_only() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    std::fs::create_dir_all(home.workspace()).unwrap();
    let workspace = home.workspace().canonicalize().unwrap();
    std::fs::write(workspace.join("notes.txt"), "gateway notes\n").unwrap();
    // A shell wrapper notes every launch of the filesystem server.
    let launches = home.path().join("launches.txt");
    let wrapper = format!(
        "echo started >> {launches:?}; exec {node:?} {files:?} {workspace:?}",
        node = node(),
        files = server_script("server-filesystem"),
        workspace = workspace.display().to_string(),
        launches = launches.display().to_string(),
    );
    home.append_config(&format!("[mcp.servers.files]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {wrapper:?}]\n"));
    let mut running = start(&home).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!launches.exists(), "starting the gateway spawns no MCP server");

    let path = workspace.join("notes.txt").display().to_string();
    for (turn, user) in ["ana", "bo"].iter().enumerate() {
        server.push(Reply::tool_call("files__read_text_file", json!({ "path": path })));
        server.push(Reply::text("read it"));
        let body = json!({"model": "local/test-model", "user": user, "messages": [{"role": "user", "content": "read my notes"}]});
        let reply: Value = running.chat_completions(&body).await.json().await.unwrap();
        assert_eq!(reply["choices"][0]["message"]["content"], "read it", "{reply}");
        let requests = server.requests();
        let results = tool_results(&requests[requests.len() - 1].body);
        assert_eq!(results.last().unwrap().trim_end(), "gateway notes", "turn {turn}");
    }
    let started = std::fs::read_to_string(&launches).unwrap();
    assert_eq!(started.lines().count(), 1, "the second turn reuses the running server");
    server.assert_clean();
    running.child.kill().await.unwrap();
}
