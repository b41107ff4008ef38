//! Timeline events read into what the adapter acts on: messages (text, emotes and
//! media, with their reply, thread and mention metadata), edits, encrypted events, and
//! everything else ignored. Pure functions of the event JSON.

use serde::Deserialize;
use serde_json::Value;

/// A timeline event, as far as the adapter cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TimelineEvent {
    /// A message to consider answering.
    Message(RoomMessage),
    /// A replacement (`m.replace`) of an earlier message: edits aren't answered.
    Edit { event_id: String, sender: String },
    /// An end-to-end encrypted event the adapter can't read.
    Encrypted { event_id: String, sender: String },
    /// Anything else (state, reactions, notices, redacted or unknown messages), with
    /// why, for the debug log.
    Ignored { event_id: String, reason: String },
    /// Not an event as the spec describes it, with why, for the warn log.
    Malformed { reason: String },
}

/// What kind of message it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKind {
    /// `m.text`.
    Text,
    /// `m.emote` (`/me waves`).
    Emote,
    /// `m.image`, `m.file`, `m.audio` or `m.video`: a file with an optional caption.
    Media,
}

/// A file referred to by a media message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaFile {
    /// Its `mxc://` URI.
    pub url: String,
    /// Its file name (untrusted).
    pub name: String,
    /// Its media type, when the sender gave one.
    pub mime: Option<String>,
    /// Its size in bytes, when the sender gave one.
    pub size: Option<u64>,
}

/// An `m.room.message` event worth considering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoomMessage {
    /// The event id (unique across rooms).
    pub event_id: String,
    /// The sender's user id.
    pub sender: String,
    /// Text, emote or media.
    pub kind: MessageKind,
    /// The plain-text body (for media, the caption; empty without one).
    pub body: String,
    /// The event this one really replies to (`m.in_reply_to` that isn't only a thread
    /// fallback).
    pub in_reply_to: Option<String>,
    /// Whether the body starts with a reply fallback (any `m.in_reply_to` present).
    pub has_reply_fallback: bool,
    /// The thread's root event id when the message is in a thread.
    pub thread_root: Option<String>,
    /// `m.mentions.user_ids`, when the sender's client sets `m.mentions`.
    pub mentioned_user_ids: Vec<String>,
    /// The file of a media message.
    pub file: Option<MediaFile>,
}

#[derive(Debug, Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    event_type: String,
    event_id: String,
    sender: String,
    #[serde(default)]
    content: Value,
}

#[derive(Debug, Default, Deserialize)]
struct RawContent {
    #[serde(default)]
    msgtype: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    filename: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    info: Option<RawInfo>,
    #[serde(default, rename = "m.relates_to")]
    relates_to: Option<RawRelation>,
    #[serde(default, rename = "m.mentions")]
    mentions: Option<RawMentions>,
}

