//! Copying a validated skill into place without trusting that it is still what was
//! validated: every directory and file is opened relative to its already-open parent with
//! `O_NOFOLLOW`, and its type is checked on the open descriptor, so a file swapped for a
//! symlink (or a directory for a link to `/`) after validation is refused, not followed.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

use super::tree::Summary;
use super::{MAX_SKILL_BYTES, MAX_SKILL_DEPTH, MAX_SKILL_FILES};
use crate::problem::{ProblemKind, SkillProblem};

/// Copies the skill in `from` into the new directory `to`, with the validator's caps and
/// refusals checked again on what is actually read. A top-level `.git` is left out.
pub(super) fn copy(from: &Path, to: &Path) -> Result<Summary, Vec<SkillProblem>> {
    let mut copier = Copier { summary: Summary::default(), problems: Vec::new() };
    let root = match open(from, directory_flags(), Mode::empty()) {
        Ok(root) => root,
        Err(Errno::ELOOP | Errno::ENOTDIR) => return Err(vec![SkillProblem::new(from, ProblemKind::Symlink)]),
        Err(error) => return Err(vec![unreadable(from, error)]),
    };
    if let Err(error) = std::fs::create_dir(to) {
        return Err(vec![SkillProblem::new(to, ProblemKind::Unreadable(error.to_string()))]);
    }
    copier.directory(root, from, to, 0);
    if copier.problems.is_empty() { Ok(copier.summary) } else { Err(copier.problems) }
}

