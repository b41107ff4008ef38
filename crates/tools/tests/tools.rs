//! Integration tests: every built-in tool driven through the `DynTool` interface with JSON
//! arguments, on real temporary directories and real processes.

// The fixture helpers below are test code too, though outside `#[test]` functions.
#![allow(clippy::unwrap_used)]

mod memory_tools;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot_core::sandbox::HostShell;
use squidbot_core::tool::{DynTool, ToolContext, ToolError, ToolOutput};
use squidbot_tools::builtin_tools;
use squidbot_types::config::ToolsConfig;
use tokio_util::sync::CancellationToken;

struct Fixture {
    directory: tempfile::TempDir,
    tools: Vec<Arc<dyn DynTool>>,
    context: ToolContext,
}

impl Fixture {
    fn new() -> Self {
        Self::with_config(&ToolsConfig::default())
    }

    fn with_config(config: &ToolsConfig) -> Self {
        let directory = tempfile::tempdir().unwrap();
        let context = ToolContext {
            workspace: directory.path().to_path_buf(),
            session_key: "test".to_owned(),
            context: "owner".to_owned(),
            cancel: CancellationToken::new(),
            correlation_id: String::new(),
            actor: None,
            skills_in_use: Default::default(),
        };
        Self { tools: builtin_tools(config, Arc::new(HostShell)), directory, context }
    }

    fn path(&self) -> &Path {
        self.directory.path()
    }

    fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path().join(relative)).unwrap()
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<ToolOutput, ToolError> {
        let tool = self.tools.iter().find(|tool| tool.spec().name == name).unwrap_or_else(|| panic!("no tool {name}"));
        tool.call_boxed(arguments, &self.context).await
    }

    async fn ok(&self, name: &str, arguments: Value) -> String {
        match self.call(name, arguments.clone()).await {
            Ok(output) => output.content,
            Err(error) => panic!("{name} {arguments} failed: {error:?}"),
        }
    }

    async fn refused(&self, name: &str, arguments: Value) -> String {
        match self.call(name, arguments.clone()).await {
            Err(ToolError::RespondToModel(message)) => message,
            other => panic!("{name} {arguments}: expected a refusal, got {other:?}"),
        }
    }
}

fn numbered(lines: std::ops::RangeInclusive<usize>) -> String {
    lines.map(|number| format!("line {number}\n")).collect()
}

// ---- read_file ----

#[tokio::test]
async fn read_file_numbers_lines_and_honours_offset_and_limit() {
    let fixture = Fixture::new();
    fixture.write("notes.txt", numbered(1..=10));
    let all = fixture.ok("read_file", json!({"path": "notes.txt"})).await;
    assert!(all.starts_with("     1\tline 1\n     2\tline 2\n"), "{all}");
    assert!(all.ends_with("    10\tline 10\n"), "{all}");
    let window = fixture.ok("read_file", json!({"path": "notes.txt", "offset": 3, "limit": 2})).await;
    assert_eq!(window, "     3\tline 3\n     4\tline 4\n[more lines follow; read_file with offset=5 to continue]");
    let past = fixture.refused("read_file", json!({"path": "notes.txt", "offset": 50})).await;
    assert!(past.contains("past the end (the file has 10 lines)"), "{past}");
}

#[tokio::test]
async fn read_file_caps_output_and_says_how_to_continue() {
    let fixture = Fixture::new();
    let long_line = "x".repeat(99);
    let content: String = (0..2000).map(|_| format!("{long_line}\n")).collect();
    fixture.write("big.txt", content);
    let output = fixture.ok("read_file", json!({"path": "big.txt"})).await;
    assert!(output.len() <= 50_000 + 200, "{}", output.len());
    let note = output.lines().last().unwrap();
    assert!(note.starts_with("[output cut at 50000 characters; read_file with offset="), "{note}");
}

#[tokio::test]
async fn read_file_refuses_missing_directories_and_binaries() {
    let fixture = Fixture::new();
    fixture.write("dir/inner.txt", "x");
    fixture.write("image.bin", [0x89, b'P', b'N', b'G', 0, 0, 1, 2]);
    let missing = fixture.refused("read_file", json!({"path": "nope.txt"})).await;
    assert_eq!(missing, "can't read nope.txt: no such file or directory");
    let directory = fixture.refused("read_file", json!({"path": "dir"})).await;
    assert!(directory.contains("is a directory; use list_dir"), "{directory}");
    let binary = fixture.refused("read_file", json!({"path": "image.bin"})).await;
    assert!(binary.contains("binary file"), "{binary}");
    assert_eq!(fixture.ok("read_file", json!({"path": "dir/inner.txt"})).await, "     1\tx\n");
}

