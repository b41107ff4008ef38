//! `squidbot tui` for real: the binary in tmux, keys sent with `send-keys`, the screen
//! read with `capture-pane`, in process and against a running gateway.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{gateway_home, started};
use crate::harness::Home;

/// A TUI in its own tmux server (so tests don't share one), ended on drop.
struct Pane {
    socket: String,
}

impl Pane {
    /// Starts `squidbot tui ARGUMENTS` for `home` in a 120×40 pane; `None` when tmux is
    /// missing and `SQUIDBOT_TEST_TMUX_UNAVAILABLE` says that is expected.
    fn start(home: &Home, arguments: &str) -> Option<Pane> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var_os("SQUIDBOT_TEST_TMUX_UNAVAILABLE").is_some(),
                "tmux is missing: install it (scripts/test does) or set SQUIDBOT_TEST_TMUX_UNAVAILABLE"
            );
            println!("NOT TESTED: tmux is missing");
            return None;
        }
        let socket = format!("squidbot-e2e-{}-{}", std::process::id(), unique_name(home.path()));
        let binary = env!("CARGO_BIN_EXE_squidbot");
        let path = std::env::var("PATH").unwrap_or_default();
        let home_path = home.path().display();
        // The pane's command gets a clean environment, like the harness's commands.
        let command = format!(
            "env -i TERM=xterm-256color PATH='{path}' HOME='{home_path}' SQUIDBOT_HOME='{home_path}' \
             SQUIDBOT__AGENTS__ASSISTANT__MODE=direct {binary} tui {arguments} 2>'{home_path}/tui.stderr'"
        );
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", "tui"])
            .arg(&command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux did not start");
        Some(Pane { socket })
    }

    fn tmux(&self, arguments: &[&str]) -> std::process::Output {
        Command::new("tmux").args(["-L", &self.socket]).args(arguments).output().unwrap()
    }

    /// Types `text` and presses Enter.
    fn type_line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "tui", "-l", text]);
        self.keys(&["Enter"]);
    }

    /// Presses `keys` (tmux key names).
    fn keys(&self, keys: &[&str]) {
        let mut arguments = vec!["send-keys", "-t", "tui"];
        arguments.extend_from_slice(keys);
        self.tmux(&arguments);
    }

    /// The screen as text.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "tui"]).stdout).into_owned()
    }

    /// Waits until the screen shows every one of `texts`; the screen.
    async fn wait_for(&self, texts: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if texts.iter().all(|text| screen.contains(text)) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the screen never showed {texts:?}:\n{screen}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the screen no longer shows `text` (a key like Escape must be read
    /// alone before more is typed, or the terminal reads Alt+the next key).
    async fn wait_until_gone(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.screen().contains(text) {
            assert!(Instant::now() < deadline, "the screen kept showing {text:?}:\n{}", self.screen());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the pane's program has ended (the tmux session is gone).
    async fn wait_for_exit(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.tmux(&["has-session", "-t", "tui"]).status.success() {
            assert!(Instant::now() < deadline, "the TUI did not quit:\n{}", self.screen());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        if let Err(error) = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).output() {
            eprintln!("can't stop the test's tmux server: {error}");
        }
    }
}

/// A name for the tmux socket unique to this home.
fn unique_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().replace(|c: char| !c.is_ascii_alphanumeric(), ""))
        .unwrap_or_default()
}

fn script_a_tool_call_and_a_markdown_reply(server: &ScriptedLlm) {
    server.push(Reply::tool_call("exec", json!({"command": "echo hi"})));
    server.push(Reply::text("## Done\n\nThe shell said **hi**:\n\n```sh\necho hi\n```\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_in_process_runs_a_tool_call_switches_model_and_quits() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    // A port nothing listens on: no gateway answers, so the assistant runs in process.
    home.append_config("[gateway]\nport = 9\n");
    script_a_tool_call_and_a_markdown_reply(&server);
    let Some(pane) = Pane::start(&home, "") else { return };
    pane.wait_for(&["local", "local/test-model", "cli:local"]).await;
    pane.type_line("say hi in the shell");
    let screen = pane.wait_for(&["exec echo hi", "## Done", "The shell said hi:", "│ echo hi"]).await;
    assert!(screen.contains("✓ exec"), "{screen}");
    // Tab selects the newest card and unfolds it: its arguments and result.
    pane.keys(&["Tab", "Tab"]);
    pane.wait_for(&["▾ ✓ exec", "\"command\": \"echo hi\"", "│ hi"]).await;
    pane.keys(&["Escape"]);
    pane.wait_until_gone("Tab/Enter fold").await;

    pane.type_line("/model");
    pane.wait_for(&["models · Enter switches", "● local/test-model"]).await;
    pane.keys(&["Escape"]);
    pane.wait_until_gone("models · Enter switches").await;
    pane.type_line("/model local/other-model");
    pane.wait_for(&["model: local/other-model"]).await;
    server.push(Reply::text("answered by the other model"));
    pane.type_line("and now?");
    pane.wait_for(&["answered by the other model"]).await;
    let requests = server.requests();
    assert_eq!(requests.last().unwrap().body["model"], "other-model", "{:?}", requests.last().unwrap().body);

    pane.type_line("/tree");
    pane.wait_for(&["tree of cli:local", "user: say hi in the shell"]).await;
    pane.type_line("/quit");
    pane.wait_for_exit().await;
    let lines = home.session_lines("cli:local");
    assert!(lines.iter().any(|line| line["type"] == "tool_result"), "{lines:?}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_talks_to_a_running_gateway() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    home.append_config(&format!("[gateway]\nport = {port}\n"));
    let mut gateway = started(home.command(&["gateway"])).await;
    script_a_tool_call_and_a_markdown_reply(&server);
    let Some(pane) = Pane::start(&home, "--session tui:gateway") else { return };
    pane.wait_for(&[" gateway", "local/test-model", "tui:gateway"]).await;
    pane.type_line("say hi in the shell");
    pane.wait_for(&["exec echo hi", "## Done", "The shell said hi:"]).await;
    // The gateway's finish event carries the output: the unfolded card shows it.
    pane.keys(&["Tab", "Tab"]);
    pane.wait_for(&["▾ ✓ exec", "│ hi"]).await;
    pane.keys(&["Escape"]);
    pane.wait_until_gone("Tab/Enter fold").await;

    pane.type_line("/model");
    pane.wait_for(&["models · Enter switches", "local/test-model"]).await;
    pane.keys(&["Escape"]);
    pane.wait_until_gone("models · Enter switches").await;
    pane.type_line("/model local/other-model");
    pane.wait_for(&["switching the model over the gateway: not available yet"]).await;
    pane.type_line("/sessions");
    pane.wait_for(&["sessions · Enter resumes", "tui:gateway"]).await;
    pane.keys(&["Escape"]);
    pane.wait_until_gone("sessions · Enter resumes").await;
    pane.type_line("/tree");
    pane.wait_for(&["tree of tui:gateway", "user: say hi in the shell"]).await;
    let exported = home.path().join("exported.md");
    pane.type_line(&format!("/export md {}", exported.display()));
    pane.wait_for(&["exported tui:gateway to"]).await;
    let text = std::fs::read_to_string(&exported).unwrap();
    assert!(text.contains("say hi in the shell"), "{text}");
    pane.type_line("/quit");
    pane.wait_for_exit().await;
    gateway.child.start_kill().unwrap();
    gateway.child.wait().await.unwrap();
    server.assert_clean();
}
