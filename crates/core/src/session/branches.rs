//! The session tree as front ends show and steer it: listing the tree, switching the
//! active branch, forking at an entry (in the same file, or into a new session).
//!
//! Fork semantics: forking at entry X makes X the active leaf, so the next message
//! continues from X on a new branch; nothing is copied. Switching to entry X makes the
//! newest leaf under X active (naming any entry of a branch lands on its tip). Both are
//! recorded as a leaf line, so the next load (another process, a restart) starts there.
//! Forking into another key copies the branch from its root to X into a new session file
//! (same entry ids), leaving the original untouched.

use serde::Serialize;
use squidbot_types::session::{EntryBody, LeafLine, LeafTag, MessageRole, SessionEntry, SessionHeader};

use super::Session;
use crate::store::{Durability, DynSessionStore, StoreError};

/// Characters of an entry's text a tree row shows.
const SHORT_TEXT_CHARS: usize = 80;

/// One row of [`Session::tree`], in depth-first order (children in the order written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeNode {
    /// Entry id.
    pub id: String,
    /// The entry it follows, `None` for a root.
    pub parent: Option<String>,
    /// The entry's type as written (`message`, `tool_call`, …).
    pub kind: &'static str,
    /// Who wrote a message entry.
    pub role: Option<MessageRole>,
    /// Its text on one line, clipped.
    pub text: String,
    /// When it was written, RFC 3339.
    pub timestamp: String,
    /// Nesting: how many branch points lie above it.
    pub depth: usize,
    /// How many entries follow it (more than one: a branch point).
    pub children: usize,
    /// True when it is on the active branch.
    pub active: bool,
    /// True for the active leaf itself.
    pub leaf: bool,
}

/// How [`move_leaf`] moves the active leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafMove {
    /// The entry itself becomes the leaf: the next message starts a new branch after it.
    Fork,
    /// The newest leaf under the entry becomes the leaf: back onto an existing branch.
    Switch,
}

/// Why a branch operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BranchError {
    /// The session has no such entry.
    #[error("can't find entry {entry} in session {key}; `squidbot sessions tree {key}` lists them")]
    UnknownEntry {
        /// Session key.
        key: String,
        /// The entry asked for.
        entry: String,
    },
    /// Reading or writing the store failed (or the new key exists).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Session {
    /// The whole tree in depth-first order, each entry with its place and whether it is on
    /// the active branch.
    pub fn tree(&self) -> Vec<TreeNode> {
        let active: std::collections::HashSet<&str> =
            self.active_path().iter().map(|entry| entry.id.as_str()).collect();
        let mut children: std::collections::HashMap<Option<&str>, Vec<&SessionEntry>> =
            std::collections::HashMap::new();
        for entry in &self.entries {
            // An entry whose parent is not here (released, or a hand edit) shows as a root.
            let parent = entry.parent.as_deref().filter(|parent| self.index.contains_key(*parent));
            children.entry(parent).or_default().push(entry);
        }
        let mut rows = Vec::with_capacity(self.entries.len());
        let mut seen = std::collections::HashSet::new();
        let mut stack: Vec<(&SessionEntry, usize)> =
            children.get(&None).map(|roots| roots.iter().rev().map(|entry| (*entry, 0)).collect()).unwrap_or_default();
        while let Some((entry, depth)) = stack.pop() {
            if !seen.insert(entry.id.as_str()) {
                continue;
            }
            let below = children.get(&Some(entry.id.as_str())).map(Vec::as_slice).unwrap_or_default();
            rows.push(TreeNode {
                id: entry.id.clone(),
                parent: entry.parent.clone(),
                kind: entry.body.type_name(),
                role: match &entry.body {
                    EntryBody::Message { role, .. } => Some(*role),
                    EntryBody::ToolCall { .. }
                    | EntryBody::ToolResult { .. }
                    | EntryBody::Compaction { .. }
                    | EntryBody::Delegate { .. }
                    | EntryBody::ModelChange { .. } => None,
                },
                text: short_text(&entry.body),
                timestamp: entry.timestamp.clone(),
                depth,
                children: below.len(),
                active: active.contains(entry.id.as_str()),
                leaf: self.leaf.as_deref() == Some(entry.id.as_str()),
            });
            let child_depth = if below.len() > 1 { depth + 1 } else { depth };
            stack.extend(below.iter().rev().map(|child| (*child, child_depth)));
        }
        rows
    }

    /// The newest leaf under `id` (following the last written child each step), `id`
    /// itself when nothing follows it.
    pub fn tip_under(&self, id: &str) -> Option<String> {
        let mut current = self.entry(id)?.id.clone();
        for _ in 0..=self.entries.len() {
            match self.children(Some(&current)).last() {
                Some(child) => current = child.id.clone(),
                None => break,
            }
        }
        Some(current)
    }

    /// The entries from the root to `id`, for a copy into a new session; `None` when
    /// `id` is unknown.
    pub fn branch_to(&self, id: &str) -> Option<Vec<SessionEntry>> {
        self.entry(id)?;
        let mut probe = self.clone();
        probe.leaf = Some(id.to_owned());
        Some(probe.active_path().into_iter().cloned().collect())
    }

    /// The user message before the last one on the active branch: where `/fork` without an
    /// entry goes back to (the reply before it, so the fork retries that message).
    pub fn previous_turn_point(&self) -> Option<String> {
        let path = self.active_path();
        let last_user =
            path.iter().rposition(|entry| matches!(entry.body, EntryBody::Message { role: MessageRole::User, .. }))?;
        last_user.checked_sub(1).map(|position| path[position].id.clone())
    }
}