// ---- path guard ----

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let fixture = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), fixture.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), fixture.path().join("secret-link")).unwrap();

    let dotdot = fixture.refused("read_file", json!({"path": "../x"})).await;
    assert!(dotdot.starts_with("can't read ../x: path escapes the workspace"), "{dotdot}");
    let link = fixture.refused("read_file", json!({"path": "secret-link"})).await;
    assert!(link.contains("escapes the workspace"), "{link}");
    let write = fixture.refused("write_file", json!({"path": "escape/new/file.txt", "content": "x"})).await;
    assert!(write.starts_with("can't write escape/new/file.txt: path escapes"), "{write}");
    assert!(!outside.path().join("new").exists());
    let absolute = outside.path().join("secret.txt").display().to_string();
    fixture.refused("read_file", json!({"path": absolute})).await;
    fixture.refused("list_dir", json!({"path": "escape"})).await;
    fixture.refused("grep", json!({"pattern": "secret", "path": "escape"})).await;
    fixture.refused("find", json!({"pattern": "*", "path": ".."})).await;
    let nul = fixture.refused("edit_file", json!({"path": "a\u{0}b", "old_text": "a", "new_text": "b"})).await;
    assert!(nul.contains("NUL byte"), "{nul}");
}

#[tokio::test]
async fn unrestricted_workspace_allows_outside_paths_but_not_nul() {
    let config = ToolsConfig { restrict_to_workspace: false, ..ToolsConfig::default() };
    let fixture = Fixture::with_config(&config);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("a.txt"), "hello").unwrap();
    let path = outside.path().join("a.txt").display().to_string();
    assert_eq!(fixture.ok("read_file", json!({"path": path})).await, "     1\thello\n");
    fixture.refused("read_file", json!({"path": "x\u{0}"})).await;
}

// ---- invalid arguments ----

#[tokio::test]
async fn invalid_arguments_are_explained_to_the_model() {
    let fixture = Fixture::new();
    let missing = fixture.refused("read_file", json!({})).await;
    assert!(missing.contains("missing field `path`"), "{missing}");
    let wrong_type = fixture.refused("read_file", json!({"path": "a", "limit": "ten"})).await;
    assert!(wrong_type.contains("invalid type"), "{wrong_type}");
    let exec = fixture.refused("exec", json!({"command": 5})).await;
    assert!(exec.starts_with("invalid arguments"), "{exec}");
    assert_eq!(fixture.ok("list_dir", Value::Null).await, "(empty directory)");
}

// ---- write_file and edit_file ----

#[tokio::test]
async fn write_file_creates_directories_atomically() {
    let fixture = Fixture::new();
    let output = fixture.ok("write_file", json!({"path": "a/b/c.txt", "content": "héllo"})).await;
    assert_eq!(output, "wrote 6 bytes to a/b/c.txt");
    assert_eq!(fixture.read("a/b/c.txt"), "héllo");
    fixture.ok("write_file", json!({"path": "a/b/c.txt", "content": "second"})).await;
    assert_eq!(fixture.read("a/b/c.txt"), "second");
    let leftovers: Vec<_> = std::fs::read_dir(fixture.path().join("a/b")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "temporary files left behind");
    let directory = fixture.refused("write_file", json!({"path": "a", "content": "x"})).await;
    assert!(directory.contains("is a directory"), "{directory}");
}

#[tokio::test]
async fn edit_file_needs_exactly_one_match() {
    let fixture = Fixture::new();
    fixture.write("code.rs", "fn a() {}\nfn b() {}\nfn a() {}\n");
    let none = fixture.refused("edit_file", json!({"path": "code.rs", "old_text": "fn c", "new_text": "x"})).await;
    assert!(none.contains("no match") && none.contains("re-read"), "{none}");
    let several =
        fixture.refused("edit_file", json!({"path": "code.rs", "old_text": "fn a() {}", "new_text": "x"})).await;
    assert!(several.contains("found 2 matches; add surrounding lines"), "{several}");
    let empty = fixture.refused("edit_file", json!({"path": "code.rs", "old_text": "", "new_text": "x"})).await;
    assert!(empty.contains("old_text is empty"), "{empty}");
    fixture.ok("edit_file", json!({"path": "code.rs", "old_text": "fn b() {}", "new_text": "fn b() { 1 }"})).await;
    assert_eq!(fixture.read("code.rs"), "fn a() {}\nfn b() { 1 }\nfn a() {}\n");
    fixture.refused("edit_file", json!({"path": "missing.rs", "old_text": "a", "new_text": "b"})).await;
}

