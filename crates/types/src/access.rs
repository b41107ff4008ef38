//! Plain data of channel access: the senders the owner approved and the pairing codes
//! waiting for the owner.

use std::time::SystemTime;

use crate::channel::Sender;

/// A sender the owner approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedSender {
    /// The channel they wrote on.
    pub channel: String,
    /// Their sender id there.
    pub sender_id: String,
    /// Their display name when they asked, for `squidbot users list`.
    pub display_name: Option<String>,
    /// When the owner approved them.
    pub approved_at: SystemTime,
}

/// A code waiting for the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPairing {
    /// The code.
    pub code: String,
    /// The channel the stranger wrote on.
    pub channel: String,
    /// Who they are.
    pub sender: Sender,
    /// When the code stops being accepted.
    pub expires_at: SystemTime,
}
