//! Hooks through the real binary, confined by a real sandbox: a before-hook script vetoes
//! `exec` with a reason the model reads, a hook that outlives its timeout blocks the call,
//! `squidbot hooks test` prints a decision, hooks rewrite or veto a message and rewrite a
//! reply, observers hear each event of a turn and a crashing one changes nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, tool_results};
use crate::sandbox::declared_unavailable;

/// Writes an executable `#!/bin/sh` script named `name` into `directory`.
fn script(directory: &Path, name: &str, body: &str) -> PathBuf {
    let path = directory.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn hook_config(backend: &str, program: &Path, extra: &str) -> String {
    format!(
        "[sandbox]\nbackend = \"{backend}\"\n\n[agents.assistant]\nmode = \"direct\"\n\n\
         [[hooks]]\nevent = \"before_tool\"\ncommand = [\"{}\"]\ntools = [\"exec\"]\n{extra}\n",
        program.display()
    )
}

/// The veto script: reads the call, refuses any `rm`, allows the rest.
const VETO_RM: &str = r#"input=$(cat)
case "$input" in
  *'"rm '*) echo '{"decision":"veto","reason":"deleting files needs a human"}' ;;
  *) echo '{"decision":"allow"}' ;;
esac"#;

async fn a_hook_vetoes_exec(backend: &str) {
    if declared_unavailable(backend) {
        return;
    }
    let hooks = tempfile::tempdir().unwrap();
    let program = script(hooks.path(), "check", VETO_RM);
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config(&hook_config(backend, &program, ""));
    server.push(Reply::tool_call("exec", json!({ "command": "rm -rf important" })));
    server.push(Reply::text("refused"));
    std::fs::create_dir_all(home.workspace().join("important")).unwrap();
    let run = home.run(&["agent", "-m", "clean up"]).await.success();
    assert_eq!(run.stdout, "refused\n");
    let results = tool_results(&server.requests()[1].body);
    assert_eq!(results, ["Refused by a hook: deleting files needs a human"], "{results:?}");
    assert!(home.workspace().join("important").exists(), "the vetoed command ran");

    // The same hook allows a harmless command.
    server.push(Reply::tool_call("exec", json!({ "command": "echo fine" })));
    server.push(Reply::text("ok"));
    home.run(&["agent", "-m", "say fine"]).await.success();
    let results = tool_results(&server.requests()[3].body);
    let last = results.last().unwrap();
    assert!(last.contains("fine") && !last.contains("Refused"), "{results:?}");

    // `hooks test` runs it by hand.
    let input = hooks.path().join("input.json");
    std::fs::write(&input, json!({"tool": "exec", "arguments": {"command": "rm x"}}).to_string()).unwrap();
    let run = home.run(&["hooks", "test", "before_tool", input.to_str().unwrap()]).await.failure();
    assert!(run.stdout.contains("veto: deleting files needs a human"), "{}", run.stdout);
    let run = home.run(&["hooks", "list"]).await.success();
    assert!(run.stdout.contains("before_tool") && run.stdout.contains("fail closed"), "{}", run.stdout);
    server.assert_clean();
}