// ---- list_dir ----

#[tokio::test]
async fn list_dir_sorts_marks_directories_and_caps() {
    let fixture = Fixture::new();
    fixture.write("b.txt", "12345");
    fixture.write("a/inner.txt", "x");
    fixture.write("c.md", "");
    let listing = fixture.ok("list_dir", json!({})).await;
    assert_eq!(listing, "a/\nb.txt (5 bytes)\nc.md (0 bytes)\n");
    for index in 0..1005 {
        fixture.write(&format!("many/{index:04}.txt"), "");
    }
    let many = fixture.ok("list_dir", json!({"path": "many"})).await;
    assert_eq!(many.lines().count(), 1001);
    assert!(
        many.ends_with("[5 more entries not shown; use find or grep to narrow down]"),
        "{}",
        many.lines().last().unwrap()
    );
    fixture.refused("list_dir", json!({"path": "b.txt"})).await;
}

// ---- grep ----

#[tokio::test]
async fn grep_searches_text_and_skips_vendored_binary_and_git() {
    let fixture = Fixture::new();
    fixture.write("src/main.rs", "fn main() {\n    println!(\"needle\");\n}\n");
    fixture.write("docs/notes.md", "a needle here\n");
    fixture.write(".git/config", "needle\n");
    fixture.write("node_modules/x/index.js", "needle\n");
    fixture.write("target/out.txt", "needle\n");
    fixture.write("blob.bin", b"needle\0\0binary");
    let output = fixture.ok("grep", json!({"pattern": "need+le"})).await;
    assert_eq!(output, "docs/notes.md:1: a needle here\nsrc/main.rs:2:     println!(\"needle\");");
    let filtered = fixture.ok("grep", json!({"pattern": "needle", "glob": "*.rs"})).await;
    assert_eq!(filtered, "src/main.rs:2:     println!(\"needle\");");
    let single = fixture.ok("grep", json!({"pattern": "here", "path": "docs/notes.md"})).await;
    assert_eq!(single, "docs/notes.md:1: a needle here");
    assert_eq!(fixture.ok("grep", json!({"pattern": "absent"})).await, "no matches");
    let invalid = fixture.refused("grep", json!({"pattern": "(unclosed"})).await;
    assert!(invalid.starts_with("can't search: invalid regex"), "{invalid}");
}

#[tokio::test]
async fn grep_cuts_results_and_long_lines() {
    let fixture = Fixture::new();
    let content: String = (0..250).map(|index| format!("match {index} {}\n", "y".repeat(400))).collect();
    fixture.write("many.txt", content);
    let output = fixture.ok("grep", json!({"pattern": "^match"})).await;
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 201);
    assert!(lines[0].starts_with("many.txt:1: match 0 yyy") && lines[0].ends_with('…'));
    assert!(lines[0].len() < 330, "{}", lines[0].len());
    assert!(lines[200].starts_with("[results cut at 200 matches"), "{}", lines[200]);
}

// ---- find ----

#[tokio::test]
async fn find_matches_globs_by_name_or_path() {
    let fixture = Fixture::new();
    for path in
        ["Cargo.toml", "README.md", "src/lib.rs", "src/deep/mod_a.rs", "docs/guide.md", "target/gen.rs", ".git/x.rs"]
    {
        fixture.write(path, "");
    }
    assert_eq!(fixture.ok("find", json!({"pattern": "*.rs"})).await, "src/deep/mod_a.rs\nsrc/lib.rs");
    assert_eq!(fixture.ok("find", json!({"pattern": "*.md"})).await, "README.md\ndocs/guide.md");
    assert_eq!(fixture.ok("find", json!({"pattern": "src/*.rs"})).await, "src/lib.rs");
    assert_eq!(fixture.ok("find", json!({"pattern": "**/*.rs"})).await, "src/deep/mod_a.rs\nsrc/lib.rs");
    assert_eq!(fixture.ok("find", json!({"pattern": "*.rs", "path": "src/deep"})).await, "src/deep/mod_a.rs");
    assert_eq!(fixture.ok("find", json!({"pattern": "*.py"})).await, "no matches");
    let invalid = fixture.refused("find", json!({"pattern": "[a"})).await;
    assert!(invalid.contains("invalid glob"), "{invalid}");
}

