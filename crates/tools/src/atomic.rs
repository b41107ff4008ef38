//! Atomic file replacement: write a temporary file beside the target, then rename it over.

use std::io::{self, Write};
use std::path::Path;

/// Writes `content` to `path` so readers see either the old file or the new one, never a
/// half-written file. Creates missing parent directories and keeps an existing file's
/// permissions. Blocking; run it off the async runtime.
pub(crate) fn write_atomically(path: &Path, content: &[u8]) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent)?;
    let existing_permissions = std::fs::metadata(path).ok().map(|metadata| metadata.permissions());
    let mut temporary = tempfile::Builder::new().prefix(".squidbot-write-").tempfile_in(parent)?;
    temporary.write_all(content)?;
    temporary.as_file().sync_all()?;
    if let Some(permissions) = existing_permissions {
        temporary.as_file().set_permissions(permissions)?;
    }
    temporary.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_parents_and_leaves_no_temporary_files() {
        let directory = tempfile::tempdir().unwrap();
        let target = directory.path().join("a/b/c.txt");
        write_atomically(&target, b"hello").unwrap();
        write_atomically(&target, b"again").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "again");
        let names: Vec<_> =
            std::fs::read_dir(directory.path().join("a/b")).unwrap().map(|entry| entry.unwrap().file_name()).collect();
        assert_eq!(names, ["c.txt"]);
    }
}
