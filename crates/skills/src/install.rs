//! Installing a skill: fetch (local directory, local git repository, or git URL),
//! validate without running anything from it, copy atomically into the user's skills
//! directory, and log the attempt as a JSON line. The clone and the validation are the
//! steps that touch untrusted data; an [`InstallIsolation`] decides where they run (the
//! binary runs them confined by the sandbox, see [`SandboxedInstall`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::manifest::{Manifest, SKILL_FILE, read_skill_file};
use crate::problem::{ProblemKind, SkillProblem};

mod copy;
mod git;
mod sandboxed;
mod tree;
mod verdict;

pub use git::GIT_TIMEOUT;
pub use sandboxed::{SandboxedInstall, VALIDATE_TIMEOUT};
pub use verdict::{
    Accepted, MAX_VERDICT_BYTES, ReportedProblem, VALIDATE_SUBCOMMAND, Verdict, run_validator_if_requested,
};

/// Largest total size of an installed skill's files.
pub const MAX_SKILL_BYTES: u64 = 5 * 1024 * 1024;

/// Most files an installed skill may hold.
pub const MAX_SKILL_FILES: usize = 500;

/// Deepest directory nesting an installed skill may have.
pub const MAX_SKILL_DEPTH: usize = 10;

/// A skill directory that passed validation.
#[derive(Debug, Clone, Serialize)]
pub struct ValidSkill {
    /// Its parsed `SKILL.md`.
    pub manifest: Manifest,
    /// The directory validated.
    pub directory: PathBuf,
    /// Regular files in it.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
}

/// Checks a skill directory without executing anything from it: a valid `SKILL.md`
/// (frontmatter, name, description, size), at most [`MAX_SKILL_FILES`] files and
/// [`MAX_SKILL_BYTES`] bytes, nesting up to [`MAX_SKILL_DEPTH`], no symbolic links at all
/// (so none can point outside), no devices, FIFOs or sockets. A top-level `.git`
/// directory (left by a clone) is ignored and never copied.
pub fn validate_skill_dir(path: &Path) -> Result<ValidSkill, Vec<SkillProblem>> {
    let mut problems = Vec::new();
    let summary = tree::walk(path, &mut problems);
    let skill_file = path.join(SKILL_FILE);
    let manifest = match std::fs::symlink_metadata(&skill_file) {
        Ok(metadata) if metadata.is_file() => match read_skill_file(&skill_file) {
            Ok(manifest) => Some(manifest),
            Err(problem) => {
                problems.push(problem);
                None
            }
        },
        // A link or special file at SKILL.md was already reported by the walk.
        Ok(_) => None,
        Err(_) => {
            problems.push(SkillProblem::new(path, ProblemKind::MissingSkillFile));
            None
        }
    };
    match manifest {
        Some(manifest) if problems.is_empty() => {
            Ok(ValidSkill { manifest, directory: path.to_path_buf(), files: summary.files, bytes: summary.bytes })
        }
        _ => Err(problems),
    }
}

/// A repository to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// What git is given: a local path or a URL.
    pub url: String,
    /// The local repository the clone reads, when it is one (a path or a `file://` URL).
    pub local: Option<PathBuf>,
    /// True when the clone needs the network.
    pub remote: bool,
}

/// Where the steps that touch untrusted data run: cloning and validating.
pub trait InstallIsolation: Send + Sync {
    /// How they are confined, for the log and the output (`landlock`, `bubblewrap`,
    /// `none`, `in-process`).
    fn backend(&self) -> String;
    /// True when the steps run confined.
    fn confined(&self) -> bool;
    /// Clones `repository` into `into`, a directory to create inside `workspace` (the only
    /// place the clone may write).
    fn clone_repository(
        &self,
        repository: &Repository,
        workspace: &Path,
        into: &Path,
        timeout: Duration,
    ) -> Result<(), CloneError>;
    /// Validates the skill in `directory`; `scratch` is an empty directory it may use.
    fn validate(&self, directory: &Path, scratch: &Path) -> Result<Accepted, Vec<SkillProblem>>;
}

/// Why a repository could not be cloned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloneError {
    /// There is no `git` to run.
    #[error("git is not installed; it is needed to install from a repository")]
    NoGit,
    /// `git` could not be started or waited for.
    #[error("can't run git: {0}")]
    CannotRun(String),
    /// `git` ran and failed; its own message, on one line.
    #[error("{0}")]
    Failed(String),
    /// It ran past the time given.
    #[error("git clone did not finish within {seconds} s")]
    TimedOut {
        /// The time given.
        seconds: u64,
    },
    /// The sandbox it was to run in refused or broke.
    #[error("git clone in the {backend} sandbox failed: {reason}")]
    Sandbox {
        /// The sandbox backend.
        backend: String,
        /// Why.
        reason: String,
    },
}

