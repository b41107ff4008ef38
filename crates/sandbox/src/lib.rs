//! Confines the commands squidbot's tools run, as the `Sandbox` port of squidbot-core:
//! landlock + seccomp (the binary re-executes itself as a helper that restricts itself
//! and then becomes `sh -c`), bubblewrap (the helper sets limits and executes `bwrap`),
//! or none. `auto` probes once which works here and takes the strongest.

mod bubblewrap;
mod cgroup;
mod grants;
mod helper;
mod launch;
mod policy;
mod probe;
mod ruleset;
mod seccomp;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use squidbot_core::sandbox::{
    Confinement, HostShell, Sandbox, SandboxError, SandboxLease, SandboxRequest, SandboxedCommand,
};
use squidbot_types::sandbox::SandboxBackend;

pub use cgroup::{CgroupVersion, PidsHierarchy};
pub use helper::{SANDBOX_FAILURE_EXIT, run_if_requested};
pub use launch::HELPER_SUBCOMMAND;
pub use policy::{ResolvedPaths, SandboxSettings};

use cgroup::CgroupLease;
use launch::{Confiner, Launch, Limits};

/// Order in which `auto` tries the backends. Both enforce the whole policy (hidden
/// secrets, writes only in the workspace, no network, process and resource limits,
/// the seccomp filter). Landlock comes first because it costs a few milliseconds per
/// command where bubblewrap's namespaces cost tens (see BENCHMARKS.md); bubblewrap
/// isolates more (a private /tmp, PID and network namespaces, un-granted paths absent
/// rather than refused) and is the one to configure when that matters more than speed.
pub const AUTO_ORDER: [SandboxBackend; 2] = [SandboxBackend::Landlock, SandboxBackend::Bubblewrap];

/// The backend that runs commands, once chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Active {
    /// Landlock + seccomp through the helper.
    Landlock,
    /// bubblewrap through the helper.
    Bubblewrap(PathBuf),
    /// No confinement.
    None,
    /// The configured backend does not work here; nothing runs.
    Unavailable {
        /// The configured backend.
        backend: SandboxBackend,
        /// Why.
        reason: String,
    },
}

impl Active {
    /// Name of the backend.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Landlock => "landlock",
            Self::Bubblewrap(_) => "bubblewrap",
            Self::None => "none",
            Self::Unavailable { backend, .. } => backend.as_str(),
        }
    }
}

/// How the per-command process limit is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessLimit {
    /// A `pids` cgroup per command: exact, and it also kills detached processes.
    Cgroup(PidsHierarchy),
    /// `RLIMIT_NPROC` on top of the user's current process count (per user, not per command).
    Rlimit,
    /// Not enforced, with the reason (root ignores `RLIMIT_NPROC`).
    Unenforced(String),
}

impl ProcessLimit {
    /// Finds the best mechanism available to this process.
    pub fn discover() -> Self {
        match PidsHierarchy::discover() {
            Ok(hierarchy) => Self::Cgroup(hierarchy),
            Err(_) if !nix::unistd::geteuid().is_root() => Self::Rlimit,
            Err(reason) => {
                Self::Unenforced(format!("RLIMIT_NPROC does not bind root and no pids cgroup is usable: {reason}"))
            }
        }
    }

    /// One line for `doctor`.
    pub fn describe(&self) -> String {
        match self {
            Self::Cgroup(hierarchy) => {
                format!("pids cgroup per command under {} ({:?})", hierarchy.parent.display(), hierarchy.version)
            }
            Self::Rlimit => "RLIMIT_NPROC (counts all of this user's processes)".to_owned(),
            Self::Unenforced(reason) => format!("not enforced: {reason}"),
        }
    }
}

/// The choice `auto` (or the configuration) led to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The backend in use.
    pub active: Active,
    /// Why it was chosen (probe results of the backends tried).
    pub reason: String,
}

/// One backend's probe result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendProbe {
    /// The backend.
    pub backend: SandboxBackend,
    /// The helper's status line when it works, the reason when it doesn't.
    pub outcome: Result<String, String>,
}

/// Everything `doctor` shows: every backend's probe, the selection and the process limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The configured backend.
    pub configured: SandboxBackend,
    /// Each confining backend's probe.
    pub probes: Vec<BackendProbe>,
    /// What runs commands.
    pub selection: Selection,
    /// How the process limit is enforced.
    pub process_limit: ProcessLimit,
}

/// The `Sandbox` port on Linux.
#[derive(Debug)]
pub struct LinuxSandbox {
    settings: SandboxSettings,
    paths: ResolvedPaths,
    selection: OnceLock<(Selection, ProcessLimit)>,
    /// The landlock rules of the policy's own roots, expanded once (walking the roots
    /// that hold hidden paths costs a command milliseconds).
    base_rules: OnceLock<Vec<(PathBuf, grants::Access)>>,
}

