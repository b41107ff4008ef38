//! The leak corpus (issue 19): end-to-end attempts, through the real gateway and the
//! scripted model, to get a vault secret, a provider key or another credential out, each
//! run against every sandbox backend, each checked blocked or redacted.
//!
//! One home and gateway per backend ([`setup::Corpus`]) holds: the provider key in the
//! vault, a second vault secret nothing refers to, a third the MCP server's `env` takes,
//! key-shaped values and a pasted provider key in workspace files, two secrets in the
//! gateway's environment, a hook that dumps what it sees and a skill script that prints
//! its environment.
//!
//! | attack kind (attempts)                                        | landlock | bubblewrap | none     |
//! |---------------------------------------------------------------|----------|------------|----------|
//! | exec environment dumps: printenv, env, /proc/self, /proc/* (4) | confined | confined   | refused¹ |
//! | exec on the gateway: its /proc, config, vault key, database,   | 9        | 9          | n/a²     |
//! |   transcripts, grep of the home, `squidbot config show` (9)    |          |            |          |
//! | exec: skill script env, printed keys and their encodings (6)   | 6        | 6          | 6        |
//! | read_file of host paths and escapes (7), of planted keys (2)   | 9        | 9          | 9        |
//! | MCP server env, hook input and env, hook echo (3)              | 3        | 3          | 3        |
//! | web_fetch (6) and web_search (3) exfiltration, control (1)     | 10       | 10         | 10       |
//! | memory write then read of a secret (2)                         | 2        | 2          | 2        |
//! | the model echoing secrets, streamed (7) and over WS (1)        | 8        | 8          | 8        |
//! | WS config/transcripts/status/health (4), CLI (6), HTTP (2),    | 13       | 13         | 13       |
//! |   stored files and the web recorder (1)                        |          |            |          |
//! | total                                                          | 64       | 64         | 55       |
//!
//! ¹ Unconfined, the command policy refuses them. ² With the sandbox off commands run
//! unconfined as the admin chose (the gateway refuses that while a non-admin could run
//! them); only the other layers are tested.

mod attacks;
mod setup;

use base64::Engine;
use serde_json::{Value, json};

use crate::protocol::Client;
use crate::sandbox::declared_unavailable;
use attacks::{Attempt, Expect};
use setup::Corpus;

/// The provider's key, in the vault; `/`, `+` and `=` make its encodings differ from it.
const PROVIDER_KEY: &str = "prov-key/4f9a7c2e+correct=horse";
/// A vault secret nothing in the config refers to.
const SPARE: &str = "spare-vault-value-8d1b5e3a";
/// The vault secret the MCP server's `env` takes.
const MCP_VALUE: &str = "mcp-vault-value-2c7e9f41";
/// In the gateway's environment under a name squidbot knows nothing of.
const ENV_SECRET: &str = "env-only-password-6a3f0d9b";
/// In the gateway's environment as `OPENAI_API_KEY`.
const OPENAI_ENV: &str = "openai-env-value-0b8e4d2a77";
/// Key-shaped values planted in a workspace file.
const SHAPED: [&str; 3] = [
    "sk-proj-abcdefghijklmnopqrstuvwx1234",
    "xoxb-1234567890-abcdefghijklmnop",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
];
/// A comment in config.toml: seen anywhere, the config file was read.
/// A vault secret an installed skill declares in `addons.env` (as `ADDON_TOKEN`).
const ADDON_VALUE: &str = "addon-vault-value-3e8a1f70";

const CONFIG_MARKER: &str = "leak-corpus-config-marker-91c4";

/// `text` percent-encoded (every byte but the unreserved ones).
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// Every form a secret is searched in: itself, percent-encoded (both cases), and the
/// base64 characters it alone decides at each alignment (standard and URL-safe).
fn forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned(), percent_encoded(secret), percent_encoded(secret).to_lowercase()];
    for alignment in 0..3usize {
        let mut padded = vec![0u8; alignment];
        padded.extend_from_slice(secret.as_bytes());
        let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&padded);
        let (first, last) = ((8 * alignment).div_ceil(6), (8 * (alignment + secret.len())) / 6);
        let standard = &encoded[first..last];
        forms.push(standard.to_owned());
        forms.push(standard.replace('+', "-").replace('/', "_"));
    }
    forms
}

