//! The in-memory session tree: entries linked by `parent`, an active leaf, and the
//! rebuild of provider-ready history along the active branch.

use std::collections::{HashMap, HashSet};

use squidbot_types::ChatMessage;
use squidbot_types::message::ToolCall;
use squidbot_types::session::{EntryBody, MessageRole, SessionEntry, SessionHeader};

use crate::ids;
use crate::store::LoadedSession;

pub mod branches;
pub mod export;

/// Text given to the model for a tool call whose result was never recorded
/// (the turn was interrupted between the call and its result).
pub const MISSING_RESULT: &str = "interrupted: no result was recorded for this call";

/// A session's tree plus the branch new entries attach to. A session a front end keeps
/// open holds only what the model can still see (see [`Session::release_compacted`]);
/// the store keeps the whole tree.
#[derive(Debug, Clone)]
pub struct Session {
    header: SessionHeader,
    entries: Vec<SessionEntry>,
    index: HashMap<String, usize>,
    leaf: Option<String>,
    persisted: bool,
    partial: bool,
    /// The model someone chose for this session (`/model`), instead of the agent's; kept
    /// while the session is open, recorded as a model change by the next turn.
    chosen_model: Option<String>,
}

impl Session {
    /// A brand-new session that is not on disk yet.
    pub fn new(header: SessionHeader) -> Self {
        Self {
            header,
            entries: Vec::new(),
            index: HashMap::new(),
            leaf: None,
            persisted: false,
            partial: false,
            chosen_model: None,
        }
    }

    /// A session read from the store; the active leaf is the last entry written, or where
    /// a later leaf line moved it (an unknown target leaves it at the last entry).
    pub fn from_loaded(loaded: LoadedSession) -> Self {
        let mut session = Self::new(loaded.header);
        session.persisted = true;
        for entry in loaded.entries {
            session.insert(entry);
        }
        if let Some(line) = loaded.moved_leaf {
            match line.leaf {
                Some(leaf) => {
                    session.checkout(&leaf);
                }
                None => session.start_new_branch(),
            }
        }
        session
    }

    /// Adds an entry read from elsewhere (already written) after the others; it becomes
    /// the leaf.
    pub fn append_loaded(&mut self, entry: SessionEntry) {
        self.insert(entry);
    }

    fn insert(&mut self, entry: SessionEntry) {
        self.leaf = Some(entry.id.clone());
        self.index.insert(entry.id.clone(), self.entries.len());
        self.entries.push(entry);
    }

    /// The header line.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The session key.
    pub fn key(&self) -> &str {
        &self.header.key
    }

    /// True once the header has been written to the store.
    pub fn is_persisted(&self) -> bool {
        self.persisted
    }

    /// Records that the header is now on disk.
    pub fn mark_persisted(&mut self) {
        self.persisted = true;
    }

    /// The entries held in memory, in the order written: every entry, unless
    /// [`Session::is_partial`].
    pub fn entries(&self) -> &[SessionEntry] {
        &self.entries
    }

    /// True once [`Session::release_compacted`] dropped entries: the store has the rest.
    pub fn is_partial(&self) -> bool {
        self.partial
    }

    /// Keeps in memory only the active branch from the first entry the latest compaction
    /// kept, and lets go of the rest (the summarised turns and other branches, all on
    /// disk). History, turn starts and the summary read the same afterwards, so a long
    /// conversation costs memory for what the model sees, not for all it ever said.
    /// Returns how many entries were released.
    pub fn release_compacted(&mut self) -> usize {
        let (kept, leaf) = {
            let path = self.active_path();
            let (start, summary) = compacted_start(&path);
            if summary.is_none() || path.len() - start == self.entries.len() {
                return 0;
            }
            let kept: HashSet<&str> = path[start..].iter().map(|entry| entry.id.as_str()).collect();
            let kept: Vec<SessionEntry> =
                self.entries.iter().filter(|entry| kept.contains(entry.id.as_str())).cloned().collect();
            (kept, self.leaf.clone())
        };
        let released = self.entries.len() - kept.len();
        self.entries = Vec::with_capacity(kept.len());
        self.index = HashMap::with_capacity(kept.len());
        for entry in kept {
            self.insert(entry);
        }
        self.leaf = leaf;
        self.partial = true;
        released
    }

