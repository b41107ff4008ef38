//! `squidbot sessions list|show|archive`, and through `branches` the tree, forks,
//! exports and search.

mod branches;

use anyhow::{Result, bail};
use squidbot_core::session::Session;
use squidbot_core::store::SessionStore;
use squidbot_store::{JsonlSessionStore, SessionStatus, SqliteSessionIndex};
use squidbot_types::session::{EntryBody, MessageRole, SessionEntry};

use crate::cli::SessionsAction;
use crate::wiring::Environment;

/// Runs a sessions action.
pub async fn run(environment: &Environment, action: SessionsAction) -> Result<()> {
    let store = JsonlSessionStore::new(environment.paths.sessions());
    match action {
        SessionsAction::Archive { key } => {
            let archived = environment.housekeeping()?.archive(&key).await?;
            println!("archived {key} ({} memories extracted); using it again resumes it", archived.memories);
            Ok(())
        }
        SessionsAction::List(flags) => {
            let sessions = store.list().await?;
            let index = SqliteSessionIndex::new(environment.database()?);
            let statuses: std::collections::HashMap<String, &'static str> = index
                .list()?
                .into_iter()
                .map(|entry| {
                    let status = match entry.status {
                        SessionStatus::Active => "active",
                        SessionStatus::Archived => "archived",
                    };
                    (entry.key, status)
                })
                .collect();
            let status_of = |key: &str| statuses.get(key).copied().unwrap_or("active");
            if flags.json {
                let rows: Vec<serde_json::Value> = sessions
                    .iter()
                    .map(|session| {
                        serde_json::json!({
                            "key": session.key, "status": status_of(&session.key), "context": session.context, "created": session.created,
                            "updated": session.updated, "entries": session.entry_count,
                            "messages": session.message_count, "preview": session.preview,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
            }
            if sessions.is_empty() {
                println!("no sessions yet");
                return Ok(());
            }
            println!("{:<28} {:>8}  {:<20}  LAST MESSAGE", "KEY", "MESSAGES", "UPDATED");
            for session in sessions {
                println!(
                    "{:<28} {:>8}  {:<20}  {}",
                    session.key, session.message_count, session.updated, session.preview
                );
            }
            Ok(())
        }
        SessionsAction::Show { key, json } => {
            let session = load(&store, &key).await?;
            for entry in session.active_path() {
                if json {
                    println!("{}", serde_json::to_string(entry)?);
                } else {
                    println!("{}", describe(entry, usize::MAX));
                }
            }
            Ok(())
        }
        SessionsAction::Tree { key, json } => branches::tree(environment, &key, json).await,
        SessionsAction::Fork { key, at, new_key } => branches::fork(environment, &key, &at, new_key.as_deref()).await,
        SessionsAction::Switch { key, to } => branches::switch(environment, &key, &to).await,
        SessionsAction::Export { key, format, output, active } => {
            branches::export_session(environment, &key, &format, output, active).await
        }
        SessionsAction::Search { query, limit, json, reindex } => {
            branches::search(environment, &query, limit, json, reindex).await
        }
    }
}

async fn load(store: &JsonlSessionStore, key: &str) -> Result<Session> {
    let Some(loaded) = store.load(key).await? else {
        bail!("can't find session {key}; `squidbot sessions list` shows the existing ones");
    };
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(Session::from_loaded(loaded))
}

fn clip(text: &str, limit: usize) -> String {
    let single: String = if limit == usize::MAX { text.to_owned() } else { text.replace('\n', " ") };
    if single.len() <= limit {
        return single;
    }
    format!("{}…", &single[..squidbot_core::text::floor_char_boundary(&single, limit)])
}

/// One line (or block) describing an entry.
fn describe(entry: &SessionEntry, limit: usize) -> String {
    match &entry.body {
        EntryBody::Message { role, content, model, interrupted, .. } => {
            let who = match role {
                MessageRole::User => "user".to_owned(),
                MessageRole::Assistant => {
                    format!("assistant{}", model.as_ref().map(|model| format!(" ({model})")).unwrap_or_default())
                }
            };
            let flag = if *interrupted { " [interrupted]" } else { "" };
            format!("[{who}]{flag} {}", clip(content, limit))
        }
        EntryBody::ToolCall { name, arguments, .. } => format!("  → {name} {}", clip(arguments, limit.min(200))),
        EntryBody::ToolResult { name, content, is_error, .. } => {
            format!("  ← {name}{} {}", if *is_error { " (error)" } else { "" }, clip(content, limit.min(200)))
        }
        EntryBody::Compaction { summary, condensed, method, .. } => {
            format!("(compaction, {method}: {condensed} messages → {})", clip(summary, limit.min(200)))
        }
        EntryBody::Delegate { worker, agent, status, result, session, .. } => {
            format!("[background {agent} {worker} {status} → {session}] {}", clip(result, limit))
        }
        EntryBody::ModelChange { previous, new } => {
            format!("(model {} → {new})", if previous.is_empty() { "none" } else { previous })
        }
    }
}
