//! The skills shipped inside the binary, and writing them out (read-only) to a
//! directory so the file tools can read them and their paths can be shown to the model.

use std::io::Write;
use std::path::Path;

use crate::manifest::SKILL_FILE;
use crate::problem::{ProblemKind, SkillProblem};

/// One skill embedded at build time.
#[derive(Debug, Clone, Copy)]
pub struct BundledSkill {
    /// Its name (and directory).
    pub name: &'static str,
    /// The text of its `SKILL.md`.
    pub text: &'static str,
}

/// Version of the bundled set; callers keep each version in its own directory so two
/// installed versions never fight over the files.
pub const BUNDLED_VERSION: &str = env!("CARGO_PKG_VERSION");

macro_rules! bundled {
    ($($name:literal),* $(,)?) => {
        [$(BundledSkill { name: $name, text: include_str!(concat!("../bundled/", $name, "/SKILL.md")) }),*]
    };
}

/// Every bundled skill.
pub const BUNDLED: [BundledSkill; 10] = bundled![
    "code-review",
    "cron",
    "git",
    "github",
    "memory",
    "python",
    "research",
    "skill-creator",
    "summarize",
    "web-search",
];

/// Writes every bundled skill to `directory/<name>/SKILL.md` (read-only), leaving files
/// that already hold the right text alone. Each file is written to a temporary name and
/// renamed, so a reader never sees half a skill.
pub fn materialize(directory: &Path) -> Result<(), SkillProblem> {
    for skill in BUNDLED {
        let skill_directory = directory.join(skill.name);
        let file = skill_directory.join(SKILL_FILE);
        if std::fs::read(&file).is_ok_and(|current| current == skill.text.as_bytes()) {
            continue;
        }
        let problem = |error: std::io::Error| {
            SkillProblem::new(&file, ProblemKind::Unreadable(format!("can't write the bundled skill: {error}")))
        };
        std::fs::create_dir_all(&skill_directory).map_err(problem)?;
        let temporary = skill_directory.join(format!(".{SKILL_FILE}.{}.tmp", std::process::id()));
        let written = write_read_only(&temporary, skill.text).and_then(|()| std::fs::rename(&temporary, &file));
        if let Err(error) = written {
            if let Err(cleanup) = std::fs::remove_file(&temporary) {
                tracing::debug!(%cleanup, path = %temporary.display(), "can't remove a temporary file");
            }
            return Err(problem(error));
        }
    }
    Ok(())
}

fn write_read_only(path: &Path, text: &str) -> std::io::Result<()> {
    // A read-only leftover of a crashed run with the same process id would refuse creation.
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let mut file = std::fs::File::create(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    let mut permissions = file.metadata()?.permissions();
    permissions.set_readonly(true);
    file.set_permissions(permissions)
}
