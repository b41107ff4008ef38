//! The ports of channel access: where approved senders and pending pairing codes are
//! kept. The channels' access policy reads them; the store keeps them in the database
//! so the gateway and `squidbot users` (another process) share them.

use std::time::SystemTime;

pub use squidbot_types::access::{ApprovedSender, PendingPairing};

/// The store of approved senders or pending pairing codes failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("can't {action}: {reason}")]
pub struct AccessStoreError {
    /// What was attempted ("read approved senders", "store a pairing code").
    pub action: String,
    /// What went wrong.
    pub reason: String,
}

/// Where approved senders are kept (the database in the gateway; in memory in tests).
pub trait ApprovedSenders: Send + Sync {
    /// Whether `sender_id` on `channel` was approved.
    fn is_approved(&self, channel: &str, sender_id: &str) -> Result<bool, AccessStoreError>;
    /// Records an approval (replacing an earlier one for the same sender).
    fn approve(&self, sender: &ApprovedSender) -> Result<(), AccessStoreError>;
    /// Withdraws an approval; false if the sender was not approved.
    fn revoke(&self, channel: &str, sender_id: &str) -> Result<bool, AccessStoreError>;
    /// Every approved sender.
    fn list(&self) -> Result<Vec<ApprovedSender>, AccessStoreError>;
}

/// Where pending pairing codes are kept: in the database in the gateway, so
/// `squidbot users approve CODE` from another process reaches them; in memory in tests.
/// A store bounds itself (at most a few hundred codes, expired ones forgotten after a
/// day) so a flood of strangers can't grow it.
pub trait PendingCodes: Send + Sync {
    /// Whether `sender_id` on `channel` holds a code that has not expired at `now`.
    fn has_live_code(&self, channel: &str, sender_id: &str, now: SystemTime) -> Result<bool, AccessStoreError>;
    /// Stores a new code; `Ok(false)` when the code is already taken.
    fn insert(&self, pending: &PendingPairing, now: SystemTime) -> Result<bool, AccessStoreError>;
    /// Removes the code (normalized: upper case) and returns what it was issued for.
    fn take(&self, code: &str) -> Result<Option<PendingPairing>, AccessStoreError>;
    /// The codes still live at `now`, oldest first.
    fn pending(&self, now: SystemTime) -> Result<Vec<PendingPairing>, AccessStoreError>;
}