fn directory_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn unreadable(path: &Path, error: impl std::fmt::Display) -> SkillProblem {
    SkillProblem::new(path, ProblemKind::Unreadable(error.to_string()))
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

struct Copier {
    summary: Summary,
    problems: Vec<SkillProblem>,
}

impl Copier {
    /// Copies the open directory `descriptor` (at `source`) into the existing `target`;
    /// stops at the first problem.
    fn directory(&mut self, descriptor: OwnedFd, source: &Path, target: &Path, depth: usize) {
        let mut directory = match Dir::from_fd(descriptor) {
            Ok(directory) => directory,
            Err(error) => return self.problems.push(unreadable(source, error)),
        };
        let mut names: Vec<CString> = Vec::new();
        for entry in directory.iter() {
            match entry {
                Ok(entry) if is_dot(entry.file_name()) => {}
                Ok(entry) => names.push(entry.file_name().to_owned()),
                Err(error) => return self.problems.push(unreadable(source, error)),
            }
        }
        names.sort();
        for name in names {
            let os_name = OsStr::from_bytes(name.to_bytes());
            if depth == 0 && os_name == ".git" {
                continue;
            }
            let path = source.join(os_name);
            let destination = target.join(os_name);
            if let Err(problem) = self.entry(&directory, &name, &path, &destination, depth) {
                return self.problems.push(problem);
            }
        }
    }

    fn entry(
        &mut self,
        parent: &Dir,
        name: &CStr,
        path: &Path,
        destination: &Path,
        depth: usize,
    ) -> Result<(), SkillProblem> {
        let seen =
            fstatat(parent.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|error| unreadable(path, error))?;
        match kind(&seen) {
            SFlag::S_IFLNK => Err(SkillProblem::new(path, ProblemKind::Symlink)),
            SFlag::S_IFDIR => {
                if depth + 1 > MAX_SKILL_DEPTH {
                    let limit = format!("directories are nested more than {MAX_SKILL_DEPTH} deep");
                    return Err(SkillProblem::new(path, ProblemKind::OverLimit(limit)));
                }
                let descriptor = self.open(parent, name, path, directory_flags())?;
                let opened = fstat(&descriptor).map_err(|error| unreadable(path, error))?;
                if kind(&opened) != SFlag::S_IFDIR {
                    return Err(SkillProblem::new(path, ProblemKind::Symlink));
                }
                std::fs::create_dir(destination).map_err(|error| unreadable(destination, error))?;
                self.directory(descriptor, path, destination, depth + 1);
                Ok(())
            }
            SFlag::S_IFREG => {
                // Non-blocking, so a file swapped for a FIFO can't hang the open.
                let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
                let descriptor = self.open(parent, name, path, flags)?;
                let opened = fstat(&descriptor).map_err(|error| unreadable(path, error))?;
                if kind(&opened) != SFlag::S_IFREG {
                    return Err(SkillProblem::new(path, ProblemKind::SpecialFile));
                }
                self.file(File::from(descriptor), opened.st_mode, path, destination)
            }
            _ => Err(SkillProblem::new(path, ProblemKind::SpecialFile)),
        }
    }

    fn open(&self, parent: &Dir, name: &CStr, path: &Path, flags: OFlag) -> Result<OwnedFd, SkillProblem> {
        openat(parent.as_fd(), name, flags, Mode::empty()).map_err(|error| match error {
            // Swapped for a link since the look a moment ago.
            Errno::ELOOP | Errno::ENOTDIR => SkillProblem::new(path, ProblemKind::Symlink),
            error => unreadable(path, error),
        })
    }

    /// Copies one file's content, keeping only its read/write/execute bits (no setuid,
    /// setgid, sticky), reading at most what the size cap leaves.
    fn file(&mut self, source: File, mode: u32, path: &Path, destination: &Path) -> Result<(), SkillProblem> {
        self.summary.files += 1;
        if self.summary.files > MAX_SKILL_FILES {
            let limit = format!("the skill has more than {MAX_SKILL_FILES} files");
            return Err(SkillProblem::new(path, ProblemKind::OverLimit(limit)));
        }
        let allowance = MAX_SKILL_BYTES - self.summary.bytes;
        let mut target = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(destination)
            .map_err(|error| unreadable(destination, error))?;
        // One byte past the allowance tells a file that grew over the cap.
        let copied =
            std::io::copy(&mut source.take(allowance + 1), &mut target).map_err(|error| unreadable(path, error))?;
        if copied > allowance {
            let limit = format!("the skill's files total more than {MAX_SKILL_BYTES} bytes");
            return Err(SkillProblem::new(path, ProblemKind::OverLimit(limit)));
        }
        self.summary.bytes += copied;
        target
            .set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
            .map_err(|error| unreadable(destination, error))
    }
}

fn is_dot(name: &CStr) -> bool {
    matches!(name.to_bytes(), b"." | b"..")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn paths(problems: &[SkillProblem]) -> Vec<PathBuf> {
        problems.iter().map(|problem| problem.path.clone()).collect()
    }

    #[test]
    fn files_and_directories_are_copied_without_special_bits() {
        let source = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(source.path().join("scripts/deep")).unwrap();
        std::fs::create_dir_all(source.path().join(".git/objects")).unwrap();
        std::fs::write(source.path().join("SKILL.md"), "skill").unwrap();
        std::fs::write(source.path().join("scripts/deep/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(source.path().join("scripts/deep/run.sh"), std::fs::Permissions::from_mode(0o4755))
            .unwrap();
        let target = tempfile::tempdir().unwrap();
        let copied = target.path().join("skill");
        let summary = copy(source.path(), &copied).unwrap();
        assert_eq!((summary.files, summary.bytes), (2, 15));
        assert_eq!(std::fs::read_to_string(copied.join("SKILL.md")).unwrap(), "skill");
        let mode = std::fs::metadata(copied.join("scripts/deep/run.sh")).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o755);
        assert!(!copied.join(".git").exists());
    }

    #[test]
    fn links_anywhere_in_the_tree_are_refused_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        for (name, link_to_directory) in [("file-link", false), ("sub/dir-link", true)] {
            let source = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(source.path().join("sub")).unwrap();
            std::fs::write(source.path().join("SKILL.md"), "skill").unwrap();
            let target = if link_to_directory { outside.path().to_path_buf() } else { outside.path().join("secret") };
            std::os::unix::fs::symlink(target, source.path().join(name)).unwrap();
            let destination = tempfile::tempdir().unwrap();
            let problems = copy(source.path(), &destination.path().join("skill")).unwrap_err();
            assert_eq!(paths(&problems), [source.path().join(name)]);
            assert_eq!(problems[0].kind, ProblemKind::Symlink);
        }
        // The root itself swapped for a link.
        let link = outside.path().join("root-link");
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        let destination = tempfile::tempdir().unwrap();
        let problems = copy(&link, &destination.path().join("skill")).unwrap_err();
        assert_eq!(problems[0].kind, ProblemKind::Symlink);
    }

    #[test]
    fn fifos_are_refused_without_hanging() {
        let source = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&source.path().join("pipe"), Mode::from_bits_truncate(0o600)).unwrap();
        let destination = tempfile::tempdir().unwrap();
        let problems = copy(source.path(), &destination.path().join("skill")).unwrap_err();
        assert_eq!(problems[0].kind, ProblemKind::SpecialFile);
    }
}
