//! A temporary squidbot home plus helpers to run the binary in it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use squidbot_testkit::ScriptedLlm;

/// Key the scripted server expects.
pub const KEY: &str = "sk-e2e-secret-key";

/// A squidbot home in a temp directory.
pub struct Home {
    directory: tempfile::TempDir,
}

/// What one run of the binary produced.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(output: Output) -> Run {
        Run {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Panics with the output unless the run succeeded.
    pub fn success(self) -> Run {
        assert!(self.status.success(), "exit {:?}\nstdout:\n{}\nstderr:\n{}", self.status, self.stdout, self.stderr);
        self
    }

    /// Panics with the output unless the run failed.
    pub fn failure(self) -> Run {
        assert!(!self.status.success(), "expected failure\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
}

impl Home {
    /// An empty home.
    pub fn new() -> Home {
        Home { directory: tempfile::tempdir().expect("temp dir") }
    }

    /// A home with the DESIGN.md minimal config pointing at `server` (inline key).
    pub fn with_minimal_config(server: &ScriptedLlm) -> Home {
        let home = Home::new();
        home.write_config(&format!(
            "[llm]\nmodel = \"local/test-model\"        # default for every role: \"<provider>/<model>\"\n\n\
             [providers.local]\nkind = \"openai\"                   # wire protocol: openai | anthropic | gemini\n\
             api_base = \"{}\"\napi_key = \"{KEY}\"               # or api_key_env = \"VAR\", or secret = \"name\"\n",
            server.base_url()
        ));
        server.expect_api_key(KEY);
        home
    }

    /// The home directory.
    pub fn path(&self) -> &Path {
        self.directory.path()
    }

    /// The default workspace.
    pub fn workspace(&self) -> PathBuf {
        self.path().join("workspace")
    }

    /// Appends TOML to config.toml.
    pub fn append_config(&self, text: &str) {
        let path = self.path().join("config.toml");
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        std::fs::write(path, format!("{current}\n{text}\n")).expect("write config");
    }

    /// Writes config.toml.
    pub fn write_config(&self, text: &str) {
        std::fs::write(self.path().join("config.toml"), text).expect("write config");
    }

    /// A command for the binary with this home and a clean environment. The assistant
    /// runs in direct mode (it calls the tools itself), which is what most tests script;
    /// tests of delegation set `SQUIDBOT__AGENTS__ASSISTANT__MODE` back to `delegate`.
    pub fn command(&self, arguments: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"));
        command
            .args(arguments)
            .env_clear()
            .env("SQUIDBOT__AGENTS__ASSISTANT__MODE", "direct")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("SQUIDBOT_HOME", self.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs the binary to completion.
    pub async fn run(&self, arguments: &[&str]) -> Run {
        self.run_with(arguments, &[]).await
    }

    /// Runs the binary with extra environment variables.
    pub async fn run_with(&self, arguments: &[&str], environment: &[(&str, &str)]) -> Run {
        let mut command = self.command(arguments);
        for (name, value) in environment {
            command.env(name, value);
        }
        let output = tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
            .await
            .expect("squidbot did not finish within 60 s")
            .expect("spawn squidbot");
        Run::from(output)
    }

    /// The session file's JSON lines.
    pub fn session_lines(&self, key: &str) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.path().join("sessions").join(format!("{key}.jsonl"))).expect("session");
        text.lines().map(|line| serde_json::from_str(line).expect("every line is JSON")).collect()
    }
}

/// Messages of an OpenAI request body.
pub fn messages(body: &serde_json::Value) -> Vec<serde_json::Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// Names of the tools an OpenAI request offered the model.
pub fn offered_tools(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .expect("the request offers tools")
        .iter()
        .map(|tool| tool["function"]["name"].as_str().expect("a tool has a name").to_owned())
        .collect()
}

/// The contents of every `tool` message of an OpenAI request.
pub fn tool_results(body: &serde_json::Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}
