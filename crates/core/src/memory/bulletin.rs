//! The `Bulletins` port: the last memory bulletin written for each context, with the
//! fingerprint of the memories it summarizes, so it is rewritten only after they change.

/// A written bulletin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bulletin {
    /// The bulletin text.
    pub content: String,
    /// Fingerprint of the memories it summarizes ([`super::Memories::fingerprint`]).
    pub fingerprint: String,
    /// When it was written, Unix seconds.
    pub generated_at: i64,
}

/// Why the bulletin could not be read or stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BulletinError {
    /// The storage failed.
    #[error("can't {action}: {reason}")]
    Storage {
        /// What was attempted.
        action: &'static str,
        /// The underlying error.
        reason: String,
    },
}

/// Where each context's bulletin is kept. Calls block (a database).
pub trait Bulletins: Send + Sync + 'static {
    /// The bulletin of `context`, `Ok(None)` before one was written.
    fn get(&self, context: &str) -> Result<Option<Bulletin>, BulletinError>;
    /// Stores the bulletin of `context`, replacing the previous one.
    fn put(&self, context: &str, bulletin: &Bulletin) -> Result<(), BulletinError>;
}
