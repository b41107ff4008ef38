//! `squidbot approvals list|approve|deny`: the tool calls waiting for an admin, decided
//! here as the owner. Decisions land in the database, where a running gateway's waiting
//! turn finds them within a second.

use anyhow::{Result, anyhow};
use serde_json::{Value, json};
use squidbot_core::leaks::LeakScanner;
use squidbot_core::people::OWNER_CONTEXT;
use squidbot_store::ApprovalListing;
use squidbot_types::people::{ApprovalRequest, ApprovalStatus};

use crate::cli::ApprovalsAction;
use crate::wiring::Environment;

/// Most requests `list` prints.
const LIST_LIMIT: usize = 200;

/// Runs an approvals action.
pub fn run(environment: &Environment, action: ApprovalsAction) -> Result<()> {
    let database = crate::people::open(environment)?;
    match action {
        ApprovalsAction::List { all, json } => {
            let listing = if all { ApprovalListing::All } else { ApprovalListing::Pending };
            let requests = database.approvals.list(LIST_LIMIT, listing)?;
            let leaks = environment.leak_scanner();
            list(&requests, &leaks, json)
        }
        ApprovalsAction::Approve { id } => decide(environment, &database, &id, Decision::Approve),
        ApprovalsAction::Deny { id, reason } => decide(environment, &database, &id, Decision::Deny { reason }),
    }
}

/// What the owner decides.
#[derive(Debug)]
enum Decision {
    Approve,
    Deny { reason: Option<String> },
}

fn decide(
    environment: &Environment,
    database: &crate::people::PeopleDatabase,
    id: &str,
    decision: Decision,
) -> Result<()> {
    let people = database.policy(environment.config());
    let admin = people.actor_for_context(OWNER_CONTEXT);
    let (approve, reason) = match decision {
        Decision::Approve => (true, None),
        Decision::Deny { reason } => (false, reason),
    };
    let request = people.decide(id.trim(), &admin, approve, reason).map_err(|error| anyhow!("{error}"))?;
    let who = who(&request);
    match &request.status {
        ApprovalStatus::Approved { .. } => {
            println!("approved {}: `{}` for {who} runs once, as shown", request.id, request.tool);
        }
        ApprovalStatus::Denied { reason, .. } => {
            let reason = reason.as_deref().map(|reason| format!(" ({reason})")).unwrap_or_default();
            println!("denied {}: `{}` for {who} does not run{reason}", request.id, request.tool);
        }
        ApprovalStatus::Pending | ApprovalStatus::Expired | ApprovalStatus::Abandoned => {
            println!("{} is {}", request.id, request.status.name());
        }
    }
    Ok(())
}

/// Who asked, in words.
fn who(request: &ApprovalRequest) -> String {
    match &request.actor.user {
        Some(user) if *user != request.actor.name => format!("{user} ({})", request.actor.name),
        Some(user) => user.clone(),
        None => format!("{} (a guest)", request.actor.name),
    }
}

/// The arguments as shown: secrets redacted, JSON when they are JSON.
fn shown_arguments(request: &ApprovalRequest, leaks: &LeakScanner) -> (String, Value) {
    let (text, _) = leaks.redact(&request.arguments);
    let value = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
    (text, value)
}

fn decision(status: &ApprovalStatus) -> (Option<&str>, Option<&str>) {
    match status {
        ApprovalStatus::Approved { by } => (Some(by), None),
        ApprovalStatus::Denied { by, reason } => (Some(by), reason.as_deref()),
        ApprovalStatus::Pending | ApprovalStatus::Expired | ApprovalStatus::Abandoned => (None, None),
    }
}

fn list(requests: &[ApprovalRequest], leaks: &LeakScanner, as_json: bool) -> Result<()> {
    if as_json {
        let rows: Vec<Value> = requests
            .iter()
            .map(|request| {
                let (decided_by, reason) = decision(&request.status);
                json!({
                    "id": request.id,
                    "status": request.status.name(),
                    "tool": request.tool,
                    "arguments": shown_arguments(request, leaks).1,
                    "rule": request.rule,
                    "user": request.actor.user,
                    "name": request.actor.name,
                    "role": request.actor.role,
                    "context": request.actor.context,
                    "session_key": request.session_key,
                    "created_ms": request.created_ms,
                    "expires_ms": request.expires_ms,
                    "decided_ms": request.decided_ms,
                    "decided_by": decided_by,
                    "reason": reason,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows).map_err(|error| anyhow!(error))?);
        return Ok(());
    }
    if requests.is_empty() {
        println!("no approval requests waiting");
        return Ok(());
    }
    for request in requests {
        let (decided_by, reason) = decision(&request.status);
        let decided = match (decided_by, reason) {
            (Some(by), Some(reason)) => format!(" by {by}: {reason}"),
            (Some(by), None) => format!(" by {by}"),
            (None, _) => String::new(),
        };
        println!(
            "{}  {}{decided}  `{}` for {}, people's role {}  asked {}  expires {}",
            request.id,
            request.status.name(),
            request.tool,
            who(request),
            request.actor.role,
            super::users::local_time_ms(request.created_ms),
            super::users::local_time_ms(request.expires_ms),
        );
        println!("    arguments  {}", shown_arguments(request, leaks).0);
        println!("    why        {}", request.rule);
    }
    if requests.iter().any(|request| request.status == ApprovalStatus::Pending) {
        println!("decide with `squidbot approvals approve ID` or `squidbot approvals deny ID [--reason TEXT]`");
    }
    Ok(())
}
