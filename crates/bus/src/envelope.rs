//! The message envelope `(ROLE #N): [TAG] body`: priorities, formatting, a tolerant parser
//! for incoming text, and the per-sender sequence counters.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Role shown for text that arrives without a header: people.
pub const USER_ROLE: &str = "USER";

/// Longest role name a header may carry.
const MAX_ROLE_CHARS: usize = 64;

/// How a message asks to be handled; at most one tag per message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Priority {
    /// No tag: read it when you get to it.
    #[default]
    #[serde(rename = "normal")]
    Normal,
    /// `[ACK REQUIRED]`: high stakes; the target acknowledges receipt at once.
    #[serde(rename = "ack", alias = "ack_required", alias = "ack-required")]
    AckRequired,
    /// `[URGENT]`: a blocker; the target's current turn is interrupted at a safe point.
    #[serde(rename = "urgent")]
    Urgent,
    /// `[FYI]`: informational, no answer expected.
    #[serde(rename = "fyi")]
    Fyi,
    /// `[TASK]`: a formal delegation the target treats as a new task.
    #[serde(rename = "task")]
    Task,
}

impl Priority {
    /// Every priority, in the order the CLI lists them.
    pub const ALL: [Priority; 5] =
        [Priority::Normal, Priority::AckRequired, Priority::Urgent, Priority::Fyi, Priority::Task];

    /// The tag written after the header, `None` for [`Priority::Normal`].
    pub fn tag(self) -> Option<&'static str> {
        match self {
            Priority::Normal => None,
            Priority::AckRequired => Some("[ACK REQUIRED]"),
            Priority::Urgent => Some("[URGENT]"),
            Priority::Fyi => Some("[FYI]"),
            Priority::Task => Some("[TASK]"),
        }
    }

    /// The short name used on the command line, in JSON and in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Normal => "normal",
            Priority::AckRequired => "ack",
            Priority::Urgent => "urgent",
            Priority::Fyi => "fyi",
            Priority::Task => "task",
        }
    }

    /// Reads a short name (`ack`, `urgent`, `fyi`, `task`, `normal`; `ack_required` too),
    /// ignoring case.
    pub fn parse(name: &str) -> Option<Priority> {
        match name.trim().to_ascii_lowercase().as_str() {
            "normal" | "" => Some(Priority::Normal),
            "ack" | "ack_required" | "ack-required" => Some(Priority::AckRequired),
            "urgent" => Some(Priority::Urgent),
            "fyi" => Some(Priority::Fyi),
            "task" => Some(Priority::Task),
            _ => None,
        }
    }

    /// The priority whose tag starts `text`, with the rest of the text.
    fn strip_tag(text: &str) -> (Priority, &str) {
        for priority in Priority::ALL {
            if let Some(rest) = priority.tag().and_then(|tag| text.strip_prefix(tag)) {
                return (priority, rest.trim_start());
            }
        }
        (Priority::Normal, text)
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Formats a message as the target sees it: `(ROLE #N): [TAG] body`, with the role upper-cased.
pub fn format(role: &str, seq: u64, priority: Priority, body: &str) -> String {
    let role = role.to_uppercase();
    match priority.tag() {
        Some(tag) => format!("({role} #{seq}): {tag} {body}"),
        None => format!("({role} #{seq}): {body}"),
    }
}

/// A message read back from text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The sender's role, upper-case ([`USER_ROLE`] when the text had no header).
    pub role: String,
    /// The sender's sequence number, `None` when the text had no header.
    pub seq: Option<u64>,
    /// The tag found after the header (or at the start of headerless text).
    pub priority: Priority,
    /// The text after header and tag.
    pub body: String,
}

/// Reads `(ROLE #N): [TAG] body`. Never fails: text without a valid header counts as
/// written by a person (`USER`, no sequence), and a tag is recognised either way.
pub fn parse(text: &str) -> Envelope {
    let trimmed = text.trim_start();
    let (role, seq, rest) = match header(trimmed) {
        Some((role, seq, rest)) => (role.to_uppercase(), Some(seq), rest.trim_start()),
        None => (USER_ROLE.to_owned(), None, trimmed),
    };
    let (priority, body) = Priority::strip_tag(rest);
    Envelope { role, seq, priority, body: body.to_owned() }
}

