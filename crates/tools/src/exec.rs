//! `exec`: runs a shell command in the workspace after the safety check, through the
//! sandbox port, with a timeout, a filtered environment, the whole process group (and
//! sandbox) killed on timeout or cancellation, and output capped with its middle omitted.

mod background;
mod environment;
mod output;
pub(crate) mod process_group;

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::leaks::LeakScanner;
use squidbot_core::sandbox::{Confinement, Grants, HostShell, Sandbox, SandboxRequest, SandboxedCommand};
use squidbot_core::skill_use::{SkillEnvironment, SkillEnvironmentRequest, SkillVariable};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use squidbot_types::config::ExecConfig;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

pub use background::JOBS_DIRECTORY;
pub use environment::{DEFAULT_PATH, SAFE_NAMES, SECRET_MARKERS, looks_secret};

use crate::path_guard::PathGuard;
use crate::safety::{CommandPolicy, PolicyError, Rule};
use crate::{parse, schema};
use output::OutputCollector;
use process_group::GroupGuard;

/// Longest timeout the model may ask for, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// How long output may keep flowing after the shell exits (background children still
/// holding the pipe) before they are stopped.
const AFTER_EXIT_GRACE: Duration = Duration::from_millis(500);

/// How long to collect the last output after killing a timed-out or cancelled command.
const AFTER_KILL_GRACE: Duration = Duration::from_millis(250);

/// Run a shell command (sh -c) in the workspace; returns its output and exit code.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecArguments {
    /// Shell command.
    pub command: String,
    /// Timeout in seconds.
    pub timeout: Option<u64>,
    /// Run detached; output goes to a log file.
    #[serde(default)]
    pub background: bool,
}

/// What `exec` withholds from its commands' environment and what it adds to it.
#[derive(Debug, Clone, Default)]
pub struct CommandEnvironment {
    /// Secrets no passed variable may carry, whatever its name (every vault value, the
    /// configured credentials).
    pub withheld: LeakScanner,
    /// The `addons.env` variables of the skills a turn uses; `None` adds none.
    pub skills: Option<Arc<dyn SkillEnvironment>>,
}

/// The `exec` tool.
#[derive(Debug)]
pub struct ExecTool {
    guard: PathGuard,
    timeout_secs: u64,
    max_output_chars: usize,
    policy: Result<CommandPolicy, PolicyError>,
    passed_names: Vec<String>,
    sandbox: Arc<dyn Sandbox>,
    /// Sandboxes of people's roles that have their own (`[user_roles.<role>] sandbox`).
    role_sandboxes: std::collections::BTreeMap<String, Arc<dyn Sandbox>>,
    environment: CommandEnvironment,
}

/// How a foreground command ended.
#[derive(Debug)]
enum Ending {
    Exited { status: ExitStatus, left_running: bool },
    TimedOut,
    Cancelled,
    TooMuchOutput { limit: u64 },
}

impl ExecTool {
    /// An `exec` tool with `[tools.exec]` settings; its working directory goes through `guard`.
    /// An invalid `blocked_patterns` entry makes every call fail (and is logged now).
    pub fn new(guard: PathGuard, config: &ExecConfig) -> Self {
        let policy = CommandPolicy::new(&config.blocked_patterns);
        if let Err(error) = &policy {
            tracing::error!(%error, "exec will refuse every command until the configuration is fixed");
        }
        Self {
            guard,
            timeout_secs: config.timeout_secs.clamp(1, MAX_TIMEOUT_SECS),
            max_output_chars: config.max_output_chars,
            policy,
            passed_names: environment::passed_names(&config.pass_env),
            sandbox: Arc::new(HostShell),
            role_sandboxes: std::collections::BTreeMap::new(),
            environment: CommandEnvironment::default(),
        }
    }

    /// Withholds variables carrying these secrets and adds the variables of skills in use.
    pub fn with_environment(mut self, environment: CommandEnvironment) -> Self {
        self.environment = environment;
        self
    }

    /// The `addons.env` variables of the skills the call's turn read the `SKILL.md` of.
    async fn skill_variables(&self, context: &ToolContext) -> Vec<SkillVariable> {
        let Some(skills) = &self.environment.skills else { return Vec::new() };
        if context.skills_in_use.is_empty() {
            return Vec::new();
        }
        let directories = context.skills_in_use.directories();
        let request = SkillEnvironmentRequest {
            directories: &directories,
            context: &context.context,
            actor: context.actor.as_ref(),
        };
        let variables = skills.variables(request).await;
        if !variables.is_empty() {
            let names: Vec<&str> = variables.iter().map(|variable| variable.name.as_str()).collect();
            tracing::debug!(variables = ?names, "setting the variables of the skills in use");
        }
        variables
    }

