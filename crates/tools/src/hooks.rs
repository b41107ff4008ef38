//! Executable hooks (`[[hooks]]`): each matching program runs confined by the sandbox in
//! a private empty directory without network, reads the event as JSON on stdin and (for
//! `message_received`, `before_tool` and `before_reply`) answers a decision as JSON on
//! stdout. A deciding hook that fails blocks unless it is `fail_open`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use squidbot_core::BoxFuture;
use squidbot_core::hooks::{Hook, HookEvent, HookInput, HookVerdict};
use squidbot_core::sandbox::{Grants, NetworkGrant, Sandbox, SandboxRequest};
use squidbot_types::hooks::HookConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::exec::DEFAULT_PATH;
use crate::exec::process_group::GroupGuard;

/// Most bytes of a hook's answer read; a longer answer is a failure.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

/// Why a hook gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookFailure {
    /// The sandbox or the process could not be set up.
    #[error("can't run the hook: {0}")]
    Spawn(String),
    /// It ran longer than its `timeout_ms`.
    #[error("the hook timed out after {0} ms")]
    TimedOut(u64),
    /// It exited unsuccessfully.
    #[error("the hook exited with {0}")]
    Exit(String),
    /// Its stdout was not a decision.
    #[error("the hook's answer is not a decision: {0}")]
    BadAnswer(String),
}

/// Why the hooks of a configuration can't be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("can't use hooks[{index}]: {problem}")]
pub struct HookSetupError {
    /// Position in `[[hooks]]`.
    pub index: usize,
    /// What is wrong.
    pub problem: String,
}

/// A hook's answer, as written on its stdout.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "decision", rename_all = "lowercase", deny_unknown_fields)]
pub enum HookDecision {
    /// Run the call.
    Allow {
        /// Ignored: for the hook's own notes.
        #[serde(default)]
        reason: Option<String>,
    },
    /// Refuse it.
    Veto {
        /// Why; the model reads it.
        #[serde(default)]
        reason: Option<String>,
    },
    /// Go on with another payload.
    Rewrite {
        /// The new arguments (a JSON object), for `before_tool`.
        #[serde(default)]
        arguments: Option<serde_json::Value>,
        /// The new text, for `message_received` and `before_reply`.
        #[serde(default)]
        text: Option<String>,
        /// Ignored: for the hook's own notes.
        #[serde(default)]
        reason: Option<String>,
    },
}

/// One configured hook with its event read and its tool patterns compiled.
#[derive(Debug)]
struct PreparedHook {
    config: HookConfig,
    event: HookEvent,
    /// `None`: every tool.
    tools: Option<GlobSet>,
}

/// The `[[hooks]]` of a configuration, run through a sandbox.
#[derive(Debug)]
pub struct ExecutableHooks {
    hooks: Vec<PreparedHook>,
    sandbox: Arc<dyn Sandbox>,
}

/// Checks the tool patterns of `hooks` (the one thing only compiling them tells).
pub fn check(hooks: &[HookConfig]) -> Vec<HookSetupError> {
    hooks.iter().enumerate().filter_map(|(index, hook)| compile(index, hook).err()).collect()
}

fn event_of(index: usize, hook: &HookConfig) -> Result<HookEvent, HookSetupError> {
    HookEvent::from_name(&hook.event).ok_or_else(|| HookSetupError {
        index,
        problem: format!("unknown event {:?}; known: {}", hook.event, HookEvent::names()),
    })
}

fn compile(index: usize, hook: &HookConfig) -> Result<Option<GlobSet>, HookSetupError> {
    if hook.tools.is_empty() {
        return Ok(None);
    }
    let mut builder = GlobSetBuilder::new();
    for pattern in &hook.tools {
        let glob = Glob::new(pattern)
            .map_err(|error| HookSetupError { index, problem: format!("tools: {pattern:?} is not a glob: {error}") })?;
        builder.add(glob);
    }
    builder
        .build()
        .map(Some)
        .map_err(|error| HookSetupError { index, problem: format!("tools: can't compile the globs: {error}") })
}