#[tokio::test]
async fn find_caps_results() {
    let fixture = Fixture::new();
    for index in 0..510 {
        fixture.write(&format!("files/{index:04}.log"), "");
    }
    let output = fixture.ok("find", json!({"pattern": "*.log"})).await;
    assert_eq!(output.lines().count(), 501);
    assert!(output.ends_with("[10 more matches not shown; narrow the pattern or path]"));
}

// ---- exec ----

/// True once process `pid` is gone (or a zombie nobody has reaped yet).
fn process_is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_until_gone(pid: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !process_is_gone(pid) {
        assert!(Instant::now() < deadline, "process {pid} still alive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn exec_reports_output_and_exit_code() {
    let fixture = Fixture::new();
    let output = fixture.ok("exec", json!({"command": "echo out; echo err >&2; exit 3"})).await;
    assert_eq!(output, "out\nerr\n[exit code 3]");
    let directory = fixture.ok("exec", json!({"command": "pwd"})).await;
    assert_eq!(directory, format!("{}\n[exit code 0]", fixture.path().canonicalize().unwrap().display()));
    assert_eq!(fixture.ok("exec", json!({"command": "true"})).await, "(no output)\n[exit code 0]");
    let refused = fixture.refused("exec", json!({"command": "echo hi && sudo ls"})).await;
    assert_eq!(refused, "command refused by safety policy: `sudo` (privilege escalation)");
}

#[tokio::test]
async fn exec_unconfined_runs_only_for_admins() {
    let mut fixture = Fixture::new();
    let person = |role: &str| squidbot_types::people::Actor {
        user: Some("someone".into()),
        name: "someone".into(),
        role: role.into(),
        context: "user:someone".into(),
        session: None,
    };
    // Here commands run on the host (HostShell): a person of any role but admin is refused,
    // whatever the model asks for.
    fixture.context.actor = Some(person("user"));
    let refused = fixture.refused("exec", json!({"command": "cat ~/.squidbot/config.toml"})).await;
    assert_eq!(
        refused,
        "Refused by policy: commands run unconfined here (sandbox `none`), and only admins may run them so; the \
         person's role is `user`."
    );
    fixture.context.actor = Some(person("admin"));
    assert_eq!(fixture.ok("exec", json!({"command": "echo hi"})).await, "hi\n[exit code 0]");
}

#[tokio::test]
async fn exec_timeout_kills_the_whole_process_group() {
    let fixture = Fixture::new();
    let started = Instant::now();
    let output = fixture.ok("exec", json!({"command": "sleep 30 & echo $! > pid; wait", "timeout": 1})).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(output.ends_with("[killed after 1s timeout]"), "{output}");
    let pid = fixture.read("pid").trim().to_owned();
    wait_until_gone(&pid).await;
}

#[tokio::test]
async fn exec_cancellation_kills_the_command() {
    let fixture = Fixture::new();
    let cancel = fixture.context.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let output = fixture.ok("exec", json!({"command": "echo begun; sleep 30 & echo $! > pid; wait"})).await;
    canceller.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(output.starts_with("begun\n") && output.ends_with("[cancelled; command killed]"), "{output}");
    let pid = fixture.read("pid").trim().to_owned();
    wait_until_gone(&pid).await;
}

#[tokio::test]
async fn exec_stops_leftover_background_children() {
    let fixture = Fixture::new();
    let started = Instant::now();
    let output = fixture.ok("exec", json!({"command": "sleep 30 & echo $! > pid; echo started"})).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(output.starts_with("started\n[exit code 0]\n[processes it left running"), "{output}");
    wait_until_gone(fixture.read("pid").trim()).await;
}

#[tokio::test]
async fn exec_output_is_capped_with_the_middle_omitted() {
    let mut config = ToolsConfig::default();
    config.exec.max_output_chars = 2_000;
    let fixture = Fixture::with_config(&config);
    let output = fixture.ok("exec", json!({"command": "seq 1 100000"})).await;
    assert!(output.starts_with("1\n2\n3\n"), "{output}");
    assert!(output.ends_with("99999\n100000\n[exit code 0]"), "{output}");
    assert!(output.contains("characters omitted ...]"), "{output}");
    assert!(output.len() < 2_200, "{}", output.len());
}

#[tokio::test]
async fn exec_background_job_logs_and_returns_at_once() {
    let fixture = Fixture::new();
    let started = Instant::now();
    let output = fixture.ok("exec", json!({"command": "sleep 2; echo from-job", "background": true})).await;
    assert!(started.elapsed() < Duration::from_millis(1500), "did not return at once");
    assert!(output.starts_with("started background job "), "{output}");
    let log = output.lines().find_map(|line| line.strip_prefix("log: ")).unwrap().to_owned();
    assert!(log.starts_with(".squidbot/jobs/") && log.ends_with(".log"), "{log}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let content = std::fs::read_to_string(fixture.path().join(&log)).unwrap_or_default();
        if content.contains("[exit code 0]") {
            assert_eq!(content, "from-job\n[exit code 0]\n");
            break;
        }
        assert!(Instant::now() < deadline, "job never finished: {content:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The host shell with an output limit, as a sandbox adapter sets one.
#[derive(Debug)]
struct OutputLimited(u64);

impl squidbot_core::sandbox::Sandbox for OutputLimited {
    fn backend(&self) -> String {
        "limited".to_owned()
    }

    fn confinement(&self) -> squidbot_core::sandbox::Confinement {
        squidbot_core::sandbox::Confinement::default()
    }

    fn wrap(
        &self,
        request: squidbot_core::sandbox::SandboxRequest<'_>,
    ) -> Result<squidbot_core::sandbox::SandboxedCommand, squidbot_core::sandbox::SandboxError> {
        let mut command = squidbot_core::sandbox::HostShell.wrap(request)?;
        command.max_output_bytes = Some(self.0);
        Ok(command)
    }
}

#[tokio::test]
async fn exec_stops_a_command_past_the_sandbox_output_limit() {
    let mut fixture = Fixture::new();
    fixture.tools = builtin_tools(&ToolsConfig::default(), Arc::new(OutputLimited(100_000)));
    let started = Instant::now();
    let output = fixture.ok("exec", json!({"command": "yes", "timeout": 30})).await;
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(output.starts_with("y\ny\n"), "{output}");
    assert!(output.ends_with("[killed after writing more than 100000 bytes of output]"), "{output}");
}

/// Runs only inside the child process `exec_environment_is_filtered` starts, where the
/// test variables are set; elsewhere it has nothing to check.
#[tokio::test]
async fn exec_environment_probe() {
    if std::env::var_os("SQUIDBOT_TEST_API_KEY").is_none() {
        return;
    }
    let mut config = ToolsConfig::default();
    config.exec.pass_env = vec!["SQUIDBOT_TEST_PASSED".to_owned(), "SQUIDBOT_TEST_API_KEY".to_owned()];
    let fixture = Fixture::with_config(&config);
    let output = fixture
        .ok(
            "exec",
            json!({"command": "echo \"key=${SQUIDBOT_TEST_API_KEY:-unset} passed=${SQUIDBOT_TEST_PASSED:-unset} other=${SQUIDBOT_TEST_OTHER:-unset} path=${PATH:+set}\""}),
        )
        .await;
    assert_eq!(output, "key=unset passed=yes other=unset path=set\n[exit code 0]");
    println!("environment probe ran");
}

#[test]
fn exec_environment_is_filtered() {
    let probe = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "exec_environment_probe", "--test-threads=1", "--nocapture"])
        .env("SQUIDBOT_TEST_API_KEY", "sk-should-never-leak")
        .env("SQUIDBOT_TEST_PASSED", "yes")
        .env("SQUIDBOT_TEST_OTHER", "not-listed")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&probe.stdout);
    let stderr = String::from_utf8_lossy(&probe.stderr);
    assert!(probe.status.success(), "the probe failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("environment probe ran"), "the probe did not run:\n{stdout}");
}

// ---- the tool list ----

#[tokio::test]
async fn tool_list_is_complete_and_lean() {
    let fixture = Fixture::new();
    let names: Vec<String> = fixture.tools.iter().map(|tool| tool.spec().name).collect();
    assert_eq!(names, ["read_file", "write_file", "edit_file", "list_dir", "grep", "find", "send_file", "exec"]);
    let size = squidbot_tools::tool_specs_size(&fixture.tools);
    println!("total tool spec size: {size} characters");
    assert!(size < 3_000);
    for tool in &fixture.tools {
        let text = serde_json::to_string(&tool.spec()).unwrap();
        for noise in ["$schema", "\"title\"", "\"format\"", "null"] {
            assert!(!text.contains(noise), "{text} contains {noise}");
        }
    }
}