impl LinuxSandbox {
    /// A sandbox for `settings`; the backend is probed on first use.
    pub fn new(settings: SandboxSettings) -> Self {
        let paths = settings.resolve();
        Self { settings, paths, selection: OnceLock::new(), base_rules: OnceLock::new() }
    }

    /// Probes every confining backend (even when one is configured) and reports.
    pub fn report(&self) -> Report {
        let probes: Vec<BackendProbe> = AUTO_ORDER
            .iter()
            .map(|backend| BackendProbe { backend: *backend, outcome: self.probe(*backend) })
            .collect();
        let (selection, process_limit) = self.selected();
        Report {
            configured: self.settings.config.backend,
            probes,
            selection: selection.clone(),
            process_limit: process_limit.clone(),
        }
    }

    /// The backend in use (probed once).
    pub fn selection(&self) -> &Selection {
        &self.selected().0
    }

    fn selected(&self) -> &(Selection, ProcessLimit) {
        self.selection.get_or_init(|| {
            let selection = self.select();
            match &selection.active {
                Active::Unavailable { .. } | Active::None => {
                    tracing::warn!(backend = selection.active.name(), reason = %selection.reason, "commands run unconfined");
                }
                Active::Landlock | Active::Bubblewrap(_) => {
                    tracing::info!(backend = selection.active.name(), reason = %selection.reason, "sandbox selected");
                }
            }
            let limit = match selection.active {
                Active::Landlock | Active::Bubblewrap(_) => ProcessLimit::discover(),
                Active::None | Active::Unavailable { .. } => ProcessLimit::Unenforced("no sandbox".to_owned()),
            };
            (selection, limit)
        })
    }

    fn select(&self) -> Selection {
        let configured = self.settings.config.backend;
        let candidates: &[SandboxBackend] = match configured {
            SandboxBackend::None => {
                return Selection {
                    active: Active::None,
                    reason: "configured (sandbox.backend = \"none\")".to_owned(),
                };
            }
            SandboxBackend::Auto => &AUTO_ORDER,
            SandboxBackend::Landlock => &[SandboxBackend::Landlock],
            SandboxBackend::Bubblewrap => &[SandboxBackend::Bubblewrap],
        };
        let mut reasons = Vec::new();
        for backend in candidates {
            match self.probe(*backend) {
                Ok(status) => {
                    let active = match backend {
                        SandboxBackend::Bubblewrap => Active::Bubblewrap(bubblewrap::find().unwrap_or_default()),
                        SandboxBackend::Landlock => Active::Landlock,
                        SandboxBackend::Auto | SandboxBackend::None => continue,
                    };
                    reasons.push(format!("{} works ({status})", backend.as_str()));
                    let reason = if configured == SandboxBackend::Auto {
                        format!("auto: {}", reasons.join("; "))
                    } else {
                        format!("configured; {}", reasons.join("; "))
                    };
                    return Selection { active, reason };
                }
                Err(reason) => reasons.push(format!("{} unavailable: {reason}", backend.as_str())),
            }
        }
        let reason = reasons.join("; ");
        match configured {
            SandboxBackend::Auto => {
                Selection { active: Active::None, reason: format!("auto: nothing works ({reason})") }
            }
            SandboxBackend::Landlock | SandboxBackend::Bubblewrap | SandboxBackend::None => {
                Selection { active: Active::Unavailable { backend: configured, reason: reason.clone() }, reason }
            }
        }
    }

    fn probe(&self, backend: SandboxBackend) -> Result<String, String> {
        match backend {
            SandboxBackend::Landlock => probe::probe(Confiner::Landlock, &self.settings.helper, &self.paths, None),
            SandboxBackend::Bubblewrap => match bubblewrap::find() {
                Some(program) => probe::probe(Confiner::Bubblewrap, &self.settings.helper, &self.paths, Some(program)),
                None => Err(format!(
                    "bwrap is not installed (looked for {}; Debian: apt-get install bubblewrap)",
                    bubblewrap::SEARCH_PATH.join(", ")
                )),
            },
            SandboxBackend::Auto | SandboxBackend::None => Err("not a confining backend".to_owned()),
        }
    }

    fn limits(&self, process_limit: &ProcessLimit) -> Limits {
        let config = &self.settings.config;
        Limits {
            cpu_secs: config.cpu_secs.max(1),
            data_bytes: config.memory_mb.max(1).saturating_mul(1 << 20),
            file_bytes: config.max_file_mb.max(1).saturating_mul(1 << 20),
            processes: matches!(process_limit, ProcessLimit::Rlimit).then_some(u64::from(config.max_processes.max(1))),
        }
    }