impl ExecutableHooks {
    /// Prepares `hooks` to run through `sandbox`.
    pub fn new(hooks: &[HookConfig], sandbox: Arc<dyn Sandbox>) -> Result<Self, HookSetupError> {
        let hooks = hooks
            .iter()
            .enumerate()
            .map(|(index, config)| {
                Ok(PreparedHook {
                    config: config.clone(),
                    event: event_of(index, config)?,
                    tools: compile(index, config)?,
                })
            })
            .collect::<Result<Vec<_>, HookSetupError>>()?;
        Ok(Self { hooks, sandbox })
    }

    /// Whether any hook is configured.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks of `event` that apply to `tool` (for tool events), in configuration
    /// order.
    pub fn matching<'a>(&'a self, event: HookEvent, tool: &'a str) -> impl Iterator<Item = &'a HookConfig> + 'a {
        self.hooks
            .iter()
            .filter(move |hook| {
                hook.event == event
                    && (!event.is_about_a_tool() || hook.tools.as_ref().is_none_or(|set| set.is_match(tool)))
            })
            .map(|hook| &hook.config)
    }

    /// Runs one observing hook on `input` (JSON written to its stdin); its output is
    /// ignored.
    pub async fn notify(&self, hook: &HookConfig, input: &serde_json::Value) -> Result<(), HookFailure> {
        run_confined(self.sandbox.as_ref(), hook, input).await.map(|_| ())
    }

    /// Runs one hook on `input` (JSON written to its stdin) and reads its decision.
    pub async fn run(&self, hook: &HookConfig, input: &serde_json::Value) -> Result<HookDecision, HookFailure> {
        let answer = run_confined(self.sandbox.as_ref(), hook, input).await?;
        serde_json::from_slice(&answer).map_err(|error| HookFailure::BadAnswer(error.to_string()))
    }
}

/// What a deciding hook's run on `event` means: its decision, or its failure blocking
/// (or not, when it fails open).
pub fn verdict(hook: &HookConfig, event: HookEvent, result: Result<HookDecision, HookFailure>) -> HookVerdict {
    match result {
        Ok(HookDecision::Allow { .. }) => HookVerdict::Allow,
        Ok(HookDecision::Veto { reason }) => HookVerdict::Veto(reason.unwrap_or_else(|| "no reason given".to_owned())),
        Ok(HookDecision::Rewrite { arguments, text, .. }) => match (event, arguments, text) {
            (HookEvent::BeforeTool, Some(arguments @ serde_json::Value::Object(_)), None) => {
                HookVerdict::Rewrite(arguments)
            }
            (HookEvent::BeforeTool, ..) => {
                failed(hook, event, &HookFailure::BadAnswer("a rewrite of a call needs `arguments`, an object".into()))
            }
            (_, None, Some(text)) => HookVerdict::Rewrite(serde_json::Value::String(text)),
            (..) => failed(hook, event, &HookFailure::BadAnswer(format!("a rewrite on {event} needs `text`"))),
        },
        Err(failure) => failed(hook, event, &failure),
    }
}

fn failed(hook: &HookConfig, event: HookEvent, failure: &HookFailure) -> HookVerdict {
    let program = hook.command.first().map_or("", String::as_str);
    tracing::warn!(%program, %failure, %event, fail_open = hook.fail_open, "a hook failed");
    if hook.fail_open {
        return HookVerdict::Allow;
    }
    let what = match event {
        HookEvent::BeforeTool => "the call",
        HookEvent::MessageReceived => "the message",
        _ => "the reply",
    };
    HookVerdict::Veto(format!("the check `{program}` failed ({failure}), so {what} was blocked"))
}

impl Hook for ExecutableHooks {
    fn wants(&self, event: HookEvent, tool: &str) -> bool {
        self.matching(event, tool).next().is_some()
    }

