//! `squidbot audit` and `audit verify`: the newest rows of the audit trail, and the check
//! of its keyed chain with the key kept beside the database.

use std::collections::VecDeque;
use std::time::SystemTime;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use squidbot_core::clock::{from_unix_millis, rfc3339, unix_millis};
use squidbot_core::people::AuditLog;
use squidbot_types::people::AuditRow;

use crate::cli::{AuditAction, AuditArgs};
use crate::wiring::Environment;

/// Rows read from the database at a time.
const PAGE: usize = 5_000;

/// Runs `squidbot audit …`.
pub fn run(environment: &Environment, arguments: &AuditArgs) -> Result<()> {
    let since = match &arguments.since {
        Some(since) => Some(super::usage::since_ms(since, unix_millis(SystemTime::now()))?),
        None => None,
    };
    let database = crate::people::open(environment)?;
    match arguments.action {
        Some(AuditAction::Verify) => {
            return match database.audit.verify() {
                Ok(rows) => {
                    println!("ok: {rows} rows, chain intact");
                    Ok(())
                }
                Err(error) => bail!("the audit trail does not verify: {error}"),
            };
        }
        None => {}
    }
    let rows = newest(&database.audit, arguments.user.as_deref(), since, arguments.limit)?;
    if arguments.json {
        let rows: Vec<Value> = rows.iter().map(row_json).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no audit rows");
        return Ok(());
    }
    for row in &rows {
        let event = &row.event;
        println!(
            "#{:<6} {}  {:<18} {:<16} {:<20} {:<7} {}",
            row.seq,
            super::users::local_time_ms(event.at_ms),
            event.kind.name(),
            event.actor,
            event.subject,
            if event.ok { "ok" } else { "refused" },
            event.detail
        );
    }
    Ok(())
}

/// The newest `limit` rows (oldest first) whose actor is `actor` and written at or after
/// `since`, read a page at a time.
fn newest(log: &dyn AuditLog, actor: Option<&str>, since: Option<i64>, limit: usize) -> Result<Vec<AuditRow>> {
    let mut kept = VecDeque::with_capacity(limit.min(PAGE));
    let mut after = 0;
    loop {
        let page = log.rows(after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for row in page {
            let wanted = actor.is_none_or(|actor| row.event.actor == actor)
                && since.is_none_or(|since| row.event.at_ms >= since);
            if wanted && limit > 0 {
                if kept.len() == limit {
                    kept.pop_front();
                }
                kept.push_back(row);
            }
        }
    }
    Ok(kept.into())
}

fn row_json(row: &AuditRow) -> Value {
    let event = &row.event;
    let detail = serde_json::from_str(&event.detail).unwrap_or_else(|_| Value::String(event.detail.clone()));
    json!({
        "seq": row.seq,
        "at_ms": event.at_ms,
        "at": rfc3339(from_unix_millis(event.at_ms)),
        "kind": event.kind.name(),
        "actor": event.actor,
        "subject": event.subject,
        "ok": event.ok,
        "detail": detail,
    })
}
