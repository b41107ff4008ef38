//! `FsMemoryDocuments`: the `MemoryDocuments` port as one `memory.md` per context,
//! replaced atomically.

use std::fs;
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

use squidbot_core::memory::{MemoryDocuments, MemoryError};

use crate::key::encode_key;

/// File name of each context's document.
const DOCUMENT_FILE: &str = "memory.md";

/// Documents stored as `<root>/<encoded context>/memory.md`.
#[derive(Debug, Clone)]
pub struct FsMemoryDocuments {
    root: PathBuf,
}

impl FsMemoryDocuments {
    /// Documents under `root` (created on the first write).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The document file of `context`. Contexts are encoded like session keys, so no
    /// context can name a path outside `root`.
    fn path(&self, context: &str) -> Result<PathBuf, String> {
        let directory = encode_key(context).map_err(|error| error.to_string())?;
        Ok(self.root.join(directory).join(DOCUMENT_FILE))
    }

    /// Appends `from`'s document to `to`'s under a `## Merged from <from>` heading, then
    /// deletes `from`'s; false when `from` had none. A crash in between leaves the text
    /// in both, never in neither.
    pub(crate) fn merge(&self, from: &str, to: &str) -> Result<bool, MemoryError> {
        let Some(moved) = self.read(from)? else { return Ok(false) };
        if !moved.trim().is_empty() {
            let text = moved.trim_start_matches(['\n', '\r']).trim_end();
            let section = format!("## Merged from {from}\n\n{text}\n");
            let merged = match self.read(to)? {
                Some(kept) if !kept.trim().is_empty() => format!("{}\n\n{section}", kept.trim_end()),
                Some(_) | None => section,
            };
            self.write(to, &merged)?;
        }
        self.remove(from)
    }

    /// Deletes `context`'s document, and its directory once empty; false when it had
    /// none.
    pub(crate) fn remove(&self, context: &str) -> Result<bool, MemoryError> {
        let path = self.path(context).map_err(|reason| MemoryError::Store { action: "delete", reason })?;
        let removed = match fs::remove_file(&path) {
            Ok(()) => true,
            Err(error) if error.kind() == ErrorKind::NotFound => false,
            Err(error) => return Err(failed("delete", &path, &error)),
        };
        if let Some(directory) = path.parent() {
            match fs::remove_dir(directory) {
                Ok(()) => {}
                // Something else lives there (a write in progress): it stays.
                Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::DirectoryNotEmpty) => {}
                Err(error) => return Err(failed("delete", directory, &error)),
            }
        }
        Ok(removed)
    }
}

fn failed(action: &'static str, path: &Path, error: &io::Error) -> MemoryError {
    MemoryError::Store { action, reason: format!("{}: {error}", path.display()) }
}

/// Writes `text` to a new file beside `path`, syncs it, renames it over `path` and
/// syncs the directory: readers see the old document or the new one, never a mix,
/// and a crash can't leave a truncated document.
fn replace_atomically(path: &Path, text: &str) -> Result<(), MemoryError> {
    let Some(directory) = path.parent() else {
        return Err(MemoryError::Store { action: "write", reason: format!("{} has no directory", path.display()) });
    };
    fs::create_dir_all(directory).map_err(|error| failed("write", directory, &error))?;
    let mut temporary = tempfile::Builder::new()
        .prefix(".memory.md.")
        .suffix(".tmp")
        .tempfile_in(directory)
        .map_err(|error| failed("write", directory, &error))?;
    temporary
        .write_all(text.as_bytes())
        .and_then(|()| temporary.as_file().sync_all())
        .map_err(|error| failed("write", temporary.path(), &error))?;
    temporary.persist(path).map_err(|error| failed("write", path, &error.error))?;
    sync_directory(directory).map_err(|error| failed("write", directory, &error))
}

#[cfg(unix)]
fn sync_directory(directory: &Path) -> io::Result<()> {
    fs::File::open(directory)?.sync_all()
}

#[cfg(not(unix))]
fn sync_directory(_directory: &Path) -> io::Result<()> {
    Ok(())
}

impl MemoryDocuments for FsMemoryDocuments {
    fn read(&self, context: &str) -> Result<Option<String>, MemoryError> {
        let path = self.path(context).map_err(|reason| MemoryError::Store { action: "read", reason })?;
        match fs::read(&path) {
            Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| MemoryError::Store {
                action: "read",
                reason: format!("{}: the document is not UTF-8 text", path.display()),
            }),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(failed("read", &path, &error)),
        }
    }

    fn write(&self, context: &str, text: &str) -> Result<(), MemoryError> {
        let path = self.path(context).map_err(|reason| MemoryError::Store { action: "write", reason })?;
        replace_atomically(&path, text)
    }

    fn location(&self, context: &str) -> String {
        match self.path(context) {
            Ok(path) => path.display().to_string(),
            Err(reason) => format!("(nowhere: {reason})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_documents_read_as_none_and_writes_replace() {
        let directory = tempfile::tempdir().unwrap();
        let documents = FsMemoryDocuments::new(directory.path().join("memory"));
        assert_eq!(documents.read("cli:local").unwrap(), None);
        documents.write("cli:local", "# Memory\n").unwrap();
        documents.write("cli:local", "# Memory\n- tea\n").unwrap();
        assert_eq!(documents.read("cli:local").unwrap().as_deref(), Some("# Memory\n- tea\n"));
        let location = documents.location("cli:local");
        assert!(location.ends_with("memory/cli:local/memory.md"), "{location}");
        let leftovers: Vec<_> = fs::read_dir(directory.path().join("memory/cli:local")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "only memory.md remains: {leftovers:?}");
    }

    #[test]
    fn invalid_contexts_are_refused() {
        let directory = tempfile::tempdir().unwrap();
        let documents = FsMemoryDocuments::new(directory.path().to_path_buf());
        assert!(documents.write("", "x").is_err());
        assert!(documents.read("").is_err());
        assert!(documents.location("").starts_with("(nowhere"));
    }
}