    fn confine(
        &self,
        confiner: Confiner,
        bwrap: Option<PathBuf>,
        process_limit: &ProcessLimit,
        request: SandboxRequest<'_>,
    ) -> Result<SandboxedCommand, SandboxError> {
        let config = &self.settings.config;
        let unlimited = ProcessLimit::Unenforced("a quick start was asked for".to_owned());
        let process_limit = if request.grants.quick_start { &unlimited } else { process_limit };
        let cgroup = match process_limit {
            ProcessLimit::Cgroup(hierarchy) => {
                Some(hierarchy.create(config.max_processes.max(1)).map_err(SandboxError::Setup)?)
            }
            ProcessLimit::Rlimit | ProcessLimit::Unenforced(_) => None,
        };
        let private_tmp = match confiner {
            Confiner::Landlock => {
                Some(tempfile::Builder::new().prefix("squidbot-sandbox-").tempdir().map_err(|error| {
                    SandboxError::Setup(format!("can't create a private temporary directory: {error}"))
                })?)
            }
            Confiner::Bubblewrap => None,
        };
        let grants = request.grants;
        let rules = (confiner == Confiner::Landlock).then(|| {
            let mut rules = self
                .base_rules
                .get_or_init(|| grants::rules(&self.paths.read_only, &self.paths.read_write, &self.paths.hidden))
                .clone();
            let mut writable = grants.read_write.clone();
            writable.push(request.workspace.to_path_buf());
            writable.extend(private_tmp.as_ref().map(|directory| directory.path().to_path_buf()));
            rules.extend(grants::rules(&grants.read_only, &writable, &self.paths.hidden));
            rules
        });
        let mut read_only = self.paths.read_only.clone();
        read_only.extend(grants.read_only);
        let mut read_write = self.paths.read_write.clone();
        read_write.extend(grants.read_write);
        let launch = Launch {
            confiner,
            command: request.command.to_owned(),
            program: request.program.map(<[String]>::to_vec),
            workspace: request.workspace.to_path_buf(),
            read_only,
            read_write,
            hidden: self.paths.hidden.clone(),
            private_tmp: private_tmp.as_ref().map(|directory| directory.path().to_path_buf()),
            network: grants.network.allows(config.network),
            limits: self.limits(process_limit),
            cgroup: cgroup.as_ref().map(|group| group.directory().to_path_buf()),
            bwrap,
            report: false,
            rules,
        };
        let description = serde_json::to_string(&launch)
            .map_err(|error| SandboxError::Setup(format!("can't describe the command: {error}")))?;
        let mut environment: Vec<(String, OsString)> =
            request.environment.into_iter().filter(|(name, _)| name != "TMPDIR").collect();
        if let Some(directory) = &private_tmp {
            environment.push(("TMPDIR".to_owned(), directory.path().as_os_str().to_owned()));
        }
        Ok(SandboxedCommand {
            program: self.settings.helper.clone(),
            arguments: vec![OsString::from(HELPER_SUBCOMMAND), OsString::from(description)],
            environment,
            current_dir: request.workspace.to_path_buf(),
            starts_own_session: true,
            max_output_bytes: Some(config.max_output_bytes),
            lease: Some(Box::new(Lease { cgroup, private_tmp })),
        })
    }
}

impl Sandbox for LinuxSandbox {
    fn backend(&self) -> String {
        self.selection().active.name().to_owned()
    }

    fn confinement(&self) -> Confinement {
        match self.selection().active {
            Active::Landlock | Active::Bubblewrap(_) => {
                Confinement { isolates_host: true, network_allowed: self.settings.config.network }
            }
            Active::None | Active::Unavailable { .. } => Confinement::default(),
        }
    }

    fn wrap(&self, request: SandboxRequest<'_>) -> Result<SandboxedCommand, SandboxError> {
        let (selection, process_limit) = self.selected();
        match &selection.active {
            Active::Landlock => self.confine(Confiner::Landlock, None, process_limit, request),
            Active::Bubblewrap(program) => {
                self.confine(Confiner::Bubblewrap, Some(program.clone()), process_limit, request)
            }
            Active::None => {
                let mut command = HostShell.wrap(request)?;
                command.max_output_bytes = Some(self.settings.config.max_output_bytes);
                Ok(command)
            }
            Active::Unavailable { backend, reason } => {
                Err(SandboxError::Unavailable { backend: backend.as_str().to_owned(), reason: reason.clone() })
            }
        }
    }
}

/// What one confined command holds: its process-count group and private /tmp.
#[derive(Debug)]
struct Lease {
    cgroup: Option<CgroupLease>,
    private_tmp: Option<tempfile::TempDir>,
}

impl SandboxLease for Lease {
    fn kill_all(&self) {
        if let Some(group) = &self.cgroup {
            group.kill_all();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Processes first, so nothing writes into the temporary directory while it goes.
        self.cgroup.take();
        if let Some(directory) = self.private_tmp.take()
            && let Err(error) = directory.close()
        {
            tracing::debug!(%error, "can't remove a sandbox temporary directory");
        }
    }
}
