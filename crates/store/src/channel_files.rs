//! The files the chat channels make: inbound attachments saved under their session's
//! data directory (core's [`AttachmentStore`]), the directories of user and group
//! contexts with their workspaces (core's [`ContextWorkspaces`]; the layout in `layout`),
//! and moving or deleting a context's files when contexts are merged or purged (`moves`).

mod layout;
mod moves;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use squidbot_core::attachments::{Attachment, AttachmentData, AttachmentError, AttachmentStore};
use squidbot_core::clock::{Clock, SystemClock};
use squidbot_core::workspace::{
    ContextKind, ContextProfile, ContextWorkspace, ContextWorkspaceError, ContextWorkspaces,
};

use crate::key::encode_key;
use crate::workspace::FsWorkspace;
pub use layout::{ContextHeartbeats, ContextSkillPaths, context_skill_directories, context_skill_paths};
pub(crate) use layout::{MEMORY_FILE, SKILLS_DIRECTORY, WORKSPACE_DIRECTORY, context_root};
pub(crate) use moves::{move_files, remove_files};

/// Prompt files a new user or group workspace starts with, copied from the owner's: who
/// the assistant is and how it works, not who the owner is (`USER.md`, `MEMORY.md` and
/// `HEARTBEAT.md` stay the owner's).
const SHARED_PROMPT_FILES: [&str; 4] = ["SOUL.md", "IDENTITY.md", "AGENTS.md", "TOOLS.md"];

/// Longest file name kept from a sender's attachment name.
const MAX_NAME_CHARS: usize = 80;

/// Context workspaces kept open at most (each caches its prompt files); past it the ones
/// nobody holds are dropped, and a dropped one opens again on its next use.
const MAX_OPEN_CONTEXTS: usize = 256;

/// Saves attachments to `<sessions>/<session>.files/<time>-<name>`.
#[derive(Debug, Clone)]
pub struct SessionFiles {
    sessions: PathBuf,
}

impl SessionFiles {
    /// Attachments kept beside the session files in `sessions`.
    pub fn new(sessions: PathBuf) -> Self {
        Self { sessions }
    }
}

/// A sender's file name made safe: letters, digits, `.`, `-`, `_` kept, anything else
/// `_`, no leading dot, at most [`MAX_NAME_CHARS`].
fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(name)
        .chars()
        .map(|character| if character.is_ascii_alphanumeric() || "._-".contains(character) { character } else { '_' })
        .take(MAX_NAME_CHARS)
        .collect();
    let trimmed = cleaned.trim_start_matches('.');
    if trimmed.is_empty() { "attachment".to_owned() } else { trimmed.to_owned() }
}

impl AttachmentStore for SessionFiles {
    fn save(&self, session_key: &str, attachment: &Attachment) -> Result<PathBuf, AttachmentError> {
        let stem = encode_key(session_key).map_err(|error| AttachmentError::InvalidSession(error.to_string()))?;
        let directory = self.sessions.join(format!("{stem}.files"));
        std::fs::create_dir_all(&directory)
            .map_err(|error| AttachmentError::Io { path: directory.clone(), reason: error.to_string() })?;
        let stamp = SystemClock.unix_millis();
        let path = directory.join(format!("{stamp}-{}", safe_name(&attachment.name)));
        match &attachment.data {
            AttachmentData::Bytes(bytes) => std::fs::write(&path, bytes),
            AttachmentData::Path(source) => std::fs::copy(source, &path).map(drop),
        }
        .map_err(|error| AttachmentError::Io { path: path.clone(), reason: error.to_string() })?;
        Ok(path)
    }
}

/// User contexts work in `<home>/users/<id>/workspace`, groups in
/// `<home>/groups/<id>/workspace`, and their prompts read `USER.md` or `GROUP.md` from
/// the directory above; the owner works in the main workspace.
pub struct ContextDirectories {
    home: PathBuf,
    owner_workspace: PathBuf,
    open: Mutex<HashMap<String, ContextWorkspace>>,
}

impl ContextDirectories {
    /// Directories under `home`, new workspaces seeded from `owner_workspace`.
    pub fn new(home: &Path, owner_workspace: &Path) -> Self {
        Self {
            home: home.to_path_buf(),
            owner_workspace: owner_workspace.to_path_buf(),
            open: Mutex::new(HashMap::new()),
        }
    }

    fn root_of(&self, context: &str) -> Result<Option<(ContextKind, PathBuf)>, ContextWorkspaceError> {
        context_root(&self.home, context).map_err(ContextWorkspaceError::InvalidId)
    }
}