    /// Runs the commands of people of the people's role `role` through `sandbox`.
    pub fn with_role_sandbox(mut self, role: &str, sandbox: Arc<dyn Sandbox>) -> Self {
        self.role_sandboxes.insert(role.to_owned(), sandbox);
        self
    }

    /// The sandbox for the person a call acts for: their role's own, else the tool's.
    /// Only admins (and calls outside any people's policy) may run commands unconfined.
    fn sandbox_for(&self, context: &ToolContext) -> Result<&Arc<dyn Sandbox>, ToolError> {
        let Some(actor) = &context.actor else { return Ok(&self.sandbox) };
        let sandbox = self.role_sandboxes.get(&actor.role).unwrap_or(&self.sandbox);
        if !sandbox.confinement().isolates_host && !actor.is_admin() {
            return Err(ToolError::RespondToModel(format!(
                "Refused by policy: commands run unconfined here (sandbox `{}`), and only admins may run them so; \
                 the person's role is `{}`.",
                sandbox.backend(),
                actor.role
            )));
        }
        Ok(sandbox)
    }

    /// Runs commands through `sandbox` instead of directly on the host.
    pub fn with_sandbox(mut self, sandbox: Arc<dyn Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox commands run through.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    /// Confines `command` through `sandbox`, in `directory` with the filtered environment
    /// and the variables of the skills in use.
    fn wrap(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        command: &str,
        directory: &std::path::Path,
        skill_variables: Vec<SkillVariable>,
    ) -> Result<SandboxedCommand, ToolError> {
        let filtered = environment::values(&self.passed_names, &self.environment.withheld);
        let request = SandboxRequest {
            command,
            workspace: directory,
            environment: environment::with_skill_variables(filtered, skill_variables),
            grants: Grants::default(),
            program: None,
        };
        sandbox.wrap(request).map_err(|error| ToolError::Fatal(format!("can't run commands: {error}")))
    }

    async fn exec(&self, arguments: ExecArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let policy = self.policy.as_ref().map_err(|error| ToolError::Fatal(format!("can't run commands: {error}")))?;
        let sandbox = self.sandbox_for(context)?;
        policy
            .check_allowing(&arguments.command, &allowed_rules(sandbox.confinement()))
            .map_err(|refusal| ToolError::RespondToModel(refusal.to_string()))?;
        let directory = self.guard.workspace_directory(&context.workspace)?;
        let skill_variables = self.skill_variables(context).await;
        if arguments.background {
            let wrapped =
                self.wrap(sandbox, &background::job_script(&arguments.command), &directory, skill_variables)?;
            return background::start(wrapped, &directory).await;
        }
        let timeout_secs = arguments.timeout.unwrap_or(self.timeout_secs).clamp(1, MAX_TIMEOUT_SECS);
        let mut wrapped = self.wrap(sandbox, &arguments.command, &directory, skill_variables)?;
        let lease = wrapped.lease.take();
        let spawn_failure = |error: std::io::Error| ToolError::Fatal(format!("can't run sh: {error}"));
        let (reader, writer) = std::io::pipe().map_err(spawn_failure)?;
        let writer_for_errors = writer.try_clone().map_err(spawn_failure)?;
        let mut process = tokio::process::Command::new(&wrapped.program);
        process
            .args(&wrapped.arguments)
            .current_dir(&wrapped.current_dir)
            .env_clear()
            .envs(wrapped.environment.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(writer_for_errors)
            .kill_on_drop(true);
        // A sandbox helper makes itself a session leader, which a group leader can't.
        if !wrapped.starts_own_session {
            process.process_group(0);
        }
        let mut child = process.spawn().map_err(spawn_failure)?;
        // The command holds our copies of the pipe's write end; without dropping it the
        // pipe never reports end of file.
        drop(process);
        let mut guard = GroupGuard::new(child.id());
        let mut receiver = pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).map_err(spawn_failure)?;
        let mut collector = OutputCollector::new(self.max_output_chars);
        let output_limit = wrapped.max_output_bytes;
        let ending = tokio::select! {
            biased;
            () = context.cancel.cancelled() => Ending::Cancelled,
            () = tokio::time::sleep(Duration::from_secs(timeout_secs)) => Ending::TimedOut,
            finished = run_to_end(&mut child, &mut receiver, &mut collector, output_limit) => {
                finished.map_err(|error| ToolError::Fatal(format!("can't run sh: {error}")))?
            }
        };
        match ending {
            // Children that sent their output elsewhere (`server > log 2>&1 &`) were
            // detached on purpose: leave them running on the host. A sandbox's processes
            // end with the call (background jobs are the way to keep something running).
            Ending::Exited { left_running: false, .. } if lease.is_none() => guard.disarm(),
            Ending::Exited { left_running: false, .. } => guard.kill(),
            Ending::Exited { left_running: true, .. }
            | Ending::TimedOut
            | Ending::Cancelled
            | Ending::TooMuchOutput { .. } => {
                guard.kill();
                if let Some(lease) = &lease {
                    lease.kill_all();
                }
                if let Err(error) = child.wait().await {
                    tracing::warn!(%error, "can't reap killed command");
                }
                let drained = tokio::time::timeout(AFTER_KILL_GRACE, drain(&mut receiver, &mut collector));
                if drained.await.is_err() {
                    tracing::debug!("output pipe still open after killing the command");
                }
            }
        }
        let mut text = if collector.is_empty() { "(no output)".to_owned() } else { collector.render() };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&footer(&ending, timeout_secs));
        drop(lease);
        Ok(ToolOutput::text(text))
    }
}

