//! The happy path: onboard, chat with tools, history across restarts, inspection.

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm, Wire};

use crate::harness::{Home, KEY, messages, tool_results};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboard_then_chat_with_tools_and_history_survives_restart() {
    let server = ScriptedLlm::start().await;
    server.expect_api_key(KEY);
    let home = Home::new();
    let base = server.base_url();
    let run = home
        .run(&[
            "onboard",
            "--non-interactive",
            "--provider",
            "local",
            "--kind",
            "openai",
            "--api-base",
            &base,
            "--api-key-env",
            "E2E_LOCAL_KEY",
            "--model",
            "test-model",
        ])
        .await
        .success();
    assert!(run.stdout.contains("squidbot agent"), "{}", run.stdout);
    for name in ["AGENTS.md", "SOUL.md", "USER.md", "IDENTITY.md", "TOOLS.md", "HEARTBEAT.md"] {
        assert!(home.workspace().join(name).is_file(), "{name} missing");
    }
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(config.contains("model = \"local/test-model\""), "{config}");
    // The gateway never starts without authentication: onboard made a token, kept in the
    // vault, shown once.
    assert!(config.contains("[gateway.auth]\nmode = \"token\"\ntoken = \"secret:gateway.token\""), "{config}");
    let shown = run.stdout.lines().find_map(|line| line.split("gateway token (").nth(1)).expect("the token is shown");
    let token = shown.rsplit(": ").next().unwrap().trim();
    assert_eq!(token.len(), 48, "{shown}");
    assert!(!config.contains(token), "the token is not in config.toml");
    let validate = home.run_with(&["config", "validate"], &[("E2E_LOCAL_KEY", KEY)]).await.success();
    assert!(!validate.stderr.contains("gateway"), "{}", validate.stderr);

    server.push(Reply::tool_call("write_file", json!({"path": "notes/todo.txt", "content": "buy milk"})));
    server.push(Reply::text("Saved your note."));
    let environment = [("E2E_LOCAL_KEY", KEY)];
    let run = home.run_with(&["agent", "-m", "note: buy milk"], &environment).await.success();
    assert_eq!(run.stdout, "Saved your note.\n");
    assert_eq!(std::fs::read_to_string(home.workspace().join("notes/todo.txt")).unwrap(), "buy milk");

    // A new process: the history comes back from the session file.
    server.push(Reply::text("You asked me to note: buy milk."));
    let run = home.run_with(&["agent", "-m", "what did I ask?"], &environment).await.success();
    assert_eq!(run.stdout, "You asked me to note: buy milk.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last = &requests[2].body;
    let history = messages(last);
    assert_eq!(history[0]["role"], "system");
    assert!(history[0]["content"].as_str().unwrap().contains("# SOUL.md"), "bootstrap files are in the prompt");
    assert_eq!(history[1]["content"], "note: buy milk");
    assert!(tool_results(last)[0].contains("bytes"), "{:?}", tool_results(last));
    assert_eq!(history.last().unwrap()["content"], "what did I ask?");
    assert_eq!(requests[0].wire, Wire::OpenAi);
    server.assert_clean();

    let run = home.run(&["sessions", "list", "--json"]).await.success();
    let sessions: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(sessions[0]["key"], "cli:local");
    assert_eq!(sessions[0]["messages"], 5);
    let run = home.run(&["sessions", "show", "cli:local"]).await.success();
    assert!(run.stdout.contains("→ write_file"), "{}", run.stdout);
    assert!(run.stdout.contains("[assistant (local/test-model)] You asked me"), "{}", run.stdout);
    let run = home.run(&["sessions", "tree", "cli:local"]).await.success();
    assert_eq!(run.stdout.lines().filter(|line| line.starts_with('*')).count(), 8, "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_design_config_works_as_written() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("hello from the model"));
    let run = home.run(&["agent", "-m", "hello"]).await.success();
    assert_eq!(run.stdout, "hello from the model\n");
    assert_eq!(server.requests()[0].body["model"], "test-model");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_provider_runs_parallel_tools() {
    let server = ScriptedLlm::start().await;
    server.expect_api_key(KEY);
    let home = Home::new();
    home.write_config(&format!(
        "[llm]\nmodel = \"claude/sonnet\"\n[providers.claude]\nkind = \"anthropic\"\napi_base = \"{}\"\napi_key = \"{KEY}\"\n",
        server.base_url()
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("a.txt"), "alpha").unwrap();
    std::fs::write(home.workspace().join("b.txt"), "beta").unwrap();
    server.push(Reply::tool_calls(vec![
        ("read_file", json!({"path": "a.txt"})),
        ("read_file", json!({"path": "b.txt"})),
    ]));
    server.push(Reply::text("alpha and beta"));
    let run = home.run(&["agent", "-m", "read both"]).await.success();
    assert_eq!(run.stdout, "alpha and beta\n");
    let second = &server.requests()[1];
    assert_eq!(second.wire, Wire::Anthropic);
    let text = second.body.to_string();
    assert!(text.contains("alpha") && text.contains("beta"), "{text}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_provider_answers_and_is_recorded() {
    let primary = ScriptedLlm::start().await;
    let backup = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&format!(
        "[llm]\nmodel = \"main/big\"\nfallbacks = [\"spare/small\"]\nmax_retries = 0\n\
         [providers.main]\napi_base = \"{}\"\napi_key = \"k1\"\n[providers.spare]\napi_base = \"{}\"\napi_key = \"k2\"\n",
        primary.base_url(),
        backup.base_url()
    ));
    primary.push(Reply::server_error(503));
    backup.push(Reply::text("backup here"));
    let run = home.run(&["agent", "-m", "hi"]).await.success();
    assert_eq!(run.stdout, "backup here\n");
    let lines = home.session_lines("cli:local");
    assert_eq!(lines.last().unwrap()["model"], "spare/small", "{lines:?}");
    primary.assert_clean();
    backup.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_override_changes_the_model_and_secrets_stay_hidden() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("ok"));
    let run = home
        .run_with(&["agent", "-m", "hi"], &[("SQUIDBOT__LLM__MODEL", "local/other-model"), ("RUST_LOG", "trace")])
        .await
        .success();
    assert_eq!(server.requests()[0].body["model"], "other-model");
    assert!(!run.stderr.contains(KEY), "the key leaked into the log");
    assert!(run.stderr.len() > 100, "trace logging produced output");
    let run = home.run(&["config", "show"]).await.success();
    assert!(!run.stdout.contains(KEY), "{}", run.stdout);
    assert!(run.stdout.contains("[redacted]"), "{}", run.stdout);
    let run = home.run(&["config", "path"]).await.success();
    assert_eq!(run.stdout.trim(), home.path().join("config.toml").display().to_string());
    home.run(&["config", "validate"]).await.success();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_a_lean_prompt() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let base = server.base_url();
    home.run(&["onboard", "--non-interactive", "--provider", "local", "--api-base", &base, "--model", "m", "--force"])
        .await
        .success();
    // The default delegate mode: 8 tools (delegate, cancel_worker, memory, send,
    // send_file); the tool work happens in sub-agents.
    let run =
        home.run_with(&["status", "--json"], &[("SQUIDBOT__AGENTS__ASSISTANT__MODE", "delegate")]).await.success();
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let system = status["prompt"]["system_chars"].as_u64().unwrap();
    let tools = status["prompt"]["tool_schema_chars"].as_u64().unwrap();
    assert!(system > 500 && system < 6_000, "system prompt is {system} chars");
    assert!(tools > 500 && tools < 4_500, "tool schemas are {tools} chars");
    assert!(system + tools < 7_000, "prompt and schemas together are {} chars", system + tools);
    assert_eq!(status["prompt"]["tools"], 8);
    assert_eq!(status["model"], "local/m");
    // Direct mode (the harness default): files, shell, memory, the two web tools, the five
    // cron tools (in delegate mode the worker's), send, send_file and spawn. The cron tools
    // add about 1,470 chars to the 5,650 of the other sixteen.
    let run = home.run(&["status", "--json"]).await.success();
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(status["prompt"]["tools"], 21);
    let tools = status["prompt"]["tool_schema_chars"].as_u64().unwrap();
    assert!(tools < 7_000, "tool schemas are {tools} chars");
    let run = home.run(&["status"]).await.success();
    assert!(run.stdout.contains("chars system prompt"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oldest_turns_are_dropped_with_a_warning_when_the_context_overflows() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.write_config(&config.replace("[llm]\n", "[llm]\nmax_tokens = 100\ncontext_window = 1500\n"));
    // Compaction off: this test is about the per-request trimming alone.
    home.append_config("[memory]\ncompact_at = 1.0\naggressive_at = 1.0\nemergency_at = 1.0\n");
    server.push(Reply::text("noted"));
    server.push(Reply::text("fits"));
    let long = "a long message that fills the window ".repeat(100);
    let run = home.run(&["agent", "-m", &long]).await.success();
    assert!(!run.stderr.contains("left out"), "{}", run.stderr);
    let run = home.run(&["agent", "-m", "short one"]).await.success();
    assert_eq!(run.stdout, "fits\n");
    assert!(run.stderr.contains("the 2 oldest messages were left out"), "{}", run.stderr);
    let sent = messages(&server.requests()[1].body);
    assert_eq!(sent.len(), 2, "system prompt and the new message only: {sent:?}");
    assert_eq!(sent[1]["content"], "short one");
    assert_eq!(home.session_lines("cli:local").iter().filter(|line| line["type"] == "message").count(), 4);
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_tool_output_never_reach_the_model() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    std::fs::create_dir_all(home.workspace()).unwrap();
    let leaked = format!(
        "ANTHROPIC_API_KEY=sk-ant-api03-{}\nour provider key: {KEY}\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nplain line\n",
        "Z".repeat(40)
    );
    std::fs::write(home.workspace().join(".env"), leaked).unwrap();
    server.push(Reply::tool_call("exec", json!({"command": "cat .env"})));
    server.push(Reply::text("I looked."));
    let run = home.run(&["agent", "-m", "show me .env"]).await.success();
    assert_eq!(run.stdout, "I looked.\n");
    assert!(run.stderr.contains("Redacted 3 secret(s)"), "{}", run.stderr);
    let sent = server.requests()[1].body.to_string();
    assert!(!sent.contains("ZZZZZZZZZZ") && !sent.contains(KEY) && !sent.contains("MIIEpAIBAAKCAQEA"), "{sent}");
    assert!(sent.contains("[REDACTED:anthropic_key]") && sent.contains("plain line"), "{sent}");
    server.assert_clean();
}
