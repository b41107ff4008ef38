//! What a reply needs to know about the mail it answers (who wrote it, its subject, its
//! place in the thread), remembered in memory for the last mails received and sent.
//!
//! A reply goes to the sender of the mail named by `OutboundMessage.reply_to`; without
//! one (or when it is no longer remembered), to the latest mail of the conversation.
//! After a restart nothing is remembered until new mail arrives.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// How many mails are remembered.
const REMEMBERED_MAILS: usize = 4096;

/// How many ids a References header keeps: the root and the most recent ones, so long
/// threads don't grow the header without bound.
const MAX_REFERENCES: usize = 20;

/// A mail as a reply to it needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadEntry {
    /// Who the reply goes to.
    pub recipient: String,
    /// Their display name.
    pub recipient_name: Option<String>,
    /// The subject of the mail.
    pub subject: String,
    /// Its Message-ID.
    pub message_id: String,
    /// Its References.
    pub references: Vec<String>,
}

impl ThreadEntry {
    /// The subject of a reply: `Re: <subject>`, without stacking `Re:`.
    pub(crate) fn reply_subject(&self) -> String {
        let subject = self.subject.trim();
        let already_reply = subject.get(..3).is_some_and(|prefix| prefix.eq_ignore_ascii_case("re:"));
        match (already_reply, subject.is_empty()) {
            (true, _) => subject.to_owned(),
            (false, true) => "Re:".to_owned(),
            (false, false) => format!("Re: {subject}"),
        }
    }

    /// The References of a reply: this mail's References and its own id, trimmed to
    /// the root and the most recent ids.
    pub(crate) fn reply_references(&self) -> Vec<String> {
        let mut references: Vec<String> = self.references.clone();
        if !references.contains(&self.message_id) {
            references.push(self.message_id.clone());
        }
        if references.len() > MAX_REFERENCES {
            let recent = references.split_off(references.len() - (MAX_REFERENCES - 1));
            references.truncate(1);
            references.extend(recent);
        }
        references
    }
}

#[derive(Debug, Default)]
struct Remembered {
    by_message: HashMap<String, ThreadEntry>,
    latest_by_conversation: HashMap<String, String>,
    conversation_of: HashMap<String, String>,
    order: VecDeque<String>,
}

/// The remembered mails, shared by the receive loop and `send`.
#[derive(Debug, Default)]
pub(crate) struct Threads {
    remembered: Mutex<Remembered>,
}

impl Threads {
    /// Remembers a mail of `conversation_id` as its latest.
    pub(crate) fn remember(&self, conversation_id: &str, entry: ThreadEntry) {
        let mut remembered = squidbot_core::sync::lock(&self.remembered);
        let message_id = entry.message_id.clone();
        if remembered.by_message.insert(message_id.clone(), entry).is_none() {
            remembered.order.push_back(message_id.clone());
        }
        remembered.latest_by_conversation.insert(conversation_id.to_owned(), message_id.clone());
        remembered.conversation_of.insert(message_id, conversation_id.to_owned());
        while remembered.order.len() > REMEMBERED_MAILS {
            let Some(oldest) = remembered.order.pop_front() else { break };
            remembered.by_message.remove(&oldest);
            if let Some(conversation) = remembered.conversation_of.remove(&oldest)
                && remembered.latest_by_conversation.get(&conversation) == Some(&oldest)
            {
                remembered.latest_by_conversation.remove(&conversation);
            }
        }
    }

    /// The mail a reply answers: `reply_to` if remembered, else the conversation's
    /// latest.
    pub(crate) fn reply_target(&self, reply_to: Option<&str>, conversation_id: &str) -> Option<ThreadEntry> {
        let remembered = squidbot_core::sync::lock(&self.remembered);
        reply_to
            .and_then(|id| remembered.by_message.get(id))
            .or_else(|| {
                let latest = remembered.latest_by_conversation.get(conversation_id)?;
                remembered.by_message.get(latest)
            })
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(message_id: &str, subject: &str) -> ThreadEntry {
        ThreadEntry {
            recipient: "ann@example.org".to_owned(),
            recipient_name: None,
            subject: subject.to_owned(),
            message_id: message_id.to_owned(),
            references: Vec::new(),
        }
    }

    #[test]
    fn replies_say_re_once() {
        assert_eq!(entry("<a>", "Lunch").reply_subject(), "Re: Lunch");
        assert_eq!(entry("<a>", "RE: Lunch").reply_subject(), "RE: Lunch");
        assert_eq!(entry("<a>", "re:Lunch").reply_subject(), "re:Lunch");
        assert_eq!(entry("<a>", "").reply_subject(), "Re:");
        assert_eq!(entry("<a>", "Ré").reply_subject(), "Re: Ré");
    }

    #[test]
    fn references_grow_by_the_answered_id_and_stay_bounded() {
        let mut answered = entry("<c>", "x");
        answered.references = vec!["<a>".to_owned(), "<b>".to_owned()];
        assert_eq!(answered.reply_references(), ["<a>", "<b>", "<c>"]);
        answered.references = (0..30).map(|index| format!("<{index}>")).collect();
        let references = answered.reply_references();
        assert_eq!(references.len(), MAX_REFERENCES);
        assert_eq!(references.first().map(String::as_str), Some("<0>"));
        assert_eq!(references.last().map(String::as_str), Some("<c>"));
        assert_eq!(references[1], "<12>");
    }

    #[test]
    fn the_named_mail_wins_over_the_latest_of_the_conversation() {
        let threads = Threads::default();
        threads.remember("<root>", entry("<root>", "first"));
        threads.remember("<root>", entry("<second>", "second"));
        assert_eq!(threads.reply_target(Some("<root>"), "<root>").unwrap().subject, "first");
        assert_eq!(threads.reply_target(None, "<root>").unwrap().subject, "second");
        assert_eq!(threads.reply_target(Some("<unknown>"), "<root>").unwrap().subject, "second");
        assert_eq!(threads.reply_target(None, "<other>"), None);
    }

    #[test]
    fn old_mails_are_forgotten() {
        let threads = Threads::default();
        for index in 0..=REMEMBERED_MAILS {
            threads.remember(&format!("<conversation-{index}>"), entry(&format!("<{index}>"), "x"));
        }
        assert_eq!(threads.reply_target(Some("<0>"), "<conversation-0>"), None);
        assert!(threads.reply_target(Some("<1>"), "<conversation-1>").is_some());
        let remembered = threads.remembered.lock().unwrap();
        assert_eq!(remembered.by_message.len(), REMEMBERED_MAILS);
        assert_eq!(remembered.latest_by_conversation.len(), REMEMBERED_MAILS);
    }
}
