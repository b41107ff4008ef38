//! The port of inbound attachments: where the files people send on the chat channels
//! are kept (the store saves them under the session's data directory).

use std::path::PathBuf;

pub use squidbot_types::channel::{Attachment, AttachmentData};

/// Why an inbound attachment was not saved (the message goes on without it, saying so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    /// The session's key can't name a directory.
    #[error("the session can't have a directory: {0}")]
    InvalidSession(String),
    /// The file or its directory could not be written.
    #[error("can't write {path}: {reason}")]
    Io {
        /// What could not be written.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// This store keeps no attachments.
    #[error("attachments are not kept here")]
    NotKept,
}

/// Where inbound attachments are kept.
pub trait AttachmentStore: Send + Sync {
    /// Saves `attachment`, sent in `session_key`, and returns the file's path.
    fn save(&self, session_key: &str, attachment: &Attachment) -> Result<PathBuf, AttachmentError>;
}
