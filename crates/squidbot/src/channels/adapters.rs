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
        #[cfg(feature = "matrix")]
        "matrix" => {
            use squidbot_channel_matrix::{InvitePolicy, KnownInviter, MatrixChannel, MatrixSettings};
            let token = credential(config.token.as_ref(), config.token_env.as_ref())
                .map_err(|problem| anyhow!("channels.{name}.token_env {problem}"))?;
            let password = credential(config.password.as_ref(), config.password_env.as_ref())
                .map_err(|problem| anyhow!("channels.{name}.password_env {problem}"))?;
            let invites = match config.auto_join.as_str() {
                "all" => InvitePolicy::All,
                "none" => InvitePolicy::None,
                _ => {
                    let allowed = config.owners.iter().chain(&config.allow_from).cloned().collect();
                    // People linked to this channel (`squidbot users link NAME matrix:@…`)
                    // may invite the bot too, from the moment they are linked.
                    let people = environment.people()?;
                    let channel = name.to_owned();
                    let known = KnownInviter(Arc::new(move |inviter: &str| {
                        let identity = squidbot_types::people::Identity {
                            channel: channel.clone(),
                            sender_id: inviter.to_owned(),
                        };
                        people.user_of(&identity).ok().flatten().is_some_and(|user| !user.disabled)
                    }));
                    InvitePolicy::FromOrKnown(allowed, known)
                }
            };
            let state_dir = environment.paths.home.join("channels");
            std::fs::create_dir_all(&state_dir)
                .map_err(|error| anyhow!("can't create {}: {error}", state_dir.display()))?;
            let settings = MatrixSettings {
                name: name.to_owned(),
                homeserver: config
                    .homeserver
                    .clone()
                    .or_else(|| config.api_base.clone())
                    .ok_or_else(|| anyhow!("channels.{name}: homeserver is not set"))?,
                user_id: config.user_id.clone().ok_or_else(|| anyhow!("channels.{name}: user_id is not set"))?,
                access_token: token,
                password,
                device_id: config.device_id.clone(),
                state_dir,
                invites,
                max_attachment_bytes: attachment_bytes(config),
            };
            let channel = MatrixChannel::new(settings).map_err(|error| anyhow!("channels.{name}: {error}"))?;
            Ok(Arc::new(channel))
        }
        #[cfg(feature = "email")]
        "email" => {
            use squidbot_channel_email::{EmailChannel, EmailSettings, ImapSettings, Security, SmtpSettings};
            let security = |text: &str| match text {
                "starttls" => Security::StartTls,
                "plain" => Security::Plain,
                _ => Security::Tls,
            };
            let password = required(name, "password", config.password.as_ref(), config.password_env.as_ref())?;
            let address = config.address.clone().ok_or_else(|| anyhow!("channels.{name}: address is not set"))?;
            let username = config.username.clone().unwrap_or_else(|| address.clone());
            let imap_host = config.imap_host.clone().ok_or_else(|| anyhow!("channels.{name}: imap_host is not set"))?;
            let smtp_host = config.smtp_host.clone().ok_or_else(|| anyhow!("channels.{name}: smtp_host is not set"))?;
            let mut imap = ImapSettings::new(imap_host, username.clone(), password.clone());
            imap.security = security(&config.imap_security);
            imap.port = config.imap_port.unwrap_or(if imap.security == Security::Tls { 993 } else { 143 });
            imap.mailbox = config.mailbox.clone();
            let mut smtp = SmtpSettings::new(smtp_host, username, password);
            smtp.security = security(&config.smtp_security);
            smtp.port = config.smtp_port.unwrap_or(match smtp.security {
                Security::Tls => 465,
                Security::StartTls => 587,
                Security::Plain => 25,
            });
            let state_dir = environment.paths.home.join("channels");
            std::fs::create_dir_all(&state_dir)
                .map_err(|error| anyhow!("can't create {}: {error}", state_dir.display()))?;
            let mut settings = EmailSettings::new(name, address, imap, smtp, state_dir);
            settings.display_name = config.display_name.clone();
            settings.poll_interval = std::time::Duration::from_secs(config.poll_interval_secs.max(1));
            settings.extra_root_certificates =
                config.ca_files.iter().map(|path| environment.paths.home.join(path)).collect();
            settings.max_attachment_bytes = attachment_bytes(config);
            let channel = EmailChannel::new(settings).map_err(|error| anyhow!("channels.{name}: {error}"))?;
            Ok(Arc::new(channel))
        }
        _ => {
            let _unused = config;
            bail!("channels.{name}: this squidbot was built without the {kind} channel")
        }
    }
}
