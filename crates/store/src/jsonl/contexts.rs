//! The session files of one memory context, found by the context their header names:
//! moved to another context (their header rewritten, atomically) or deleted with their
//! attachments. Blocking; writers in other processes are not coordinated, so these run
//! while no turn writes to the context's sessions.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::path::{Path, PathBuf};

use squidbot_core::store::StoreError;

use super::EXTENSION;
use super::file::{LIST_KEY, io_error, sync_directory};
use crate::key::decode_key;

/// Times a header rewrite starts over when the file grew while it was being rewritten.
const REWRITE_ATTEMPTS: usize = 5;

/// A session file in the directory.
struct SessionFile {
    key: String,
    path: PathBuf,
}

/// The session files in `directory` (none when it does not exist).
fn session_files(directory: &Path) -> Result<Vec<SessionFile>, StoreError> {
    let entries = match fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(StoreError::List { directory: directory.display().to_string(), reason: error.to_string() });
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| io_error("list", LIST_KEY, directory, &error))?;
        let is_file = entry.file_type().map_err(|error| io_error("list", LIST_KEY, &entry.path(), &error))?.is_file();
        let name = entry.file_name();
        let key = name.to_str().and_then(|name| name.strip_suffix(EXTENSION)?.strip_suffix('.')).and_then(decode_key);
        if let (true, Some(key)) = (is_file, key) {
            files.push(SessionFile { key, path: entry.path() });
        }
    }
    files.sort_by(|left, right| left.key.cmp(&right.key));
    Ok(files)
}

/// The context named by the header of the session file at `path`; `None` (with a
/// warning) when the header can't be read: such a file belongs to no context.
fn context_of(file: &SessionFile) -> Result<Option<String>, StoreError> {
    let opened = match File::open(&file.path) {
        Ok(opened) => opened,
        // Deleted since the listing.
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error("read", &file.key, &file.path, &error)),
    };
    let mut reader = BufReader::new(opened);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read =
            reader.read_until(b'\n', &mut line).map_err(|error| io_error("read", &file.key, &file.path, &error))?;
        if read == 0 || !line.trim_ascii().is_empty() {
            break;
        }
    }
    let header = serde_json::from_slice::<serde_json::Value>(line.trim_ascii()).ok();
    let context = header.as_ref().and_then(|header| header.get("context")?.as_str()).map(str::to_owned);
    if context.is_none() {
        tracing::warn!(path = %file.path.display(), "a session file without a readable header; leaving it as it is");
    }
    Ok(context)
}

/// Rewrites the header of every session file in `directory` whose context is `from` to
/// name `to`; the keys of the sessions moved. Entries are kept byte for byte.
pub(crate) fn move_context_sessions(directory: &Path, from: &str, to: &str) -> Result<Vec<String>, StoreError> {
    let mut moved = Vec::new();
    for file in session_files(directory)? {
        if context_of(&file)?.as_deref() == Some(from) && relabel(&file, from, to)? {
            moved.push(file.key);
        }
    }
    if !moved.is_empty() {
        sync_directory(directory).map_err(|error| io_error("move", LIST_KEY, directory, &error))?;
    }
    Ok(moved)
}

