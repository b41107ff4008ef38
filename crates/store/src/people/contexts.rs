//! Whole memory contexts merged and purged: `squidbot users link` joins what a stranger
//! said and kept (their memories, sessions, memory document, workspace, usage) to the
//! user they turn out to be, and `users purge` deletes a person's (their directory
//! `users/<id>/` included). The database moves in
//! one transaction first; the files follow, each step safe to run again, so a merge cut
//! short is finished by running it again and loses nothing.
//!
//! Both run while the gateway does not write to the context (stop it, or run them when
//! the person is idle): the session files are not locked against other processes.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use squidbot_core::people::{OWNER_CONTEXT, PeopleStoreError};

use super::usage::delete_usage_of;
use super::{failed, write};
use crate::channel_files::{WORKSPACE_DIRECTORY, context_root, move_files, remove_files};
use crate::database::Database;
use crate::jsonl::{move_context_sessions, remove_context_sessions};
use crate::memory_documents::FsMemoryDocuments;
use crate::memory_store::{delete_context_memories, move_context_memories};

/// Where one squidbot home keeps the files of its memory contexts: session files in
/// `<home>/sessions`; the directories of `user:` and `group:` contexts (`USER.md` or
/// `GROUP.md`, `HEARTBEAT.md`, `memory.md`, `skills/`, `workspace/`) in `<home>/users`
/// and `<home>/groups`; the owner's files in the main workspace and its memory document
/// in `<home>/memory`.
#[derive(Debug, Clone)]
pub struct ContextPaths {
    home: PathBuf,
    owner_workspace: PathBuf,
}

impl ContextPaths {
    /// The files of `home`, the owner working in `owner_workspace`.
    pub fn new(home: &Path, owner_workspace: &Path) -> Self {
        Self { home: home.to_path_buf(), owner_workspace: owner_workspace.to_path_buf() }
    }

    fn sessions(&self) -> PathBuf {
        self.home.join("sessions")
    }

    fn documents(&self) -> FsMemoryDocuments {
        FsMemoryDocuments::new(self.home.join("memory"))
    }

    /// Where the files of `context` are; `None` for contexts without any.
    fn files(&self, context: &str) -> Result<Option<ContextFiles>, String> {
        if context == OWNER_CONTEXT {
            return Ok(Some(ContextFiles::Owner(self.owner_workspace.clone())));
        }
        Ok(context_root(&self.home, context)?.map(|(_, root)| ContextFiles::Directory(root)))
    }
}

/// Where a context keeps its files.
#[derive(Debug, Clone)]
enum ContextFiles {
    /// A person's or group's directory: `USER.md` or `GROUP.md`, `HEARTBEAT.md`,
    /// `memory.md`, `skills/`, `workspace/`.
    Directory(PathBuf),
    /// The owner's: everything in the main workspace.
    Owner(PathBuf),
}

impl ContextFiles {
    fn path(&self) -> &Path {
        match self {
            ContextFiles::Directory(path) | ContextFiles::Owner(path) => path,
        }
    }
}

/// What a merge moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeSummary {
    /// Memories (with their vectors and links).
    pub memories: usize,
    /// Session files whose header now names the new context.
    pub sessions: usize,
    /// Files of the context's directory: its workspace, `USER.md`, `HEARTBEAT.md`, its
    /// skills (a file the target already held byte for byte counts too).
    pub files: usize,
    /// Scheduled jobs of the person (`squidbot cron`, the cron tool).
    pub jobs: usize,
    /// Usage records.
    pub usage: usize,
    /// Whether a memory document was appended to the new context's.
    pub document: bool,
}

/// What a purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeSummary {
    /// Memories.
    pub memories: usize,
    /// Session files (with their attachments).
    pub sessions: usize,
    /// Files of the context's directory: its workspace, `USER.md` or `GROUP.md`,
    /// `HEARTBEAT.md`, its skills.
    pub files: usize,
    /// Scheduled jobs.
    pub jobs: usize,
    /// Usage records.
    pub usage: usize,
    /// Whether the memory document was deleted.
    pub document: bool,
}

