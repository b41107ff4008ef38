//! Socket Mode frames and Events API events read into what the adapter acts on: which
//! frames to acknowledge, which events become inbound messages, and the pair Slack
//! sends for one mention told apart from a redelivery.

use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;
use squidbot_channels::{Conversation, ConversationKind, Sender};

use crate::text::plain_text;
use crate::web_api::Identity;

/// How many delivered message ids are remembered to drop the second half of a mention
/// pair (the two events arrive within moments of each other).
const REMEMBERED_DELIVERIES: usize = 512;

/// One Socket Mode frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    /// The connection is ready.
    Hello,
    /// Slack is about to close the connection and wants a new one (`refresh_requested`,
    /// `warning`), or the app's Socket Mode was turned off (`link_disabled`).
    Disconnect {
        /// Slack's reason.
        reason: String,
    },
    /// Something to acknowledge with its `envelope_id`.
    Envelope {
        /// Echoed back as the acknowledgement.
        envelope_id: String,
        /// `events_api`, `slash_commands`, `interactive`.
        kind: String,
        /// The payload (for `events_api`, the event callback).
        payload: Value,
        /// How often Slack delivered it before (0 the first time).
        retry_attempt: u64,
    },
    /// A frame type this adapter doesn't know.
    Unknown {
        /// Its `type`.
        kind: String,
    },
}

/// Reads a text frame; the error is a reason for a warn log.
pub(crate) fn read_frame(text: &str) -> Result<Frame, String> {
    let value: Value = serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
    let object = value.as_object().ok_or_else(|| "not a JSON object".to_owned())?;
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
    // Anything carrying an envelope id is acknowledged, whatever else is wrong with it:
    // an unacknowledged envelope is redelivered again and again.
    if let Some(envelope_id) = object.get("envelope_id").and_then(Value::as_str) {
        return Ok(Frame::Envelope {
            envelope_id: envelope_id.to_owned(),
            kind,
            payload: object.get("payload").cloned().unwrap_or(Value::Null),
            retry_attempt: object.get("retry_attempt").and_then(Value::as_u64).unwrap_or(0),
        });
    }
    match kind.as_str() {
        "hello" => Ok(Frame::Hello),
        "disconnect" => {
            Ok(Frame::Disconnect { reason: object.get("reason").and_then(Value::as_str).unwrap_or("").to_owned() })
        }
        "" => Err("no type and no envelope_id".to_owned()),
        _ => Ok(Frame::Unknown { kind }),
    }
}

/// Which event an inbound message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// A `message` event.
    Message,
    /// An `app_mention` event.
    AppMention,
}

/// A file shared with a message, as the event describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct SlackFile {
    pub id: String,
    pub name: Option<String>,
    pub title: Option<String>,
    pub mimetype: Option<String>,
    pub size: Option<u64>,
    pub url_private_download: Option<String>,
    pub url_private: Option<String>,
    /// `hosted`, `external`, `snippet`, `tombstone` (deleted), `hidden_by_limit`.
    pub mode: Option<String>,
}

impl SlackFile {
    /// The name to show for it.
    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().or(self.title.as_deref()).filter(|name| !name.is_empty()).unwrap_or(&self.id)
    }
}

/// A message event worth delivering, before its files are downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReceivedMessage {
    pub kind: EventKind,
    /// `<channel>:<ts>`: the same for both events of a mention pair and for retries.
    pub platform_message_id: String,
    pub conversation: Conversation,
    pub sender: Sender,
    pub text: String,
    pub mentions_bot: bool,
    pub files: Vec<SlackFile>,
}

/// What to do with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Interpretation {
    Deliver(ReceivedMessage),
    /// Not for the bot (its own message, an edit, an unknown event type); the reason is
    /// for a debug log.
    Ignore(String),
}