/// The secrets of `corpus` and every form of each. Key shapes are found as written only:
/// the scanner knows the encodings of known values, not of every key-shaped string
/// (the web boundary decodes what would leave, see `fetch-base64-shaped-key`).
fn needles(corpus: &Corpus) -> Vec<(String, String)> {
    let mut secrets: Vec<String> = [PROVIDER_KEY, SPARE, MCP_VALUE, ENV_SECRET, OPENAI_ENV, ADDON_VALUE, CONFIG_MARKER]
        .map(str::to_owned)
        .to_vec();
    secrets.push(corpus.vault_key.clone());
    let mut needles: Vec<(String, String)> =
        secrets.iter().flat_map(|secret| forms(secret).into_iter().map(|form| (secret.clone(), form))).collect();
    needles.extend(SHAPED.map(|shaped| (shaped.to_owned(), shaped.to_owned())));
    needles
}

/// Collects every failed check, so one run reports every leak at once.
struct Checker {
    backend: &'static str,
    needles: Vec<(String, String)>,
    failures: std::sync::Mutex<Vec<String>>,
}

impl Checker {
    fn new(corpus: &Corpus) -> Checker {
        Checker { backend: corpus.backend, needles: needles(corpus), failures: std::sync::Mutex::default() }
    }

    /// Fails when `text` (also with zero-width characters removed) holds a secret.
    fn no_secret(&self, what: &str, text: &str) {
        let visible: String = text
            .chars()
            .filter(|character| !matches!(character, '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}'))
            .collect();
        for (secret, form) in &self.needles {
            if text.contains(form.as_str()) || visible.contains(form.as_str()) {
                self.fail(format!("LEAK: {what} holds {secret:?} (as {form:?}):\n{text}"));
                return;
            }
        }
    }

    /// Fails with `message` unless `holds`.
    fn expect(&self, holds: bool, message: impl FnOnce() -> String) {
        if !holds {
            self.fail(message());
        }
    }

    fn fail(&self, message: String) {
        self.failures.lock().unwrap().push(format!("[{}] {message}", self.backend));
    }

    /// Checks one tool attempt's result: no secret, and the proof it ran as expected.
    fn attempt(&self, attempt: &Attempt, result: &str) {
        let what = format!("{} ({})", attempt.kind, attempt.tool);
        self.no_secret(&what, result);
        for expect in &attempt.expect {
            let holds = match expect {
                Expect::Says(text) => result.contains(text.as_str()),
                Expect::Redacted(kind) => result.contains(&format!("[REDACTED:{kind}]")),
                Expect::Unreadable => ["No such file", "Permission denied", "Operation not permitted"]
                    .iter()
                    .any(|error| result.contains(error)),
            };
            self.expect(holds, || format!("{what}: expected {expect:?} in:\n{result}"));
        }
    }

    /// Panics listing every failure.
    fn finish(&self) {
        let failures = self.failures.lock().unwrap();
        assert!(failures.is_empty(), "{} failed check(s):\n\n{}", failures.len(), failures.join("\n\n"));
    }
}

/// Makes `attempts` in turns of a few parallel calls, checking each; returns their kinds.
async fn run_tools(corpus: &Corpus, checker: &Checker, attempts: &[Attempt]) -> Vec<String> {
    for batch in attempts.chunks(8) {
        let calls = batch.iter().map(|attempt| (attempt.tool, attempt.arguments.clone())).collect();
        let results = corpus.tool_turn(calls).await;
        for (attempt, result) in batch.iter().zip(&results) {
            checker.attempt(attempt, result);
        }
    }
    attempts.iter().map(|attempt| attempt.kind.clone()).collect()
}

