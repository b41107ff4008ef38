//! Plain data of the chat channels that more than one layer reads: who wrote a message,
//! the files sent with it, and each channel's health as the gateway reports it.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Who wrote an inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// The platform's stable id of the sender (user id, email address).
    pub id: String,
    /// The name shown on the platform, when it gives one.
    pub display_name: Option<String>,
}

/// Where an attachment's content is.
#[derive(Clone, PartialEq, Eq)]
pub enum AttachmentData {
    /// Held in memory (small files).
    Bytes(Vec<u8>),
    /// Saved to a file (large files, and inbound files once stored under the session's
    /// data directory).
    Path(PathBuf),
}

impl fmt::Debug for AttachmentData {
    // Attachments can be megabytes; a log line shows the size, not the bytes.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachmentData::Bytes(bytes) => write!(formatter, "Bytes({} bytes)", bytes.len()),
            AttachmentData::Path(path) => formatter.debug_tuple("Path").field(path).finish(),
        }
    }
}

/// A file sent with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The file name as given by the sender (untrusted: never use it as a path as is).
    pub name: String,
    /// Its media type, e.g. `image/png`.
    pub mime: String,
    /// Its content.
    pub data: AttachmentData,
}

/// Where a channel's receive loop is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelState {
    /// Not started yet.
    Starting,
    /// Its receive loop is running.
    Running,
    /// It failed and is restarted after `retry_in`.
    Restarting {
        /// Failures in a row.
        attempt: u32,
        /// The wait before the restart.
        retry_in: Duration,
    },
    /// It failed in a way a restart can't fix (credentials refused, bad settings).
    Failed,
    /// Stopped with the gateway.
    Stopped,
}

impl ChannelState {
    /// A one-word name: `starting`, `running`, `restarting`, `failed`, `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ChannelState::Starting => "starting",
            ChannelState::Running => "running",
            ChannelState::Restarting { .. } => "restarting",
            ChannelState::Failed => "failed",
            ChannelState::Stopped => "stopped",
        }
    }

    /// The state as `status` and `/health` show it: the one-word name, and for a restart
    /// which attempt it is and when it comes (`restarting (attempt 2, in 10 s)`).
    pub fn describe(&self) -> String {
        match self {
            ChannelState::Restarting { attempt, retry_in } => {
                format!("restarting (attempt {attempt}, in {} s)", retry_in.as_secs())
            }
            ChannelState::Starting | ChannelState::Running | ChannelState::Failed | ChannelState::Stopped => {
                self.as_str().to_owned()
            }
        }
    }
}

/// One channel's health and counters, kept by the channel manager and shown by the
/// gateway (`status`, `/health`, `/metrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelHealth {
    /// The channel's name (`[channels.<name>]`).
    pub name: String,
    /// Its platform (`telegram`, `webhook`, ...).
    pub kind: String,
    /// Where its receive loop is.
    pub state: ChannelState,
    /// The last failure, `can't …: …`.
    pub last_error: Option<String>,
    /// When the last failure happened.
    pub last_error_at: Option<SystemTime>,
    /// Restarts after failures since the gateway started.
    pub restarts: u32,
    /// Messages received (duplicates not counted).
    pub received: u64,
    /// Messages answered with a turn.
    pub answered: u64,
    /// Messages not answered under the access policy.
    pub denied: u64,
    /// Redelivered messages dropped.
    pub duplicates: u64,
    /// Messages and edits sent.
    pub sent: u64,
    /// Sends and edits that failed for good.
    pub send_failures: u64,
}

impl ChannelHealth {
    /// A channel `name` of platform `kind` that has not started yet, all counters zero.
    pub fn new(name: &str, kind: &str) -> Self {
        Self {
            name: name.to_owned(),
            kind: kind.to_owned(),
            state: ChannelState::Starting,
            last_error: None,
            last_error_at: None,
            restarts: 0,
            received: 0,
            answered: 0,
            denied: 0,
            duplicates: 0,
            sent: 0,
            send_failures: 0,
        }
    }

    /// Whether the channel is up (its receive loop runs).
    pub fn is_up(&self) -> bool {
        self.state == ChannelState::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_bytes_are_not_dumped_into_logs() {
        let data = AttachmentData::Bytes(vec![0; 2048]);
        assert_eq!(format!("{data:?}"), "Bytes(2048 bytes)");
    }

    #[test]
    fn a_restart_is_described_with_its_attempt_and_wait() {
        let restarting = ChannelState::Restarting { attempt: 2, retry_in: Duration::from_millis(10_900) };
        assert_eq!(restarting.describe(), "restarting (attempt 2, in 10 s)");
        assert_eq!(restarting.as_str(), "restarting");
        assert_eq!(ChannelState::Running.describe(), "running");
    }
}
