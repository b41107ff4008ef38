//! `FsWatchedFile`: one file on disk looked at again and again (HEARTBEAT.md), a `stat`
//! each time and a read only when it changed.

use std::path::PathBuf;
use std::time::SystemTime;

use squidbot_core::workspace::{FileStamp, WatchedFile, WatchedFileError};

/// A file at a fixed path. Calls block (a `stat`, a small read).
#[derive(Debug, Clone)]
pub struct FsWatchedFile {
    path: PathBuf,
}

impl FsWatchedFile {
    /// The file at `path`; it need not exist yet.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    fn unreadable(&self, error: &std::io::Error) -> WatchedFileError {
        WatchedFileError::Unreadable { location: self.location(), reason: error.to_string() }
    }
}

impl WatchedFile for FsWatchedFile {
    fn stamp(&self) -> Result<Option<FileStamp>, WatchedFileError> {
        match std::fs::metadata(&self.path) {
            Ok(metadata) => Ok(Some(FileStamp {
                modified: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                length: metadata.len(),
            })),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(self.unreadable(&error)),
        }
    }

    fn read(&self) -> Result<Vec<u8>, WatchedFileError> {
        std::fs::read(&self.path).map_err(|error| self.unreadable(&error))
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_has_no_stamp_and_a_written_one_has_its_length_and_bytes() {
        let directory = tempfile::tempdir().unwrap();
        let file = FsWatchedFile::new(directory.path().join("HEARTBEAT.md"));
        assert_eq!(file.stamp().unwrap(), None);
        assert!(matches!(file.read(), Err(WatchedFileError::Unreadable { .. })));

        std::fs::write(directory.path().join("HEARTBEAT.md"), b"- check\xff\n").unwrap();
        assert_eq!(file.stamp().unwrap().map(|stamp| stamp.length), Some(9));
        assert_eq!(file.read().unwrap(), b"- check\xff\n");
        assert!(file.location().ends_with("HEARTBEAT.md"));
    }
}