/// The model writes secrets in its replies: what streams out is redacted.
async fn run_echoes(corpus: &Corpus, checker: &Checker) -> Vec<String> {
    let zero_width: String = PROVIDER_KEY.chars().flat_map(|character| [character, '\u{200b}']).collect();
    let echoes = [
        ("echo-provider-key", PROVIDER_KEY.to_owned(), "configured_secret"),
        ("echo-base64", base64::engine::general_purpose::STANDARD.encode(PROVIDER_KEY), "configured_secret"),
        ("echo-url-encoded", percent_encoded(PROVIDER_KEY), "configured_secret"),
        ("echo-zero-width", zero_width, "configured_secret"),
        ("echo-shaped-keys", SHAPED.join(" and "), "openai_key"),
        ("echo-mcp-secret", MCP_VALUE.to_owned(), "configured_secret"),
        ("echo-gateway-env-key", OPENAI_ENV.to_owned(), "configured_secret"),
    ];
    let mut kinds = Vec::new();
    for (kind, secret, redaction) in echoes {
        let streamed = corpus.streamed_reply(&format!("Sure, here it is: {secret}. Keep it safe.")).await;
        let what = format!("{kind} (streamed reply)");
        checker.no_secret(&what, &streamed);
        checker.expect(
            streamed.contains(&format!("[REDACTED:{redaction}]")) && streamed.contains("Keep it safe."),
            || format!("{what}: expected [REDACTED:{redaction}] in: {streamed}"),
        );
        kinds.push(kind.to_owned());
    }
    kinds
}

