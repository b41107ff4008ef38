//! The platform adapters, each built from its `[channels.<name>]` table when its cargo
//! feature is on.

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use squidbot_channels::DynChannel;
use squidbot_types::Secret;
use squidbot_types::config::ChannelConfig;

use crate::channels::settings::credential;
use crate::wiring::Environment;

/// A credential the channel must have.
#[allow(dead_code, reason = "unused when the binary is built without the chat platforms")]
fn required(name: &str, field: &str, inline: Option<&Secret>, variable: Option<&String>) -> Result<Secret> {
    credential(inline, variable)
        .map_err(|problem| anyhow!("channels.{name}.{field}_env {problem}"))?
        .ok_or_else(|| anyhow!("channels.{name}: {field} (or {field}_env) is not set"))
}

/// Largest attachment in bytes.
#[allow(dead_code, reason = "unused when the binary is built without the chat platforms")]
fn attachment_bytes(config: &ChannelConfig) -> u64 {
    config.max_attachment_mb.saturating_mul(1024 * 1024)
}

/// The adapter of channel `name` of platform `kind`.
pub fn build(environment: &Environment, name: &str, kind: &str, config: &ChannelConfig) -> Result<Arc<dyn DynChannel>> {
    let _unused = environment;
    match kind {
        #[cfg(feature = "telegram")]
        "telegram" => {
            let token = required(name, "token", config.token.as_ref(), config.token_env.as_ref())?;
            let mut settings = squidbot_channel_telegram::TelegramSettings::new(name, token);
            if let Some(base) = &config.api_base {
                settings.api_base = base.clone();
            }
            settings.max_attachment_bytes = attachment_bytes(config);
            let channel = squidbot_channel_telegram::TelegramChannel::new(settings)
                .map_err(|error| anyhow!("channels.{name}: {error}"))?;
            Ok(Arc::new(channel))
        }
        #[cfg(feature = "slack")]
        "slack" => {
            let bot = required(name, "token", config.token.as_ref(), config.token_env.as_ref())?;
            let app = required(name, "app_token", config.app_token.as_ref(), config.app_token_env.as_ref())?;
            let mut settings = squidbot_channel_slack::SlackSettings::new(name, app, bot);
            if let Some(base) = &config.api_base {
                settings.api_base = base.clone();
            }
            settings.max_attachment_bytes = attachment_bytes(config);
            let channel = squidbot_channel_slack::SlackChannel::new(settings)
                .map_err(|error| anyhow!("channels.{name}: {error}"))?;
            Ok(Arc::new(channel))
        }
        #[cfg(feature = "discord")]
        "discord" => {
            let token = required(name, "token", config.token.as_ref(), config.token_env.as_ref())?;
            let mut settings = squidbot_channel_discord::DiscordSettings::new(name, token);
            if let Some(base) = &config.api_base {
                settings.api_base = base.clone();
            }
            settings.max_attachment_bytes = attachment_bytes(config);
            let channel = squidbot_channel_discord::DiscordChannel::new(settings)
                .map_err(|error| anyhow!("channels.{name}: {error}"))?;
            Ok(Arc::new(channel))
        }
        _ => {
            let _unused = config;
            bail!("channels.{name}: this squidbot was built without the {kind} channel")
        }
    }
}