#[derive(Debug, Default, Deserialize)]
struct RawInfo {
    #[serde(default)]
    mimetype: Option<String>,
    #[serde(default)]
    size: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct RawRelation {
    #[serde(default)]
    rel_type: Option<String>,
    #[serde(default)]
    event_id: Option<String>,
    #[serde(default, rename = "m.in_reply_to")]
    in_reply_to: Option<RawInReplyTo>,
    #[serde(default)]
    is_falling_back: bool,
}

#[derive(Debug, Default, Deserialize)]
struct RawInReplyTo {
    #[serde(default)]
    event_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawMentions {
    #[serde(default)]
    user_ids: Vec<String>,
}

/// Reads one timeline event.
pub(crate) fn parse(event: &Value) -> TimelineEvent {
    let raw: RawEvent = match serde_json::from_value(event.clone()) {
        Ok(raw) => raw,
        Err(error) => return TimelineEvent::Malformed { reason: format!("not a room event: {error}") },
    };
    let RawEvent { event_type, event_id, sender, content } = raw;
    match event_type.as_str() {
        "m.room.message" => parse_message(event_id, sender, content),
        "m.room.encrypted" => TimelineEvent::Encrypted { event_id, sender },
        _ => TimelineEvent::Ignored { event_id, reason: format!("event type {event_type}") },
    }
}

fn parse_message(event_id: String, sender: String, content: Value) -> TimelineEvent {
    if content.as_object().is_some_and(serde_json::Map::is_empty) {
        return TimelineEvent::Ignored { event_id, reason: "redacted message".to_owned() };
    }
    let content: RawContent = match serde_json::from_value(content) {
        Ok(content) => content,
        Err(error) => {
            return TimelineEvent::Malformed { reason: format!("message {event_id} has bad content: {error}") };
        }
    };
    let relation = content.relates_to.unwrap_or_default();
    if relation.rel_type.as_deref() == Some("m.replace") {
        return TimelineEvent::Edit { event_id, sender };
    }
    let Some(msgtype) = content.msgtype else {
        return TimelineEvent::Ignored { event_id, reason: "message without msgtype".to_owned() };
    };
    let Some(body) = content.body else {
        return TimelineEvent::Malformed { reason: format!("message {event_id} has no body") };
    };
    let kind = match msgtype.as_str() {
        "m.text" => MessageKind::Text,
        "m.emote" => MessageKind::Emote,
        "m.image" | "m.file" | "m.audio" | "m.video" => MessageKind::Media,
        // Notices are what bots send; answering them makes bots talk to each other.
        _ => return TimelineEvent::Ignored { event_id, reason: format!("msgtype {msgtype}") },
    };
    let (body, file) = match kind {
        MessageKind::Text | MessageKind::Emote => (body, None),
        MessageKind::Media => {
            let Some(url) = content.url else {
                // Encrypted attachments carry `file` instead of `url`.
                return TimelineEvent::Ignored { event_id, reason: format!("{msgtype} without a plain url") };
            };
            let info = content.info.unwrap_or_default();
            // Since Matrix 1.10 `filename` names the file and `body` is a caption when it
            // differs; before, `body` was the file name.
            let (name, caption) = match content.filename {
                Some(filename) if !filename.is_empty() => {
                    let caption = if body == filename { String::new() } else { body };
                    (filename, caption)
                }
                Some(_) | None => (body, String::new()),
            };
            (caption, Some(MediaFile { url, name, mime: info.mimetype, size: info.size }))
        }
    };
    let in_reply_to_any = relation.in_reply_to.and_then(|reply| reply.event_id);
    let thread_root = match relation.rel_type.as_deref() {
        Some("m.thread") => relation.event_id,
        Some(_) | None => None,
    };
    let in_reply_to = match (&thread_root, relation.is_falling_back) {
        (Some(_), true) => None,
        (Some(_), false) | (None, _) => in_reply_to_any.clone(),
    };
    TimelineEvent::Message(RoomMessage {
        event_id,
        sender,
        kind,
        body,
        in_reply_to,
        has_reply_fallback: in_reply_to_any.is_some(),
        thread_root,
        mentioned_user_ids: content.mentions.map(|mentions| mentions.user_ids).unwrap_or_default(),
        file,
    })
}

/// Removes a reply fallback from a reply's body: the leading lines quoted with `> `
/// up to the first blank line. A body quoting without a blank line after is left as
/// it is (nothing would remain of it).
pub(crate) fn strip_reply_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body;
    }
    let Some((quoted, rest)) = body.split_once("\n\n") else {
        return body;
    };
    if quoted.lines().all(|line| line.starts_with("> ") || line == ">") { rest } else { body }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(content: Value) -> TimelineEvent {
        parse(&json!({
            "type": "m.room.message",
            "event_id": "$event",
            "sender": "@alice:localhost",
            "origin_server_ts": 1,
            "content": content,
        }))
    }

