//! The REPL's commands on the session tree and the model: `/tree`, `/fork [ENTRY]`,
//! `/model [NAME]` and `/compact`.

use anyhow::Result;
use squidbot_core::agent::{Agent, AgentEvents};
use squidbot_core::clock::{Clock, SystemClock, rfc3339};
use squidbot_core::session::Session;
use squidbot_core::session::branches::{self, LeafMove};

/// `/tree`: the whole tree, `*` on the active branch.
pub(super) async fn tree(agent: &Agent, session: &Session) -> Result<()> {
    let whole = whole(agent, session).await?;
    for row in whole.tree() {
        let marker = if row.active { '*' } else { ' ' };
        let leaf = if row.leaf { "  <- leaf" } else { "" };
        let fork = if row.children > 1 { format!(" ({} branches)", row.children) } else { String::new() };
        println!("{marker} {}{} {}{fork}{leaf}", "  ".repeat(row.depth), row.id, row.text);
    }
    Ok(())
}

/// `/fork [ENTRY]`: the next message continues from ENTRY (default: the reply before the
/// last message, so the last message can be asked again differently).
pub(super) async fn fork(agent: &Agent, session: &mut Session, entry: Option<&str>) -> Result<()> {
    let mut whole = whole(agent, session).await?;
    let Some(entry) = entry.map(str::to_owned).or_else(|| whole.previous_turn_point()) else {
        println!("nothing to fork from yet; /tree lists the entries");
        return Ok(());
    };
    let now = rfc3339(SystemClock.now());
    let leaf = branches::move_leaf(agent.store().as_ref(), &mut whole, &entry, LeafMove::Fork, now).await?;
    whole.release_compacted();
    *session = whole;
    println!("(forked at {leaf}; the next message continues from there on a new branch)");
    Ok(())
}

/// `/compact`: condenses every turn but the last now.
pub(super) async fn compact(agent: &Agent, session: &mut Session, events: &dyn AgentEvents) -> Result<()> {
    match agent.compact_now(session, events).await? {
        Some(condensed) => println!("(condensed {condensed} older messages into a summary)"),
        None => println!("(nothing to condense: compaction is off or there is only one turn)"),
    }
    Ok(())
}

/// The stored tree with `session`'s leaf (the open session may hold only the branch the
/// model sees).
async fn whole(agent: &Agent, session: &Session) -> Result<Session> {
    if !session.is_persisted() || !session.is_partial() {
        return Ok(session.clone());
    }
    let Some(stored) = agent.store().load_boxed(session.key()).await? else { return Ok(session.clone()) };
    let mut whole = Session::from_loaded(stored);
    for entry in session.entries() {
        if whole.entry(&entry.id).is_none() {
            whole.append_loaded(entry.clone());
        }
    }
    match session.leaf() {
        Some(leaf) => {
            whole.checkout(leaf);
        }
        None => whole.start_new_branch(),
    }
    Ok(whole)
}
