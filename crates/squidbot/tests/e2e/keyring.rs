//! The vault key in a real Secret Service (gnome-keyring on a private D-Bus session bus
//! the test starts): nothing written to the home, secrets that reach the model, rotation,
//! and a clear refusal, with nothing lost, when the service is not there.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::harness::{Home, Run};

/// Set when a machine has no gnome-keyring on purpose: the tests then say NOT TESTED
/// and pass instead of failing.
const UNAVAILABLE_VARIABLE: &str = "SQUIDBOT_TEST_KEYRING_UNAVAILABLE";

/// The login keyring's password; it only guards the test's throw-away keyring files.
const KEYRING_PASSWORD: &str = "squidbot-test";

/// A private D-Bus session bus (no service activation, so nothing on it but what the test
/// starts), with gnome-keyring's Secret Service on it or not.
struct SessionBus {
    address: String,
    _bus: Child,
    _keyring: Option<Child>,
    _directory: tempfile::TempDir,
}

impl SessionBus {
    /// A bus with nothing on it; `None` when `dbus-daemon` is not installed.
    async fn empty() -> Option<SessionBus> {
        let directory = tempfile::tempdir().expect("temp dir");
        let config = directory.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n<busconfig>\n  \
                 <type>session</type>\n  <listen>unix:path={}</listen>\n  <policy context=\"default\">\n    \
                 <allow send_destination=\"*\" eavesdrop=\"true\"/>\n    <allow eavesdrop=\"true\"/>\n    \
                 <allow own=\"*\"/>\n  </policy>\n</busconfig>\n",
                directory.path().join("bus").display()
            ),
        )
        .expect("write bus.conf");
        let mut bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let mut address = String::new();
        let stdout = bus.stdout.take().expect("dbus-daemon stdout");
        tokio::time::timeout(Duration::from_secs(10), BufReader::new(stdout).read_line(&mut address))
            .await
            .expect("dbus-daemon printed no address within 10 s")
            .expect("read the bus address");
        let address = address.trim().to_owned();
        assert!(address.starts_with("unix:"), "dbus-daemon printed {address:?}");
        Some(SessionBus { address, _bus: bus, _keyring: None, _directory: directory })
    }

    /// A bus with gnome-keyring's Secret Service, its login keyring made and unlocked;
    /// `None` when dbus-daemon or gnome-keyring-daemon is not installed.
    async fn with_keyring() -> Option<SessionBus> {
        let mut bus = SessionBus::empty().await?;
        let root = bus._directory.path().to_path_buf();
        let runtime = root.join("run");
        std::fs::create_dir(&runtime).expect("create the runtime directory");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
        }
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("HOME", &root)
            .env("XDG_DATA_HOME", root.join("data"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        // --unlock reads the login keyring's password from standard input, up to its end.
        let mut stdin = keyring.stdin.take().expect("gnome-keyring-daemon stdin");
        stdin.write_all(KEYRING_PASSWORD.as_bytes()).await.expect("write the keyring password");
        drop(stdin);
        bus._keyring = Some(keyring);
        bus.wait_for_login_keyring().await;
        Some(bus)
    }

    /// Waits until the service answers with its default collection (the login keyring).
    async fn wait_for_login_keyring(&self) {
        for _ in 0..100 {
            let answer = Command::new("dbus-send")
                .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
                .args([
                    "--session",
                    "--print-reply",
                    "--dest=org.freedesktop.secrets",
                    "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.ReadAlias",
                    "string:default",
                ])
                .output()
                .await
                .expect("run dbus-send");
            if String::from_utf8_lossy(&answer.stdout).contains("/collection/login") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("gnome-keyring's Secret Service did not answer on {} within 10 s", self.address);
    }

    fn environment(&self) -> [(&str, &str); 1] {
        [("DBUS_SESSION_BUS_ADDRESS", self.address.as_str())]
    }
}

/// The keyring, or `None` after saying NOT TESTED when the machine is marked as having
/// none; without that mark a missing gnome-keyring fails the test.
async fn keyring_or_skip() -> Option<SessionBus> {
    if let Some(bus) = SessionBus::with_keyring().await {
        return Some(bus);
    }
    let reason = "dbus-daemon or gnome-keyring-daemon is not installed (apt-get install gnome-keyring)";
    if std::env::var_os(UNAVAILABLE_VARIABLE).is_some() {
        println!("NOT TESTED: the vault key in the Secret Service: {reason}");
        return None;
    }
    panic!("{reason}; set {UNAVAILABLE_VARIABLE} to skip the keyring tests on purpose");
}

/// Runs the binary on `bus` (or with no session bus at all), `input` on standard input.
async fn run_on(home: &Home, bus: Option<&SessionBus>, arguments: &[&str], input: &str) -> Run {
    let mut command = home.command(arguments);
    if let Some(bus) = bus {
        command.envs(bus.environment());
    }
    crate::secrets::run_command_with_input(command, input).await
}

fn keyring_config(server: &ScriptedLlm) -> String {
    format!(
        "[llm]\nmodel = \"local/test-model\"\n\n[providers.local]\nkind = \"openai\"\napi_base = \"{}\"\napi_key = \
         \"secret:openai\"\n\n[vault]\nkey = \"keyring\"\n",
        server.base_url()
    )
}

fn key_file(home: &Home) -> PathBuf {
    home.path().join("vault.key")
}

fn assert_no_key_file(home: &Path) {
    assert!(!home.join("vault.key").exists(), "no key file is written in keyring mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyring_vault_key_is_never_written_to_the_home_and_its_secrets_reach_the_llm() {
    let Some(bus) = keyring_or_skip().await else { return };
    let server = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&keyring_config(&server));
    run_on(&home, Some(&bus), &["secrets", "set", "openai"], "sk-from-the-keyring\n").await.success();
    run_on(&home, Some(&bus), &["secrets", "set", "other"], "other-value-kept\n").await.success();
    assert_no_key_file(home.path());

    server.expect_api_key("sk-from-the-keyring");
    server.push(Reply::text("hello from the keyring"));
    let run = run_on(&home, Some(&bus), &["agent", "-m", "hi"], "").await.success();
    assert_eq!(run.stdout, "hello from the keyring\n");

    run_on(&home, Some(&bus), &["secrets", "rotate", "openai"], "sk-rotated-in-keyring\n").await.success();
    server.expect_api_key("sk-rotated-in-keyring");
    server.push(Reply::text("rotated"));
    assert_eq!(run_on(&home, Some(&bus), &["agent", "-m", "again"], "").await.success().stdout, "rotated\n");
    let listed = run_on(&home, Some(&bus), &["secrets", "list", "--json"], "").await.success();
    let names: Vec<String> = serde_json::from_str::<serde_json::Value>(&listed.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["openai", "other"]);
    assert_no_key_file(home.path());

    let doctor = run_on(&home, Some(&bus), &["doctor", "--security", "--json"], "").await;
    let report: serde_json::Value = serde_json::from_str(&doctor.stdout).expect("doctor --json");
    let vault = report["findings"].as_array().unwrap().iter().find(|finding| finding["key"] == "vault.key").unwrap();
    assert!(vault["detail"].as_str().unwrap().contains("OS keyring"), "{vault}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_secret_service_the_vault_stays_locked_and_nothing_is_lost() {
    let Some(bus) = keyring_or_skip().await else { return };
    let server = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&keyring_config(&server));
    run_on(&home, Some(&bus), &["secrets", "set", "openai"], "sk-kept-safe\n").await.success();

    // No session bus at all (a headless server).
    let refused = run_on(&home, None, &["secrets", "set", "new"], "never-stored\n").await.failure();
    assert!(
        refused.stderr.contains("can't unlock the vault: the Secret Service is not reachable"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("DBUS_SESSION_BUS_ADDRESS is not set"), "{}", refused.stderr);
    assert!(refused.stderr.contains("use [vault] key = \"file\" or \"passphrase\""), "{}", refused.stderr);
    let turn = run_on(&home, None, &["agent", "-m", "hi"], "").await.failure();
    assert!(turn.stderr.contains("the Secret Service is not reachable"), "{}", turn.stderr);

    // A session bus where no Secret Service answers.
    let empty = SessionBus::empty().await.expect("dbus-daemon");
    let refused = run_on(&home, Some(&empty), &["secrets", "list"], "").await.failure();
    assert!(refused.stderr.contains("the Secret Service is not reachable"), "{}", refused.stderr);

    // Another Secret Service, which never held this home's key: no new key is made.
    let other = SessionBus::with_keyring().await.expect("a second keyring");
    let refused = run_on(&home, Some(&other), &["secrets", "list"], "").await.failure();
    assert!(refused.stderr.contains("holds no vault key for"), "{}", refused.stderr);
    assert!(refused.stderr.contains("nothing was changed"), "{}", refused.stderr);
    assert!(!key_file(&home).exists(), "never a silent fall back to a key file");

    // Back on the first bus every value is there.
    server.expect_api_key("sk-kept-safe");
    server.push(Reply::text("still here"));
    assert_eq!(run_on(&home, Some(&bus), &["agent", "-m", "hi"], "").await.success().stdout, "still here\n");
    let listed = run_on(&home, Some(&bus), &["secrets", "list", "--json"], "").await.success();
    assert!(!listed.stdout.contains("\"new\""), "{}", listed.stdout);
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboard_keeps_the_vault_key_in_the_keyring_when_a_secret_service_answers() {
    let Some(bus) = keyring_or_skip().await else { return };
    let server = ScriptedLlm::start().await;
    let base = server.base_url();
    let arguments = ["onboard", "--non-interactive", "--provider", "local", "--api-base", &base, "--model", "m"];
    let home = Home::new();
    let run = run_on(&home, Some(&bus), &arguments, "").await.success();
    assert!(run.stdout.contains("vault key: the OS keyring"), "{}", run.stdout);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(config.contains("[vault]\nkey = \"keyring\""), "{config}");
    assert_no_key_file(home.path());
    let token = run_on(&home, Some(&bus), &["secrets", "list", "--json"], "").await.success();
    assert!(token.stdout.contains("gateway.token"), "{}", token.stdout);

    // Without a session bus onboarding keeps the key in a file, and says so.
    let headless = Home::new();
    let run = run_on(&headless, None, &arguments, "").await.success();
    assert!(run.stdout.contains("vault key: the key file") && run.stdout.contains("no OS keyring"), "{}", run.stdout);
    assert!(key_file(&headless).exists());
    let config = std::fs::read_to_string(headless.path().join("config.toml")).unwrap();
    assert!(!config.contains("[vault]"), "{config}");
}