/// Rules a sandbox makes pointless: commands that can't see the gateway's environment
/// may dump their own, and network clients may run where the policy grants the network.
fn allowed_rules(confinement: Confinement) -> Vec<Rule> {
    let mut allowed = Vec::new();
    if confinement.isolates_host {
        allowed.push(Rule::EnvironmentDump);
        if confinement.network_allowed {
            allowed.push(Rule::NetworkTool);
        }
    }
    allowed
}

/// Reads output until end of file while waiting for the shell to exit. When the shell has
/// exited but something it started still holds the pipe open, waits briefly, then reports
/// it as left running. Stops early once more than `output_limit` bytes arrived.
async fn run_to_end(
    child: &mut tokio::process::Child,
    receiver: &mut pipe::Receiver,
    collector: &mut OutputCollector,
    output_limit: Option<u64>,
) -> std::io::Result<Ending> {
    let mut status = None;
    let mut end_of_file = false;
    let mut buffer = vec![0u8; 16 * 1024];
    let mut total: u64 = 0;
    loop {
        tokio::select! {
            exited = child.wait(), if status.is_none() => status = Some(exited?),
            read = receiver.read(&mut buffer), if !end_of_file => match read? {
                0 => end_of_file = true,
                count => {
                    collector.push(&buffer[..count]);
                    total = total.saturating_add(u64::try_from(count).unwrap_or(u64::MAX));
                    if let Some(limit) = output_limit.filter(|limit| total > *limit) {
                        return Ok(Ending::TooMuchOutput { limit });
                    }
                }
            },
        }
        match (status, end_of_file) {
            (Some(status), true) => return Ok(Ending::Exited { status, left_running: false }),
            (Some(status), false) => {
                let drained = tokio::time::timeout(AFTER_EXIT_GRACE, drain(receiver, collector)).await;
                return Ok(Ending::Exited { status, left_running: drained.is_err() });
            }
            (None, _) => {}
        }
    }
}

/// Reads the pipe to its end (or first error) into `collector`.
async fn drain(receiver: &mut pipe::Receiver, collector: &mut OutputCollector) {
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(count) = receiver.read(&mut buffer).await {
        if count == 0 {
            return;
        }
        collector.push(&buffer[..count]);
    }
}

/// The last line of the result: how the command ended.
fn footer(ending: &Ending, timeout_secs: u64) -> String {
    match ending {
        Ending::Exited { status, left_running } => {
            let mut line = match (status.code(), status.signal()) {
                (Some(code), _) => format!("[exit code {code}]"),
                (None, Some(signal)) => format!("[killed by signal {signal}]"),
                (None, None) => "[exit status unknown]".to_owned(),
            };
            if *left_running {
                line.push_str(
                    "\n[processes it left running in the background were stopped; use background: true for long-running jobs]",
                );
            }
            line
        }
        Ending::TimedOut => format!("[killed after {timeout_secs}s timeout]"),
        Ending::Cancelled => "[cancelled; command killed]".to_owned(),
        Ending::TooMuchOutput { limit } => format!("[killed after writing more than {limit} bytes of output]"),
    }
}

impl Tool for ExecTool {
    fn spec(&self) -> ToolSpec {
        let mut spec = schema::spec_for::<ExecArguments>("exec");
        if let Some(timeout) = spec.parameters.pointer_mut("/properties/timeout/description") {
            *timeout = serde_json::Value::String(format!(
                "Timeout in seconds (default {}, max {MAX_TIMEOUT_SECS}).",
                self.timeout_secs
            ));
        }
        spec
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.exec(parse(arguments)?, context).await
    }
}
