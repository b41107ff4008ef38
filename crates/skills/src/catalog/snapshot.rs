//! What a discovery was built from (every source directory and `SKILL.md` with the mtime
//! and size it had), so an unchanged discovery is handed out again after one `stat` per
//! input.

use std::fs::Metadata;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use squidbot_core::freshness::is_racy;

use super::Discovery;

/// How long the requirement checks of a discovery (executables on `PATH`, environment
/// variables) are trusted. Rechecking every turn stats each `PATH` directory for each
/// executable skills ask for, as much work again as the rest of a discovery; a tool
/// installed while the gateway runs shows up a second later instead, which nobody can
/// tell from immediately.
pub(super) const REQUIREMENTS_TTL: Duration = Duration::from_secs(1);

/// What a `stat` says about whether a file or directory changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    /// Its modification time (the epoch when the platform has none).
    pub modified: SystemTime,
    /// Its size in bytes.
    pub length: u64,
}

impl Stamp {
    pub(super) fn of(metadata: &Metadata) -> Self {
        Self { modified: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH), length: metadata.len() }
    }
}

/// How a discovery found one of its inputs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Found {
    /// It did not exist.
    Absent,
    /// It existed with `stamp`, and what the discovery used of it was read at `read_at`.
    Present { stamp: Stamp, read_at: SystemTime },
    /// It could not be examined; a discovery with such an input is never reused, so the
    /// problem is looked at again each time.
    Failed,
}

/// One source directory or `SKILL.md` a discovery looked at.
#[derive(Debug)]
pub(super) struct Input {
    pub path: PathBuf,
    pub found: Found,
}

impl Input {
    /// True when a `stat` now finds it as the discovery did, and the discovery's reading of
    /// it was not racy.
    fn unchanged(&self) -> bool {
        match (&self.found, std::fs::metadata(&self.path)) {
            (Found::Absent, Err(error)) => error.kind() == std::io::ErrorKind::NotFound,
            (Found::Present { stamp, read_at }, Ok(metadata)) => {
                Stamp::of(&metadata) == *stamp && !is_racy(stamp.modified, *read_at)
            }
            (Found::Absent | Found::Present { .. } | Found::Failed, _) => false,
        }
    }
}

/// A discovery with what it was built from.
#[derive(Debug)]
pub(super) struct Snapshot {
    /// The discovery, without `new_problems`.
    pub discovery: Arc<Discovery>,
    /// Every root and `SKILL.md` it looked at.
    pub inputs: Vec<Input>,
    /// When it began, before its requirement checks ran.
    pub checked_at: Instant,
}

impl Snapshot {
    /// True when the discovery still holds: its requirement checks are recent and no
    /// input changed. False without looking when that would take more than `most_stats`
    /// `stat` calls.
    pub(super) fn unchanged(&self, most_stats: usize) -> bool {
        self.inputs.len() <= most_stats
            && self.checked_at.elapsed() < REQUIREMENTS_TTL
            && self.inputs.iter().all(Input::unchanged)
    }
}
