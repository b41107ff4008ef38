//! `squidbot sessions tree|fork|switch|export|search`: the session tree and the
//! transcripts' search, for the owner (every context).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use squidbot_core::clock::{Clock, SystemClock, rfc3339};
use squidbot_core::session::Session;
use squidbot_core::session::branches::{self, LeafMove};
use squidbot_core::session::export::{ExportFormat, ExportScope, export};
use squidbot_core::store::SessionStore;
use squidbot_core::store::search::{SearchScope, SessionSearch};
use squidbot_store::{IndexedSessionStore, MAX_SEARCH_HITS};

use crate::wiring::Environment;

async fn load(store: &IndexedSessionStore, key: &str) -> Result<Session> {
    let Some(loaded) = store.load(key).await? else {
        bail!("can't find session {key}; `squidbot sessions list` shows the existing ones");
    };
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(Session::from_loaded(loaded))
}

/// `sessions tree KEY [--json]`.
pub async fn tree(environment: &Environment, key: &str, json: bool) -> Result<()> {
    let session = load(&environment.session_store()?, key).await?;
    let rows = session.tree();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    for row in rows {
        let marker = if row.active { '*' } else { ' ' };
        let who = match row.role {
            Some(role) => format!("{role:?}").to_lowercase(),
            None => row.kind.to_owned(),
        };
        let fork = if row.children > 1 { format!(" ({} branches)", row.children) } else { String::new() };
        let leaf = if row.leaf { " <- leaf" } else { "" };
        println!("{marker} {}{} {} [{who}] {}{fork}{leaf}", "  ".repeat(row.depth), row.id, row.timestamp, row.text);
    }
    Ok(())
}

/// `sessions fork KEY --at ENTRY [--as NEWKEY]`.
pub async fn fork(environment: &Environment, key: &str, at: &str, new_key: Option<&str>) -> Result<()> {
    let store = environment.session_store()?;
    let mut session = load(&store, key).await?;
    let now = rfc3339(SystemClock.now());
    match new_key {
        Some(new_key) => {
            let header = branches::fork_header(&session, new_key, now);
            branches::fork_into(&store, &session, at, header).await?;
            println!("forked {key} at {at} into {new_key}; the next message there continues from {at}");
        }
        None => {
            branches::move_leaf(&store, &mut session, at, LeafMove::Fork, now).await?;
            println!("forked {key} at {at}; the next message continues from it on a new branch");
        }
    }
    Ok(())
}

/// `sessions switch KEY --to ENTRY`.
pub async fn switch(environment: &Environment, key: &str, to: &str) -> Result<()> {
    let store = environment.session_store()?;
    let mut session = load(&store, key).await?;
    let leaf = branches::move_leaf(&store, &mut session, to, LeafMove::Switch, rfc3339(SystemClock.now())).await?;
    println!("switched {key} to the branch ending at {leaf}");
    Ok(())
}

/// `sessions export KEY --format html|md [-o FILE] [--active]`.
pub async fn export_session(
    environment: &Environment,
    key: &str,
    format: &str,
    output: Option<PathBuf>,
    active_only: bool,
) -> Result<()> {
    let Some(format) = ExportFormat::parse(format) else {
        bail!("can't export as {format:?}: the formats are html and md");
    };
    let session = load(&environment.session_store()?, key).await?;
    let scope = if active_only { ExportScope::ActiveBranch } else { ExportScope::WholeTree };
    let document = export(&session, format, scope, &environment.leak_scanner());
    if document.redactions > 0 {
        eprintln!("note: {} secret(s) were redacted from the export", document.redactions);
    }
    match output {
        Some(path) => {
            std::fs::write(&path, &document.text).with_context(|| format!("can't write {}", path.display()))?;
            println!("wrote {}", path.display());
        }
        None => print!("{}", document.text),
    }
    Ok(())
}

/// `sessions search QUERY [--limit N] [--json] [--reindex]`.
pub async fn search(environment: &Environment, query: &str, limit: usize, json: bool, reindex: bool) -> Result<()> {
    let index = environment.session_search()?;
    if reindex {
        let rebuilt = index.clone();
        let report = tokio::task::spawn_blocking(move || rebuilt.reindex()).await??;
        eprintln!("reindexed {} session(s)", report.indexed);
    }
    let hits = index.search(query, SearchScope::Everything, limit.min(MAX_SEARCH_HITS)).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&hits)?);
        return Ok(());
    }
    if hits.is_empty() {
        println!("no matches");
    }
    for hit in hits {
        println!("{}  {}  {}  {}", hit.key, hit.entry_id, hit.timestamp, hit.snippet.replace('\n', " "));
    }
    Ok(())
}
