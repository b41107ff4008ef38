//! The install steps inside the sandbox: `git clone` confined to the staging directory
//! (reading only the local source, networked only for a remote URL), then the binary
//! re-executed as the validator, confined to reading the fetched files, whose verdict is
//! read back strictly. With the `none` backend both still run as separate processes.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use squidbot_core::sandbox::{Grants, NetworkGrant, Sandbox, SandboxRequest};

use super::verdict::{Accepted, MAX_VERDICT_BYTES, VALIDATE_SUBCOMMAND, Verdict};
use super::{CloneError, InstallIsolation, Repository, git};
use crate::problem::{ProblemKind, SkillProblem};

/// How long the validator may take.
pub const VALIDATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Error output kept for messages.
const STDERR_CAP: u64 = 16 * 1024;

/// `PATH` when the gateway has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Variables a remote clone may need to reach its server, passed when set.
const NETWORK_VARIABLES: [&str; 7] =
    ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY", "SSH_AUTH_SOCK"];

/// Runs the install steps through the sandbox port.
#[derive(Debug, Clone)]
pub struct SandboxedInstall {
    sandbox: Arc<dyn Sandbox>,
    program: PathBuf,
}

/// How a confined command ended.
struct Finished {
    /// Exit code; `None` when killed by a signal.
    code: Option<i32>,
    /// Standard output, at most the cap plus one byte.
    stdout: Vec<u8>,
    /// Standard error, capped.
    stderr: String,
}

impl SandboxedInstall {
    /// Steps confined by `sandbox`; `program` is this binary, which answers to
    /// [`VALIDATE_SUBCOMMAND`].
    pub fn new(sandbox: Arc<dyn Sandbox>, program: PathBuf) -> Self {
        Self { sandbox, program }
    }

    fn environment(workspace: &Path, network: bool) -> Vec<(String, OsString)> {
        let mut environment = vec![
            ("PATH".to_owned(), std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into())),
            ("HOME".to_owned(), workspace.as_os_str().to_owned()),
            ("LANG".to_owned(), "C".into()),
            ("GIT_TERMINAL_PROMPT".to_owned(), "0".into()),
            ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".into()),
            ("GIT_CONFIG_GLOBAL".to_owned(), "/dev/null".into()),
            ("GIT_SSH_COMMAND".to_owned(), "ssh -o BatchMode=yes".into()),
        ];
        if network {
            for name in NETWORK_VARIABLES {
                if let Some(value) = std::env::var_os(name) {
                    environment.push((name.to_owned(), value));
                }
            }
        }
        environment
    }

    /// Runs `command` confined, killing its whole process group at `timeout`.
    fn run(
        &self,
        command: &str,
        workspace: &Path,
        grants: Grants,
        timeout: Duration,
        stdout_cap: usize,
    ) -> Result<Finished, String> {
        let network = grants.network == NetworkGrant::Allowed;
        let wrapped = self
            .sandbox
            .wrap(SandboxRequest {
                command,
                workspace,
                environment: Self::environment(workspace, network),
                grants,
                program: None,
            })
            .map_err(|error| error.to_string())?;
        let mut process = Command::new(&wrapped.program);
        process
            .args(&wrapped.arguments)
            .env_clear()
            .envs(wrapped.environment.iter().map(|(name, value)| (name, value)))
            .current_dir(&wrapped.current_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if !wrapped.starts_own_session {
            process.process_group(0);
        }
        let mut child =
            process.spawn().map_err(|error| format!("can't start {}: {error}", wrapped.program.display()))?;
        let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let cap = u64::try_from(stdout_cap).unwrap_or(u64::MAX).saturating_add(1);
        let stdout = child.stdout.take().map(|stdout| std::thread::spawn(move || read_capped(stdout, cap)));
        let stderr = child.stderr.take().map(|stderr| std::thread::spawn(move || read_capped(stderr, STDERR_CAP)));
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if started.elapsed() >= timeout => {
                    break Err(format!("it took longer than {} s", timeout.as_secs()));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(error) => break Err(format!("can't wait for it: {error}")),
            }
        };
        // Whatever it left behind goes too, so nothing holds the pipes open.
        if let Err(error) = killpg(group, Signal::SIGKILL)
            && error != nix::errno::Errno::ESRCH
        {
            tracing::debug!(%error, "can't kill the install step's process group");
        }
        if let Some(lease) = &wrapped.lease {
            lease.kill_all();
        }
        if status.is_err()
            && let Err(error) = child.wait()
        {
            tracing::warn!(%error, "can't reap an install step that timed out");
        }
        drop(wrapped.lease);
        let status = status?;
        let stdout = stdout.and_then(|thread| thread.join().ok()).unwrap_or_default();
        let stderr = stderr.and_then(|thread| thread.join().ok()).unwrap_or_default();
        Ok(Finished { code: status.code(), stdout, stderr: String::from_utf8_lossy(&stderr).into_owned() })
    }
}

