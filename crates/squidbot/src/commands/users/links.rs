//! `squidbot users link|unlink|approve|revoke`: which chat accounts are whose. Linking an
//! account that talked to the assistant as a stranger merges the stranger's context
//! (memories, sessions, memory.md, files, jobs, usage) into the user's, losing nothing.

use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Result, anyhow, bail};
use serde_json::json;
use squidbot_channels::{ApprovedSenders, PairingCodes, PairingError, PendingCodes, SystemRandom, stranger_context};
use squidbot_core::people::Directory;
use squidbot_store::{ContextPaths, MergeSummary, merge_context};
use squidbot_types::people::{AuditKind, Identity, User};

use super::{Users, new_user, now_ms, store_user};

/// The channel name of gateway logins, which has no `[channels]` table.
const GATEWAY_CHANNEL: &str = "gateway";

/// Reads `CHANNEL:ID`.
fn parse_identity(text: &str) -> Result<Identity> {
    match Identity::parse(text.trim()) {
        Some(identity) => Ok(identity),
        None => bail!("can't read {text:?} as CHANNEL:ID (for example telegram:12345678 or matrix:@bob:example.org)"),
    }
}

/// Refuses an identity on a channel that is not configured.
fn check_channel(users: &Users<'_>, identity: &Identity) -> Result<()> {
    let channels = &users.config().channels;
    if identity.channel == GATEWAY_CHANNEL || channels.contains_key(&identity.channel) {
        return Ok(());
    }
    let names: Vec<&str> = channels.keys().map(String::as_str).collect();
    let configured = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
    bail!(
        "can't link {identity}: no channel is called {:?} (configured in [channels]: {configured}; `{GATEWAY_CHANNEL}` \
         names gateway logins)",
        identity.channel
    )
}

/// Refuses an identity linked to someone other than `user`, naming them.
fn check_not_taken(users: &Users<'_>, identity: &Identity, user: &str) -> Result<()> {
    match users.database.directory.by_identity(identity)? {
        Some(holder) if holder.id != user => bail!("can't link {identity} to {user}: it is linked to {}", holder.id),
        Some(_) | None => Ok(()),
    }
}

