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
//! Under the people's policy, [`route_for`] sends the direct messages of a person whose
//! identity is linked to a user to that user's context, from whichever channel they write.
//!
//! Keys become file names in the session store, so each part is escaped: `%`, `/`,
//! `\`, whitespace and control characters are written `%XX` (UTF-8 bytes), and so is a
//! `.` that starts a part (no key or part is hidden, `.` or `..`). `:` stays, since Matrix ids (`@alice:example.org`) contain it,
//! and the store keeps it readable. A key whose file name would be longer than the store
//! accepts is cut and ends with `+` and a hash of the whole key, so it stays unique.

use blake2::{Blake2b128, Digest};
use squidbot_types::people::User;

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
            Route { context, session_key: direct_session_key(&message.channel, &message.sender.id) }
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

/// The context and session of `message` when its sender's identity is linked to `user`
/// (`None`: linked to nobody, or no people's policy): a linked person's direct messages
/// go to their own context (the session key stays the channel's and the sender's); a
/// room keeps its context whoever speaks. Without a user this is [`route`].
pub fn route_for(message: &InboundMessage, owners: &[String], user: Option<&User>) -> Route {
    let route = route(message, owners);
    match (message.conversation.kind, user) {
        (ConversationKind::Direct, Some(user)) => Route { context: user.context.clone(), ..route },
        (ConversationKind::Direct, None) | (ConversationKind::Group, _) => route,
    }
}

/// The context `sender_id`'s direct messages on `channel` had while they were a stranger
/// (not an owner, linked to nobody), as [`route`] makes it: where `squidbot users link`
/// finds what they said before.
pub fn stranger_context(channel: &str, sender_id: &str) -> String {
    bounded(format!("user:{}:{}", escape_part(channel), escape_part(sender_id)))
}

/// The session key of `sender_id`'s direct messages on `channel`, as [`route`] makes it.
pub fn direct_session_key(channel: &str, sender_id: &str) -> String {
    bounded(format!("{}:{}", escape_part(channel), escape_part(sender_id)))
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

    fn linked(context: &str) -> User {
        User {
            id: "bob".to_owned(),
            name: "Bob".to_owned(),
            role: "user".to_owned(),
            context: context.to_owned(),
            created_ms: 0,
            disabled: false,
            budget: Default::default(),
        }
    }

    #[test]
    fn a_linked_person_writes_into_their_own_context_from_any_channel() {
        let bob = linked("user:bob");
        let telegram =
            route_for(&message("telegram", ConversationKind::Direct, "555", None, "555"), &owners(), Some(&bob));
        let slack = route_for(&message("slack", ConversationKind::Direct, "D1", None, "U9"), &owners(), Some(&bob));
        assert_eq!(telegram, Route { context: "user:bob".to_owned(), session_key: "telegram:555".to_owned() });
        assert_eq!(slack, Route { context: "user:bob".to_owned(), session_key: "slack:U9".to_owned() });
        // An owner id linked to a user is that user.
        let owner =
            route_for(&message("telegram", ConversationKind::Direct, "1000", None, "1000"), &owners(), Some(&bob));
        assert_eq!(owner.context, "user:bob");
    }

    #[test]
    fn a_room_keeps_its_context_whoever_speaks_and_no_user_is_plain_routing() {
        let bob = linked("user:bob");
        let room = message("matrix", ConversationKind::Group, "!abc:example.org", Some("t1"), "@bob:example.org");
        assert_eq!(route_for(&room, &owners(), Some(&bob)), route(&room, &owners()));
        let stranger = message("telegram", ConversationKind::Direct, "555", None, "555");
        assert_eq!(route_for(&stranger, &owners(), None), route(&stranger, &owners()));
    }

    #[test]
    fn the_direct_session_key_is_the_one_route_makes() {
        let sender = "../odd id";
        let routed = route(&message("email", ConversationKind::Direct, "x", None, sender), &[]);
        assert_eq!(direct_session_key("email", sender), routed.session_key);
        assert_eq!(direct_session_key("telegram", "1000"), "telegram:1000");
    }

    #[test]
    fn the_stranger_context_is_the_one_route_makes() {
        let long = "x".repeat(300);
        for (channel, sender) in
            [("telegram", "77"), ("matrix", "@bob:example.org"), ("email", "../odd id"), ("c", long.as_str())]
        {
            let routed = route(&message(channel, ConversationKind::Direct, "x", None, sender), &owners());
            assert_eq!(stranger_context(channel, sender), routed.context, "{channel}:{sender}");
        }
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
