//! The adapter's files in its state directory: the sync token (`<name>.sync`), so a
//! restart resumes where the last handed-over batch ended, and the encrypted rooms
//! already told that encryption isn't supported (`<name>.encrypted-rooms`). Both are
//! replaced atomically (write a temporary file, then rename).

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use squidbot_channels::ChannelError;

/// The state files of one channel.
#[derive(Debug, Clone)]
pub(crate) struct StateFiles {
    directory: PathBuf,
    sync_token: PathBuf,
    encrypted_rooms: PathBuf,
}

impl StateFiles {
    /// The files of channel `name` in `directory`.
    pub(crate) fn new(directory: &Path, name: &str) -> Self {
        Self {
            directory: directory.to_path_buf(),
            sync_token: directory.join(format!("{name}.sync")),
            encrypted_rooms: directory.join(format!("{name}.encrypted-rooms")),
        }
    }

    /// The stored sync token, `None` before the first sync was handed over.
    pub(crate) async fn sync_token(&self) -> Result<Option<String>, ChannelError> {
        let text = read_optional(&self.sync_token).await?;
        Ok(text.map(|text| text.trim().to_owned()).filter(|token| !token.is_empty()))
    }

    /// Replaces the stored sync token.
    pub(crate) async fn store_sync_token(&self, token: &str) -> Result<(), ChannelError> {
        self.replace(&self.sync_token, format!("{token}\n")).await
    }

    /// The rooms already told that encryption isn't supported.
    pub(crate) async fn encrypted_rooms(&self) -> Result<BTreeSet<String>, ChannelError> {
        let text = read_optional(&self.encrypted_rooms).await?.unwrap_or_default();
        Ok(text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect())
    }

    /// Replaces the list of rooms told that encryption isn't supported.
    pub(crate) async fn store_encrypted_rooms(&self, rooms: &BTreeSet<String>) -> Result<(), ChannelError> {
        let text: String = rooms.iter().map(|room| format!("{room}\n")).collect();
        self.replace(&self.encrypted_rooms, text).await
    }

    async fn replace(&self, path: &Path, contents: String) -> Result<(), ChannelError> {
        tokio::fs::create_dir_all(&self.directory)
            .await
            .map_err(|error| io_error(&self.directory, "create", &error))?;
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        tokio::fs::write(&temporary, contents).await.map_err(|error| io_error(&temporary, "write", &error))?;
        tokio::fs::rename(&temporary, path).await.map_err(|error| io_error(path, "replace", &error))
    }
}

async fn read_optional(path: &Path) -> Result<Option<String>, ChannelError> {
    match tokio::fs::read_to_string(path).await {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error(path, "read", &error)),
    }
}

/// A state file that can't be read or written: fatal when permissions forbid it (a
/// restart won't change that), transient otherwise (a full disk may be cleared).
fn io_error(path: &Path, verb: &str, error: &std::io::Error) -> ChannelError {
    let message = format!("can't {verb} {}: {error}", path.display());
    if error.kind() == ErrorKind::PermissionDenied {
        ChannelError::fatal(message)
    } else {
        ChannelError::transient(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_sync_token_survives_a_restart() {
        let directory = tempfile::tempdir().unwrap();
        let nested = directory.path().join("state");
        let files = StateFiles::new(&nested, "matrix");
        assert_eq!(files.sync_token().await.unwrap(), None);
        files.store_sync_token("s72594_4483_1934").await.unwrap();
        files.store_sync_token("s72595_4483_1934").await.unwrap();
        let reopened = StateFiles::new(&nested, "matrix");
        assert_eq!(reopened.sync_token().await.unwrap().as_deref(), Some("s72595_4483_1934"));
        assert_eq!(std::fs::read_to_string(nested.join("matrix.sync")).unwrap(), "s72595_4483_1934\n");
        assert!(!nested.join("matrix.sync.tmp").exists());
        // Another channel in the same directory has its own token.
        assert_eq!(StateFiles::new(&nested, "work").sync_token().await.unwrap(), None);
    }

    #[tokio::test]
    async fn an_empty_token_file_means_no_token() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::write(directory.path().join("matrix.sync"), "\n").unwrap();
        assert_eq!(StateFiles::new(directory.path(), "matrix").sync_token().await.unwrap(), None);
    }

    #[tokio::test]
    async fn encrypted_rooms_are_remembered() {
        let directory = tempfile::tempdir().unwrap();
        let files = StateFiles::new(directory.path(), "matrix");
        assert!(files.encrypted_rooms().await.unwrap().is_empty());
        let rooms = BTreeSet::from(["!a:localhost".to_owned(), "!b:localhost".to_owned()]);
        files.store_encrypted_rooms(&rooms).await.unwrap();
        assert_eq!(files.encrypted_rooms().await.unwrap(), rooms);
    }

    #[tokio::test]
    async fn an_unreadable_state_path_is_an_error_not_a_missing_token() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::create_dir(directory.path().join("matrix.sync")).unwrap();
        let error = StateFiles::new(directory.path(), "matrix").sync_token().await.unwrap_err();
        assert!(error.message.starts_with("can't read"), "{error}");
    }
}