async fn a_slow_hook_fails_closed(backend: &str) {
    if declared_unavailable(backend) {
        return;
    }
    let hooks = tempfile::tempdir().unwrap();
    let program = script(hooks.path(), "slow", "cat >/dev/null\nsleep 5\necho '{\"decision\":\"allow\"}'");
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config(&hook_config(backend, &program, "timeout_ms = 300"));
    server.push(Reply::tool_call("exec", json!({ "command": "echo ran > ran.txt" })));
    server.push(Reply::text("blocked"));
    let started = std::time::Instant::now();
    home.run(&["agent", "-m", "go"]).await.success();
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "waited for the hook: {:?}", started.elapsed());
    let results = tool_results(&server.requests()[1].body);
    assert!(results[0].starts_with("Refused by a hook:") && results[0].contains("timed out"), "{results:?}");
    assert!(!home.workspace().join("ran.txt").exists(), "the blocked command ran");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_hook_vetoes_exec_and_the_model_reads_why() {
    a_hook_vetoes_exec("landlock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bubblewrap_hook_vetoes_exec_and_the_model_reads_why() {
    a_hook_vetoes_exec("bubblewrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_hook_past_its_timeout_blocks_the_call() {
    a_slow_hook_fails_closed("landlock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bubblewrap_hook_past_its_timeout_blocks_the_call() {
    a_slow_hook_fails_closed("bubblewrap").await;
}

/// Rewrites the text it is given (`message_received`, `before_reply`) by appending `mark`.
fn appending(mark: &str) -> String {
    format!(
        r#"text=$(sed 's/.*"text":"\([^"]*\)".*/\1/')
printf '{{"decision":"rewrite","text":"%s{mark}"}}' "$text""#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_rewrite_messages_and_replies_and_a_crashing_observer_changes_nothing() {
    let backend = "landlock";
    if declared_unavailable(backend) {
        return;
    }
    let hooks = tempfile::tempdir().unwrap();
    let log = tempfile::tempdir().unwrap();
    let message = script(hooks.path(), "message", &appending(" (checked)"));
    let reply = script(hooks.path(), "reply", &appending(" -- reviewed"));
    let observe = script(
        hooks.path(),
        "observe",
        &format!(
            // One write per event: observers run at the same time.
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> {}/events.log",
            log.path().display()
        ),
    );
    let crash = script(hooks.path(), "crash", "echo 'not json at all'\nkill -SEGV $$");
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let mut config = format!(
        "[sandbox]\nbackend = \"{backend}\"\n\n[agents.assistant]\nmode = \"direct\"\n\n\
         [[hooks]]\nevent = \"message_received\"\ncommand = [\"{}\"]\n\n\
         [[hooks]]\nevent = \"before_reply\"\ncommand = [\"{}\"]\n\n\
         [[hooks]]\nevent = \"after_tool\"\ncommand = [\"{}\"]\n\n",
        message.display(),
        reply.display(),
        crash.display()
    );
    for event in ["session_created", "turn_started", "after_tool", "turn_finished"] {
        config.push_str(&format!(
            "[[hooks]]\nevent = \"{event}\"\ncommand = [\"{}\"]\nwrite = [\"{}\"]\n\n",
            observe.display(),
            log.path().display()
        ));
    }
    home.append_config(&config);
    server.push(Reply::tool_call("exec", json!({ "command": "echo tool ran" })));
    server.push(Reply::text("all done"));
    let run = home.run(&["agent", "-m", "clean the kitchen"]).await.success();
    assert_eq!(run.stdout, "all done -- reviewed\n", "the reply hook's rewrite is what the person reads");

    let first = &server.requests()[0].body;
    let said: Vec<&str> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str())
        .collect();
    assert_eq!(said, ["clean the kitchen (checked)"], "the model reads the rewritten message");
    // The crashing after-hook changed nothing the model or the person saw.
    let results = tool_results(&server.requests()[1].body);
    assert!(results[0].contains("tool ran") && !results[0].contains("Refused"), "{results:?}");

    let events = std::fs::read_to_string(log.path().join("events.log")).unwrap();
    let events: Vec<serde_json::Value> =
        events.lines().filter(|line| !line.trim().is_empty()).map(|line| serde_json::from_str(line).unwrap()).collect();
    // Observers run on their own: each event once, in no promised order.
    let mut names: Vec<&str> = events.iter().map(|event| event["event"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["after_tool", "session_created", "turn_finished", "turn_started"], "{events:?}");
    let event = |name: &str| events.iter().find(|event| event["event"] == name).unwrap();
    assert_eq!(event("after_tool")["tool"], "exec");
    assert_eq!(event("after_tool")["ok"], true);
    assert_eq!(event("turn_finished")["status"], "completed");
    assert_eq!(event("turn_finished")["tool_calls"], 1);
    assert_eq!(event("turn_finished")["user"], "owner");

    // The session keeps what was said after the hooks.
    let listed = home.run(&["sessions", "show", "cli:local"]).await.success();
    let text = listed.stdout;
    assert!(text.contains("clean the kitchen (checked)") && text.contains("all done -- reviewed"), "{text}");

    // A message hook that vetoes: the person reads why, the model is never asked.
    let veto =
        script(hooks.path(), "veto", "cat >/dev/null\necho '{\"decision\":\"veto\",\"reason\":\"not on Sundays\"}'");
    home.append_config(&format!("[[hooks]]\nevent = \"message_received\"\ncommand = [\"{}\"]\n", veto.display()));
    let asked = server.requests().len();
    let run = home.run(&["agent", "-m", "anything"]).await.failure();
    assert!(run.stderr.contains("Your message was not accepted: not on Sundays"), "{}", run.stderr);
    assert_eq!(server.requests().len(), asked, "the model was asked");
    server.assert_clean();
}
