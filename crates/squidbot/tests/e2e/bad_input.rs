//! Bad input of every kind gives a clear message, no panic, and a loadable session.

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedCall, ScriptedLlm};

use crate::harness::{Home, Run, tool_results};

fn assert_no_panic(run: &Run) {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(!run.stderr.contains("RUST_BACKTRACE"), "{}", run.stderr);
}

async fn assert_session_loads(home: &Home) {
    let run = home.run(&["sessions", "show", "cli:local"]).await.success();
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_config_names_the_key() {
    let home = Home::new();
    home.write_config("[llm]\nmodel = \"local/m\"\n[providers.local]\nkind = \"pigeon\"\napi_base = \"http://x\"\n");
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(run.stderr.contains("providers.local.kind"), "{}", run.stderr);
    assert_no_panic(&run);

    home.write_config("[llm]\nmodle = \"local/m\"\n");
    let run = home.run(&["agent", "-m", "hi"]).await.failure();
    assert!(run.stderr.contains("modle"), "{}", run.stderr);

    home.write_config("[llm\nmodel = ");
    let run = home.run(&["status"]).await.failure();
    assert!(run.stderr.contains("can't read config"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "one-line error: {}", run.stderr);

    home.write_config("[llm]\nmodel = \"nowhere/m\"\n");
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(run.stderr.contains("llm.model"), "{}", run.stderr);

    home.write_config("[llm]\nmodel = \"local/m\"\n[providers.local]\napi_base = \"ftp://x\"\n");
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(run.stderr.contains("providers.local.api_base"), "{}", run.stderr);

    let run =
        home.run_with(&["config", "validate"], &[("SQUIDBOT__TOOLS__EXEC__TIMEOUT_SECS", "soon")]).await.failure();
    assert!(run.stderr.contains("tools.exec.timeout_secs"), "{}", run.stderr);

    // What the gateway would refuse to start with is said by validate too, and so is
    // allow_from that the default owner_only policy ignores.
    home.write_config(
        "[llm]\nmodel = \"local/m\"\n[providers.local]\napi_base = \"http://127.0.0.1:9/v1\"\napi_key = \"k-123456\"\n\
         [gateway]\nbind = \"0.0.0.0\"\n[gateway.auth]\nmode = \"none\"\n\
         [channels.telegram]\ntoken = \"1:x\"\nowners = [\"1\"]\nallow_from = [\"2\"]\n",
    );
    let run = home.run(&["config", "validate"]).await;
    assert!(
        run.stderr.contains("warning: gateway.bind: refusing to listen on 0.0.0.0 without authentication"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("warning: channels.telegram.allow_from: set, but channels.telegram.policy is owner_only"),
        "{}",
        run.stderr
    );
    home.write_config(
        "[llm]\nmodel = \"local/m\"\n[providers.local]\napi_base = \"http://127.0.0.1:9/v1\"\napi_key = \"k-123456\"\n",
    );
    let run = home.run(&["config", "validate"]).await.success();
    assert!(run.stderr.contains("warning: gateway.auth: gateway.auth.mode is token but neither"), "{}", run.stderr);
    assert!(run.stdout.contains("ok for the terminal, but `squidbot gateway` would refuse to start"), "{}", run.stdout);
    let run = home.run(&["gateway"]).await.failure();
    assert!(run.stderr.contains("gateway.auth.mode is token but neither"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_config_points_to_onboard() {
    let home = Home::new();
    let run = home.run(&["agent", "-m", "hi"]).await.failure();
    assert!(run.stderr.contains("squidbot onboard"), "{}", run.stderr);
    let run = home.run(&["status"]).await.success();
    assert!(run.stdout.contains("problem    no config at"), "{}", run.stdout);
    assert!(run.stdout.contains("run `squidbot onboard`"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_api_key_names_the_env_var() {
    let home = Home::new();
    home.write_config("[llm]\nmodel = \"openrouter/some/model\"\n");
    let run = home.run(&["agent", "-m", "hi"]).await.failure();
    assert!(run.stderr.contains("OPENROUTER_API_KEY"), "{}", run.stderr);
    let run = home.run(&["status", "--json"]).await.success();
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(status["problems"][0].as_str().unwrap().contains("OPENROUTER_API_KEY"), "{status}");
    assert_eq!(status["providers"][0]["key"], "missing");
    assert!(
        !home.path().join("sessions/cli:local.jsonl").exists(),
        "nothing was recorded for a turn that could not start"
    );

    let run = home.run(&["agent", "-m", "hi", "--model", "nosuch/model"]).await.failure();
    assert!(run.stderr.contains("nosuch"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert_no_panic(&run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_provider_is_a_clear_error() {
    let home = Home::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    home.write_config(&format!(
        "[llm]\nmodel = \"local/m\"\nmax_retries = 1\n[providers.local]\napi_base = \"http://127.0.0.1:{port}/v1\"\napi_key = \"k\"\n"
    ));
    let run = home.run(&["agent", "-m", "hi"]).await.failure();
    let last_line = run.stderr.lines().last().unwrap_or_default();
    assert!(last_line.starts_with("error: can't call local"), "{}", run.stderr);
    assert!(last_line.contains("Connection refused"), "{}", run.stderr);
    assert_no_panic(&run);
    assert_session_loads(&home).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_cut_streams_fail_cleanly() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.write_config(&format!(
        "{}\n[llm]\nmodel = \"local/test-model\"\nmax_retries = 0\n",
        std::fs::read_to_string(home.path().join("config.toml"))
            .unwrap()
            .replace("[llm]\nmodel = \"local/test-model\"", "")
    ));
    server.push(Reply::garbage("<html>definitely not json</html>"));
    let run = home.run(&["agent", "-m", "one"]).await.failure();
    assert!(run.stderr.contains("invalid response"), "{}", run.stderr);
    assert_no_panic(&run);

    // The REPL streams: cut the stream half way.
    server.push(Reply::cut_stream("half a sent"));
    let mut command = home.command(&["agent"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"two\n/quit\n").await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("error: can't call local"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_session_loads(&home).await;
    let lines = home.session_lines("cli:local");
    let last = lines.last().unwrap();
    assert_eq!(last["interrupted"], true, "{last}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_tool_arguments_go_back_to_the_model() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::ToolCalls {
        text: String::new(),
        calls: vec![ScriptedCall::new("call_bad", "read_file", "{\"path\": \"a.txt\"")],
    });
    server.push(Reply::text("I sent broken arguments, sorry."));
    let run = home.run(&["agent", "-m", "read a.txt"]).await.success();
    assert_eq!(run.stdout, "I sent broken arguments, sorry.\n");
    let results = tool_results(&server.requests()[1].body);
    assert!(results[0].contains("invalid JSON"), "{results:?}");
    assert_session_loads(&home).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enormous_tool_output_is_capped_with_the_middle_omitted() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::tool_call("exec", json!({"command": "seq 1 200000"})));
    server.push(Reply::text("lots of numbers"));
    home.run(&["agent", "-m", "count"]).await.success();
    let results = tool_results(&server.requests()[1].body);
    let output = &results[0];
    assert!(output.len() <= 30_200, "{} chars", output.len());
    assert!(output.starts_with("1\n2\n3\n"), "{}", &output[..50]);
    assert!(output.contains("200000"), "the tail is kept");
    assert!(output.contains("omitted"), "the cut is marked");
    assert!(output.contains("exit code 0"), "the exit code is reported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_tells_the_user() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.write_config(&format!("{config}\n[agents.assistant]\nmax_turns = 2\n"));
    server.push(Reply::tool_call("list_dir", json!({})));
    server.push(Reply::tool_call("list_dir", json!({})));
    let run = home.run(&["agent", "-m", "loop forever"]).await.success();
    assert!(run.stdout.contains("max_turns = 2"), "{}", run.stdout);
    assert_eq!(server.requests().len(), 2);
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_session_settings_are_validated() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[sessions]\narchive_after = \"tomorrow\"\n[memory]\ncompact_at = 0.9\nemergency_at = 0.5\n");
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(run.stderr.contains("sessions.archive_after"), "{}", run.stderr);
    assert!(run.stderr.contains("memory.compact_at"), "{}", run.stderr);
}
