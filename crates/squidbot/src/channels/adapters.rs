//! The platform adapters, each built from its `[channels.<name>]` table when its cargo
//! feature is on.

use std::sync::Arc;

use anyhow::{Result, bail};
use squidbot_channels::DynChannel;
use squidbot_types::config::ChannelConfig;

use crate::wiring::Environment;

/// The adapter of channel `name` of platform `kind`.
pub fn build(environment: &Environment, name: &str, kind: &str, config: &ChannelConfig) -> Result<Arc<dyn DynChannel>> {
    let _ = (environment, config);
    bail!("channels.{name}: this squidbot was built without the {kind} channel")
}
