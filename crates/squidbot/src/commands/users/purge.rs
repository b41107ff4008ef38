//! `squidbot users purge`: deletes one person and their data (memories, sessions,
//! memory.md, files, jobs, usage) after they typed the id to confirm; the audit trail
//! keeps that it happened.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Result, anyhow, bail};
use serde_json::json;
use squidbot_channels::ApprovedSenders;
use squidbot_core::people::{Directory, OWNER_CONTEXT};
use squidbot_store::{ContextPaths, purge_context};
use squidbot_types::people::AuditKind;

use super::Users;

/// Asks on the terminal to type `id`; true when they did.
fn confirmed(id: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!("can't purge {id} without confirmation: standard input is not a terminal; pass --yes");
    }
    print!("This deletes {id} and their memories, sessions, memory.md, files, jobs and usage. Type {id} to confirm: ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim() == id)
}

/// `users purge`.
pub(super) fn purge(users: &Users<'_>, id: &str, yes: bool) -> Result<()> {
    let user = users.user(id)?;
    if user.context == OWNER_CONTEXT {
        bail!(
            "can't purge {id}: their context is `{OWNER_CONTEXT}`, the main workspace and its memories, which are never \
             deleted this way; give someone else the role admin and disable {id} instead"
        );
    }
    if !yes && !confirmed(id)? {
        bail!("can't purge {id}: the id typed was not {id}, so nothing was deleted");
    }
    let environment = users.environment;
    let paths = ContextPaths::new(&environment.paths.home, &environment.workspace());
    let purged = purge_context(&environment.database()?, &paths, &user.context, Some(&user.id))
        .map_err(|error| anyhow!("{error}; {id} is kept, run the same command again"))?;
    // Their accounts go with them: linked nowhere, approved nowhere.
    let identities = users.database.directory.identities(&user.id)?;
    for identity in &identities {
        users.access.revoke(&identity.channel, &identity.sender_id).map_err(|error| anyhow!(error))?;
    }
    users.database.directory.remove_user(&user.id)?;
    users.audit(
        AuditKind::UserChange,
        &user.id,
        json!({
            "action": "purge",
            "role": user.role,
            "context": user.context,
            "memories": purged.memories,
            "sessions": purged.sessions,
            "files": purged.files,
            "jobs": purged.jobs,
            "usage": purged.usage,
            "document": purged.document,
            "identities": identities.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }),
    );
    println!(
        "purged {id}: {} memories, {} sessions, {} files, {} jobs, {} usage records{} deleted, and the user with \
         their links and token; the audit trail keeps that this happened",
        purged.memories,
        purged.sessions,
        purged.files,
        purged.jobs,
        purged.usage,
        if purged.document { ", memory.md" } else { "" }
    );
    Ok(())
}