fn read_capped(reader: impl Read, cap: u64) -> Vec<u8> {
    let mut buffer = Vec::new();
    if let Err(error) = reader.take(cap).read_to_end(&mut buffer) {
        tracing::debug!(%error, "can't read an install step's output");
    }
    buffer
}

/// `text` quoted for `sh`.
fn quote(text: &std::ffi::OsStr) -> String {
    format!("'{}'", text.to_string_lossy().replace('\'', r"'\''"))
}

impl InstallIsolation for SandboxedInstall {
    fn backend(&self) -> String {
        self.sandbox.backend()
    }

    fn confined(&self) -> bool {
        self.sandbox.confinement().isolates_host
    }

    fn clone_repository(
        &self,
        repository: &Repository,
        workspace: &Path,
        into: &Path,
        timeout: Duration,
    ) -> Result<(), CloneError> {
        let command: Vec<String> = std::iter::once(OsString::from("git"))
            .chain(git::clone_arguments(&repository.url, into))
            .map(|argument| quote(&argument))
            .collect();
        let grants = Grants {
            read_only: repository.local.iter().cloned().collect(),
            read_write: Vec::new(),
            network: if repository.remote { NetworkGrant::Allowed } else { NetworkGrant::Denied },
            quick_start: false,
        };
        let finished = self
            .run(&command.join(" "), workspace, grants, timeout, 0)
            .map_err(|reason| CloneError::Sandbox { backend: self.backend(), reason: reason.to_string() })?;
        match finished.code {
            Some(0) => Ok(()),
            Some(code) => Err(git::summarize(format!("exit code {code}"), &finished.stderr)),
            None => Err(git::summarize("killed", &finished.stderr)),
        }
    }

    fn validate(&self, directory: &Path, scratch: &Path) -> Result<Accepted, Vec<SkillProblem>> {
        let refuse = |reason: String| vec![SkillProblem::new(directory, ProblemKind::Reported(reason))];
        let command =
            format!("{} {VALIDATE_SUBCOMMAND} {}", quote(self.program.as_os_str()), quote(directory.as_os_str()));
        let grants = Grants {
            read_only: vec![self.program.clone(), directory.to_path_buf()],
            read_write: Vec::new(),
            network: NetworkGrant::Denied,
            quick_start: false,
        };
        let finished = self
            .run(&command, scratch, grants, VALIDATE_TIMEOUT, MAX_VERDICT_BYTES)
            .map_err(|reason| refuse(format!("the validator in the {} sandbox failed: {reason}", self.backend())))?;
        Verdict::read(finished.code, &finished.stdout, directory).map_err(|mut problems| {
            let said = finished.stderr.trim();
            if finished.code != Some(0) && finished.code != Some(1) && !said.is_empty() {
                problems
                    .push(SkillProblem::new(directory, ProblemKind::Reported(format!("the validator said: {said}"))));
            }
            problems
        })
    }
}
