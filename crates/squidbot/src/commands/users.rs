//! `squidbot users`: approved senders of the chat channels and pairing codes waiting
//! for the owner. Works on the database, so it reaches a running gateway at once.

use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Result, anyhow, bail};
use squidbot_channels::{ApprovedSenders, PairingCodes, PairingError, PendingCodes, SystemRandom};
use squidbot_core::clock::unix_seconds;
use squidbot_store::{ChannelAccessStore, SqliteChannelAccess};

use crate::cli::UsersAction;
use crate::wiring::Environment;

fn local_time(time: SystemTime) -> String {
    jiff::Timestamp::from_second(unix_seconds(time))
        .map(|stamp| stamp.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// Runs a `squidbot users …` action.
pub fn run(environment: &Environment, action: &UsersAction) -> Result<()> {
    let access = SqliteChannelAccess::new(ChannelAccessStore::new(environment.database()?));
    match action {
        UsersAction::List(flags) => list(&access, flags.json),
        UsersAction::Approve { code } => {
            let codes = PairingCodes::with_store(Box::new(SystemRandom), Arc::new(access.clone()));
            let sender = match codes.approve(code, SystemTime::now()) {
                Ok(sender) => sender,
                Err(error @ (PairingError::UnknownCode { .. } | PairingError::Expired { .. })) => bail!("{error}"),
                Err(error @ PairingError::Store(_)) => return Err(anyhow!(error)),
            };
            access.approve(&sender).map_err(|error| anyhow!("can't approve {}: {error}", sender.sender_id))?;
            let name = sender.display_name.as_deref().map(|name| format!(" ({name})")).unwrap_or_default();
            println!(
                "approved {}:{}{name}; they are answered from their next message",
                sender.channel, sender.sender_id
            );
            Ok(())
        }
        UsersAction::Revoke { sender } => {
            let Some((channel, id)) = sender.split_once(':') else {
                bail!("can't revoke {sender:?}: give CHANNEL:SENDER_ID as `squidbot users list` shows it");
            };
            if access.revoke(channel, id).map_err(|error| anyhow!(error))? {
                println!("revoked {channel}:{id}");
                Ok(())
            } else {
                bail!("can't revoke {sender}: no such approved sender")
            }
        }
    }
}

fn list(access: &SqliteChannelAccess, json: bool) -> Result<()> {
    let approved = access.list().map_err(|error| anyhow!(error))?;
    let pending = PendingCodes::pending(access, SystemTime::now()).map_err(|error| anyhow!(error))?;
    if json {
        let value = serde_json::json!({
            "approved": approved.iter().map(|sender| serde_json::json!({
                "channel": sender.channel,
                "sender_id": sender.sender_id,
                "display_name": sender.display_name,
                "approved_at": unix_seconds(sender.approved_at),
            })).collect::<Vec<_>>(),
            "pending": pending.iter().map(|code| serde_json::json!({
                "code": code.code,
                "channel": code.channel,
                "sender_id": code.sender.id,
                "display_name": code.sender.display_name,
                "expires_at": unix_seconds(code.expires_at),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    if approved.is_empty() && pending.is_empty() {
        println!("no approved senders and no pairing codes waiting");
        return Ok(());
    }
    for sender in &approved {
        let name = sender.display_name.as_deref().unwrap_or("-");
        println!("approved  {}:{}  {name}  since {}", sender.channel, sender.sender_id, local_time(sender.approved_at));
    }
    for code in &pending {
        let name = code.sender.display_name.as_deref().unwrap_or("-");
        println!(
            "pending   {}:{}  {name}  code {}  until {}",
            code.channel,
            code.sender.id,
            code.code,
            local_time(code.expires_at)
        );
    }
    Ok(())
}
