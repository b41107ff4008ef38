//! Acceptance tests of the real sandboxes, through the real `exec` tool: for each backend
//! that confines (landlock, bubblewrap), planted secrets stay unreadable, writes stay in
//! the workspace, the network stays closed unless granted, a fork bomb hits the process
//! limit, the environment holds no key, and a timeout kills every process.
//!
//! A backend that does not work on this machine fails its tests with the probe's reason,
//! unless `SQUIDBOT_TEST_SANDBOX_UNAVAILABLE` names it (comma-separated), which turns its
//! tests into announced no-ops.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "test helpers outside #[test] fail loudly")]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot_core::sandbox::{Grants, NetworkGrant, SandboxRequest};
use squidbot_core::tool::{Tool, ToolContext, ToolError};
use squidbot_sandbox::{Active, LinuxSandbox, SandboxSettings};
use squidbot_tools::{ExecTool, PathGuard};
use squidbot_types::config::ExecConfig;
use squidbot_types::sandbox::{SandboxBackend, SandboxConfig};
use tokio_util::sync::CancellationToken;

/// Names backends known not to work on the machine running the tests.
const UNAVAILABLE_VARIABLE: &str = "SQUIDBOT_TEST_SANDBOX_UNAVAILABLE";

const PLANTED_KEY: &str = "PLANTED-SSH-PRIVATE-KEY-0xC0FFEE";
const PLANTED_CONFIG: &str = "PLANTED-CONFIG-api_key-0xBADC0DE";

/// A user home with an SSH key, a squidbot home with a config, a workspace, and the
/// `exec` tool running through one backend.
struct Fixture {
    _directories: tempfile::TempDir,
    home: PathBuf,
    squidbot_home: PathBuf,
    workspace: PathBuf,
    outside: PathBuf,
    tool: ExecTool,
    context: ToolContext,
}

impl Fixture {
    /// The fixture for `backend`, or `None` (announced) when the environment declares the
    /// backend unavailable. Panics with the probe's reason when it doesn't work here.
    fn new(backend: SandboxBackend, configure: impl FnOnce(&mut SandboxConfig)) -> Option<Fixture> {
        let declared = std::env::var(UNAVAILABLE_VARIABLE).unwrap_or_default();
        if declared.split(',').any(|name| name.trim() == backend.as_str()) {
            eprintln!("NOT TESTED: {UNAVAILABLE_VARIABLE} declares the {} sandbox unavailable", backend.as_str());
            return None;
        }
        let directories = tempfile::tempdir().unwrap();
        let root = directories.path().canonicalize().unwrap();
        let home = root.join("home");
        let squidbot_home = home.join(".squidbot");
        let workspace = squidbot_home.join("workspace");
        let outside = root.join("outside");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), format!("{PLANTED_KEY}\n")).unwrap();
        std::fs::write(squidbot_home.join("config.toml"), format!("# {PLANTED_CONFIG}\n")).unwrap();
        let mut config = SandboxConfig { backend, ..SandboxConfig::default() };
        configure(&mut config);
        let sandbox = LinuxSandbox::new(SandboxSettings {
            config,
            squidbot_home: squidbot_home.clone(),
            private_files: Vec::new(),
            user_home: Some(home.clone()),
            extra_read_only: Vec::new(),
            helper: PathBuf::from(env!("CARGO_BIN_EXE_squidbot-sandbox-helper")),
        });
        let selection = sandbox.selection().clone();
        match (&selection.active, backend) {
            (Active::Landlock, SandboxBackend::Landlock) | (Active::Bubblewrap(_), SandboxBackend::Bubblewrap) => {}
            (active, _) => panic!(
                "the {} sandbox does not work on this machine ({active:?}: {}); set {UNAVAILABLE_VARIABLE}={} \
                 to declare it unavailable",
                backend.as_str(),
                selection.reason,
                backend.as_str()
            ),
        }
        let tool =
            ExecTool::new(PathGuard::restricted_to_workspace(), &ExecConfig::default()).with_sandbox(Arc::new(sandbox));
        let context = ToolContext {
            workspace: workspace.clone(),
            session_key: "test".to_owned(),
            context: "owner".to_owned(),
            cancel: CancellationToken::new(),
            correlation_id: String::new(),
            actor: None,
            skills_in_use: Default::default(),
        };
        Some(Fixture { _directories: directories, home, squidbot_home, workspace, outside, tool, context })
    }

    /// Runs `command` through `exec`; the tool's text, error or not.
    async fn exec(&self, arguments: Value) -> String {
        match self.tool.call(arguments, &self.context).await {
            Ok(output) => output.content,
            Err(ToolError::RespondToModel(text)) => format!("refused: {text}"),
            Err(ToolError::Fatal(text)) => panic!("exec failed: {text}"),
        }
    }

    async fn run(&self, command: &str) -> String {
        self.exec(json!({ "command": command, "timeout": 30 })).await
    }

    /// Runs `command` straight through the sandbox port with per-command `grants` (the
    /// `exec` tool never passes any); its output and whether it exited 0.
    fn run_granted(&self, command: &str, grants: Grants) -> (String, bool) {
        let wrapped = self
            .tool
            .sandbox()
            .wrap(SandboxRequest {
                command,
                workspace: &self.workspace,
                environment: vec![("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".into())],
                grants,
                program: None,
            })
            .unwrap();
        let output = std::process::Command::new(&wrapped.program)
            .args(&wrapped.arguments)
            .env_clear()
            .envs(wrapped.environment.iter().map(|(name, value)| (name, value)))
            .current_dir(&wrapped.current_dir)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        drop(wrapped.lease);
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (text, output.status.success())
    }
}

