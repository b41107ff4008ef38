//! The receive position kept across restarts: the mailbox's UIDVALIDITY and the highest
//! UID already handled, in `imap-state.json` under the state directory, replaced
//! atomically (write then rename) after every handled mail.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use squidbot_channels::ChannelError;

const FILE_NAME: &str = "imap-state.json";

/// Where the receive loop stands in a mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Position {
    /// The mailbox's UIDVALIDITY; UIDs from another value mean nothing.
    pub uid_validity: u32,
    /// Every mail with a UID up to this one has been handled.
    pub last_uid: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredPosition {
    mailbox: String,
    #[serde(flatten)]
    position: Position,
}

/// The state file of one channel.
#[derive(Debug, Clone)]
pub(crate) struct PositionStore {
    directory: PathBuf,
    mailbox: String,
}

impl PositionStore {
    /// The store in `directory` for `mailbox`.
    pub(crate) fn new(directory: &Path, mailbox: &str) -> Self {
        Self { directory: directory.to_owned(), mailbox: mailbox.to_owned() }
    }

    /// The saved position, if any for this mailbox. An unreadable file is logged and
    /// treated as none (the loop then takes the unseen mail).
    pub(crate) async fn load(&self) -> Option<Position> {
        let path = self.directory.join(FILE_NAME);
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "can't read the email receive position; taking unseen mail");
                return None;
            }
        };
        match serde_json::from_slice::<StoredPosition>(&bytes) {
            Ok(stored) if stored.mailbox == self.mailbox => Some(stored.position),
            Ok(_other_mailbox) => None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "can't parse the email receive position; taking unseen mail");
                None
            }
        }
    }

    /// Saves the position.
    pub(crate) async fn save(&self, position: Position) -> Result<(), ChannelError> {
        let failed = |error: std::io::Error| {
            ChannelError::transient(format!(
                "can't save the email receive position in {}: {error}",
                self.directory.display()
            ))
        };
        tokio::fs::create_dir_all(&self.directory).await.map_err(failed)?;
        let stored = StoredPosition { mailbox: self.mailbox.clone(), position };
        let bytes = serde_json::to_vec_pretty(&stored)
            .map_err(|error| ChannelError::fatal(format!("can't encode the email receive position: {error}")))?;
        let temporary = self.directory.join(format!("{FILE_NAME}.tmp"));
        tokio::fs::write(&temporary, bytes).await.map_err(failed)?;
        tokio::fs::rename(&temporary, self.directory.join(FILE_NAME)).await.map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_saved_position_comes_back_for_the_same_mailbox_only() {
        let directory = tempfile::tempdir().unwrap();
        let store = PositionStore::new(&directory.path().join("nested"), "INBOX");
        assert_eq!(store.load().await, None);
        let position = Position { uid_validity: 7, last_uid: 42 };
        store.save(position).await.unwrap();
        assert_eq!(store.load().await, Some(position));
        assert_eq!(PositionStore::new(&directory.path().join("nested"), "Bot").load().await, None);
    }

    #[tokio::test]
    async fn a_corrupt_file_counts_as_no_position() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::write(directory.path().join(FILE_NAME), b"{ not json").unwrap();
        assert_eq!(PositionStore::new(directory.path(), "INBOX").load().await, None);
    }
}
