//! The secrets vault through the real binary: values from standard input only, never
//! listed or shown, resolved for a turn, and moved out of config.toml by import-config.

use std::process::Stdio;

use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::AsyncWriteExt;

use crate::harness::{Home, KEY, Run};

/// Runs the binary with `input` on standard input.
pub async fn run_with_input(home: &Home, arguments: &[&str], input: &str) -> Run {
    run_command_with_input(home.command(arguments), input).await
}

/// Runs `command` (the binary, set up) with `input` on standard input.
pub async fn run_command_with_input(mut command: tokio::process::Command, input: &str) -> Run {
    command.stdin(Stdio::piped());
    let mut child = command.spawn().expect("spawn squidbot");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).await.expect("write stdin");
    drop(stdin);
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("squidbot did not finish within 60 s")
        .expect("wait for squidbot");
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn config_with_key(server: &ScriptedLlm, api_key: &str) -> String {
    format!(
        "[llm]\nmodel = \"local/test-model\"\n\n[providers.local]\nkind = \"openai\"\napi_base = \"{}\"\napi_key = \"{api_key}\"\n",
        server.base_url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_set_from_stdin_is_listed_by_name_only() {
    let home = Home::new();
    let set = run_with_input(&home, &["secrets", "set", "openai"], "sk-vault-value-123\n").await.success();
    assert!(set.stdout.contains("secret:openai"), "{}", set.stdout);
    let listed = home.run(&["secrets", "list", "--json"]).await.success();
    assert!(!listed.stdout.contains("sk-vault-value-123"), "{}", listed.stdout);
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(rows[0]["name"], "openai");
    assert!(rows[0]["created_ms"].as_i64().unwrap() > 0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join("vault.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let database = std::fs::read(home.path().join("squidbot.db")).unwrap();
    assert!(!database.windows(18).any(|window| window == b"sk-vault-value-123"), "sealed at rest");
    let audit = home.run(&["audit", "--json"]).await;
    assert!(!audit.stdout.contains("sk-vault-value-123"), "{}", audit.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_given_as_an_argument_is_refused() {
    let home = Home::new();
    let run = home.run(&["secrets", "set", "openai", "sk-in-argv"]).await.failure();
    assert!(run.stderr.contains("unexpected argument"), "{}", run.stderr);
    let listed = home.run(&["secrets", "list", "--json"]).await.success();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&listed.stdout).unwrap(), serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_key_from_the_vault_reaches_the_llm_and_is_never_shown() {
    let server = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&config_with_key(&server, "secret:openai"));
    server.expect_api_key("sk-from-the-vault");
    run_with_input(&home, &["secrets", "set", "openai"], "sk-from-the-vault\n").await.success();
    server.push(Reply::text("hello from the vault"));
    let run = home.run(&["agent", "-m", "hi"]).await.success();
    assert_eq!(run.stdout, "hello from the vault\n");
    let shown = home.run(&["config", "show"]).await.success();
    assert!(!shown.stdout.contains("sk-from-the-vault"), "{}", shown.stdout);
    // A rotated value is what the next turn sends.
    run_with_input(&home, &["secrets", "rotate", "openai"], "sk-rotated\n").await.success();
    server.expect_api_key("sk-rotated");
    server.push(Reply::text("rotated"));
    assert_eq!(home.run(&["agent", "-m", "again"]).await.success().stdout, "rotated\n");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_is_a_one_line_error_naming_key_and_secret() {
    let server = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&config_with_key(&server, "secret:nope"));
    let run = home.run(&["agent", "-m", "hi"]).await.failure();
    let stderr = run.stderr.trim();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("providers.local.api_key") && stderr.contains("secret:nope"), "{stderr}");
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_config_moves_plaintext_keys_and_keeps_comments() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[tools.web]\nbrave_api_key = \"brave-plain-key\" # search key\n");
    let run = home.run(&["secrets", "import-config"]).await.success();
    assert!(run.stdout.contains("providers.local.api_key -> secret:provider.local.api_key"), "{}", run.stdout);
    assert!(run.stdout.contains("tools.web.brave_api_key"), "{}", run.stdout);
    assert!(!run.stdout.contains(KEY), "{}", run.stdout);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(!config.contains(KEY) && !config.contains("brave-plain-key"), "{config}");
    assert!(config.contains("api_key = \"secret:provider.local.api_key\"               # or api_key_env"), "{config}");
    assert!(config.contains("# default for every role") && config.contains("# search key"), "{config}");
    let again = home.run(&["secrets", "import-config"]).await.success();
    assert!(again.stdout.contains("nothing to move"), "{}", again.stdout);
    assert_eq!(std::fs::read_to_string(home.path().join("config.toml")).unwrap(), config);
    server.push(Reply::text("still works"));
    assert_eq!(home.run(&["agent", "-m", "hi"]).await.success().stdout, "still works\n");
    let shown = home.run(&["config", "show"]).await.success();
    assert!(!shown.stdout.contains(KEY), "{}", shown.stdout);
    server.assert_clean();
}