/// What a merge moved, in words; `None` when nothing moved.
fn describe(summary: &MergeSummary) -> Option<String> {
    let counted = [
        (summary.memories, "memory", "memories"),
        (summary.sessions, "session", "sessions"),
        (summary.files, "file", "files"),
        (summary.jobs, "scheduled job", "scheduled jobs"),
        (summary.usage, "usage record", "usage records"),
    ];
    let mut parts: Vec<String> = counted
        .iter()
        .filter(|(count, _, _)| *count > 0)
        .map(|(count, one, many)| format!("{count} {}", if *count == 1 { one } else { many }))
        .collect();
    if summary.document {
        parts.push("memory.md".to_owned());
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn summary_json(summary: &MergeSummary) -> serde_json::Value {
    json!({
        "memories": summary.memories,
        "sessions": summary.sessions,
        "files": summary.files,
        "jobs": summary.jobs,
        "usage": summary.usage,
        "document": summary.document,
    })
}

/// Links `identity` to `user` and merges what it said as a stranger into their context;
/// prints what happened. Running it again finishes a merge that was cut short.
fn link_and_merge(users: &Users<'_>, user: &User, identity: &Identity) -> Result<()> {
    let new = users.database.directory.link(&user.id, identity, now_ms())?;
    let from = stranger_context(&identity.channel, &identity.sender_id);
    let environment = users.environment;
    let paths = ContextPaths::new(&environment.paths.home, &environment.workspace());
    let merged = merge_context(&environment.database()?, &paths, &from, &user.context)
        .map_err(|error| anyhow!("linked {identity} to {}, but {error}; run the same command again", user.id))?;
    let moved = describe(&merged);
    if new || moved.is_some() {
        users.audit(
            AuditKind::UserChange,
            &user.id,
            json!({"action": "link", "identity": identity.to_string(), "merged_from": from, "merged": summary_json(&merged)}),
        );
    }
    if new {
        println!("linked {identity} to {}: their messages from there go to {}", user.id, user.context);
    } else {
        println!("{identity} was already linked to {}", user.id);
    }
    if let Some(moved) = moved {
        println!("merged what {identity} had as a stranger ({from}) into {}: {moved}; nothing was lost", user.context);
    }
    Ok(())
}

/// `users link`.
pub(super) fn link(users: &Users<'_>, id: &str, identity: &str) -> Result<()> {
    let identity = parse_identity(identity)?;
    let user = users.user(id)?;
    check_channel(users, &identity)?;
    check_not_taken(users, &identity, &user.id)?;
    link_and_merge(users, &user, &identity)
}

/// `users unlink`.
pub(super) fn unlink(users: &Users<'_>, identity: &str) -> Result<()> {
    let identity = parse_identity(identity)?;
    let holder = users.database.directory.by_identity(&identity)?;
    if !users.database.directory.unlink(&identity)? {
        bail!("can't unlink {identity}: it is linked to nobody");
    }
    let holder = holder.map(|user| user.id).unwrap_or_default();
    users.audit(AuditKind::UserChange, &holder, json!({"action": "unlink", "identity": identity.to_string()}));
    println!("unlinked {identity} from {holder}; from now on it writes as a stranger");
    Ok(())
}

/// Who a pairing code's sender becomes.
pub(super) enum PairingTarget {
    /// An approved sender (a guest in their own context), as before there were users.
    Guest,
    /// Linked to this existing user.
    Existing(String),
    /// A new user with this id and people's role, linked.
    New {
        /// The new user's id.
        id: String,
        /// Their people's role.
        role: String,
    },
}

/// `users approve`.
pub(super) fn approve(users: &Users<'_>, code: &str, target: PairingTarget) -> Result<()> {
    let access = &users.access;
    let now = SystemTime::now();
    // Everything that can be refused is checked before the code (good once) is taken.
    let waiting = PendingCodes::pending(access, now)
        .map_err(|error| anyhow!(error))?
        .into_iter()
        .find(|pending| pending.code.eq_ignore_ascii_case(code.trim()));
    let prepared = match (&target, &waiting) {
        (PairingTarget::Guest, _) => None,
        (PairingTarget::Existing(_) | PairingTarget::New { .. }, None) => bail!(
            "can't approve pairing code {}: no such code is waiting (it may have been used already or expired; the \
             sender gets a new one when they write again)",
            code.trim()
        ),
        (PairingTarget::Existing(id), Some(pending)) => {
            let identity = Identity { channel: pending.channel.clone(), sender_id: pending.sender.id.clone() };
            let user = users.user(id)?;
            check_not_taken(users, &identity, &user.id)?;
            Some((user, false))
        }
        (PairingTarget::New { id, role }, Some(pending)) => {
            let identity = Identity { channel: pending.channel.clone(), sender_id: pending.sender.id.clone() };
            let user = new_user(users, id, role, pending.sender.display_name.clone())?;
            check_not_taken(users, &identity, &user.id)?;
            Some((user, true))
        }
    };
    let codes = PairingCodes::with_store(Box::new(SystemRandom), Arc::new(access.clone()));
    let sender = match codes.approve(code, now) {
        Ok(sender) => sender,
        Err(error @ (PairingError::UnknownCode { .. } | PairingError::Expired { .. })) => bail!("{error}"),
        Err(error @ PairingError::Store(_)) => return Err(anyhow!(error)),
    };
    let identity = Identity { channel: sender.channel.clone(), sender_id: sender.sender_id.clone() };
    let name = sender.display_name.as_deref().map(|name| format!(" ({name})")).unwrap_or_default();
    match prepared {
        None => {
            access.approve(&sender).map_err(|error| anyhow!("can't approve {identity}: {error}"))?;
            users.audit(
                AuditKind::UserChange,
                &identity.to_string(),
                json!({"action": "approve", "identity": identity.to_string(), "as": "guest"}),
            );
            println!("approved {identity}{name}; they are answered from their next message");
        }
        Some((user, create)) => {
            if create {
                store_user(users, &user, "users approve --new")?;
                println!("added {} ({}) with the people's role {}", user.id, user.name, user.role);
            }
            link_and_merge(users, &user, &identity)?;
            println!("approved {identity}{name} as {}; they are answered from their next message", user.id);
        }
    }
    Ok(())
}

/// `users revoke`.
pub(super) fn revoke(users: &Users<'_>, sender: &str) -> Result<()> {
    let Some((channel, id)) = sender.split_once(':') else {
        bail!("can't revoke {sender:?}: give CHANNEL:SENDER_ID as `squidbot users list` shows it");
    };
    if users.access.revoke(channel, id).map_err(|error| anyhow!(error))? {
        users.audit(AuditKind::UserChange, sender, json!({"action": "revoke", "identity": sender}));
        println!("revoked {channel}:{id}");
        Ok(())
    } else {
        bail!("can't revoke {sender}: no such approved sender")
    }
}
