//! The interactive REPL driven through a pipe: streaming, /new, Ctrl-C.

use std::time::Duration;

use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::AsyncWriteExt;

use crate::harness::{Home, messages};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repl_streams_replies_and_new_starts_fresh() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("first streamed answer"));
    server.push(Reply::text("second answer"));
    let mut command = home.command(&["agent"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello\n/new\nline one \\\nline two\n/quit\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("first streamed answer"), "{stdout}");
    assert!(stdout.contains("new conversation"), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests[0].body["stream"], true);
    let second = messages(&requests[1].body);
    assert_eq!(second.len(), 2, "only the system prompt and the new message: {second:?}");
    assert_eq!(second[1]["content"], "line one \nline two");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_turn_not_the_program() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("too late").after(Duration::from_secs(30)));
    server.push(Reply::text("still here"));
    let mut command = home.command(&["agent"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"slow question\n").await.unwrap();
    stdin.flush().await.unwrap();
    for _ in 0..200 {
        if !server.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(server.requests().len(), 1, "the turn started");
    let killed = std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    stdin.write_all(b"are you there?\n/quit\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("[stopped]"), "{stdout}");
    assert!(stdout.contains("still here"), "{stdout}");
    let lines = home.session_lines("cli:local");
    assert!(lines.iter().any(|line| line["interrupted"] == true), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_one_shot_turn_exits_130_and_records_it() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("too late").after(Duration::from_secs(30)));
    let child = home.command(&["agent", "-m", "slow"]).spawn().unwrap();
    let pid = child.id().unwrap();
    for _ in 0..200 {
        if !server.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(server.requests().len(), 1, "the turn started");
    assert!(std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap().success());
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stdout.is_empty());
    let lines = home.session_lines("cli:local");
    assert_eq!(lines.last().unwrap()["interrupted"], true, "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_activity_starts_on_its_own_line_after_streamed_text() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(squidbot_testkit::Reply::ToolCalls {
        text: "Let me look.".into(),
        calls: vec![squidbot_testkit::ScriptedCall::new("", "list_dir", "{}")],
    });
    server.push(Reply::text("Empty."));
    let mut command = home.command(&["agent"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"what is here?\n/quit\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Let me look.\n  → list_dir {}\nEmpty."), "{stdout}");
    server.assert_clean();
}