    /// Looks an entry up by id.
    pub fn entry(&self, id: &str) -> Option<&SessionEntry> {
        self.index.get(id).and_then(|position| self.entries.get(*position))
    }

    /// The entry new entries will follow, `None` at the start of a new branch.
    pub fn leaf(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// Makes the next entry a new root: a fresh conversation in the same file (`/new`).
    pub fn start_new_branch(&mut self) {
        self.leaf = None;
    }

    /// Moves the active leaf to an existing entry (used to fork); false if unknown.
    pub fn checkout(&mut self, id: &str) -> bool {
        if self.index.contains_key(id) {
            self.leaf = Some(id.to_owned());
            true
        } else {
            false
        }
    }

    /// Adds an entry after the active leaf and returns a copy to persist.
    pub fn push(&mut self, body: EntryBody, timestamp: String) -> SessionEntry {
        let mut id = ids::entry_id();
        while self.index.contains_key(&id) {
            id = ids::entry_id();
        }
        let entry = SessionEntry { id, parent: self.leaf.clone(), timestamp, body };
        self.insert(entry.clone());
        entry
    }

    /// Entries from the root to the active leaf. A missing parent or a cycle ends the walk.
    pub fn active_path(&self) -> Vec<&SessionEntry> {
        // Every model call walks the branch; a walk longer than the file is a cycle, so
        // the set that stops it is built only then.
        let mut path = Vec::new();
        let mut cursor = self.leaf.as_deref();
        while let Some(id) = cursor {
            if path.len() > self.entries.len() {
                return self.active_path_guarded();
            }
            let Some(entry) = self.entry(id) else { break };
            path.push(entry);
            cursor = entry.parent.as_deref();
        }
        path.reverse();
        path
    }

    /// [`Session::active_path`] for a file whose parent links loop: the walk stops before
    /// the first entry it meets again.
    fn active_path_guarded(&self) -> Vec<&SessionEntry> {
        let mut path = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor = self.leaf.as_deref();
        while let Some(id) = cursor {
            if !seen.insert(id) {
                break;
            }
            let Some(entry) = self.entry(id) else { break };
            path.push(entry);
            cursor = entry.parent.as_deref();
        }
        path.reverse();
        path
    }

    /// Children of an entry (or the roots for `None`), in file order.
    pub fn children(&self, parent: Option<&str>) -> Vec<&SessionEntry> {
        self.entries.iter().filter(|entry| entry.parent.as_deref() == parent).collect()
    }

    /// True when the active branch holds no user or assistant message yet.
    pub fn branch_is_empty(&self) -> bool {
        !self.active_path().iter().any(|entry| matches!(entry.body, EntryBody::Message { .. }))
    }

    /// The model chosen for this session with `/model`, if any (turns use it instead of
    /// the agent's own).
    pub fn chosen_model(&self) -> Option<&str> {
        self.chosen_model.as_deref()
    }

    /// Chooses the model the next turns use; `None` goes back to the agent's.
    pub fn choose_model(&mut self, model: Option<String>) {
        self.chosen_model = model;
    }

    /// The model most recently chosen for this branch (last `model_change`).
    pub fn current_model(&self) -> Option<String> {
        self.active_path().iter().rev().find_map(|entry| match &entry.body {
            EntryBody::ModelChange { new, .. } => Some(new.clone()),
            EntryBody::Message { .. }
            | EntryBody::ToolCall { .. }
            | EntryBody::ToolResult { .. }
            | EntryBody::Compaction { .. }
            | EntryBody::Delegate { .. } => None,
        })
    }

    /// Provider-ready history along the active branch. Every tool call gets exactly one
    /// result right after its assistant message (a missing one becomes an error result),
    /// orphan results are dropped, and empty interrupted replies are left out.
    pub fn history(&self) -> Vec<ChatMessage> {
        let path = self.active_path();
        let (start, summary) = compacted_start(&path);
        let mut raw: Vec<ChatMessage> = Vec::new();
        if let Some(summary) = summary.filter(|summary| !summary.trim().is_empty()) {
            raw.push(ChatMessage::user(format!("{SUMMARY_HEADING}\n{summary}")));
        }
        for entry in &path[start..] {
            match &entry.body {
                EntryBody::Message { role: MessageRole::User, content, images, .. } => {
                    raw.push(ChatMessage::User { content: content.clone(), images: images.clone() });
                }
                EntryBody::Message { role: MessageRole::Assistant, content, interrupted, .. } => {
                    if content.is_empty() && *interrupted {
                        continue;
                    }
                    raw.push(ChatMessage::Assistant { content: content.clone(), tool_calls: Vec::new() });
                }
                EntryBody::ToolCall { call_id, name, arguments } => {
                    let call = ToolCall { id: call_id.clone(), name: name.clone(), arguments: arguments.clone() };
                    match raw.last_mut() {
                        Some(ChatMessage::Assistant { tool_calls, .. }) => tool_calls.push(call),
                        _ => raw.push(ChatMessage::Assistant { content: String::new(), tool_calls: vec![call] }),
                    }
                }
                EntryBody::ToolResult { call_id, name, content, is_error } => raw.push(ChatMessage::Tool {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    content: content.clone(),
                    is_error: *is_error,
                }),
                EntryBody::Delegate { .. } => raw.push(ChatMessage::user(delegate_note(&entry.body))),
                EntryBody::ModelChange { .. } | EntryBody::Compaction { .. } => {}
            }
        }
        repair_tool_pairs(raw)
    }

    /// Ids of the user messages on the active branch that history may start at (after
    /// the latest compaction), oldest first, each with the entry position on the path.
    pub fn turn_starts(&self) -> Vec<(usize, String)> {
        let path = self.active_path();
        let (start, _) = compacted_start(&path);
        path.iter()
            .enumerate()
            .skip(start)
            .filter(|(_, entry)| matches!(entry.body, EntryBody::Message { role: MessageRole::User, .. }))
            .map(|(position, entry)| (position, entry.id.clone()))
            .collect()
    }

    /// The summary of the latest compaction on the active branch, if any.
    pub fn current_summary(&self) -> Option<String> {
        let path = self.active_path();
        compacted_start(&path).1.map(str::to_owned)
    }
}

/// How the model sees a background sub-agent's result: a note in the user's place, marked
/// so it is not mistaken for something the user typed.
pub fn delegate_note(body: &EntryBody) -> String {
    let EntryBody::Delegate { worker, agent, task, status, result, session } = body else { return String::new() };
    format!(
        "[Background result: {agent} worker {worker} {status} (its session: {session}). Not a user message; tell the user what it found.]\nTask: {task}\n\n{result}"
    )
}

/// Heading of the synthetic message that carries a compaction summary.
pub const SUMMARY_HEADING: &str = "[Summary of the earlier conversation]";

/// Where history starts on `path` and the summary before it: the latest compaction
/// whose `first_kept` entry is on the path before it wins; otherwise the whole path.
fn compacted_start<'a>(path: &[&'a SessionEntry]) -> (usize, Option<&'a str>) {
    for (position, entry) in path.iter().enumerate().rev() {
        if let EntryBody::Compaction { summary, first_kept, .. } = &entry.body
            && let Some(kept) = path[..position].iter().position(|candidate| &candidate.id == first_kept)
        {
            return (kept, Some(summary.as_str()));
        }
    }
    (0, None)
}

