//! From a gateway `MESSAGE_CREATE` to an [`InboundMessage`]: who may be delivered, the
//! conversation (threads included), the mention of the bot and the text without it.

use std::collections::HashMap;

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;
use squidbot_channels::{Conversation, ConversationKind, InboundMessage, Sender};

/// Message types that people write: `DEFAULT` (0) and `REPLY` (19). Joins, pins,
/// boosts, "thread created" notices and the like are skipped.
const USER_MESSAGE_TYPES: [u8; 2] = [0, 19];

/// Channel types that are threads: announcement, public and private threads.
const THREAD_CHANNEL_TYPES: [u8; 3] = [10, 11, 12];

/// A Discord user as the gateway sends it (only the fields used here).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct User {
    pub id: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

impl User {
    fn shown_name(&self) -> Option<&str> {
        self.global_name.as_deref().or(self.username.as_deref())
    }
}

/// The guild member who wrote a message (for the nickname).
#[derive(Debug, Clone, Deserialize)]
struct Member {
    #[serde(default)]
    nick: Option<String>,
}

/// An attachment of an inbound message, before it is downloaded.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AttachmentInfo {
    pub filename: String,
    #[serde(default)]
    pub size: u64,
    pub url: String,
    #[serde(default)]
    pub content_type: Option<String>,
}

/// The message a reply answers (only its author matters).
#[derive(Debug, Clone, Deserialize)]
struct ReferencedMessage {
    author: User,
}

/// The `d` of a `MESSAGE_CREATE` dispatch.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MessageCreate {
    id: String,
    channel_id: String,
    #[serde(default)]
    guild_id: Option<String>,
    author: User,
    #[serde(default)]
    member: Option<Member>,
    #[serde(default)]
    content: String,
    #[serde(default)]
    mentions: Vec<User>,
    #[serde(default)]
    attachments: Vec<AttachmentInfo>,
    #[serde(default)]
    referenced_message: Option<ReferencedMessage>,
    #[serde(rename = "type", default)]
    kind: u8,
}

/// A message ready to be delivered once its attachments are downloaded.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The message, with no attachments yet.
    pub message: InboundMessage,
    /// The files to download into it.
    pub attachments: Vec<AttachmentInfo>,
}

/// Why a message is not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// The bot wrote it.
    OwnMessage,
    /// Another bot wrote it.
    FromBot,
    /// A system notice (join, pin, boost…), not something a person wrote.
    SystemMessage,
    /// No text and no files (for example guild messages without the Message Content
    /// intent).
    Empty,
}

/// Threads the gateway has told about: thread id → parent channel id.
///
/// Filled from `GUILD_CREATE` (active threads at connect), `THREAD_CREATE`,
/// `THREAD_UPDATE`, `THREAD_LIST_SYNC`, and emptied by `THREAD_DELETE`. A message in a
/// thread has the thread's id as `channel_id`; with this map it becomes the parent's
/// conversation with the thread set, so the room's threads share its memory.
#[derive(Debug, Default)]
pub(crate) struct Threads {
    parents: HashMap<String, String>,
}

impl Threads {
    /// Learns from a dispatch; returns whether the event type was one about threads.
    pub(crate) fn observe(&mut self, event: &str, data: &Value) -> bool {
        match event {
            "GUILD_CREATE" | "THREAD_LIST_SYNC" => {
                for thread in data.get("threads").and_then(Value::as_array).into_iter().flatten() {
                    self.remember(thread);
                }
                true
            }
            "THREAD_CREATE" | "THREAD_UPDATE" => {
                self.remember(data);
                true
            }
            "THREAD_DELETE" => {
                if let Some(id) = data.get("id").and_then(Value::as_str) {
                    self.parents.remove(id);
                }
                true
            }
            _ => false,
        }
    }

    fn remember(&mut self, channel: &Value) {
        let is_thread = channel
            .get("type")
            .and_then(Value::as_u64)
            .is_some_and(|kind| THREAD_CHANNEL_TYPES.iter().any(|thread_type| u64::from(*thread_type) == kind));
        if let (true, Some(id), Some(parent)) =
            (is_thread, channel.get("id").and_then(Value::as_str), channel.get("parent_id").and_then(Value::as_str))
        {
            self.parents.insert(id.to_owned(), parent.to_owned());
        }
    }

