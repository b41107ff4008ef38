//! Walking an untrusted skill directory without following links: counts, sizes and
//! refusals for validation (in the validator process). Copying is in `copy`.

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
    visit(root, problems, &mut summary);
    summary
}

fn visit(root: &Path, problems: &mut Vec<SkillProblem>, summary: &mut Summary) {
    let io_problem =
        |path: &Path, error: std::io::Error| SkillProblem::new(path, ProblemKind::Unreadable(error.to_string()));
    let mut pending = vec![(root.to_path_buf(), 0_usize)];
    while let Some((directory, depth)) = pending.pop() {
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
                pending.push((path, depth + 1));
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
            } else {
                problems.push(SkillProblem::new(&path, ProblemKind::SpecialFile));
            }
        }
    }
}