/// One line of an entry's text, at most [`SHORT_TEXT_CHARS`] characters.
pub fn short_text(body: &EntryBody) -> String {
    let text = match body {
        EntryBody::Message { content, .. } => content.clone(),
        EntryBody::ToolCall { name, arguments, .. } => format!("{name} {arguments}"),
        EntryBody::ToolResult { name, content, .. } => format!("{name}: {content}"),
        EntryBody::Compaction { summary, condensed, .. } => format!("{condensed} messages condensed: {summary}"),
        EntryBody::Delegate { agent, status, result, .. } => format!("{agent} {status}: {result}"),
        EntryBody::ModelChange { previous, new } => format!("model {previous} → {new}"),
    };
    let single: Vec<&str> = text.split_whitespace().collect();
    let single = single.join(" ");
    if single.chars().count() <= SHORT_TEXT_CHARS {
        return single;
    }
    let mut clipped: String = single.chars().take(SHORT_TEXT_CHARS - 1).collect();
    clipped.push('…');
    clipped
}

/// Moves the active leaf of `session` to `entry` (see [`LeafMove`]) and records it in the
/// store; returns the new leaf.
pub async fn move_leaf(
    store: &dyn DynSessionStore,
    session: &mut Session,
    entry: &str,
    how: LeafMove,
    timestamp: String,
) -> Result<String, BranchError> {
    let unknown = || BranchError::UnknownEntry { key: session.key().to_owned(), entry: entry.to_owned() };
    let target = match how {
        LeafMove::Fork => session.entry(entry).map(|found| found.id.clone()),
        LeafMove::Switch => session.tip_under(entry),
    }
    .ok_or_else(unknown)?;
    if session.is_persisted() {
        let line = LeafLine { kind: LeafTag::Leaf, leaf: Some(target.clone()), timestamp };
        store.move_leaf_boxed(session.key(), &line).await?;
    }
    session.checkout(&target);
    Ok(target)
}

/// The header of a copy of `session` named `new_key`, made at `created` (RFC 3339): a
/// new id, the same context.
pub fn fork_header(session: &Session, new_key: &str, created: String) -> SessionHeader {
    SessionHeader {
        kind: squidbot_types::session::HeaderTag::Header,
        version: squidbot_types::session::SESSION_FORMAT_VERSION,
        id: crate::ids::session_id(),
        key: new_key.to_owned(),
        context: session.header().context.clone(),
        created,
    }
}