    /// The parent channel of `channel` when it is a known thread.
    pub(crate) fn parent_of(&self, channel: &str) -> Option<&str> {
        self.parents.get(channel).map(String::as_str)
    }
}

/// Turns a `MESSAGE_CREATE` into a message for the manager, or says why not.
pub(crate) fn prepare(
    channel_name: &str,
    event: MessageCreate,
    bot_id: &str,
    threads: &Threads,
    received_at: Timestamp,
) -> Result<Prepared, Skip> {
    if event.author.id == bot_id {
        return Err(Skip::OwnMessage);
    }
    if event.author.bot {
        return Err(Skip::FromBot);
    }
    if !USER_MESSAGE_TYPES.contains(&event.kind) {
        return Err(Skip::SystemMessage);
    }
    if event.content.trim().is_empty() && event.attachments.is_empty() {
        return Err(Skip::Empty);
    }
    let (kind, mentioned) = match event.guild_id {
        // A direct message is addressed to the bot.
        None => (ConversationKind::Direct, true),
        Some(_) => {
            let mentioned = event.mentions.iter().any(|user| user.id == bot_id);
            let replied_to = event.referenced_message.as_ref().is_some_and(|referenced| referenced.author.id == bot_id);
            (ConversationKind::Group, mentioned || replied_to)
        }
    };
    let conversation = match threads.parent_of(&event.channel_id) {
        Some(parent) => Conversation { id: parent.to_owned(), kind, thread: Some(event.channel_id.clone()) },
        None => Conversation { id: event.channel_id.clone(), kind, thread: None },
    };
    let display_name = event
        .member
        .as_ref()
        .and_then(|member| member.nick.clone())
        .or_else(|| event.author.shown_name().map(str::to_owned));
    let text = plain_text(&event.content, bot_id, &event.mentions);
    Ok(Prepared {
        message: InboundMessage {
            channel: channel_name.to_owned(),
            // Snowflakes are unique across Discord, so no channel prefix is needed.
            platform_message_id: event.id,
            conversation,
            sender: Sender { id: event.author.id, display_name },
            text,
            mentions_bot: mentioned,
            attachments: Vec::new(),
            received_at,
        },
        attachments: event.attachments,
    })
}