/// Clones and validates in this process, unconfined (tests, library use).
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcess;

impl InstallIsolation for InProcess {
    fn backend(&self) -> String {
        "in-process".to_owned()
    }

    fn confined(&self) -> bool {
        false
    }

    fn clone_repository(
        &self,
        repository: &Repository,
        _workspace: &Path,
        into: &Path,
        timeout: Duration,
    ) -> Result<(), CloneError> {
        git::clone(&repository.url, into, timeout)
    }

    fn validate(&self, directory: &Path, _scratch: &Path) -> Result<Accepted, Vec<SkillProblem>> {
        let valid = validate_skill_dir(directory)?;
        Ok(Accepted {
            name: valid.manifest.name,
            description: valid.manifest.description,
            files: valid.files,
            bytes: valid.bytes,
        })
    }
}

/// What to install and where.
#[derive(Debug, Clone)]
pub struct InstallRequest {
    /// A local directory, a local git repository, or a git URL (`file://`, `https://`,
    /// `ssh://`, `git://`, `user@host:path`).
    pub source: String,
    /// The user's skills directory; the skill lands in `<skills_root>/<name>`.
    pub skills_root: PathBuf,
    /// The JSON Lines file every attempt is appended to.
    pub log_file: PathBuf,
    /// Replace an installed skill of the same name.
    pub force: bool,
    /// How long a clone may take.
    pub git_timeout: Duration,
}

/// A successful install.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    /// The skill's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Where it now lives.
    pub directory: PathBuf,
    /// True when it replaced an installed skill of the same name.
    pub replaced: bool,
    /// Files copied.
    pub files: usize,
    /// Bytes copied.
    pub bytes: u64,
    /// Where the clone and validation ran (`landlock`, `bubblewrap`, `none`, `in-process`).
    pub backend: String,
    /// False when they ran unconfined.
    pub confined: bool,
}

/// Why an install failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The source is neither an existing directory nor a git URL.
    #[error("can't install {given}: {reason}")]
    BadSource {
        /// The source as given.
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Cloning failed or timed out.
    #[error("can't fetch {given}: {reason}")]
    Fetch {
        /// The source as given.
        given: String,
        /// Git's complaint or the timeout.
        reason: String,
    },
    /// The skill failed validation.
    #[error("can't install {given}: {}", join(problems))]
    Invalid {
        /// The source as given.
        given: String,
        /// Everything wrong with it.
        problems: Vec<SkillProblem>,
    },
    /// A skill of that name is installed and `force` was not given.
    #[error("can't install {name}: a skill of that name is already installed at {}; use --force to replace it", directory.display())]
    AlreadyInstalled {
        /// The skill's name.
        name: String,
        /// The installed one.
        directory: PathBuf,
    },
    /// Copying or renaming failed.
    #[error("can't install into {}: {reason}", directory.display())]
    Write {
        /// Where it was going.
        directory: PathBuf,
        /// The I/O error.
        reason: String,
    },
}