/// Quotes `path` for `sh`.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

/// One `#[tokio::test]` per confining backend for each scenario.
macro_rules! for_each_backend {
    ($scenario:ident) => {
        mod $scenario {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn landlock() {
                super::$scenario(SandboxBackend::Landlock).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn bubblewrap() {
                super::$scenario(SandboxBackend::Bubblewrap).await;
            }
        }
    };
}

for_each_backend!(secrets_stay_unreadable);
for_each_backend!(writes_stay_in_the_workspace);
for_each_backend!(network_is_closed_unless_granted);
for_each_backend!(fork_bomb_is_contained);
for_each_backend!(environment_holds_no_key);
for_each_backend!(timeout_kills_every_process);
for_each_backend!(probe_reports_the_backend);
for_each_backend!(background_jobs_run_confined);
for_each_backend!(grants_open_only_what_they_name);
for_each_backend!(network_grant_overrides_the_policy);

async fn secrets_stay_unreadable(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    let ssh_key = fixture.home.join(".ssh/id_rsa");
    let config = fixture.squidbot_home.join("config.toml");
    for command in [
        format!("HOME={}; cat ~/.ssh/id_rsa", quoted(&fixture.home)),
        format!("cat {}", quoted(&ssh_key)),
        format!("cat {}", quoted(&config)),
        format!("cat ../config.toml; ls -la {}", quoted(&fixture.squidbot_home)),
        format!("grep -r PLANTED {} /etc 2>&1 | head -5", quoted(&fixture.home)),
        "cat /etc/shadow".to_owned(),
    ] {
        let output = fixture.run(&command).await;
        assert!(!output.contains(PLANTED_KEY) && !output.contains(PLANTED_CONFIG), "{command}: {output}");
        assert!(!output.contains("root:"), "{command}: {output}");
    }
    let failed = fixture.run(&format!("cat {}", quoted(&ssh_key))).await;
    assert!(!failed.ends_with("[exit code 0]"), "reading the key must fail: {failed}");
    // The workspace inside the hidden homes is still the command's own.
    std::fs::write(fixture.workspace.join("notes.txt"), "visible").unwrap();
    assert_eq!(fixture.run("cat notes.txt").await, "visible\n[exit code 0]");
}

async fn writes_stay_in_the_workspace(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    let inside = fixture.run("echo written > inside.txt && mkdir -p sub && echo deeper > sub/file && echo ok").await;
    assert_eq!(inside, "ok\n[exit code 0]");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("sub/file")).unwrap(), "deeper\n");
    let escapes = [
        fixture.outside.join("escaped.txt"),
        fixture.home.join("escaped.txt"),
        fixture.squidbot_home.join("escaped.txt"),
        fixture.home.join(".ssh/authorized_keys"),
        PathBuf::from("/etc/squidbot-sandbox-escape"),
        PathBuf::from("/usr/local/squidbot-sandbox-escape"),
    ];
    let temporary_root = std::env::temp_dir().canonicalize().unwrap();
    for target in &escapes {
        let output = fixture.run(&format!("echo escaped > {}", quoted(target))).await;
        assert!(!target.exists(), "{} was written", target.display());
        // bubblewrap's private /tmp takes writes below it (and drops them at the end);
        // the fixture's directories live there.
        let private = backend == SandboxBackend::Bubblewrap && target.starts_with(&temporary_root);
        assert!(private || !output.ends_with("[exit code 0]"), "{}: {output}", target.display());
    }
    let output = fixture.run(&format!("rm {}", quoted(&fixture.home.join(".ssh/id_rsa")))).await;
    assert!(!output.ends_with("[exit code 0]"), "{output}");
    assert!(fixture.home.join(".ssh/id_rsa").exists(), "the key was deleted");
    // Temporary files go to a private place that works.
    let temporary = fixture.run("f=$(mktemp) && echo tmp > \"$f\" && cat \"$f\"").await;
    assert_eq!(temporary, "tmp\n[exit code 0]");
}

