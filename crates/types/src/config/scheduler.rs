//! `[scheduler]`: cron jobs, heartbeats and squidbot's own housekeeping jobs.

use serde::{Deserialize, Serialize};

/// The zone name that means "this machine's zone".
pub const LOCAL_ZONE: &str = "local";

/// `[scheduler]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// False: the gateway runs no jobs (they stay in the table; the CLI still manages them).
    pub enabled: bool,
    /// IANA zone of jobs added without `--tz`, of heartbeats and of active hours;
    /// `local` is the machine's zone.
    pub timezone: String,
    /// Failed runs in a row after which a job is paused and its owner told.
    pub max_consecutive_failures: u32,
    /// Channel that job replies go to when a job names none; unset means the channel the
    /// owner last wrote from.
    pub preferred_channel: Option<String>,
    /// Heartbeats from HEARTBEAT.md.
    pub heartbeat: HeartbeatConfig,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            timezone: LOCAL_ZONE.to_owned(),
            max_consecutive_failures: 3,
            preferred_channel: None,
            heartbeat: HeartbeatConfig::default(),
        }
    }
}

/// `[scheduler.heartbeat]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeartbeatConfig {
    /// False: HEARTBEAT.md makes no jobs.
    pub enabled: bool,
    /// How often a checklist-format HEARTBEAT.md runs, as a `--schedule` string.
    pub every: String,
    /// `HH:MM-HH:MM` window (in `scheduler.timezone`) outside which heartbeats are
    /// skipped; a section's own `Active hours:` wins. Unset: any time.
    pub active_hours: Option<String>,
    /// Context mode of heartbeats whose section names none: `session`, `isolated`, `silent`.
    pub context: String,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self { enabled: true, every: "every 30m".to_owned(), active_hours: None, context: "session".to_owned() }
    }
}