/// Rewrites `file`'s header from `from` to `to` through a new file renamed over it, so a
/// crash leaves the old file or the new one; false when its header no longer says `from`.
fn relabel(file: &SessionFile, from: &str, to: &str) -> Result<bool, StoreError> {
    let failed = |path: &Path, error: &std::io::Error| io_error("move", &file.key, path, error);
    for _ in 0..REWRITE_ATTEMPTS {
        let bytes = match fs::read(&file.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(false),
            Err(error) => return Err(failed(&file.path, &error)),
        };
        let Some((header, rest)) = split_header(&bytes) else { return Ok(false) };
        let Ok(mut header) = serde_json::from_slice::<serde_json::Value>(header) else { return Ok(false) };
        let Some(fields) =
            header.as_object_mut().filter(|fields| fields.get("context").and_then(|c| c.as_str()) == Some(from))
        else {
            return Ok(false);
        };
        fields.insert("context".to_owned(), serde_json::Value::from(to));
        let mut rewritten = serde_json::to_vec(&header).map_err(|error| StoreError::Io {
            action: "move",
            key: file.key.clone(),
            reason: format!("can't encode the header: {error}"),
        })?;
        rewritten.push(b'\n');
        rewritten.extend_from_slice(rest);
        let directory = file.path.parent().unwrap_or(Path::new("."));
        let mut temporary = tempfile::Builder::new()
            .prefix(".session.")
            .suffix(".tmp")
            .tempfile_in(directory)
            .map_err(|error| failed(directory, &error))?;
        let permissions = fs::metadata(&file.path).map_err(|error| failed(&file.path, &error))?.permissions();
        temporary
            .write_all(&rewritten)
            .and_then(|()| temporary.as_file().set_permissions(permissions))
            .and_then(|()| temporary.as_file().sync_all())
            .map_err(|error| failed(temporary.path(), &error))?;
        // An append that landed meanwhile would be lost by the rename: start over.
        let length = fs::metadata(&file.path).map_err(|error| failed(&file.path, &error))?.len();
        if length != bytes.len() as u64 {
            continue;
        }
        temporary.persist(&file.path).map_err(|error| failed(&file.path, &error.error))?;
        return Ok(true);
    }
    Err(StoreError::Io {
        action: "move",
        key: file.key.clone(),
        reason: format!(
            "{} kept growing while its header was rewritten; try again when it is idle",
            file.path.display()
        ),
    })
}

/// The first non-blank line (without its line end) and every byte after it.
fn split_header(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut start = 0;
    while start < bytes.len() {
        let end = bytes[start..].iter().position(|byte| *byte == b'\n').map_or(bytes.len(), |offset| start + offset);
        let line = &bytes[start..end];
        let after = bytes.get(end + 1..).unwrap_or_default();
        if !line.trim_ascii().is_empty() {
            return Some((line.strip_suffix(b"\r").unwrap_or(line), after));
        }
        start = end + 1;
    }
    None
}

/// Deletes every session file in `directory` whose header names `context`, and those of
/// `keys` whatever their header says, each with its `<key>.files` attachments; the keys
/// of the files deleted.
pub(crate) fn remove_context_sessions(
    directory: &Path,
    context: &str,
    keys: &[String],
) -> Result<Vec<String>, StoreError> {
    let mut removed = Vec::new();
    for file in session_files(directory)? {
        let listed = keys.contains(&file.key);
        if !listed && context_of(&file)?.as_deref() != Some(context) {
            continue;
        }
        match fs::remove_file(&file.path) {
            Ok(()) => removed.push(file.key.clone()),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(io_error("delete", &file.key, &file.path, &error)),
        }
        remove_attachments(directory, &file.key)?;
    }
    // Attachments of indexed sessions whose file is already gone.
    for key in keys {
        remove_attachments(directory, key)?;
    }
    Ok(removed)
}

fn remove_attachments(directory: &Path, key: &str) -> Result<(), StoreError> {
    let Ok(stem) = crate::key::encode_key(key) else { return Ok(()) };
    let attachments = directory.join(format!("{stem}.files"));
    match fs::remove_dir_all(&attachments) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error("delete", key, &attachments, &error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_the_first_line_with_text() {
        assert_eq!(split_header(b"{\"a\":1}\r\n{\"b\":2}\n"), Some((&b"{\"a\":1}"[..], &b"{\"b\":2}\n"[..])));
        assert_eq!(split_header(b"\n  \n{\"a\":1}"), Some((&b"{\"a\":1}"[..], &b""[..])));
        assert_eq!(split_header(b"\n \n"), None);
    }
}