    fn expect_message(content: Value) -> RoomMessage {
        match message(content) {
            TimelineEvent::Message(message) => message,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn a_text_message_is_read() {
        let read = expect_message(
            json!({"msgtype": "m.text", "body": "hello", "m.mentions": {"user_ids": ["@bot:localhost"]}}),
        );
        assert_eq!(read.event_id, "$event");
        assert_eq!(read.sender, "@alice:localhost");
        assert_eq!(read.kind, MessageKind::Text);
        assert_eq!(read.body, "hello");
        assert_eq!(read.mentioned_user_ids, vec!["@bot:localhost".to_owned()]);
        assert_eq!((read.in_reply_to, read.thread_root, read.file), (None, None, None));
    }

    #[test]
    fn notices_edits_and_encrypted_events_are_told_apart() {
        assert!(matches!(message(json!({"msgtype": "m.notice", "body": "bot"})), TimelineEvent::Ignored { .. }));
        assert!(matches!(message(json!({"msgtype": "m.location", "body": "x"})), TimelineEvent::Ignored { .. }));
        assert!(matches!(message(json!({})), TimelineEvent::Ignored { .. }));
        let edit = message(json!({
            "msgtype": "m.text", "body": "* fixed",
            "m.new_content": {"msgtype": "m.text", "body": "fixed"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$original"},
        }));
        assert_eq!(edit, TimelineEvent::Edit { event_id: "$event".to_owned(), sender: "@alice:localhost".to_owned() });
        let encrypted = parse(&json!({
            "type": "m.room.encrypted", "event_id": "$secret", "sender": "@alice:localhost",
            "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "..."},
        }));
        assert!(matches!(encrypted, TimelineEvent::Encrypted { .. }));
        let reaction = parse(&json!({"type": "m.reaction", "event_id": "$r", "sender": "@a:localhost", "content": {}}));
        assert!(matches!(reaction, TimelineEvent::Ignored { .. }));
    }

    #[test]
    fn malformed_events_are_reported_not_panicked_on() {
        assert!(matches!(parse(&json!({"type": "m.room.message"})), TimelineEvent::Malformed { .. }));
        assert!(matches!(parse(&json!("nonsense")), TimelineEvent::Malformed { .. }));
        assert!(matches!(message(json!({"msgtype": "m.text"})), TimelineEvent::Malformed { .. }));
        assert!(matches!(message(json!({"msgtype": "m.text", "body": 7})), TimelineEvent::Malformed { .. }));
    }

    #[test]
    fn replies_and_threads_are_read() {
        let reply = expect_message(json!({
            "msgtype": "m.text", "body": "> <@bot:localhost> hi\n\nthanks",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$bot-said"}},
        }));
        assert_eq!(reply.in_reply_to.as_deref(), Some("$bot-said"));
        assert!(reply.has_reply_fallback);
        assert_eq!(reply.thread_root, None);

        let in_thread = expect_message(json!({
            "msgtype": "m.text", "body": "in thread",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true,
                             "m.in_reply_to": {"event_id": "$latest"}},
        }));
        assert_eq!(in_thread.thread_root.as_deref(), Some("$root"));
        assert_eq!(in_thread.in_reply_to, None, "a thread's reply fallback isn't a reply");

        let reply_in_thread = expect_message(json!({
            "msgtype": "m.text", "body": "answer",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": false,
                             "m.in_reply_to": {"event_id": "$asked"}},
        }));
        assert_eq!(reply_in_thread.in_reply_to.as_deref(), Some("$asked"));
    }

    #[test]
    fn media_messages_name_their_file_and_caption() {
        let image = expect_message(json!({
            "msgtype": "m.image", "body": "cat.png", "url": "mxc://localhost/abc",
            "info": {"mimetype": "image/png", "size": 1234},
        }));
        assert_eq!(image.kind, MessageKind::Media);
        assert_eq!(image.body, "");
        let file = image.file.unwrap();
        assert_eq!((file.url.as_str(), file.name.as_str()), ("mxc://localhost/abc", "cat.png"));
        assert_eq!((file.mime.as_deref(), file.size), (Some("image/png"), Some(1234)));

        let captioned = expect_message(json!({
            "msgtype": "m.file", "body": "the report", "filename": "report.pdf", "url": "mxc://localhost/def",
        }));
        assert_eq!(captioned.body, "the report");
        assert_eq!(captioned.file.unwrap().name, "report.pdf");

        let encrypted_file = message(json!({"msgtype": "m.file", "body": "x", "file": {"url": "mxc://a/b"}}));
        assert!(matches!(encrypted_file, TimelineEvent::Ignored { .. }));
    }

    #[test]
    fn reply_fallbacks_are_stripped() {
        assert_eq!(strip_reply_fallback("> <@bot:localhost> hi\n> there\n\nthanks\n\nbye"), "thanks\n\nbye");
        assert_eq!(strip_reply_fallback("> <@bot:localhost> hi\n>\n> more\n\nok"), "ok");
        assert_eq!(strip_reply_fallback("no fallback"), "no fallback");
        assert_eq!(strip_reply_fallback("> quoted only"), "> quoted only");
        assert_eq!(strip_reply_fallback("> quote\nnot quoted\n\nrest"), "> quote\nnot quoted\n\nrest");
    }
}