impl ContextWorkspaces for ContextDirectories {
    fn workspace(&self, context: &str) -> Result<Option<ContextWorkspace>, ContextWorkspaceError> {
        if let Some(open) = squidbot_core::sync::lock(&self.open).get(context) {
            return Ok(Some(open.clone()));
        }
        let Some((kind, root)) = self.root_of(context)? else { return Ok(None) };
        let directory = root.join(WORKSPACE_DIRECTORY);
        for made in [&directory, &root.join(SKILLS_DIRECTORY)] {
            std::fs::create_dir_all(made)
                .map_err(|error| ContextWorkspaceError::Io { path: made.clone(), reason: error.to_string() })?;
        }
        for name in SHARED_PROMPT_FILES {
            let target = directory.join(name);
            let source = self.owner_workspace.join(name);
            if !target.exists() && source.is_file() {
                std::fs::copy(&source, &target).map_err(|error| ContextWorkspaceError::Io {
                    path: target.clone(),
                    reason: format!("copying {} failed: {error}", source.display()),
                })?;
            }
        }
        let workspace = ContextWorkspace {
            path: directory.clone(),
            files: Arc::new(FsWorkspace::new(directory)),
            profile: Some(ContextProfile { kind, files: Arc::new(FsWorkspace::new(root)) }),
        };
        let mut open = squidbot_core::sync::lock(&self.open);
        if open.len() >= MAX_OPEN_CONTEXTS {
            open.retain(|_, workspace| Arc::strong_count(&workspace.files) > 1);
        }
        if open.len() >= MAX_OPEN_CONTEXTS {
            // All held: still bounded; the holders keep theirs, the next use opens anew.
            open.clear();
        }
        open.insert(context.to_owned(), workspace.clone());
        Ok(Some(workspace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_file_names_cannot_escape_or_hide() {
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("..\\..\\boot.ini"), "boot.ini");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("my photo (1).jpg"), "my_photo__1_.jpg");
        assert_eq!(safe_name(""), "attachment");
        assert_eq!(safe_name(&"a".repeat(500)).len(), MAX_NAME_CHARS);
    }

    #[test]
    fn attachments_land_beside_their_session() {
        let home = tempfile::tempdir().unwrap();
        let files = SessionFiles::new(home.path().join("sessions"));
        let attachment =
            Attachment { name: "../x.png".into(), mime: "image/png".into(), data: AttachmentData::Bytes(vec![7; 3]) };
        let path = files.save("telegram:42", &attachment).unwrap();
        assert!(path.starts_with(home.path().join("sessions").join("telegram:42.files")), "{}", path.display());
        assert!(path.file_name().unwrap().to_string_lossy().ends_with("-x.png"));
        assert_eq!(std::fs::read(&path).unwrap(), vec![7; 3]);
    }

    #[test]
    fn a_user_context_gets_its_own_workspace_without_the_owners_private_files() {
        let home = tempfile::tempdir().unwrap();
        let owner = home.path().join("workspace");
        std::fs::create_dir_all(&owner).unwrap();
        std::fs::write(owner.join("SOUL.md"), "be kind").unwrap();
        std::fs::write(owner.join("USER.md"), "the owner's private notes").unwrap();
        let directories = ContextDirectories::new(home.path(), &owner);
        assert!(directories.workspace("owner").unwrap().is_none());
        let user = directories.workspace("user:telegram:42").unwrap().unwrap();
        assert_eq!(user.path, home.path().join("users").join("telegram:42").join("workspace"));
        assert_eq!(user.files.read("SOUL.md").as_deref(), Some("be kind"));
        assert_eq!(user.files.read("USER.md"), None);
        let group = directories.workspace("group:slack:C1").unwrap().unwrap();
        assert!(group.path.starts_with(home.path().join("groups")));
    }

    #[test]
    fn a_context_directory_holds_its_profile_skills_and_workspace() {
        let home = tempfile::tempdir().unwrap();
        let owner = home.path().join("workspace");
        std::fs::create_dir_all(&owner).unwrap();
        std::fs::write(owner.join("USER.md"), "the owner's private notes").unwrap();
        let directories = ContextDirectories::new(home.path(), &owner);
        let bob = directories.workspace("user:bob").unwrap().unwrap();
        let root = home.path().join("users").join("bob");
        assert_eq!(bob.path, root.join("workspace"));
        assert!(root.join("skills").is_dir(), "its skills directory is made with it");
        std::fs::write(root.join("USER.md"), "Bob plays chess").unwrap();
        std::fs::write(bob.path.join("USER.md"), "a copy in the workspace").unwrap();
        let profile = bob.profile.clone().unwrap();
        assert_eq!(profile.kind, ContextKind::Person);
        use squidbot_core::workspace::WorkspaceFiles as _;
        assert_eq!(bob.prompt_files().read("USER.md").as_deref(), Some("Bob plays chess"));

        let group = directories.workspace("group:telegram:-100").unwrap().unwrap();
        let root = home.path().join("groups").join("telegram:-100");
        std::fs::write(root.join("GROUP.md"), "the chess club").unwrap();
        assert_eq!(group.profile.as_ref().map(|profile| profile.kind), Some(ContextKind::Group));
        assert_eq!(group.prompt_files().read("GROUP.md").as_deref(), Some("the chess club"));
        assert_eq!(group.prompt_files().read("USER.md"), None);
    }

    #[test]
    fn open_context_workspaces_stay_bounded_and_a_dropped_one_opens_again() {
        let home = tempfile::tempdir().unwrap();
        let owner = home.path().join("workspace");
        std::fs::create_dir_all(&owner).unwrap();
        let directories = ContextDirectories::new(home.path(), &owner);
        let held = directories.workspace("user:telegram:0").unwrap().unwrap();
        std::fs::write(held.path.join("USER.md"), "first person").unwrap();
        for index in 1..(3 * MAX_OPEN_CONTEXTS) {
            directories.workspace(&format!("user:telegram:{index}")).unwrap().unwrap();
            let open = directories.open.lock().unwrap().len();
            assert!(open <= MAX_OPEN_CONTEXTS, "{open} open after {index}");
        }
        assert!(directories.open.lock().unwrap().contains_key("user:telegram:0"), "a held one stays");
        let again = directories.workspace("user:telegram:1").unwrap().unwrap();
        assert_eq!(again.path, home.path().join("users").join("telegram:1").join("workspace"));
        assert_eq!(held.files.read("USER.md").as_deref(), Some("first person"));
    }
}
