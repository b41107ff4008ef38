//! `[bus]`: the agent bus (target aliases and health thresholds).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Default for `bus.stale_after_secs`.
pub const DEFAULT_STALE_AFTER_SECS: u64 = 60;

/// Default for `bus.ack_timeout_ms`.
pub const DEFAULT_ACK_TIMEOUT_MS: u64 = 2_000;

/// `[bus]`: the agent bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BusConfig {
    /// More target names, e.g. legacy ones: `devops = "worker"`. `main` always means
    /// `assistant`.
    pub aliases: BTreeMap<String, String>,
    /// Seconds without a sign of life after which a live route counts as `stale`.
    pub stale_after_secs: u64,
    /// Milliseconds a send waits for the target's acknowledgement before answering
    /// `accepted.unverified`.
    pub ack_timeout_ms: u64,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            aliases: BTreeMap::new(),
            stale_after_secs: DEFAULT_STALE_AFTER_SECS,
            ack_timeout_ms: DEFAULT_ACK_TIMEOUT_MS,
        }
    }
}