/// Puts each assistant message's results right after it, in call order, filling gaps.
fn repair_tool_pairs(raw: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut repaired = Vec::with_capacity(raw.len());
    let mut iterator = raw.into_iter().peekable();
    while let Some(message) = iterator.next() {
        let ChatMessage::Assistant { tool_calls, .. } = &message else {
            if matches!(message, ChatMessage::Tool { .. }) {
                continue; // orphan: its call is not on this branch
            }
            repaired.push(message);
            continue;
        };
        let calls = tool_calls.clone();
        let mut results: HashMap<String, ChatMessage> = HashMap::new();
        while let Some(ChatMessage::Tool { .. }) = iterator.peek() {
            if let Some(ChatMessage::Tool { call_id, name, content, is_error }) = iterator.next()
                && calls.iter().any(|call| call.id == call_id)
                && !results.contains_key(&call_id)
            {
                results.insert(call_id.clone(), ChatMessage::Tool { call_id, name, content, is_error });
            }
        }
        repaired.push(message);
        for call in calls {
            let result = results.remove(&call.id).unwrap_or_else(|| ChatMessage::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: MISSING_RESULT.to_owned(),
                is_error: true,
            });
            repaired.push(result);
        }
    }
    repaired
}

#[cfg(test)]
mod tests {
    use super::*;
    use squidbot_types::session::{HeaderTag, SESSION_FORMAT_VERSION};

