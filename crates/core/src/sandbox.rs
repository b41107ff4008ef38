//! The `Sandbox` port: turns a shell command into a confined command line ready to spawn.
//! Adapters (landlock, bubblewrap) do the confining; spawning stays with the caller, so
//! its timeout, output and cancellation handling is the same for every backend.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// What to run: a shell command line in a workspace with an already filtered environment.
#[derive(Debug, Clone)]
pub struct SandboxRequest<'a> {
    /// The command line given to `sh -c`.
    pub command: &'a str,
    /// The writable working directory.
    pub workspace: &'a Path,
    /// The whole environment the command gets (credentials already filtered out).
    pub environment: Vec<(String, OsString)>,
    /// Access this one command gets on top of the policy (none for `exec`).
    pub grants: Grants,
    /// Run this program with these arguments directly, with no shell in between (a
    /// hook's `command` list); `command` is then only what logs and errors show.
    pub program: Option<&'a [String]>,
}

/// Per-command access on top of the policy: a skill install's clone needs its source
/// readable and its staging directory writable, and nothing else of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Paths the command may read and execute but not change. Hidden paths inside them
    /// stay hidden; a grant of a hidden path itself is refused.
    pub read_only: Vec<PathBuf>,
    /// Paths the command may change, like its workspace.
    pub read_write: Vec<PathBuf>,
    /// Whether the command may open network connections.
    pub network: NetworkGrant,
    /// No process-count limit (joining a per-command cgroup, or counting the user's
    /// processes for `RLIMIT_NPROC`, costs milliseconds): for the operator's own short
    /// programs with a hard timeout whose whole process group is killed at its end
    /// (hooks). Files, network and the other limits stay as they are.
    pub quick_start: bool,
}

/// Network access of one command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NetworkGrant {
    /// What `[sandbox] network` says.
    #[default]
    Policy,
    /// Allowed, whatever the policy says (a clone from a remote URL).
    Allowed,
    /// Refused, whatever the policy says.
    Denied,
}

impl NetworkGrant {
    /// Whether the network is open, given the policy's setting.
    pub fn allows(self, policy_allows: bool) -> bool {
        match self {
            Self::Policy => policy_allows,
            Self::Allowed => true,
            Self::Denied => false,
        }
    }
}

/// Tears a sandbox down when dropped (its processes, its temporary directory, its
/// process-count group); [`SandboxLease::kill_all`] stops its processes earlier.
pub trait SandboxLease: Send + Sync + fmt::Debug {
    /// Kills every process still running in the sandbox, however it got detached.
    fn kill_all(&self);
}

/// A confined command, ready to spawn with piped output.
#[derive(Debug)]
pub struct SandboxedCommand {
    /// Program to execute.
    pub program: PathBuf,
    /// Its arguments.
    pub arguments: Vec<OsString>,
    /// The complete environment to give it (spawn with a cleared environment).
    pub environment: Vec<(String, OsString)>,
    /// Working directory to spawn it in.
    pub current_dir: PathBuf,
    /// True when the program makes itself a session (and process group) leader, so the
    /// caller must not put it in a process group of its own first.
    pub starts_own_session: bool,
    /// Output bytes after which the caller should stop the command, when limited.
    pub max_output_bytes: Option<u64>,
    /// Keep alive as long as the command may run; dropping it stops what is left.
    pub lease: Option<Box<dyn SandboxLease>>,
}

/// Why a command could not be confined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The configured backend does not work on this machine; nothing will run until the
    /// configuration or the machine changes.
    #[error("can't use the {backend} sandbox: {reason}")]
    Unavailable {
        /// Backend name (`landlock`).
        backend: String,
        /// What the probe found.
        reason: String,
    },
    /// Preparing this one command failed (a temporary directory, a process group).
    #[error("can't prepare the sandbox: {0}")]
    Setup(String),
}

/// What a backend takes care of itself, so the command checker can leave it alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Commands can't see the gateway's files, credentials or environment: dumping
    /// their own environment reveals nothing secret.
    pub isolates_host: bool,
    /// Commands may use the network by policy.
    pub network_allowed: bool,
}

/// The port: confines shell commands.
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// Name of the backend in use (`landlock`, `bubblewrap`, `none`).
    fn backend(&self) -> String;
    /// What the backend enforces, for the command checker.
    fn confinement(&self) -> Confinement;
    /// Wraps `request` into a command line that runs it confined.
    fn wrap(&self, request: SandboxRequest<'_>) -> Result<SandboxedCommand, SandboxError>;
}

/// No confinement: `sh -c` on the host, as its own process group. Grants change nothing:
/// every path and the network are open anyway.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostShell;

impl Sandbox for HostShell {
    fn backend(&self) -> String {
        "none".to_owned()
    }

    fn confinement(&self) -> Confinement {
        Confinement::default()
    }

    fn wrap(&self, request: SandboxRequest<'_>) -> Result<SandboxedCommand, SandboxError> {
        let (program, arguments) = match request.program {
            Some([program, arguments @ ..]) => (PathBuf::from(program), arguments.iter().map(OsString::from).collect()),
            Some([]) | None => (PathBuf::from("sh"), vec![OsString::from("-c"), OsString::from(request.command)]),
        };
        Ok(SandboxedCommand {
            program,
            arguments,
            environment: request.environment,
            current_dir: request.workspace.to_path_buf(),
            starts_own_session: false,
            max_output_bytes: None,
            lease: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_shell_runs_sh_in_the_workspace() {
        let command = HostShell
            .wrap(SandboxRequest {
                program: None,
                command: "echo hi",
                workspace: Path::new("/work"),
                environment: vec![("PATH".to_owned(), OsString::from("/bin"))],
                grants: Grants::default(),
            })
            .unwrap();
        assert_eq!(command.program, PathBuf::from("sh"));
        assert_eq!(command.arguments, [OsString::from("-c"), OsString::from("echo hi")]);
        assert_eq!(command.current_dir, PathBuf::from("/work"));
        assert!(!command.starts_own_session && command.lease.is_none());
    }

    #[test]
    fn the_network_grant_overrides_the_policy_only_when_explicit() {
        for policy in [false, true] {
            assert_eq!(NetworkGrant::Policy.allows(policy), policy);
            assert!(NetworkGrant::Allowed.allows(policy));
            assert!(!NetworkGrant::Denied.allows(policy));
        }
    }
}