    fn before<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict> {
        Box::pin(async move {
            let mut input = input.clone();
            let mut rewritten = None;
            for hook in self.matching(input.event, &input.tool).collect::<Vec<_>>() {
                let json = serde_json::to_value(&input).unwrap_or(serde_json::Value::Null);
                match verdict(hook, input.event, self.run(hook, &json).await) {
                    HookVerdict::Allow => {}
                    HookVerdict::Rewrite(payload) => {
                        match &payload {
                            serde_json::Value::String(text) => input.text = Some(text.clone()),
                            arguments => input.arguments = arguments.clone(),
                        }
                        rewritten = Some(payload);
                    }
                    veto @ HookVerdict::Veto(_) => return veto,
                }
            }
            rewritten.map_or(HookVerdict::Allow, HookVerdict::Rewrite)
        })
    }

    fn after(&self, input: HookInput) -> BoxFuture<'static, ()> {
        let hooks: Vec<HookConfig> = self.matching(input.event, &input.tool).cloned().collect();
        let sandbox = self.sandbox.clone();
        Box::pin(async move {
            let json = serde_json::to_value(&input).unwrap_or(serde_json::Value::Null);
            for hook in hooks {
                if let Err(failure) = run_confined(sandbox.as_ref(), &hook, &json).await {
                    let program = hook.command.first().cloned().unwrap_or_default();
                    tracing::warn!(%program, %failure, event = %input.event, "a hook failed");
                }
            }
        })
    }
}

