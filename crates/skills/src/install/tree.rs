//! Walking an untrusted skill directory without following links: counts, sizes and
//! refusals for validation, and the same checks again while copying it.

use std::path::Path;

use super::{MAX_SKILL_BYTES, MAX_SKILL_DEPTH, MAX_SKILL_FILES};
use crate::problem::{ProblemKind, SkillProblem};

/// What a walk found.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Summary {
    /// Regular files.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
}

/// Walks `root`, recording every problem; stops early once a cap is exceeded.
pub(super) fn walk(root: &Path, problems: &mut Vec<SkillProblem>) -> Summary {
    let mut summary = Summary::default();
    visit(root, None, problems, &mut summary);
    summary
}

/// Copies `from` into the new directory `to` with the same checks as [`walk`], so files
/// swapped for links after validation are still refused.
pub(super) fn copy(from: &Path, to: &Path) -> Result<Summary, Vec<SkillProblem>> {
    let mut problems = Vec::new();
    let mut summary = Summary::default();
    visit(from, Some(to), &mut problems, &mut summary);
    if problems.is_empty() { Ok(summary) } else { Err(problems) }
}

fn visit(root: &Path, destination: Option<&Path>, problems: &mut Vec<SkillProblem>, summary: &mut Summary) {
    let io_problem =
        |path: &Path, error: std::io::Error| SkillProblem::new(path, ProblemKind::Unreadable(error.to_string()));
    if let Some(destination) = destination
        && let Err(error) = std::fs::create_dir(destination)
    {
        problems.push(io_problem(destination, error));
        return;
    }
    let mut pending = vec![(root.to_path_buf(), destination.map(Path::to_path_buf), 0_usize)];
    while let Some((directory, target, depth)) = pending.pop() {
        let entries = match std::fs::read_dir(&directory) {
            Ok(entries) => entries,
            Err(error) => {
                problems.push(io_problem(&directory, error));
                continue;
            }
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name();
            if depth == 0 && name == ".git" {
                continue;
            }
            let path = entry.path();
            let target = target.as_ref().map(|target| target.join(&name));
            let metadata = match std::fs::symlink_metadata(&path) {
                Ok(metadata) => metadata,
                Err(error) => {
                    problems.push(io_problem(&path, error));
                    continue;
                }
            };
            let kind = metadata.file_type();
            if kind.is_symlink() {
                problems.push(SkillProblem::new(&path, ProblemKind::Symlink));
            } else if kind.is_dir() {
                if depth + 1 > MAX_SKILL_DEPTH {
                    let limit = format!("directories are nested more than {MAX_SKILL_DEPTH} deep");
                    problems.push(SkillProblem::new(&path, ProblemKind::OverLimit(limit)));
                    return;
                }
                if let Some(target) = &target
                    && let Err(error) = std::fs::create_dir(target)
                {
                    problems.push(io_problem(target, error));
                    return;
                }
                pending.push((path, target, depth + 1));
            } else if kind.is_file() {
                summary.files += 1;
                summary.bytes += metadata.len();
                if summary.files > MAX_SKILL_FILES {
                    let limit = format!("the skill has more than {MAX_SKILL_FILES} files");
                    problems.push(SkillProblem::new(root, ProblemKind::OverLimit(limit)));
                    return;
                }
                if summary.bytes > MAX_SKILL_BYTES {
                    let limit = format!("the skill's files total more than {MAX_SKILL_BYTES} bytes");
                    problems.push(SkillProblem::new(root, ProblemKind::OverLimit(limit)));
                    return;
                }
                if let Some(target) = &target
                    && let Err(error) = copy_file(&path, target)
                {
                    problems.push(io_problem(&path, error));
                    return;
                }
            } else {
                problems.push(SkillProblem::new(&path, ProblemKind::SpecialFile));
            }
        }
    }
}

/// Copies one file, keeping only its read/write/execute bits (no setuid, setgid, sticky).
fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(to)?.permissions().mode() & 0o777;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}
