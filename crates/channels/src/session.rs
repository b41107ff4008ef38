//! Which context (memory) and session an inbound message belongs to.
//!
//! | conversation | context | session key |
//! |---|---|---|
//! | direct message from an owner | `owner` | `<channel>:<sender>` |
//! | direct message from anyone else | `user:<channel>:<sender>` | `<channel>:<sender>` |
//! | group room | `group:<channel>:<room>` | `<channel>:<room>` |
//! | thread in a group room | `group:<channel>:<room>` | `<channel>:<room>:<thread>` |
//!
//! A room's threads are separate conversations sharing the room's memory. Direct
//! messages ignore threads: a person has one conversation with the bot per channel.
//!
//! Keys become file names in the session store, so each part is escaped: `%`, `/`,
//! `\`, whitespace and control characters are written `%XX` (UTF-8 bytes), and so is a
//! `.` that starts a part (no key or part is hidden, `.` or `..`). `:` stays, since Matrix ids (`@alice:example.org`) contain it,
//! and the store keeps it readable. A key whose file name would be longer than the store
//! accepts is cut and ends with `+` and a hash of the whole key, so it stays unique.

use blake2::{Blake2b128, Digest};

use crate::port::{ConversationKind, InboundMessage};

/// The context of the owners' direct messages: the owner's own memory.
pub const OWNER_CONTEXT: &str = "owner";

/// Longest key, in bytes of its file name: the store's limit (`MAX_KEY_BYTES` in the
/// store's key module), which counts what its percent-encoding makes of the key.
pub const MAX_KEY_FILE_BYTES: usize = 200;

/// Hex digits of the hash that ends a shortened key ([`fingerprint`]: 16 bytes).
const HASH_DIGITS: usize = 32;

/// Where a message goes: whose memory and which conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The memory context (`owner`, `user:…`, `group:…`).
    pub context: String,
    /// The session key.
    pub session_key: String,
}

/// The context and session of `message`; `owners` are the channel's owner sender ids
/// ([`crate::AccessPolicy::owners`]).
pub fn route(message: &InboundMessage, owners: &[String]) -> Route {
    let channel = escape_part(&message.channel);
    match message.conversation.kind {
        ConversationKind::Direct => {
            let sender = escape_part(&message.sender.id);
            let context = if owners.contains(&message.sender.id) {
                OWNER_CONTEXT.to_owned()
            } else {
                bounded(format!("user:{channel}:{sender}"))
            };
            Route { context, session_key: bounded(format!("{channel}:{sender}")) }
        }
        ConversationKind::Group => {
            let room = escape_part(&message.conversation.id);
            let session_key = match &message.conversation.thread {
                Some(thread) => format!("{channel}:{room}:{}", escape_part(thread)),
                None => format!("{channel}:{room}"),
            };
            Route { context: bounded(format!("group:{channel}:{room}")), session_key: bounded(session_key) }
        }
    }
}

/// Whether a character is written as `%XX` in a key part.
fn needs_escape(character: char) -> bool {
    matches!(character, '%' | '/' | '\\') || character.is_whitespace() || character.is_control()
}

/// One part of a key, safe in a file name. An empty part (a malformed id) becomes `%00`
/// so the key keeps its shape.
fn escape_part(part: &str) -> String {
    if part.is_empty() {
        return "%00".to_owned();
    }
    let mut escaped = String::with_capacity(part.len());
    for (index, character) in part.chars().enumerate() {
        if needs_escape(character) || (index == 0 && character == '.') {
            let mut buffer = [0_u8; 4];
            for byte in character.encode_utf8(&mut buffer).bytes() {
                escaped.push_str(&format!("%{byte:02X}"));
            }
        } else {
            escaped.push(character);
        }
    }
    escaped
}

/// Bytes the store's file name spends on `byte`: the bytes it keeps cost one, the ones
/// it percent-encodes three.
fn file_name_cost(byte: u8) -> usize {
    if byte.is_ascii_alphanumeric() || matches!(byte, b':' | b'.' | b'_' | b'@' | b'+' | b'-') { 1 } else { 3 }
}

/// `key`, cut and ended with a hash of the whole key when its file name would be too long.
fn bounded(key: String) -> String {
    let cost: usize = key.bytes().map(file_name_cost).sum();
    if cost <= MAX_KEY_FILE_BYTES {
        return key;
    }
    let budget = MAX_KEY_FILE_BYTES - HASH_DIGITS - 1;
    let mut spent = 0;
    let mut prefix = String::new();
    for character in key.chars() {
        let mut buffer = [0_u8; 4];
        let character_cost: usize = character.encode_utf8(&mut buffer).bytes().map(file_name_cost).sum();
        if spent + character_cost > budget {
            break;
        }
        spent += character_cost;
        prefix.push(character);
    }
    // Don't end the prefix in the middle of a `%XX` escape.
    if let Some(percent) = prefix.get(prefix.len().saturating_sub(2)..).and_then(|tail| tail.find('%')) {
        prefix.truncate(prefix.len().saturating_sub(2) + percent);
    }
    format!("{prefix}+{}", fingerprint(&key))
}

