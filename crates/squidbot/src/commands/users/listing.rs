//! `squidbot users list` and `users show`: who the users are, what they are linked to,
//! and, for one user, their usage and budget.

use std::time::SystemTime;

use anyhow::{Result, anyhow};
use serde_json::{Value, json};
use squidbot_channels::{ApprovedSenders, PendingCodes};
use squidbot_core::clock::unix_seconds;
use squidbot_core::people::budget::{day_start_ms, effective, month_start_ms};
use squidbot_core::people::{Directory, RoleBook, UsageLedger, UsageSubject};
use squidbot_types::people::{Identity, UsageTotals, User};

use super::{Users, budget_lines, local_time, local_time_ms, now_ms};

/// A user with what `list` and `show` print beside them.
struct Listed {
    user: User,
    identities: Vec<Identity>,
    token_created_ms: Option<i64>,
}

fn listed(users: &Users<'_>, user: User) -> Result<Listed> {
    let identities = users.database.directory.identities(&user.id)?;
    let token_created_ms = users.database.directory.token_created_ms(&user.id)?;
    Ok(Listed { user, identities, token_created_ms })
}

fn identity_names(identities: &[Identity]) -> Vec<String> {
    identities.iter().map(ToString::to_string).collect()
}

fn user_json(listed: &Listed) -> Value {
    let user = &listed.user;
    json!({
        "id": user.id,
        "name": user.name,
        "role": user.role,
        "context": user.context,
        "disabled": user.disabled,
        "created_ms": user.created_ms,
        "identities": identity_names(&listed.identities),
        "token": listed.token_created_ms.is_some(),
    })
}

/// `users list`.
pub(super) fn list(users: &Users<'_>, json: bool) -> Result<()> {
    let people =
        users.database.directory.users()?.into_iter().map(|user| listed(users, user)).collect::<Result<Vec<_>>>()?;
    let access = &users.access;
    let approved = access.list().map_err(|error| anyhow!(error))?;
    let pending = PendingCodes::pending(access, SystemTime::now()).map_err(|error| anyhow!(error))?;
    if json {
        let value = json!({
            "users": people.iter().map(user_json).collect::<Vec<_>>(),
            "approved": approved.iter().map(|sender| json!({
                "channel": sender.channel,
                "sender_id": sender.sender_id,
                "display_name": sender.display_name,
                "approved_at": unix_seconds(sender.approved_at),
            })).collect::<Vec<_>>(),
            "pending": pending.iter().map(|code| json!({
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
    if people.is_empty() && approved.is_empty() && pending.is_empty() {
        println!("no users, no approved senders and no pairing codes waiting");
        return Ok(());
    }
    if !people.is_empty() {
        let id_width = people.iter().map(|listed| listed.user.id.len()).max().unwrap_or(0).max(2);
        let role_width = people.iter().map(|listed| listed.user.role.len()).max().unwrap_or(0).max(4);
        let context_width = people.iter().map(|listed| listed.user.context.len()).max().unwrap_or(0).max(7);
        println!(
            "{:<id_width$}  {:<role_width$}  {:<context_width$}  {:<8}  {:<5}  IDENTITIES",
            "ID", "ROLE", "CONTEXT", "STATE", "TOKEN"
        );
        for listed in &people {
            let user = &listed.user;
            let identities = identity_names(&listed.identities);
            println!(
                "{:<id_width$}  {:<role_width$}  {:<context_width$}  {:<8}  {:<5}  {}  ({})",
                user.id,
                user.role,
                user.context,
                if user.disabled { "disabled" } else { "enabled" },
                if listed.token_created_ms.is_some() { "yes" } else { "no" },
                if identities.is_empty() { "-".to_owned() } else { identities.join(", ") },
                user.name,
            );
        }
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

fn totals_json(totals: &UsageTotals) -> Value {
    json!({
        "calls": totals.calls,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "cache_read_tokens": totals.cache_read_tokens,
        "cache_write_tokens": totals.cache_write_tokens,
        "total_tokens": totals.tokens(),
        "cost": totals.cost,
    })
}

fn totals_text(totals: &UsageTotals) -> String {
    let cost = if totals.cost > 0.0 { format!(", cost {:.4}", totals.cost) } else { String::new() };
    format!("{} calls, {} tokens{cost}", totals.calls, totals.tokens())
}

/// `users show`.
pub(super) fn show(users: &Users<'_>, id: &str, json: bool) -> Result<()> {
    let listed = listed(users, users.user(id)?)?;
    let user = &listed.user;
    let now = now_ms();
    let subject = UsageSubject::User(user.id.clone());
    let today = users.database.usage.totals(&subject, day_start_ms(now))?;
    let month = users.database.usage.totals(&subject, month_start_ms(now))?;
    let book = RoleBook::new(&users.config().user_roles);
    let policy = book.policy(&user.role);
    let limits = effective(&user.budget, &policy.budget);
    if json {
        let mut value = user_json(&listed);
        value["token_created_ms"] = json!(listed.token_created_ms);
        value["role_exists"] = json!(book.has(&user.role));
        value["usage"] = json!({"today": totals_json(&today), "month": totals_json(&month)});
        value["budget"] = json!({
            "own": user.budget,
            "role": policy.budget,
            "effective": limits,
            "applies": policy.budget_applies,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let identities = identity_names(&listed.identities);
    println!("user        {} ({})", user.id, user.name);
    let unknown_role = if book.has(&user.role) { "" } else { " (no such people's role any more: treated as a guest)" };
    println!("role        {}{unknown_role}", user.role);
    println!("context     {}", user.context);
    println!("state       {}", if user.disabled { "disabled" } else { "enabled" });
    println!("added       {}", local_time_ms(user.created_ms));
    println!("identities  {}", if identities.is_empty() { "none".to_owned() } else { identities.join(", ") });
    match listed.token_created_ms {
        Some(created) => println!("token       made {}", local_time_ms(created)),
        None => println!("token       none"),
    }
    println!("today       {}", totals_text(&today));
    println!("this month  {}", totals_text(&month));
    println!("budget{}", if policy.budget_applies { "" } else { "      exempt (the role's budget_applies is false)" });
    for line in budget_lines(&user.budget, &limits) {
        println!("  {line}");
    }
    Ok(())
}
