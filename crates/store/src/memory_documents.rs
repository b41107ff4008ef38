//! `FsMemoryDocuments`: the `MemoryDocuments` port as one `memory.md` per context,
//! replaced atomically: a person's and a group's in their own directory, the owner's
//! (and any other context's) under `memory/`; a document left at the old place is moved
//! the first time it is used.

use std::fs;
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

use squidbot_core::memory::{MemoryDocuments, MemoryError};

use crate::channel_files::{MEMORY_FILE, context_root};
use crate::key::encode_key;

/// Where one context's document is, and where it was kept before people and groups had
/// directories of their own.
struct Place {
    /// Where it is read and written.
    current: PathBuf,
    /// `<root>/<context>/memory.md` when that is no longer `current`.
    old: Option<PathBuf>,
}

/// Documents stored as `<home>/users/<id>/memory.md` for `user:<id>`,
/// `<home>/groups/<id>/memory.md` for `group:<id>`, and `<root>/<encoded context>/memory.md`
/// for every other context (the owner's in `<root>/owner/`), where `<home>` is the
/// directory `<root>` is in (`$SQUIDBOT_HOME/memory`).
#[derive(Debug, Clone)]
pub struct FsMemoryDocuments {
    root: PathBuf,
    home: Option<PathBuf>,
}

impl FsMemoryDocuments {
    /// Documents under `root` (`<home>/memory`) and the people's and groups' directories
    /// beside it (created on the first write). A person's or group's document still at
    /// `<root>/<context>/memory.md` is moved to their directory the first time it is
    /// read or written: renamed when there is none there yet, else appended under
    /// `## Moved from memory/<context>`; the old file is removed after.
    pub fn new(root: PathBuf) -> Self {
        let home = root.parent().map(Path::to_path_buf);
        Self { root, home }
    }

    /// The document file of `context`. Contexts are encoded like session keys, so no
    /// context can name a path outside the home.
    fn place(&self, context: &str) -> Result<Place, String> {
        let old = || encode_key(context).map(|directory| self.root.join(directory).join(MEMORY_FILE));
        let own = match &self.home {
            Some(home) => context_root(home, context)?.map(|(_, directory)| directory.join(MEMORY_FILE)),
            None => None,
        };
        match own {
            Some(current) => Ok(Place { current, old: old().ok() }),
            None => Ok(Place { current: old().map_err(|error| error.to_string())?, old: None }),
        }
    }

    /// The path of `context`'s document, with one left at the old place moved there
    /// first, and `replacement` written there if given, in one atomic write: the old
    /// text is renamed into place when there is nothing there (and nothing replaces it),
    /// appended under `## Moved from memory/<context>` otherwise, so a write never drops
    /// it. The old file is deleted once the text is safe; a crash in between leaves the
    /// text in both, never in neither.
    fn settle(&self, context: &str, action: &'static str, replacement: Option<&str>) -> Result<PathBuf, MemoryError> {
        let place = self.place(context).map_err(|reason| MemoryError::Store { action, reason })?;
        let old = match &place.old {
            Some(old) => match fs::read(old) {
                Ok(bytes) => Some((old, bytes)),
                Err(error) if error.kind() == ErrorKind::NotFound => None,
                Err(error) => return Err(failed(action, old, &error)),
            },
            None => None,
        };
        let Some((old, moved)) = old else {
            if let Some(text) = replacement {
                replace_atomically(&place.current, text.as_bytes())?;
            }
            return Ok(place.current);
        };
        let kept = match replacement {
            Some(text) => Some(text.to_owned()),
            None => read_text(&place.current, action)?,
        };
        let text = match kept {
            None => moved,
            Some(kept) => {
                let moved = String::from_utf8(moved).map_err(|_| MemoryError::Store {
                    action,
                    reason: format!("{}: the document is not UTF-8 text", old.display()),
                })?;
                let moved = moved.trim_start_matches(['\n', '\r']).trim_end();
                let section = format!("## Moved from memory/{context}\n\n{moved}\n");
                match (moved.is_empty(), kept.trim().is_empty()) {
                    // An empty old document adds nothing.
                    (true, _) => kept.into_bytes(),
                    (false, true) => section.into_bytes(),
                    (false, false) => format!("{}\n\n{section}", kept.trim_end()).into_bytes(),
                }
            }
        };
        replace_atomically(&place.current, &text)?;
        tracing::info!(
            from = %old.display(),
            to = %place.current.display(),
            "moved a memory document to its context's directory"
        );
        remove_with_directory(old, action)?;
        Ok(place.current)
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

    /// Deletes `context`'s document, at its place and at the old one, and the directory
    /// it was in once empty; false when it had none.
    pub(crate) fn remove(&self, context: &str) -> Result<bool, MemoryError> {
        let place = self.place(context).map_err(|reason| MemoryError::Store { action: "delete", reason })?;
        let mut removed = remove_with_directory(&place.current, "delete")?;
        if let Some(old) = &place.old {
            removed |= remove_with_directory(old, "delete")?;
        }
        Ok(removed)
    }
}

/// Deletes `path`, then its directory if that is empty now; false when there was no
/// such file.
fn remove_with_directory(path: &Path, action: &'static str) -> Result<bool, MemoryError> {
    let removed = match fs::remove_file(path) {
        Ok(()) => true,
        Err(error) if error.kind() == ErrorKind::NotFound => false,
        Err(error) => return Err(failed(action, path, &error)),
    };
    if let Some(directory) = path.parent() {
        match fs::remove_dir(directory) {
            Ok(()) => {}
            // Something else lives there (a write in progress, a workspace): it stays.
            Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::DirectoryNotEmpty) => {}
            Err(error) => return Err(failed(action, directory, &error)),
        }
    }
    Ok(removed)
}

/// The text of the document at `path`, `None` when there is none.
fn read_text(path: &Path, action: &'static str) -> Result<Option<String>, MemoryError> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| MemoryError::Store {
            action,
            reason: format!("{}: the document is not UTF-8 text", path.display()),
        }),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(failed(action, path, &error)),
    }
}

fn failed(action: &'static str, path: &Path, error: &io::Error) -> MemoryError {
    MemoryError::Store { action, reason: format!("{}: {error}", path.display()) }
}

/// Writes `text` to a new file beside `path`, syncs it, renames it over `path` and
/// syncs the directory: readers see the old document or the new one, never a mix,
/// and a crash can't leave a truncated document.
fn replace_atomically(path: &Path, text: &[u8]) -> Result<(), MemoryError> {
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
        .write_all(text)
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
        let path = self.settle(context, "read", None)?;
        read_text(&path, "read")
    }

    fn write(&self, context: &str, text: &str) -> Result<(), MemoryError> {
        self.settle(context, "write", Some(text)).map(drop)
    }

    fn location(&self, context: &str) -> String {
        match self.place(context) {
            Ok(place) => place.current.display().to_string(),
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
