//! Blocking file operations behind `JsonlSessionStore`: create, append, read, list.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::Path;

use squidbot_core::store::{Durability, LoadedSession, SessionSummary, StoreError};

use super::EXTENSION;
use super::parse::{parse_session, sort_by_updated, summarize};
use crate::key::decode_key;

/// What `StoreError::Io` names as the key when listing, which concerns no one session.
pub(crate) const LIST_KEY: &str = "*";

pub(crate) fn io_error(action: &'static str, key: &str, path: &Path, error: &io::Error) -> StoreError {
    StoreError::Io { action, key: key.to_owned(), reason: format!("{}: {error}", path.display()) }
}

/// Writes a new session file holding `header_line`; fails if the file exists. Neither
/// the file nor its directory entry is synced: the session's first synced append does
/// both ([`append_lines`], [`sync_directory`]).
pub(crate) fn create_session(directory: &Path, path: &Path, key: &str, header_line: &[u8]) -> Result<(), StoreError> {
    fs::create_dir_all(directory).map_err(|error| io_error("create", key, directory, &error))?;
    let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            return Err(StoreError::AlreadyExists { key: key.to_owned() });
        }
        Err(error) => return Err(io_error("create", key, path, &error)),
    };
    if let Err(error) = file.write_all(header_line) {
        drop(file);
        // A file without its header could never be loaded nor created again.
        if let Err(remove_error) = fs::remove_file(path) {
            tracing::warn!(
                path = %path.display(),
                error = %remove_error,
                "can't remove a session file whose header could not be written"
            );
        }
        return Err(io_error("create", key, path, &error));
    }
    Ok(())
}

/// Makes a new directory entry durable: without this a crash can lose a file whose
/// contents were already synced.
#[cfg(unix)]
pub(crate) fn sync_directory(directory: &Path) -> io::Result<()> {
    File::open(directory)?.sync_all()
}

/// Directories can't be opened (nor need syncing) this way outside Unix.
#[cfg(not(unix))]
pub(crate) fn sync_directory(_directory: &Path) -> io::Result<()> {
    Ok(())
}

/// Appends `lines` (whole lines, each ending in `\n`) with one write, then syncs the
/// file's data (everything appended before too) when `durability` says so.
///
/// A file whose last byte is not `\n` ends in a line torn by a crash; a `\n` goes first
/// so the torn line stays alone (and is reported when loading) and the new lines parse.
pub(crate) fn append_lines(path: &Path, key: &str, lines: Vec<u8>, durability: Durability) -> Result<(), StoreError> {
    let mut file = match OpenOptions::new().read(true).append(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Err(StoreError::NotFound { key: key.to_owned() });
        }
        Err(error) => return Err(io_error("append to", key, path, &error)),
    };
    let last = last_byte(&mut file).map_err(|error| io_error("append to", key, path, &error))?;
    let buffer = match last {
        Some(byte) if byte != b'\n' => {
            tracing::warn!(
                path = %path.display(),
                "session file ends in a torn line; starting a new line before appending"
            );
            let mut repaired = Vec::with_capacity(lines.len() + 1);
            repaired.push(b'\n');
            repaired.extend_from_slice(&lines);
            repaired
        }
        Some(_) | None => lines,
    };
    let written = if buffer.is_empty() { Ok(()) } else { file.write_all(&buffer) };
    match durability {
        Durability::Synced => written.and_then(|()| file.sync_data()),
        Durability::Written => written,
    }
    .map_err(|error| io_error("append to", key, path, &error))
}

/// The file's last byte, `None` when it is empty.
fn last_byte(file: &mut File) -> io::Result<Option<u8>> {
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut byte = [0_u8; 1];
    file.read_exact(&mut byte)?;
    Ok(Some(byte[0]))
}

/// Reads and parses one session file, `Ok(None)` when it does not exist.
pub(crate) fn read_session(path: &Path, key: &str) -> Result<Option<LoadedSession>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error("read", key, path, &error)),
    };
    parse_session(&bytes, path, key).map(Some)
}

/// Summaries of every readable session file in `directory`, most recently updated
/// first. A directory that does not exist yet holds no sessions.
pub(crate) fn list_sessions(directory: &Path) -> Result<Vec<SessionSummary>, StoreError> {
    let entries = match fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(StoreError::List { directory: directory.display().to_string(), reason: error.to_string() });
        }
    };
    let mut summaries = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                tracing::warn!(
                    directory = %directory.display(),
                    %error,
                    "can't read a sessions directory entry; skipping it"
                );
                continue;
            }
        };
        let path = entry.path();
        let Some(key) = session_key_of(&entry) else {
            tracing::debug!(path = %path.display(), "not a session file; skipping it");
            continue;
        };
        match read_session(&path, &key) {
            Ok(Some(session)) => summaries.push(summarize(key, &session)),
            // Deleted between listing the directory and reading it.
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "skipping unreadable session file");
            }
        }
    }
    sort_by_updated(&mut summaries);
    Ok(summaries)
}

/// Every session file in `directory` with its key (none when the directory is missing).
pub(crate) fn session_files(directory: &Path) -> io::Result<Vec<(String, std::path::PathBuf)>> {
    let entries = match fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(key) = session_key_of(&entry) {
            files.push((key, entry.path()));
        }
    }
    Ok(files)
}

/// The key stored in a directory entry, `None` unless it is a regular file named
/// `<encoded key>.jsonl`.
fn session_key_of(entry: &fs::DirEntry) -> Option<String> {
    let is_file = entry.file_type().ok()?.is_file();
    if !is_file {
        return None;
    }
    let name = entry.file_name();
    let stem = name.to_str()?.strip_suffix(EXTENSION)?.strip_suffix('.')?;
    decode_key(stem)
}