/// Moves everything of memory context `from` into `to`: memories (with vectors, links
/// and the per-context counters), the session index and the session files' headers, the
/// person's scheduled jobs (heartbeat and system jobs stay with the files that make
/// them), usage records, the memory document (appended to `to`'s under
/// `## Merged from <from>`) and the files of `from`'s directory (never overwriting: a
/// clash is kept as `<name>.merged`): into `to`'s directory, or for the owner the
/// workspace's files into the main workspace and the rest (`USER.md`, `HEARTBEAT.md`,
/// `skills/`) beside them. A `HEARTBEAT.md` that moves takes its heartbeats along at the
/// gateway's next look. `from`'s memory bulletin is dropped; `to`'s is rebuilt because
/// its memories changed. The users table is the caller's: whoever had `from` as their
/// context keeps it.
pub fn merge_context(
    database: &Database,
    paths: &ContextPaths,
    from: &str,
    to: &str,
) -> Result<MergeSummary, PeopleStoreError> {
    let action = format!("merge the context {from} into {to}");
    let refuse = |reason: &str| Err(PeopleStoreError::new(&action, reason));
    if from.is_empty() || to.is_empty() {
        return refuse("a context name can't be empty");
    }
    if from == to {
        return refuse("they are the same context");
    }
    if from == OWNER_CONTEXT {
        return refuse("the owner's context is never merged away");
    }
    let fail = |reason: String| PeopleStoreError::new(&action, reason);
    let directories = match (paths.files(from).map_err(fail)?, paths.files(to).map_err(fail)?) {
        (Some(source), Some(target)) => Some((source, target)),
        (Some(source), None) if source.path().exists() => {
            return Err(fail(format!("{to} has no workspace to take the files in {}", source.path().display())));
        }
        (Some(_) | None, _) => None,
    };

    let mut summary = write(database, &action, |connection| move_rows(connection, from, to).map_err(failed(&action)))?;
    summary.sessions =
        move_context_sessions(&paths.sessions(), from, to).map_err(|error| fail(error.to_string()))?.len();
    summary.document = paths.documents().merge(from, to).map_err(|error| fail(error.to_string()))?;
    if let Some((source, target)) = directories {
        summary.files = match (source, target) {
            (ContextFiles::Directory(source), ContextFiles::Directory(target)) => {
                move_files(&source, &target).map_err(fail)?
            }
            (ContextFiles::Directory(source), ContextFiles::Owner(workspace)) => {
                move_files(&source.join(WORKSPACE_DIRECTORY), &workspace).map_err(fail)?
                    + move_files(&source, &workspace).map_err(fail)?
            }
            // Refused above: the owner's files never move away.
            (ContextFiles::Owner(_), ContextFiles::Directory(_) | ContextFiles::Owner(_)) => 0,
        };
    }
    Ok(summary)
}

/// The database half of a merge, inside the caller's transaction.
fn move_rows(connection: &Connection, from: &str, to: &str) -> rusqlite::Result<MergeSummary> {
    let memories = move_context_memories(connection, from, to)?;
    let update = |sql: &str| connection.prepare_cached(sql)?.execute([from, to]);
    update("UPDATE sessions SET context = ?2 WHERE context = ?1")?;
    let jobs = update("UPDATE jobs SET owner_context = ?2 WHERE owner_context = ?1 AND kind = 'user'")?;
    let usage = update("UPDATE usage SET context = ?2 WHERE context = ?1")?;
    connection.prepare_cached("DELETE FROM memory_bulletins WHERE context = ?1")?.execute([from])?;
    Ok(MergeSummary { memories, jobs, usage, ..MergeSummary::default() })
}

/// Deletes everything of memory context `context`: memories, sessions (index rows,
/// files and attachments), scheduled jobs, the memory bulletin and document (at its old
/// place too), the context's directory (workspace, `USER.md` or `GROUP.md`,
/// `HEARTBEAT.md`, skills), and the usage of the person (`user_id`'s calls anywhere, and the calls made
/// in `context` without a user). The users table is the caller's.
pub fn purge_context(
    database: &Database,
    paths: &ContextPaths,
    context: &str,
    user_id: Option<&str>,
) -> Result<PurgeSummary, PeopleStoreError> {
    let action = format!("purge the context {context}");
    if context.is_empty() {
        return Err(PeopleStoreError::new(&action, "a context name can't be empty"));
    }
    if context == OWNER_CONTEXT {
        return Err(PeopleStoreError::new(&action, "it is the owner's (the main workspace and its memories)"));
    }
    let fail = |reason: String| PeopleStoreError::new(&action, reason);
    let directory = paths.files(context).map_err(fail)?;

    let (mut summary, keys) =
        write(database, &action, |connection| delete_rows(connection, context, user_id).map_err(failed(&action)))?;
    summary.sessions =
        remove_context_sessions(&paths.sessions(), context, &keys).map_err(|error| fail(error.to_string()))?.len();
    summary.document = paths.documents().remove(context).map_err(|error| fail(error.to_string()))?;
    if let Some(ContextFiles::Directory(directory)) = directory {
        summary.files = remove_files(&directory).map_err(fail)?;
    }
    Ok(summary)
}

/// The database half of a purge, inside the caller's transaction; also the keys of the
/// sessions the index knew.
fn delete_rows(
    connection: &Connection,
    context: &str,
    user_id: Option<&str>,
) -> rusqlite::Result<(PurgeSummary, Vec<String>)> {
    let memories = delete_context_memories(connection, context)?;
    let keys = {
        let mut statement = connection.prepare_cached("DELETE FROM sessions WHERE context = ?1 RETURNING key")?;
        let keys = statement.query_map([context], |row| row.get::<_, String>(0))?;
        keys.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let jobs = connection.prepare_cached("DELETE FROM jobs WHERE owner_context = ?1")?.execute([context])?;
    connection.prepare_cached("DELETE FROM memory_bulletins WHERE context = ?1")?.execute([context])?;
    let usage = delete_usage_of(connection, user_id, context)?;
    Ok((PurgeSummary { memories, jobs, usage, ..PurgeSummary::default() }, keys))
}