/// True when `listener` got a connection within `wait`.
fn accepted(listener: &TcpListener, wait: Duration) -> bool {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if listener.accept().is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn connect_command(port: u16) -> String {
    format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'")
}

async fn network_is_closed_unless_granted(backend: SandboxBackend) {
    let Some(closed) = Fixture::new(backend, |_| {}) else { return };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let output = closed.run(&connect_command(port)).await;
    assert!(!output.contains("connected\n"), "{output}");
    assert!(!accepted(&listener, Duration::from_millis(300)), "a connection got through: {output}");
    let Some(open) = Fixture::new(backend, |config| config.network = true) else { return };
    let output = open.run(&connect_command(port)).await;
    assert!(output.starts_with("connected\n"), "{output}");
    assert!(accepted(&listener, Duration::from_secs(5)), "no connection arrived: {output}");
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .flatten()
        .filter(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .count()
}

async fn fork_bomb_is_contained(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |config| config.max_processes = 32) else { return };
    let marker = format!("bomb_{}", std::process::id());
    // Bounded (2^11 processes at most without a limit) so a broken limit can't take the
    // machine down; each branch sleeps so they pile up against the limit.
    let command = format!(
        "{marker}() {{ [ \"$1\" -gt 0 ] || {{ sleep 1; return 0; }}; {marker} $(($1 - 1)) & {marker} $(($1 - 1)); wait; }}; {marker} 10; echo finished"
    );
    let watch = tokio::spawn(async {
        // The host must stay responsive meanwhile: spawning a process stays fast.
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            let started = Instant::now();
            let status = tokio::process::Command::new("/bin/true").status().await.unwrap();
            assert!(status.success());
            slowest = slowest.max(started.elapsed());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        slowest
    });
    let started = Instant::now();
    let output = fixture.exec(json!({ "command": command, "timeout": 60 })).await;
    let slowest = watch.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(60), "the bomb ran for {:?}", started.elapsed());
    assert!(slowest < Duration::from_secs(2), "the host slowed down: spawning took {slowest:?}");
    assert!(output.to_lowercase().contains("fork"), "the process limit never refused a fork: {output}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_with(&marker) > 0 {
        assert!(Instant::now() < deadline, "{} bomb processes outlived the call", processes_with(&marker));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs only in the child process `environment_holds_no_key` starts with a key planted
/// in its environment; elsewhere it has nothing to check.
async fn environment_probe(backend: SandboxBackend) {
    let Ok(planted) = std::env::var("OPENAI_API_KEY") else { return };
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    let output = fixture.run("printenv; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep API_KEY").await;
    assert!(!output.contains(&planted), "{output}");
    assert!(!output.contains("OPENAI_API_KEY"), "{output}");
    assert!(output.contains("PATH="), "printenv ran: {output}");
    println!("environment probe ran");
}

mod environment_probe {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn landlock() {
        super::environment_probe(SandboxBackend::Landlock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bubblewrap() {
        super::environment_probe(SandboxBackend::Bubblewrap).await;
    }
}

async fn environment_holds_no_key(backend: SandboxBackend) {
    if Fixture::new(backend, |_| {}).is_none() {
        return;
    }
    let probe = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("environment_probe::{}", backend.as_str()), "--test-threads=1", "--nocapture"])
        .env("OPENAI_API_KEY", "sk-planted-in-the-gateway-environment")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&probe.stdout);
    let stderr = String::from_utf8_lossy(&probe.stderr);
    assert!(probe.status.success(), "the probe failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("environment probe ran"), "the probe did not run:\n{stdout}\n{stderr}");
}

async fn timeout_kills_every_process(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    // A plain child, a detached one (new session) and a double-forked one, each meaning
    // to write a file after the timeout.
    let command = "(sleep 3; echo late > late-child.txt) & \
                   (setsid sh -c 'sleep 3; echo late > late-session.txt' &) ; \
                   (sh -c '(sleep 3; echo late > late-orphan.txt) &' &) ; \
                   sleep 30";
    let started = Instant::now();
    let output = fixture.exec(json!({ "command": command, "timeout": 1 })).await;
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(output.ends_with("[killed after 1s timeout]"), "{output}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    for name in ["late-child.txt", "late-session.txt", "late-orphan.txt"] {
        assert!(!fixture.workspace.join(name).exists(), "{name} was written after the timeout: {output}");
    }
}

async fn probe_reports_the_backend(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    assert_eq!(fixture.tool.sandbox().backend(), backend.as_str());
    let sandbox = LinuxSandbox::new(SandboxSettings {
        config: SandboxConfig { backend, ..SandboxConfig::default() },
        squidbot_home: fixture.squidbot_home.clone(),
        private_files: Vec::new(),
        user_home: Some(fixture.home.clone()),
        extra_read_only: Vec::new(),
        helper: PathBuf::from(env!("CARGO_BIN_EXE_squidbot-sandbox-helper")),
    });
    let report = sandbox.report();
    let probe = report.probes.iter().find(|probe| probe.backend == backend).unwrap();
    let status = probe.outcome.as_ref().unwrap();
    assert!(status.starts_with(backend.as_str()), "{status}");
    assert!(report.selection.reason.contains("works"), "{}", report.selection.reason);
}

async fn background_jobs_run_confined(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    let command = format!(
        "echo from-job; cat {}; echo escaped > {}",
        quoted(&fixture.home.join(".ssh/id_rsa")),
        quoted(&fixture.outside.join("job.txt"))
    );
    let output = fixture.exec(json!({ "command": command, "background": true })).await;
    let log = output.lines().find_map(|line| line.strip_prefix("log: ")).expect(&output).to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    let content = loop {
        let content = std::fs::read_to_string(fixture.workspace.join(&log)).unwrap_or_default();
        if content.contains("[exit code") {
            break content;
        }
        assert!(Instant::now() < deadline, "the job never finished: {content:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(content.starts_with("from-job\n"), "{content}");
    assert!(!content.contains(PLANTED_KEY), "{content}");
    assert!(!content.ends_with("[exit code 0]\n"), "{content}");
    assert!(!fixture.outside.join("job.txt").exists(), "{content}");
}

async fn grants_open_only_what_they_name(backend: SandboxBackend) {
    let Some(fixture) = Fixture::new(backend, |_| {}) else { return };
    let readable = fixture.outside.join("readable");
    let writable = fixture.outside.join("writable");
    let ungranted = fixture.outside.join("ungranted");
    for directory in [&readable, &writable, &ungranted] {
        std::fs::create_dir_all(directory).unwrap();
        std::fs::write(directory.join("file.txt"), "original\n").unwrap();
    }
    // A source repository under the hidden home, as a skill install grants it.
    let source = fixture.home.join("source");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("SKILL.md"), "in the home\n").unwrap();
    let grants = || Grants {
        read_only: vec![readable.clone(), source.clone()],
        read_write: vec![writable.clone()],
        network: NetworkGrant::Policy,
        quick_start: false,
    };

    let (output, ok) = fixture.run_granted(&format!("cat {}/file.txt", quoted(&readable)), grants());
    assert!(ok && output == "original\n", "a read grant must be readable: {output}");
    let (output, ok) = fixture.run_granted(&format!("cat {}/SKILL.md", quoted(&source)), grants());
    assert!(ok && output == "in the home\n", "a read grant inside the hidden home must be readable: {output}");
    let (output, ok) = fixture.run_granted(&format!("echo changed > {}/file.txt", quoted(&readable)), grants());
    assert!(!ok, "a read grant must not be writable: {output}");
    let (output, ok) = fixture.run_granted(&format!("touch {}/new.txt", quoted(&readable)), grants());
    assert!(!ok && !readable.join("new.txt").exists(), "a read grant must not take new files: {output}");
    assert_eq!(std::fs::read_to_string(readable.join("file.txt")).unwrap(), "original\n");

    let (output, ok) = fixture.run_granted(
        &format!("echo changed > {0}/file.txt && mkdir {0}/sub && echo new > {0}/sub/new.txt", quoted(&writable)),
        grants(),
    );
    assert!(ok, "a write grant must be writable: {output}");
    assert_eq!(std::fs::read_to_string(writable.join("file.txt")).unwrap(), "changed\n");
    assert_eq!(std::fs::read_to_string(writable.join("sub/new.txt")).unwrap(), "new\n");

    for command in [
        format!("cat {}/file.txt", quoted(&ungranted)),
        format!("cat {}", quoted(&fixture.home.join(".ssh/id_rsa"))),
        format!("cat {}", quoted(&fixture.squidbot_home.join("config.toml"))),
    ] {
        let (output, ok) = fixture.run_granted(&command, grants());
        assert!(!ok, "{command} must fail: {output}");
        assert!(!output.contains(PLANTED_KEY) && !output.contains(PLANTED_CONFIG) && !output.contains("original"));
    }
    let (output, ok) = fixture.run_granted(&format!("echo x > {}/file.txt", quoted(&ungranted)), grants());
    assert!(!ok, "{output}");
    assert_eq!(std::fs::read_to_string(ungranted.join("file.txt")).unwrap(), "original\n");
}

async fn network_grant_overrides_the_policy(backend: SandboxBackend) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let Some(open_policy) = Fixture::new(backend, |config| config.network = true) else { return };
    let denied = Grants { network: NetworkGrant::Denied, ..Grants::default() };
    let (output, ok) = open_policy.run_granted(&connect_command(port), denied);
    assert!(!ok && !output.contains("connected"), "{output}");
    assert!(!accepted(&listener, Duration::from_millis(300)), "a connection got through: {output}");
    let Some(closed_policy) = Fixture::new(backend, |_| {}) else { return };
    let allowed = Grants { network: NetworkGrant::Allowed, ..Grants::default() };
    let (output, ok) = closed_policy.run_granted(&connect_command(port), allowed);
    assert!(ok && output.starts_with("connected"), "{output}");
    assert!(accepted(&listener, Duration::from_secs(5)), "no connection arrived: {output}");
}
