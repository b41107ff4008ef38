//! Builds the agent bus from configuration: targets from `[agents.*]` and `[bus]`,
//! trigger files under `$SQUIDBOT_HOME/triggers`, the journal in the database.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use squidbot_bus::{Bus, BusSettings, Directory, DynBusJournal, TriggerFiles};
use squidbot_core::clock::SystemClock;
use squidbot_types::config::Config;

/// The targets `config` defines: the built-in roles, every `[agents.<role>]`, and the
/// aliases of `[bus.aliases]`.
pub fn directory(config: &Config) -> Result<Directory> {
    Directory::new(config.agents.keys(), &config.bus.aliases).context("invalid [bus] or [agents] configuration")
}

/// The problem of `[bus]` / `[agents.*]` names as a config issue, if any.
pub fn issue(config: &Config) -> Option<squidbot_llm::ConfigIssue> {
    let error = Directory::new(config.agents.keys(), &config.bus.aliases).err()?;
    Some(squidbot_llm::ConfigIssue { key: "bus.aliases".into(), problem: error.to_string() })
}

/// A bus for this process: no routes until something registers one, so without a
/// gateway every message goes to its trigger file.
pub fn build(config: &Config, triggers: std::path::PathBuf, journal: Arc<dyn DynBusJournal>) -> Result<Arc<Bus>> {
    let settings = BusSettings {
        stale_after: Duration::from_secs(config.bus.stale_after_secs.max(1)),
        ack_timeout: Duration::from_millis(config.bus.ack_timeout_ms.max(1)),
        ..BusSettings::default()
    };
    Ok(Bus::new(directory(config)?, TriggerFiles::new(triggers), journal, Arc::new(SystemClock), settings))
}