/// What the WebSocket protocol shows: a chat turn echoing a secret, the config, the
/// transcripts, status and health.
async fn run_websocket(corpus: &Corpus, checker: &Checker) -> Vec<String> {
    let (mut client, _) = Client::connected(&corpus.running, 4, &["operator.read", "operator.write"]).await;
    corpus.server.push(squidbot_testkit::Reply::text(format!("The key: {PROVIDER_KEY}. Keep it safe.")));
    let ack = client
        .call("chat.send", json!({"sessionKey": "ws-leak", "message": "key?", "idempotencyKey": "ws-leak"}))
        .await;
    assert_eq!(ack["ok"], true, "{ack}");
    let events = serde_json::to_string(&client.chat_until_done("ws-leak").await).unwrap();
    checker.no_secret("echo-over-websocket", &events);
    checker.expect(events.contains("[REDACTED:configured_secret]"), || format!("echo-over-websocket: {events}"));
    let mut kinds = vec!["echo-over-websocket".to_owned()];

    let config = client.call("config.get", json!({})).await;
    assert_eq!(config["ok"], true, "{config}");
    checker.no_secret("ws-config-get", &config.to_string());
    let greeting = &config["payload"]["config"]["mcp"]["servers"]["everything"]["env"]["GREETING"];
    checker.expect(greeting.is_string(), || format!("ws-config-get shows the MCP env, redacted: {config}"));
    kinds.push("ws-config-get".to_owned());

    let sessions = client.call("sessions.list", json!({})).await;
    assert_eq!(sessions["ok"], true, "{sessions}");
    let keys: Vec<String> = sessions["payload"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{sessions}"))
        .iter()
        .filter_map(|session| session["key"].as_str().map(str::to_owned))
        .collect();
    assert!(keys.len() >= 2, "{sessions}");
    let mut transcripts = String::new();
    for key in &keys {
        for (method, parameters) in
            [("sessions.get", json!({"key": key})), ("chat.history", json!({"sessionKey": key}))]
        {
            let response = client.call(method, parameters).await;
            assert_eq!(response["ok"], true, "{response}");
            transcripts.push_str(&response.to_string());
        }
    }
    checker.no_secret("ws-transcripts", &transcripts);
    checker.expect(transcripts.contains("[REDACTED:configured_secret]"), || "ws-transcripts hold no echo".to_owned());
    kinds.push("ws-transcripts".to_owned());
    for method in ["status", "health"] {
        let response = client.call(method, json!({})).await;
        assert_eq!(response["ok"], true, "{response}");
        checker.no_secret(&format!("ws-{method}"), &response.to_string());
        kinds.push(format!("ws-{method}"));
    }
    kinds
}

/// What the CLI prints and HTTP serves while the gateway runs.
async fn run_surfaces(corpus: &Corpus, checker: &Checker) -> Vec<String> {
    let mut kinds = Vec::new();
    let cli: [(&str, &[&str], &str); 5] = [
        ("cli-config-show", &["config", "show"], "[mcp.servers.everything"),
        ("cli-status", &["status", "--json"], "everything"),
        ("cli-secrets-list", &["secrets", "list", "--json"], "spare.unreferenced"),
        ("cli-audit", &["audit", "--json"], ""),
        // The memory the model saved (`attacks::memory_write`) was redacted when stored.
        ("cli-memory-list", &["memory", "list", "--json"], "the provider key is"),
    ];
    for (kind, arguments, shows) in cli {
        let run = corpus.home.run(arguments).await.success();
        let output = format!("{}{}", run.stdout, run.stderr);
        checker.no_secret(kind, &output);
        checker.expect(output.contains(shows), || format!("{kind}: expected {shows:?} in {output}"));
        kinds.push(kind.to_owned());
    }
    let listed = corpus.home.run(&["sessions", "list", "--json"]).await.success();
    let sessions: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    let mut shown = String::new();
    for session in &sessions {
        let key = session["key"].as_str().unwrap();
        shown.push_str(&corpus.home.run(&["sessions", "show", key]).await.success().stdout);
    }
    checker.no_secret("cli-sessions-show", &shown);
    checker.expect(shown.contains("[REDACTED:"), || format!("cli-sessions-show holds no redaction: {shown}"));
    kinds.push("cli-sessions-show".to_owned());

    let client = reqwest::Client::new();
    let health = client.get(format!("{}/health", corpus.running.base)).send().await.unwrap().text().await.unwrap();
    checker.no_secret("http-health-unauthenticated", &health);
    checker.expect(health.contains("ok"), || format!("http-health-unauthenticated: {health}"));
    kinds.push("http-health-unauthenticated".to_owned());
    let metrics = corpus.running.metrics().await;
    checker.no_secret("http-metrics", &metrics);
    checker.expect(metrics.contains("squidbot_tool_calls_total"), || "http-metrics: no tool call counts".to_owned());
    kinds.push("http-metrics".to_owned());
    kinds
}

/// Everything the model received, stored or sent out, in any encoding.
fn check_everything_kept(corpus: &Corpus, checker: &Checker) {
    for (index, request) in corpus.server.requests().iter().enumerate() {
        checker.no_secret(&format!("model request {index}"), &request.body.to_string());
        checker.expect(request.header("authorization") == Some(format!("Bearer {PROVIDER_KEY}").as_str()), || {
            format!("model request {index} did not carry the vault's provider key")
        });
    }
    for (path, text) in corpus.stored_texts() {
        checker.no_secret(&format!("stored file {path}"), &text);
    }
    let recorded = corpus.recorded.lock().unwrap().clone();
    checker.expect(recorded.iter().any(|request| request.contains("squid")), || {
        format!("the control search did not reach the recorder: {recorded:?}")
    });
    for request in &recorded {
        checker.no_secret("a request to the web recorder", request);
    }
}

/// Runs the whole corpus against `backend`; returns how many attempts were made.
async fn corpus(backend: &'static str) -> usize {
    if backend != "none" && declared_unavailable(backend) {
        return 0;
    }
    let started = std::time::Instant::now();
    let corpus = Corpus::start(backend).await;
    let checker = Checker::new(&corpus);
    let mut kinds = run_tools(&corpus, &checker, &attacks::tool_attempts(&corpus)).await;
    kinds.extend(run_tools(&corpus, &checker, &[attacks::memory_write()]).await);
    kinds.extend(run_tools(&corpus, &checker, &[attacks::memory_read()]).await);
    kinds.extend(run_tools(&corpus, &checker, &attacks::skill_addons(&corpus)).await);
    kinds.extend(run_tools(&corpus, &checker, &attacks::forged_skill_addons()).await);
    kinds.extend(run_echoes(&corpus, &checker).await);
    kinds.extend(run_websocket(&corpus, &checker).await);
    kinds.extend(run_surfaces(&corpus, &checker).await);
    check_everything_kept(&corpus, &checker);
    kinds.push("stored-files-and-web-recorder".to_owned());
    corpus.server.assert_clean();
    checker.finish();

    let mut unique = kinds.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), kinds.len(), "attack kinds are distinct: {kinds:?}");
    eprintln!(
        "leak corpus [{backend}]: {} attempts blocked or redacted in {:?}: {}",
        kinds.len(),
        started.elapsed(),
        kinds.join(", ")
    );
    kinds.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_blocks_or_redacts_every_leak_attempt() {
    let attempts = corpus("landlock").await;
    assert!(attempts == 0 || attempts >= 40, "{attempts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bubblewrap_blocks_or_redacts_every_leak_attempt() {
    let attempts = corpus("bubblewrap").await;
    assert!(attempts == 0 || attempts >= 40, "{attempts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sandbox_every_other_layer_still_holds() {
    assert!(corpus("none").await >= 40);
}
