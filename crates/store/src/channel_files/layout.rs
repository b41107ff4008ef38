//! Where a person's and a group's own files are: `<home>/users/<id>/` and
//! `<home>/groups/<id>/`, each holding `USER.md` (a person's) or `GROUP.md` (a group's),
//! `HEARTBEAT.md`, `memory.md`, `skills/` and `workspace/`; the ids encoded like session
//! keys. Also their HEARTBEAT.md files for the heartbeat syncs (core's
//! [`ContextHeartbeatFiles`]) and their skills directories. The owner keeps the main
//! workspace and `<home>/memory/owner/` instead.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use squidbot_core::workspace::{ContextHeartbeatFiles, ContextKind, WatchedFile, WatchedFileError};

use crate::key::{decode_key, encode_key};
use crate::watched_file::FsWatchedFile;

/// The heartbeat file in a context's directory.
pub(crate) const HEARTBEAT_FILE: &str = "HEARTBEAT.md";

/// The memory document in a context's directory.
pub(crate) const MEMORY_FILE: &str = "memory.md";

/// The directory of a context's own skills.
pub(crate) const SKILLS_DIRECTORY: &str = "skills";

/// The context's workspace directory.
pub(crate) const WORKSPACE_DIRECTORY: &str = "workspace";

/// The directory under the home of each kind, and the prefix of its contexts.
const KINDS: [(ContextKind, &str, &str); 2] =
    [(ContextKind::Person, "users", "user:"), (ContextKind::Group, "groups", "group:")];

/// The directory of `context` under `home` and whose it is: `<home>/users/<id>` for
/// `user:<id>`, `<home>/groups/<id>` for `group:<id>`, `None` for any other context (the
/// owner). The id is encoded like a session key, so no context names a path outside
/// `home`.
pub(crate) fn context_root(home: &Path, context: &str) -> Result<Option<(ContextKind, PathBuf)>, String> {
    for (kind, parent, prefix) in KINDS {
        if let Some(id) = context.strip_prefix(prefix) {
            let id = encode_key(id).map_err(|error| error.to_string())?;
            return Ok(Some((kind, home.join(parent).join(id))));
        }
    }
    Ok(None)
}

/// The context whose directory under `home` is `<parent>/<name>`, when the name is one
/// [`context_root`] makes.
fn context_of(prefix: &str, name: &str) -> Option<String> {
    decode_key(name).map(|id| format!("{prefix}{id}"))
}

/// The skill directories of a person's or a group's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextSkillPaths {
    /// A person's or a group's.
    pub kind: ContextKind,
    /// Its own skills: `users/<id>/skills`, `groups/<id>/skills`.
    pub own: PathBuf,
    /// The skills in its workspace: `users/<id>/workspace/skills`, ….
    pub workspace: PathBuf,
}

/// The skill directories of `context` under `home`, which need not exist; `None` for
/// the owner and ids that can't be directory names.
pub fn context_skill_paths(home: &Path, context: &str) -> Option<ContextSkillPaths> {
    let (kind, root) = context_root(home, context).ok().flatten()?;
    Some(ContextSkillPaths {
        kind,
        own: root.join(SKILLS_DIRECTORY),
        workspace: root.join(WORKSPACE_DIRECTORY).join(SKILLS_DIRECTORY),
    })
}

/// Every `users/<id>/skills` and `groups/<id>/skills` directory under `home` now, in
/// order; unreadable directories are skipped.
pub fn context_skill_directories(home: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for (_, parent, prefix) in KINDS {
        let Ok(entries) = std::fs::read_dir(home.join(parent)) else { continue };
        for entry in entries.flatten() {
            let skills = entry.path().join(SKILLS_DIRECTORY);
            let named = entry.file_name().to_str().is_some_and(|name| context_of(prefix, name).is_some());
            if named && skills.is_dir() {
                found.push(skills);
            }
        }
    }
    found.sort();
    found
}

/// The HEARTBEAT.md files of `<home>/users/*/` and `<home>/groups/*/`.
#[derive(Debug, Clone)]
pub struct ContextHeartbeats {
    home: PathBuf,
}

impl ContextHeartbeats {
    /// The files under `home`.
    pub fn new(home: &Path) -> Self {
        Self { home: home.to_path_buf() }
    }
}

impl ContextHeartbeatFiles for ContextHeartbeats {
    /// One `read_dir` per kind and one `stat` per context directory.
    fn contexts(&self) -> Result<Vec<String>, WatchedFileError> {
        let mut contexts = Vec::new();
        for (_, parent, prefix) in KINDS {
            let directory = self.home.join(parent);
            let entries = match std::fs::read_dir(&directory) {
                Ok(entries) => entries,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => {
                    return Err(WatchedFileError::Unreadable {
                        location: directory.display().to_string(),
                        reason: error.to_string(),
                    });
                }
            };
            for entry in entries.flatten() {
                let Some(context) = entry.file_name().to_str().and_then(|name| context_of(prefix, name)) else {
                    continue;
                };
                if entry.path().join(HEARTBEAT_FILE).is_file() {
                    contexts.push(context);
                }
            }
        }
        contexts.sort();
        Ok(contexts)
    }

    fn file(&self, context: &str) -> Option<Arc<dyn WatchedFile>> {
        let (_, root) = context_root(&self.home, context).ok().flatten()?;
        Some(Arc::new(FsWatchedFile::new(root.join(HEARTBEAT_FILE))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_files_are_found_per_person_and_group_and_stray_directories_are_not() {
        let home = tempfile::tempdir().unwrap();
        let write = |relative: &str| {
            let path = home.path().join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "- check\n").unwrap();
        };
        let heartbeats = ContextHeartbeats::new(home.path());
        assert_eq!(heartbeats.contexts().unwrap(), Vec::<String>::new(), "no users/ nor groups/ yet");
        write("users/bob/HEARTBEAT.md");
        write("users/carol/USER.md");
        write("groups/telegram:-100/HEARTBEAT.md");
        write("users/not%zzencoded/HEARTBEAT.md");
        write("users/bob/skills/plants/SKILL.md");
        std::fs::create_dir_all(home.path().join("groups/slack:C1/skills")).unwrap();
        assert_eq!(heartbeats.contexts().unwrap(), ["group:telegram:-100", "user:bob"]);
        let bob = heartbeats.file("user:bob").unwrap();
        assert_eq!(bob.location(), home.path().join("users/bob/HEARTBEAT.md").display().to_string());
        assert!(bob.stamp().unwrap().is_some());
        assert!(heartbeats.file("user:carol").unwrap().stamp().unwrap().is_none());
        assert!(heartbeats.file("owner").is_none());
        assert_eq!(
            context_skill_directories(home.path()),
            [home.path().join("groups/slack:C1/skills"), home.path().join("users/bob/skills")]
        );
        let bob = context_skill_paths(home.path(), "user:bob").unwrap();
        assert_eq!((bob.kind, bob.own), (ContextKind::Person, home.path().join("users/bob/skills")));
        assert_eq!(bob.workspace, home.path().join("users/bob/workspace/skills"));
        assert_eq!(context_skill_paths(home.path(), "group:x").map(|paths| paths.kind), Some(ContextKind::Group));
        assert_eq!(context_skill_paths(home.path(), "owner"), None);
    }
}