/// Copies the branch of `session` from its root to `entry` into a new session under
/// `header` (its key must be free); the copy's leaf is `entry`.
pub async fn fork_into(
    store: &dyn DynSessionStore,
    session: &Session,
    entry: &str,
    header: SessionHeader,
) -> Result<Session, BranchError> {
    let branch = session
        .branch_to(entry)
        .ok_or_else(|| BranchError::UnknownEntry { key: session.key().to_owned(), entry: entry.to_owned() })?;
    store.create_boxed(&header).await?;
    store.append_boxed(&header.key, &branch, Durability::Synced).await?;
    let mut copy = Session::new(header);
    copy.mark_persisted();
    for entry in branch {
        copy.append_loaded(entry);
    }
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionStore;
    use crate::store::memory::MemorySessionStore;
    use squidbot_types::session::{HeaderTag, SESSION_FORMAT_VERSION};

    fn header(key: &str) -> SessionHeader {
        SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: format!("id-{key}"),
            key: key.into(),
            context: "owner".into(),
            created: "2026-11-21T00:00:00Z".into(),
        }
    }

    fn message(role: MessageRole, content: &str) -> EntryBody {
        EntryBody::Message {
            role,
            content: content.into(),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        }
    }

    /// A stored session of two turns; returns it with the first reply's id and the tip.
    async fn two_turns(store: &MemorySessionStore) -> (Session, String, String) {
        let mut session = Session::new(header("s"));
        store.create(session.header()).await.unwrap();
        session.mark_persisted();
        let written = vec![
            session.push(message(MessageRole::User, "one"), "t1".into()),
            session.push(message(MessageRole::Assistant, "reply one"), "t2".into()),
            session.push(message(MessageRole::User, "two"), "t3".into()),
            session.push(message(MessageRole::Assistant, "reply two"), "t4".into()),
        ];
        store.append(session.key(), &written, Durability::Synced).await.unwrap();
        (session, written[1].id.clone(), written[3].id.clone())
    }

    #[tokio::test]
    async fn a_fork_continues_from_the_entry_and_survives_a_reload() {
        let store = MemorySessionStore::new();
        let (mut session, first_reply, tip) = two_turns(&store).await;
        let leaf = move_leaf(&store, &mut session, &first_reply, LeafMove::Fork, "t5".into()).await.unwrap();
        assert_eq!(leaf, first_reply);
        let reloaded = Session::from_loaded(store.load("s").await.unwrap().unwrap());
        assert_eq!(reloaded.leaf(), Some(first_reply.as_str()), "the leaf line is read back");
        let fork = session.push(message(MessageRole::User, "other two"), "t6".into());
        store.append("s", std::slice::from_ref(&fork), Durability::Synced).await.unwrap();

        let tree = session.tree();
        assert_eq!(tree.len(), 5);
        assert_eq!(tree.iter().filter(|node| node.children > 1).count(), 1, "one branch point");
        assert!(tree.iter().any(|node| node.id == tip && !node.active));
        assert!(tree.iter().any(|node| node.id == fork.id && node.active && node.leaf));

        // Naming any entry of the first branch switches to its tip.
        let first_user_two = tree.iter().find(|node| node.text == "two").unwrap().id.clone();
        let leaf = move_leaf(&store, &mut session, &first_user_two, LeafMove::Switch, "t7".into()).await.unwrap();
        assert_eq!(leaf, tip);
        let reloaded = Session::from_loaded(store.load("s").await.unwrap().unwrap());
        assert_eq!(reloaded.leaf(), Some(tip.as_str()));
        assert_eq!(reloaded.history().len(), 4);
    }

    #[tokio::test]
    async fn an_unknown_entry_changes_nothing() {
        let store = MemorySessionStore::new();
        let (mut session, _, tip) = two_turns(&store).await;
        let error = move_leaf(&store, &mut session, "nope", LeafMove::Fork, "t".into()).await.unwrap_err();
        assert!(matches!(error, BranchError::UnknownEntry { .. }), "{error}");
        assert_eq!(session.leaf(), Some(tip.as_str()));
        assert!(store.load("s").await.unwrap().unwrap().moved_leaf.is_none());
    }

    #[tokio::test]
    async fn a_fork_into_a_new_key_copies_the_branch_up_to_the_entry() {
        let store = MemorySessionStore::new();
        let (session, first_reply, _) = two_turns(&store).await;
        let copy = fork_into(&store, &session, &first_reply, header("copy")).await.unwrap();
        assert_eq!(copy.leaf(), Some(first_reply.as_str()));
        let stored = store.load("copy").await.unwrap().unwrap();
        assert_eq!(stored.entries.len(), 2);
        assert_eq!(store.load("s").await.unwrap().unwrap().entries.len(), 4, "the original is untouched");
        let again = fork_into(&store, &session, &first_reply, header("copy")).await.unwrap_err();
        assert!(matches!(again, BranchError::Store(StoreError::AlreadyExists { .. })), "{again}");
    }

    #[test]
    fn fork_without_an_entry_goes_back_before_the_last_message() {
        let mut session = Session::new(header("s"));
        session.push(message(MessageRole::User, "one"), "t".into());
        let reply = session.push(message(MessageRole::Assistant, "1"), "t".into()).id;
        session.push(message(MessageRole::User, "two"), "t".into());
        session.push(message(MessageRole::Assistant, "2"), "t".into());
        assert_eq!(session.previous_turn_point(), Some(reply));
    }
}