/// Runs `hook` in `sandbox` with `input` on stdin; returns its stdout.
async fn run_confined(
    sandbox: &dyn Sandbox,
    hook: &HookConfig,
    input: &serde_json::Value,
) -> Result<Vec<u8>, HookFailure> {
    let setup = |error: std::io::Error| HookFailure::Spawn(error.to_string());
    let directory = tempfile::Builder::new().prefix("squidbot-hook-").tempdir().map_err(setup)?;
    // Shown in logs and errors; the program itself runs with no shell in between.
    let command_line = hook.command.iter().map(|word| shell_quote(word)).collect::<Vec<_>>().join(" ");
    let request = SandboxRequest {
        command: &command_line,
        program: Some(&hook.command),
        workspace: directory.path(),
        environment: vec![("PATH".to_owned(), DEFAULT_PATH.into())],
        grants: Grants {
            read_only: program_directory(hook),
            read_write: hook.write.clone(),
            network: NetworkGrant::Denied,
            quick_start: true,
        },
    };
    let wrapped = sandbox.wrap(request).map_err(|error| HookFailure::Spawn(error.to_string()))?;
    let mut process = tokio::process::Command::new(&wrapped.program);
    process
        .args(&wrapped.arguments)
        .current_dir(&wrapped.current_dir)
        .env_clear()
        .envs(wrapped.environment.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if !wrapped.starts_own_session {
        process.process_group(0);
    }
    let mut child = process.spawn().map_err(setup)?;
    let _group = GroupGuard::new(child.id());
    let _lease = wrapped.lease;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let body = input.to_string();
    let conversation = async move {
        if let Some(mut stdin) = stdin {
            // A hook that doesn't read its input is free to: a closed pipe is no failure.
            if let Err(error) = stdin.write_all(body.as_bytes()).await {
                tracing::debug!(%error, "a hook did not read its input");
            }
            drop(stdin);
        }
        let mut answer = Vec::new();
        if let Some(stdout) = stdout {
            stdout.take(MAX_ANSWER_BYTES + 1).read_to_end(&mut answer).await.map_err(setup)?;
        }
        let status = child.wait().await.map_err(setup)?;
        Ok::<_, HookFailure>((status, answer))
    };
    let (status, answer) = tokio::time::timeout(Duration::from_millis(hook.timeout_ms), conversation)
        .await
        .map_err(|_| HookFailure::TimedOut(hook.timeout_ms))??;
    if !status.success() {
        return Err(HookFailure::Exit(status.to_string()));
    }
    if answer.len() as u64 > MAX_ANSWER_BYTES {
        return Err(HookFailure::BadAnswer(format!("longer than {MAX_ANSWER_BYTES} bytes")));
    }
    Ok(answer)
}

/// The directory of an absolute program path: the hook may read its own files there.
fn program_directory(hook: &HookConfig) -> Vec<PathBuf> {
    hook.command
        .first()
        .map(Path::new)
        .filter(|program| program.is_absolute())
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .into_iter()
        .collect()
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use squidbot_core::sandbox::HostShell;

    fn hook(script: &str, timeout_ms: u64, fail_open: bool) -> HookConfig {
        HookConfig {
            event: HookEvent::BeforeTool.name().into(),
            command: vec!["sh".into(), "-c".into(), script.into()],
            timeout_ms,
            tools: vec!["ex*".into()],
            fail_open,
            write: Vec::new(),
        }
    }

    fn input() -> HookInput {
        HookInput {
            tool: "exec".into(),
            arguments: serde_json::json!({"command": "ls"}),
            ..HookInput::new(HookEvent::BeforeTool, "cli:local", "owner")
        }
    }

    async fn before(config: HookConfig) -> HookVerdict {
        let hooks = ExecutableHooks::new(&[config], Arc::new(HostShell)).unwrap();
        hooks.before(&input()).await
    }

    #[tokio::test]
    async fn decisions_are_read_from_stdout_with_the_call_on_stdin() {
        let veto = r#"cat >/dev/null; echo '{"decision":"veto","reason":"not today"}'"#;
        assert_eq!(before(hook(veto, 5000, false)).await, HookVerdict::Veto("not today".into()));
        let rewrite =
            r#"sed 's/"ls"/"pwd"/' | sed 's/.*"arguments":\([^}]*}\).*/{"decision":"rewrite","arguments":\1}/'"#;
        assert_eq!(
            before(hook(rewrite, 5000, false)).await,
            HookVerdict::Rewrite(serde_json::json!({"command": "pwd"}))
        );
        assert_eq!(before(hook(r#"echo '{"decision":"allow"}'"#, 5000, false)).await, HookVerdict::Allow);
    }

    #[tokio::test]
    async fn failures_block_unless_the_hook_fails_open() {
        for script in ["exit 3", "echo nonsense", "sleep 5"] {
            assert!(matches!(before(hook(script, 300, false)).await, HookVerdict::Veto(_)), "{script}");
            assert_eq!(before(hook(script, 300, true)).await, HookVerdict::Allow, "{script}");
        }
    }

    #[test]
    fn hooks_match_tools_by_glob_and_bad_globs_are_reported() {
        let hooks = ExecutableHooks::new(&[hook("true", 1, false)], Arc::new(HostShell)).unwrap();
        assert_eq!(hooks.matching(HookEvent::BeforeTool, "exec").count(), 1);
        assert_eq!(hooks.matching(HookEvent::BeforeTool, "read_file").count(), 0);
        assert_eq!(hooks.matching(HookEvent::AfterTool, "exec").count(), 0);
        let bad = HookConfig { tools: vec!["[".into()], ..hook("true", 1, false) };
        assert_eq!(check(&[bad]).len(), 1);
    }

    #[tokio::test]
    async fn a_message_hook_rewrites_text_and_a_rewrite_without_it_blocks() {
        let config = |script: &str| HookConfig {
            event: HookEvent::MessageReceived.name().into(),
            tools: Vec::new(),
            ..hook(script, 5000, false)
        };
        let message = HookInput { text: Some("hello".into()), ..HookInput::new(HookEvent::MessageReceived, "s", "c") };
        let rewrite = ExecutableHooks::new(
            &[config(r#"cat >/dev/null; echo '{"decision":"rewrite","text":"hello, kindly"}'"#)],
            Arc::new(HostShell),
        )
        .unwrap();
        assert_eq!(rewrite.before(&message).await, HookVerdict::Rewrite("hello, kindly".into()));
        let wrong = ExecutableHooks::new(
            &[config(r#"echo '{"decision":"rewrite","arguments":{"a":1}}'"#)],
            Arc::new(HostShell),
        )
        .unwrap();
        assert!(matches!(wrong.before(&message).await, HookVerdict::Veto(reason) if reason.contains("the message")));
    }

    #[test]
    fn an_unknown_event_is_a_setup_error() {
        let unknown = HookConfig { event: "before_lunch".into(), ..hook("true", 1, false) };
        let error = ExecutableHooks::new(&[unknown], Arc::new(HostShell)).unwrap_err();
        assert!(error.problem.contains("before_lunch"), "{error}");
    }
}