fn join(problems: &[SkillProblem]) -> String {
    problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Installs with cloning and validation in this process; see [`install_with`].
pub fn install(request: &InstallRequest) -> Result<Installed, InstallError> {
    install_with(request, &InProcess)
}

/// Fetches and validates through `isolation`, then copies the skill into
/// `<skills_root>/<name>` through a hidden staging directory and a rename, so the
/// skills directory never holds half a skill. Every attempt is logged with the backend.
pub fn install_with(request: &InstallRequest, isolation: &dyn InstallIsolation) -> Result<Installed, InstallError> {
    let result = install_inner(request, isolation);
    let (name, outcome, error) = match &result {
        Ok(installed) => {
            (Some(installed.name.clone()), if installed.replaced { "replaced" } else { "installed" }, None)
        }
        Err(error) => (None, "failed", Some(error.to_string())),
    };
    let line = serde_json::json!({
        "time": jiff::Timestamp::now().to_string(),
        "source": request.source,
        "name": name,
        "result": outcome,
        "error": error,
        "sandbox": isolation.backend(),
        "confined": isolation.confined(),
    });
    if let Err(error) = append_line(&request.log_file, &line.to_string()) {
        tracing::warn!(%error, path = %request.log_file.display(), "can't log the skill install");
    }
    result
}

fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

/// Where the files come from.
enum Origin {
    Directory(PathBuf),
    Repository(Repository),
}

fn local_repository(path: &Path) -> Repository {
    Repository { url: path.display().to_string(), local: Some(path.to_path_buf()), remote: false }
}

fn classify(source: &str) -> Result<Origin, String> {
    let source = source.trim();
    if source.is_empty() {
        return Err("the source is empty".into());
    }
    if source.starts_with('-') {
        return Err("a source must not start with `-`".into());
    }
    if let Some((scheme, rest)) = source.split_once("://") {
        return match scheme {
            "file" => {
                let path = Path::new(rest);
                let local = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
                Ok(Origin::Repository(Repository { url: source.to_owned(), local: Some(local), remote: false }))
            }
            "https" | "http" | "ssh" | "git" => {
                Ok(Origin::Repository(Repository { url: source.to_owned(), local: None, remote: true }))
            }
            other => Err(format!("unsupported URL scheme {other:?} (use file, https, ssh or git)")),
        };
    }
    let path = Path::new(source);
    if path.is_dir() {
        // The path as the user meant it, links resolved once, here; the copy then
        // follows no link at all.
        let path = path.canonicalize().map_err(|error| format!("can't resolve it: {error}"))?;
        return Ok(if path.join(".git").exists() {
            Origin::Repository(local_repository(&path))
        } else {
            Origin::Directory(path)
        });
    }
    if git::is_scp_like(source) {
        return Ok(Origin::Repository(Repository { url: source.to_owned(), local: None, remote: true }));
    }
    Err("it is not a directory, a git repository or a git URL".into())
}

/// A hidden directory inside the skills root (so renames stay on one filesystem and
/// discovery skips it), removed when dropped.
struct Staging(PathBuf);

impl Staging {
    fn create(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or_default();
        let path = root.join(format!(".staging-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(Self(path))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(%error, path = %self.0.display(), "can't remove the skill staging directory");
        }
    }
}

fn install_inner(request: &InstallRequest, isolation: &dyn InstallIsolation) -> Result<Installed, InstallError> {
    let given = request.source.clone();
    let origin =
        classify(&request.source).map_err(|reason| InstallError::BadSource { given: given.clone(), reason })?;
    let write_error = |directory: &Path, error: std::io::Error| InstallError::Write {
        directory: directory.to_path_buf(),
        reason: error.to_string(),
    };
    let staging = Staging::create(&request.skills_root).map_err(|error| write_error(&request.skills_root, error))?;
    // The untrusted steps get their own directories; the copy goes where they never could.
    let fetch = staging.0.join("fetch");
    let scratch = staging.0.join("scratch");
    for directory in [&fetch, &scratch] {
        std::fs::create_dir(directory).map_err(|error| write_error(directory, error))?;
    }
    let fetched = match origin {
        Origin::Directory(path) => path,
        Origin::Repository(repository) => {
            let clone = fetch.join("clone");
            isolation
                .clone_repository(&repository, &fetch, &clone, request.git_timeout)
                .map_err(|error| InstallError::Fetch { given: given.clone(), reason: error.to_string() })?;
            clone
        }
    };
    let valid = isolation
        .validate(&fetched, &scratch)
        .map_err(|problems| InstallError::Invalid { given: given.clone(), problems })?;
    let name = valid.name.clone();
    let destination = request.skills_root.join(&name);
    let exists = destination.symlink_metadata().is_ok();
    if exists && !request.force {
        return Err(InstallError::AlreadyInstalled { name, directory: destination });
    }
    let copy = staging.0.join("skill");
    let copied =
        copy::copy(&fetched, &copy).map_err(|problems| InstallError::Invalid { given: given.clone(), problems })?;
    if copy.join(SKILL_FILE).symlink_metadata().map(|metadata| metadata.is_file()).ok() != Some(true) {
        let problems = vec![SkillProblem::new(&fetched, ProblemKind::MissingSkillFile)];
        return Err(InstallError::Invalid { given, problems });
    }
    let replaced = staging.0.join("replaced");
    if exists {
        std::fs::rename(&destination, &replaced).map_err(|error| write_error(&destination, error))?;
    }
    if let Err(error) = std::fs::rename(&copy, &destination) {
        if exists && let Err(restore) = std::fs::rename(&replaced, &destination) {
            tracing::error!(%restore, path = %destination.display(), "can't put the replaced skill back");
        }
        return Err(write_error(&destination, error));
    }
    Ok(Installed {
        name,
        description: valid.description,
        directory: destination,
        replaced: exists,
        files: copied.files,
        bytes: copied.bytes,
        backend: isolation.backend(),
        confined: isolation.confined(),
    })
}

#[cfg(test)]
mod tests;