    fn header() -> SessionHeader {
        SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: "s".into(),
            key: "cli:local".into(),
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

    #[test]
    fn history_follows_the_active_branch_only() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "hello"), "t".into());
        let fork_point = session.push(message(MessageRole::Assistant, "hi"), "t".into()).id;
        session.push(message(MessageRole::User, "branch a"), "t".into());
        assert!(session.checkout(&fork_point));
        session.push(message(MessageRole::User, "branch b"), "t".into());
        let history = session.history();
        assert_eq!(history.len(), 3);
        assert_eq!(history[2], ChatMessage::user("branch b"));
    }

    #[test]
    fn parent_links_that_loop_end_the_walk_before_the_first_repeat() {
        let entry = |id: &str, parent: &str, content: &str| SessionEntry {
            id: id.into(),
            parent: Some(parent.into()),
            timestamp: "t".into(),
            body: message(MessageRole::User, content),
        };
        // A hand-edited file: a -> c -> b -> a, the last line written is the leaf.
        let loaded = LoadedSession {
            header: header(),
            entries: vec![entry("a", "c", "one"), entry("b", "a", "two"), entry("c", "b", "three")],
            moved_leaf: None,
            warnings: Vec::new(),
        };
        let session = Session::from_loaded(loaded);
        let path: Vec<&str> = session.active_path().iter().map(|entry| entry.id.as_str()).collect();
        assert_eq!(path, ["a", "b", "c"], "each entry once, ending at the leaf");
        assert_eq!(session.history().len(), 3);
    }

    #[test]
    fn unanswered_tool_call_gets_an_error_result() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "list"), "t".into());
        session.push(message(MessageRole::Assistant, ""), "t".into());
        for id in ["a", "b"] {
            session.push(
                EntryBody::ToolCall { call_id: id.into(), name: "list_dir".into(), arguments: "{}".into() },
                "t".into(),
            );
        }
        session.push(
            EntryBody::ToolResult {
                call_id: "b".into(),
                name: "list_dir".into(),
                content: "x".into(),
                is_error: false,
            },
            "t".into(),
        );
        let history = session.history();
        assert_eq!(history.len(), 4, "{history:?}");
        assert!(matches!(&history[2], ChatMessage::Tool { call_id, is_error: true, .. } if call_id == "a"));
        assert!(matches!(&history[3], ChatMessage::Tool { call_id, is_error: false, .. } if call_id == "b"));
    }

    #[test]
    fn new_branch_starts_an_empty_history() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "old"), "t".into());
        session.start_new_branch();
        assert!(session.branch_is_empty());
        session.push(message(MessageRole::User, "fresh"), "t".into());
        assert_eq!(session.history(), vec![ChatMessage::user("fresh")]);
        assert_eq!(session.children(None).len(), 2);
    }

    #[test]
    fn compaction_replaces_older_turns_with_its_summary() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "one"), "t".into());
        session.push(message(MessageRole::Assistant, "1"), "t".into());
        let kept = session.push(message(MessageRole::User, "two"), "t".into()).id;
        session.push(message(MessageRole::Assistant, "2"), "t".into());
        session.push(
            EntryBody::Compaction {
                summary: "they said one".into(),
                first_kept: kept,
                condensed: 2,
                method: "summary".into(),
            },
            "t".into(),
        );
        session.push(message(MessageRole::User, "three"), "t".into());
        let history = session.history();
        assert_eq!(history.len(), 4, "{history:?}");
        assert_eq!(history[0], ChatMessage::user(format!("{SUMMARY_HEADING}\nthey said one")));
        assert_eq!(history[1], ChatMessage::user("two"));
        assert_eq!(history[3], ChatMessage::user("three"));
        assert_eq!(session.turn_starts().len(), 2);
    }

    #[test]
    fn releasing_compacted_turns_keeps_what_the_model_sees() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "one"), "t".into());
        let fork_point = session.push(message(MessageRole::Assistant, "1"), "t".into()).id;
        session.push(message(MessageRole::User, "side branch"), "t".into());
        assert!(session.checkout(&fork_point));
        let kept = session.push(message(MessageRole::User, "two"), "t".into()).id;
        session.push(message(MessageRole::Assistant, "2"), "t".into());
        assert_eq!(session.release_compacted(), 0, "nothing is summarised yet");
        session.push(
            EntryBody::Compaction {
                summary: "they said one".into(),
                first_kept: kept.clone(),
                condensed: 2,
                method: "summary".into(),
            },
            "t".into(),
        );
        session.push(message(MessageRole::User, "three"), "t".into());
        let (history, starts, summary) = (session.history(), session.turn_starts(), session.current_summary());

        assert_eq!(session.release_compacted(), 3, "one, 1 and the side branch go");
        assert!(session.is_partial());
        assert_eq!(session.entries().len(), 4);
        assert_eq!(session.entries()[0].id, kept);
        assert_eq!(session.history(), history);
        assert_eq!(session.turn_starts().len(), starts.len());
        assert_eq!(session.current_summary(), summary);
        assert_eq!(session.release_compacted(), 0, "a second call has nothing left to release");

        session.push(message(MessageRole::Assistant, "3"), "t".into());
        assert_eq!(session.history().len(), history.len() + 1, "new turns still attach to the branch");
    }

    #[test]
    fn a_background_result_is_a_marked_note_in_history() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "look it up in the background"), "t".into());
        session.push(message(MessageRole::Assistant, "On it."), "t".into());
        session.push(
            EntryBody::Delegate {
                worker: "ab12cd34".into(),
                agent: "researcher".into(),
                task: "find the release date".into(),
                status: "done".into(),
                result: "It shipped on 3 May.".into(),
                session: "worker:researcher:ab12cd34".into(),
            },
            "t".into(),
        );
        let history = session.history();
        assert_eq!(history.len(), 3);
        let ChatMessage::User { content, .. } = &history[2] else { panic!("{history:?}") };
        assert!(content.starts_with("[Background result: researcher worker ab12cd34 done"), "{content}");
        assert!(content.contains("worker:researcher:ab12cd34") && content.ends_with("It shipped on 3 May."));
    }

    #[test]
    fn empty_interrupted_reply_is_left_out() {
        let mut session = Session::new(header());
        session.push(message(MessageRole::User, "q"), "t".into());
        session.push(
            EntryBody::Message {
                role: MessageRole::Assistant,
                content: String::new(),
                images: Vec::new(),
                model: None,
                usage: None,
                interrupted: true,
            },
            "t".into(),
        );
        assert_eq!(session.history(), vec![ChatMessage::user("q")]);
    }
}