/// A short, collision-resistant fingerprint of `text` (hex), for keys and ids too long
/// to keep whole.
pub(crate) fn fingerprint(text: &str) -> String {
    let digest = Blake2b128::digest(text.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::port::{Conversation, Sender};

    fn message(
        channel: &str,
        kind: ConversationKind,
        conversation: &str,
        thread: Option<&str>,
        sender: &str,
    ) -> InboundMessage {
        InboundMessage {
            channel: channel.to_owned(),
            platform_message_id: "1".to_owned(),
            conversation: Conversation { id: conversation.to_owned(), kind, thread: thread.map(str::to_owned) },
            sender: Sender { id: sender.to_owned(), display_name: None },
            text: String::new(),
            mentions_bot: false,
            attachments: Vec::new(),
            received_at: Timestamp::UNIX_EPOCH,
        }
    }

    fn owners() -> Vec<String> {
        vec!["1000".to_owned()]
    }

    #[test]
    fn a_stranger_direct_message_maps_to_their_own_context() {
        let route = route(&message("telegram", ConversationKind::Direct, "555", None, "555"), &owners());
        assert_eq!(route, Route { context: "user:telegram:555".to_owned(), session_key: "telegram:555".to_owned() });
    }

    #[test]
    fn the_owner_direct_message_maps_to_the_owner_context() {
        let route = route(&message("telegram", ConversationKind::Direct, "1000", Some("t"), "1000"), &owners());
        assert_eq!(route, Route { context: "owner".to_owned(), session_key: "telegram:1000".to_owned() });
    }

    #[test]
    fn a_group_maps_to_the_room_and_threads_to_their_own_sessions() {
        let room = route(&message("matrix", ConversationKind::Group, "!abc:example.org", None, "1000"), &owners());
        assert_eq!(
            room,
            Route {
                context: "group:matrix:!abc:example.org".to_owned(),
                session_key: "matrix:!abc:example.org".to_owned()
            }
        );
        let thread =
            route(&message("slack", ConversationKind::Group, "C123", Some("1712345678.000100"), "U1"), &owners());
        assert_eq!(thread.context, "group:slack:C123");
        assert_eq!(thread.session_key, "slack:C123:1712345678.000100");
    }

    #[test]
    fn matrix_ids_stay_readable() {
        let route = route(&message("matrix", ConversationKind::Direct, "!dm:x.org", None, "@alice:example.org"), &[]);
        assert_eq!(route.session_key, "matrix:@alice:example.org");
        assert_eq!(route.context, "user:matrix:@alice:example.org");
    }

    #[test]
    fn unsafe_characters_are_escaped() {
        let route = route(&message("email", ConversationKind::Direct, "x", None, "../../etc/pass wd\n\0%"), &[]);
        assert_eq!(route.session_key, "email:%2E.%2F..%2Fetc%2Fpass%20wd%0A%00%25");
        assert!(!route.session_key.contains(['/', '\\', '\n', '\0', ' ']));
        let hidden = super::route(&message(".hidden", ConversationKind::Direct, "x", None, "a"), &[]);
        assert_eq!(hidden.session_key, "%2Ehidden:a");
        let empty = super::route(&message("webhook", ConversationKind::Direct, "x", None, ""), &[]);
        assert_eq!(empty.session_key, "webhook:%00");
    }

    #[test]
    fn keys_are_never_ambiguous_about_escapes() {
        // A literal "%2F" in an id is not confused with an escaped "/".
        let slash = route(&message("c", ConversationKind::Direct, "x", None, "a/b"), &[]);
        let literal = route(&message("c", ConversationKind::Direct, "x", None, "a%2Fb"), &[]);
        assert_ne!(slash.session_key, literal.session_key);
    }

    #[test]
    fn long_keys_are_cut_with_a_hash_and_stay_unique() {
        let long_thread = format!("<{}@mail.example.org>", "x".repeat(400));
        let other_thread = format!("<{}@mail.example.org>", "x".repeat(401));
        let first = route(&message("email", ConversationKind::Group, "list", Some(&long_thread), "a"), &[]);
        let second = route(&message("email", ConversationKind::Group, "list", Some(&other_thread), "a"), &[]);
        assert_ne!(first.session_key, second.session_key);
        for key in [&first.session_key, &second.session_key] {
            let cost: usize = key.bytes().map(file_name_cost).sum();
            assert!(cost <= MAX_KEY_FILE_BYTES, "{cost}: {key}");
            assert!(key.starts_with("email:list:%3C") || key.starts_with("email:list:<"), "{key}");
        }
        let unicode = route(&message("c", ConversationKind::Direct, "x", None, &"日本".repeat(100)), &[]);
        let cost: usize = unicode.session_key.bytes().map(file_name_cost).sum();
        assert!(cost <= MAX_KEY_FILE_BYTES, "{cost}");
    }

    #[test]
    fn cut_keys_do_not_end_inside_an_escape() {
        // 161 kept bytes fill the budget up to the middle of the first "%20".
        let sender = format!("{}{}", "a".repeat(161), " ".repeat(50));
        let key = route(&message("c", ConversationKind::Direct, "x", None, &sender), &[]).session_key;
        let (prefix, _hash) = key.rsplit_once('+').unwrap();
        let tail_start = prefix.len().saturating_sub(2);
        assert!(!prefix[tail_start..].contains('%'), "{key}");
        assert!(prefix.ends_with('a'), "{key}");
    }
}