/// Splits `(ROLE #N):` off the start of `text`.
fn header(text: &str) -> Option<(&str, u64, &str)> {
    let inside = text.strip_prefix('(')?;
    let (role, rest) = inside.split_once(" #")?;
    let valid_role = !role.is_empty()
        && role.chars().count() <= MAX_ROLE_CHARS
        && role.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '_' | '-'));
    if !valid_role {
        return None;
    }
    let (number, rest) = rest.split_once("):")?;
    if number.is_empty() || !number.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some((role, number.parse().ok()?, rest))
}

/// Per-sender sequence numbers of one bus instance: each sender's first message is `#1`,
/// every later one the next number, never reused. Nothing is persisted: a new process
/// starts again at 1, as the protocol asks.
#[derive(Debug, Default)]
pub struct Sequences {
    next: Mutex<HashMap<String, u64>>,
}

impl Sequences {
    /// Counters that all start at 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next number of `sender` (its id, not its role: two workers count apart).
    pub fn next(&self, sender: &str) -> u64 {
        let mut next = squidbot_core::sync::lock(&self.next);
        let counter = next.entry(sender.to_owned()).or_insert(0);
        *counter += 1;
        *counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_header_tag_and_body() {
        assert_eq!(format("assistant", 1, Priority::Normal, "hello"), "(ASSISTANT #1): hello");
        assert_eq!(
            format("worker", 42, Priority::Urgent, "build is failing"),
            "(WORKER #42): [URGENT] build is failing"
        );
        assert_eq!(format("user", 2, Priority::AckRequired, "deploy?"), "(USER #2): [ACK REQUIRED] deploy?");
        assert_eq!(format("coder", 3, Priority::Fyi, "done"), "(CODER #3): [FYI] done");
        assert_eq!(format("assistant", 4, Priority::Task, "write tests"), "(ASSISTANT #4): [TASK] write tests");
    }

    #[test]
    fn parses_what_it_formats() {
        for priority in Priority::ALL {
            let text = format("researcher", 7, priority, "look into it\nsecond line");
            let envelope = parse(&text);
            assert_eq!(
                envelope,
                Envelope {
                    role: "RESEARCHER".into(),
                    seq: Some(7),
                    priority,
                    body: "look into it\nsecond line".into()
                }
            );
        }
    }

    #[test]
    fn text_without_a_header_is_from_the_user() {
        assert_eq!(
            parse("  just a note"),
            Envelope { role: USER_ROLE.into(), seq: None, priority: Priority::Normal, body: "just a note".into() }
        );
        assert_eq!(parse("[URGENT] server down").priority, Priority::Urgent);
        assert_eq!(parse("[URGENT] server down").body, "server down");
        for broken in ["(ARCH #): x", "(ARCH #x1): x", "(AR CH #1): x", "(ARCH 1): x", "(#1): x", "(ARCH #1) x", "("] {
            let envelope = parse(broken);
            assert_eq!((envelope.role.as_str(), envelope.seq), (USER_ROLE, None), "{broken}");
            assert_eq!(envelope.body, broken.trim_start(), "{broken}");
        }
        assert_eq!(parse("(ARCH #99999999999999999999999): x").seq, None, "an overflowing number is no header");
        assert_eq!(parse("(builder-bg-1 #3): ok").role, "BUILDER-BG-1");
    }

    #[test]
    fn priorities_read_their_names() {
        for priority in Priority::ALL {
            assert_eq!(Priority::parse(priority.as_str()), Some(priority));
            let json = serde_json::to_string(&priority).unwrap();
            assert_eq!(json, format!("\"{}\"", priority.as_str()));
            assert_eq!(serde_json::from_str::<Priority>(&json).unwrap(), priority);
        }
        assert_eq!(Priority::parse("ACK_REQUIRED"), Some(Priority::AckRequired));
        assert_eq!(Priority::parse("soon"), None);
        assert_eq!(serde_json::from_str::<Priority>("\"ack_required\"").unwrap(), Priority::AckRequired);
    }

    #[test]
    fn sequences_are_per_sender_start_at_one_and_never_repeat() {
        let sequences = Sequences::new();
        assert_eq!(sequences.next("assistant"), 1);
        assert_eq!(sequences.next("assistant"), 2);
        assert_eq!(sequences.next("worker-1"), 1);
        assert_eq!(sequences.next("worker-2"), 1);
        assert_eq!(sequences.next("assistant"), 3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(sequences.next("user")));
        }
        let restarted = Sequences::new();
        assert_eq!(restarted.next("assistant"), 1, "a new bus instance starts again at 1");
    }
}
