//! What can be wrong with a skill on disk: one `SkillProblem` names the file and the
//! reason, so a malformed skill is skipped with a warning instead of failing a turn.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a skill (or a file of one) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemKind {
    /// The file could not be read.
    #[error("can't read it: {0}")]
    Unreadable(String),
    /// The file is not UTF-8 text.
    #[error("it is not UTF-8 text")]
    NotText,
    /// `SKILL.md` is larger than the cap.
    #[error("it is {size} bytes, more than the {cap} allowed for SKILL.md")]
    TooLarge {
        /// Size found.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// No `---` line opens the file, or none closes the frontmatter.
    #[error("{0}")]
    NoFrontmatter(&'static str),
    /// The YAML between the `---` lines does not parse or has the wrong shape.
    #[error("broken YAML frontmatter: {0}")]
    BrokenYaml(String),
    /// `name` breaks the naming rules.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name as written.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// `name` differs from the directory holding the skill.
    #[error("name {name:?} does not match its directory {directory:?}")]
    NameMismatch {
        /// The name as written.
        name: String,
        /// The directory's name.
        directory: String,
    },
    /// `description` is missing, empty or too long.
    #[error("{0}")]
    InvalidDescription(String),
    /// `addons` has the wrong shape or names a variable a skill may not set.
    #[error("invalid addons: {0}")]
    InvalidAddons(String),
    /// A skill directory holds a symbolic link.
    #[error("symbolic links are not allowed in a skill")]
    Symlink,
    /// A skill directory holds a device, FIFO or socket.
    #[error("only regular files and directories are allowed in a skill")]
    SpecialFile,
    /// The skill directory is over a size, count or depth cap.
    #[error("{0}")]
    OverLimit(String),
    /// The directory has no `SKILL.md`.
    #[error("there is no SKILL.md")]
    MissingSkillFile,
    /// What the confined validator process said (it reports problems as text).
    #[error("{0}")]
    Reported(String),
}

/// A problem with one file or directory of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillProblem {
    /// The file or directory at fault.
    pub path: PathBuf,
    /// What is wrong with it.
    pub kind: ProblemKind,
}

impl SkillProblem {
    /// A problem with `path`.
    pub fn new(path: impl Into<PathBuf>, kind: ProblemKind) -> Self {
        Self { path: path.into(), kind }
    }

    /// The path at fault.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for SkillProblem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.path.display(), self.kind)
    }
}

impl std::error::Error for SkillProblem {}