/// The text with the bot's own mention (`<@ID>`, `<@!ID>`) removed and other users'
/// mentions shown as `@name`.
pub(crate) fn plain_text(content: &str, bot_id: &str, mentions: &[User]) -> String {
    let mut text = content.to_owned();
    for form in [format!("<@{bot_id}> "), format!("<@!{bot_id}> "), format!("<@{bot_id}>"), format!("<@!{bot_id}>")] {
        text = text.replace(&form, "");
    }
    for user in mentions.iter().filter(|user| user.id != bot_id) {
        if let Some(name) = user.shown_name() {
            let shown = format!("@{name}");
            text = text.replace(&format!("<@{}>", user.id), &shown).replace(&format!("<@!{}>", user.id), &shown);
        }
    }
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BOT: &str = "900";

    fn event(value: Value) -> MessageCreate {
        serde_json::from_value(value).unwrap()
    }

    fn guild_message(content: &str) -> Value {
        json!({
            "id": "1001", "channel_id": "200", "guild_id": "300", "type": 0, "content": content,
            "author": {"id": "42", "username": "ada", "global_name": "Ada"},
            "member": {"nick": "Countess"},
            "mentions": [], "attachments": []
        })
    }

    fn prepare_value(value: Value, threads: &Threads) -> Result<Prepared, Skip> {
        prepare("discord", event(value), BOT, threads, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_direct_message_is_addressed_to_the_bot() {
        let value = json!({
            "id": "1", "channel_id": "55", "content": "hello",
            "author": {"id": "42", "username": "ada"}
        });
        let prepared = prepare_value(value, &Threads::default()).unwrap();
        assert_eq!(
            prepared.message.conversation,
            Conversation { id: "55".into(), kind: ConversationKind::Direct, thread: None }
        );
        assert!(prepared.message.mentions_bot);
        assert_eq!(prepared.message.sender, Sender { id: "42".into(), display_name: Some("ada".into()) });
        assert_eq!(prepared.message.platform_message_id, "1");
    }

    #[test]
    fn a_guild_message_mentions_the_bot_only_when_it_names_or_answers_it() {
        let plain = prepare_value(guild_message("just chatting"), &Threads::default()).unwrap();
        assert!(!plain.message.mentions_bot);
        assert_eq!(plain.message.sender.display_name.as_deref(), Some("Countess"));

        let mut mentioned = guild_message("<@!900> what time is it?");
        mentioned["mentions"] = json!([{"id": BOT, "username": "squidbot", "bot": true}]);
        let mentioned = prepare_value(mentioned, &Threads::default()).unwrap();
        assert!(mentioned.message.mentions_bot);
        assert_eq!(mentioned.message.text, "what time is it?");

        let mut reply = guild_message("and tomorrow?");
        reply["type"] = json!(19);
        reply["referenced_message"] = json!({"id": "7", "author": {"id": BOT, "bot": true}});
        assert!(prepare_value(reply, &Threads::default()).unwrap().message.mentions_bot);

        let mut everyone = guild_message("@everyone lunch");
        everyone["mention_everyone"] = json!(true);
        assert!(!prepare_value(everyone, &Threads::default()).unwrap().message.mentions_bot);
    }

    #[test]
    fn the_bot_s_own_and_other_bots_messages_are_skipped() {
        let mut own = guild_message("hi");
        own["author"] = json!({"id": BOT, "bot": true});
        assert_eq!(prepare_value(own, &Threads::default()).unwrap_err(), Skip::OwnMessage);
        let mut other_bot = guild_message("hi");
        other_bot["author"] = json!({"id": "77", "bot": true});
        assert_eq!(prepare_value(other_bot, &Threads::default()).unwrap_err(), Skip::FromBot);
        let mut pin_notice = guild_message("");
        pin_notice["type"] = json!(6);
        assert_eq!(prepare_value(pin_notice, &Threads::default()).unwrap_err(), Skip::SystemMessage);
        assert_eq!(prepare_value(guild_message("  "), &Threads::default()).unwrap_err(), Skip::Empty);
    }

    #[test]
    fn mentions_of_the_bot_are_stripped_and_others_named() {
        let others = [User { id: "7".into(), username: Some("bob".into()), global_name: None, bot: false }];
        assert_eq!(plain_text("<@900> hi <@7>", BOT, &others), "hi @bob");
        assert_eq!(plain_text("hey <@900> there", BOT, &[]), "hey there");
        assert_eq!(plain_text("ask <@!900>", BOT, &[]), "ask");
        assert_eq!(plain_text("<@9000> is not me", BOT, &[]), "<@9000> is not me");
    }

    #[test]
    fn messages_in_known_threads_carry_the_thread_under_the_parent() {
        let mut threads = Threads::default();
        assert!(threads.observe(
            "GUILD_CREATE",
            &json!({"id": "300", "threads": [
                {"id": "600", "parent_id": "200", "type": 11},
                {"id": "601", "parent_id": "200", "type": 0}
            ]})
        ));
        assert!(threads.observe("THREAD_CREATE", &json!({"id": "700", "parent_id": "201", "type": 12})));
        assert!(!threads.observe("CHANNEL_CREATE", &json!({"id": "800", "parent_id": "201", "type": 11})));

        let mut in_thread = guild_message("inside");
        in_thread["channel_id"] = json!("600");
        let prepared = prepare_value(in_thread, &threads).unwrap();
        assert_eq!(prepared.message.conversation.id, "200");
        assert_eq!(prepared.message.conversation.thread.as_deref(), Some("600"));

        let mut not_a_thread = guild_message("plain");
        not_a_thread["channel_id"] = json!("601");
        assert_eq!(prepare_value(not_a_thread, &threads).unwrap().message.conversation.thread, None);

        assert!(threads.observe("THREAD_DELETE", &json!({"id": "700", "parent_id": "201", "type": 12})));
        assert_eq!(threads.parent_of("700"), None);
        assert_eq!(threads.parent_of("600"), Some("200"));
    }
}