#[derive(Debug, Deserialize)]
struct EventCallback {
    event: Event,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    subtype: Option<String>,
    hidden: bool,
    channel: Option<String>,
    channel_type: Option<String>,
    user: Option<String>,
    bot_id: Option<String>,
    text: Option<String>,
    ts: Option<String>,
    thread_ts: Option<String>,
    parent_user_id: Option<String>,
    user_profile: Option<UserProfile>,
    files: Vec<SlackFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct UserProfile {
    display_name: Option<String>,
    real_name: Option<String>,
}

/// Reads an `events_api` payload; the error (a malformed event) is for a warn log.
pub(crate) fn interpret(payload: &Value, identity: &Identity) -> Result<Interpretation, String> {
    let callback = EventCallback::deserialize(payload).map_err(|error| format!("malformed event: {error}"))?;
    let event = callback.event;
    let kind = match event.kind.as_str() {
        "message" => EventKind::Message,
        "app_mention" => EventKind::AppMention,
        other => return Ok(Interpretation::Ignore(format!("event type {other:?}"))),
    };
    if let Some(subtype) = event.subtype.as_deref()
        && subtype != "file_share"
        && subtype != "thread_broadcast"
    {
        return Ok(Interpretation::Ignore(format!("message subtype {subtype:?}")));
    }
    if event.hidden {
        return Ok(Interpretation::Ignore("hidden message".to_owned()));
    }
    if let Some(bot_id) = event.bot_id.as_deref() {
        return Ok(Interpretation::Ignore(format!("message from bot {bot_id}")));
    }
    let user = event.user.filter(|user| !user.is_empty()).ok_or("message without user")?;
    if user == identity.user_id {
        return Ok(Interpretation::Ignore("the bot's own message".to_owned()));
    }
    let channel = event.channel.filter(|channel| !channel.is_empty()).ok_or("message without channel")?;
    let ts = event.ts.filter(|ts| !ts.is_empty()).ok_or("message without ts")?;
    let conversation_kind = match (kind, event.channel_type.as_deref()) {
        (EventKind::AppMention, _) => ConversationKind::Group,
        (EventKind::Message, Some("im")) => ConversationKind::Direct,
        (EventKind::Message, Some("channel" | "group" | "mpim")) => ConversationKind::Group,
        (EventKind::Message, None) if channel.starts_with('D') => ConversationKind::Direct,
        (EventKind::Message, None) => ConversationKind::Group,
        (EventKind::Message, Some(other)) => {
            return Ok(Interpretation::Ignore(format!("message in a {other:?} conversation")));
        }
    };
    let plain = plain_text(event.text.as_deref().unwrap_or(""), &identity.user_id);
    let replies_to_bot = event.thread_ts.as_ref().is_some_and(|thread| *thread != ts)
        && event.parent_user_id.as_deref() == Some(identity.user_id.as_str());
    let mentions_bot = plain.mentions_bot
        || replies_to_bot
        || kind == EventKind::AppMention
        || conversation_kind == ConversationKind::Direct;
    let display_name = event.user_profile.and_then(|profile| {
        [profile.display_name, profile.real_name].into_iter().flatten().find(|name| !name.trim().is_empty())
    });
    Ok(Interpretation::Deliver(ReceivedMessage {
        kind,
        platform_message_id: format!("{channel}:{ts}"),
        conversation: Conversation { id: channel, kind: conversation_kind, thread: event.thread_ts },
        sender: Sender { id: user, display_name },
        text: plain.text,
        mentions_bot,
        files: event.files,
    }))
}

/// The message ids delivered lately and the event each came from, so the second event
/// of a mention pair (`message` plus `app_mention`) is dropped. A redelivery of the same
/// event passes (the manager drops it by id), so retries stay visible.
#[derive(Debug, Default)]
pub(crate) struct RecentDeliveries {
    order: VecDeque<String>,
    kinds: HashMap<String, EventKind>,
}

impl RecentDeliveries {
    /// Whether to deliver `id` from a `kind` event; remembers it when so.
    pub(crate) fn admit(&mut self, id: &str, kind: EventKind) -> bool {
        match self.kinds.get(id) {
            Some(delivered) => *delivered == kind,
            None => {
                self.kinds.insert(id.to_owned(), kind);
                self.order.push_back(id.to_owned());
                if self.order.len() > REMEMBERED_DELIVERIES
                    && let Some(oldest) = self.order.pop_front()
                {
                    self.kinds.remove(&oldest);
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests;
