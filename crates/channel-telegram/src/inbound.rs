//! Reading a Telegram message: who wrote it where, whether it addresses the bot, its
//! text with the bot's mention and command suffix removed, and the files to fetch.

use std::ops::Range;

use squidbot_channels::{Conversation, ConversationKind, Sender};

use crate::wire::{MediaFile, Message, MessageEntity, User};

/// Longest inbound text handed on, in characters; longer texts are cut with a note.
/// Telegram itself allows 4,096, so only a malformed update gets near this.
pub(crate) const MAX_TEXT_CHARS: usize = 16_000;

/// Who the bot is, learned with `getMe` at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BotIdentity {
    /// The bot's user id.
    pub id: i64,
    /// The bot's username without `@`.
    pub username: String,
}

/// Why a message is not handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// No `from`: a channel post or a service message.
    NoSender,
    /// Written by this bot.
    OwnMessage,
    /// Written by another bot.
    FromBot,
    /// A command addressed to another bot (`/new@otherbot`).
    CommandForAnotherBot,
    /// Neither text nor a supported attachment.
    Empty,
}

impl Skip {
    /// Why, for the log.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Skip::NoSender => "it has no sender",
            Skip::OwnMessage => "the bot wrote it",
            Skip::FromBot => "another bot wrote it",
            Skip::CommandForAnotherBot => "it is a command for another bot",
            Skip::Empty => "it has neither text nor a supported attachment",
        }
    }
}

/// A file of an inbound message, still on Telegram's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteFile {
    /// Telegram's id, for `getFile`.
    pub file_id: String,
    /// The name to give it.
    pub name: String,
    /// Its media type.
    pub mime: String,
    /// The size Telegram announced, if it did.
    pub size: Option<u64>,
}

/// An inbound message read from its update, before its files are downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Draft {
    /// `<chat_id>:<message_id>`.
    pub platform_message_id: String,
    /// Where it was written.
    pub conversation: Conversation,
    /// Who wrote it.
    pub sender: Sender,
    /// Its text or caption, mention removed.
    pub text: String,
    /// Whether it addresses the bot.
    pub mentions_bot: bool,
    /// Its files.
    pub files: Vec<RemoteFile>,
}

/// Reads `message` as the bot `bot` sees it.
pub(crate) fn interpret(message: &Message, bot: &BotIdentity) -> Result<Draft, Skip> {
    let from = message.from.as_ref().ok_or(Skip::NoSender)?;
    if from.id == bot.id {
        return Err(Skip::OwnMessage);
    }
    if from.is_bot {
        return Err(Skip::FromBot);
    }
    let kind = if message.chat.kind == "private" { ConversationKind::Direct } else { ConversationKind::Group };
    // Only forum topics are threads replies can go into; in other supergroups
    // `message_thread_id` names a reply chain, which `sendMessage` can't target.
    let thread = if message.is_topic_message { message.message_thread_id } else { None };
    let (raw_text, entities) = match (&message.text, &message.caption) {
        (Some(text), _) => (text.as_str(), message.entities.as_slice()),
        (None, Some(caption)) => (caption.as_str(), message.caption_entities.as_slice()),
        (None, None) => ("", &[][..]),
    };
    let addressed = address(raw_text, entities, bot)?;
    let files = remote_files(message);
    if addressed.text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let mentions_bot = kind == ConversationKind::Direct || addressed.mentions_bot || replies_to_bot(message, bot);
    Ok(Draft {
        platform_message_id: format!("{}:{}", message.chat.id, message.message_id),
        conversation: Conversation { id: message.chat.id.to_string(), kind, thread: thread.map(|id| id.to_string()) },
        sender: Sender { id: from.id.to_string(), display_name: display_name(from) },
        text: truncate(addressed.text),
        mentions_bot,
        files,
    })
}

/// Whether the message answers one of the bot's. In a forum topic every message
/// "replies" to the topic's first message, which is no reply to anyone.
fn replies_to_bot(message: &Message, bot: &BotIdentity) -> bool {
    let Some(replied) = &message.reply_to_message else { return false };
    let topic_root = message.is_topic_message && message.message_thread_id == Some(replied.message_id);
    !topic_root && replied.from.as_ref().is_some_and(|author| author.id == bot.id)
}

/// "First Last", else the username.
fn display_name(user: &User) -> Option<String> {
    let full = match &user.last_name {
        Some(last) => format!("{} {last}", user.first_name),
        None => user.first_name.clone(),
    };
    let full = full.trim();
    if !full.is_empty() {
        return Some(full.to_owned());
    }
    user.username.clone().filter(|username| !username.is_empty())
}

/// Text with the bot's mention removed, and whether the bot was addressed.
#[derive(Debug, PartialEq, Eq)]
struct Addressed {
    text: String,
    mentions_bot: bool,
}

/// Finds the bot's mentions and a leading `/command@bot`, and removes them from the text.
fn address(text: &str, entities: &[MessageEntity], bot: &BotIdentity) -> Result<Addressed, Skip> {
    let mut mentions_bot = false;
    // (bytes to remove, whether separators after it go too)
    let mut removals: Vec<(Range<usize>, bool)> = Vec::new();
    for entity in entities {
        let Some(range) = utf16_range(text, entity.offset, entity.length) else { continue };
        let Some(covered) = text.get(range.clone()) else { continue };
        match entity.kind.as_str() {
            "mention" if is_bot_name(covered.strip_prefix('@').unwrap_or(""), bot) => {
                mentions_bot = true;
                removals.push((range, true));
            }
            "text_mention" if entity.user.as_ref().is_some_and(|user| user.id == bot.id) => {
                mentions_bot = true;
                removals.push((range, true));
            }
            "bot_command" if range.start == 0 => {
                if let Some(at) = covered.find('@') {
                    if !is_bot_name(covered.get(at + 1..).unwrap_or(""), bot) {
                        return Err(Skip::CommandForAnotherBot);
                    }
                    mentions_bot = true;
                    removals.push((at..range.end, false));
                }
            }
            _ => {}
        }
    }
    let mut result = text.to_owned();
    removals.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut previous_start = usize::MAX;
    for (range, tidy) in removals {
        if range.end > previous_start {
            continue; // overlapping entities: keep the first removal only
        }
        let end = if tidy { separators_end(text, &range).min(previous_start) } else { range.end };
        result.replace_range(range.start..end, "");
        previous_start = range.start;
    }
    Ok(Addressed { text: result.trim().to_owned(), mentions_bot })
}

/// Where a removed mention's trailing separators end: "@bot, hi" loses ", " too, but
/// only when the mention starts a word.
fn separators_end(text: &str, range: &Range<usize>) -> usize {
    let before = text.get(..range.start).unwrap_or("");
    if !(before.is_empty() || before.ends_with(char::is_whitespace)) {
        return range.end;
    }
    let after = text.get(range.end..).unwrap_or("");
    let rest = after.trim_start_matches([',', ':']).trim_start();
    text.len() - rest.len()
}

fn is_bot_name(name: &str, bot: &BotIdentity) -> bool {
    !bot.username.is_empty() && name.eq_ignore_ascii_case(&bot.username)
}

/// The byte range of an entity given in UTF-16 code units, if it lies on the text's
/// character boundaries.
pub(crate) fn utf16_range(text: &str, offset: usize, length: usize) -> Option<Range<usize>> {
    let end_units = offset.checked_add(length)?;
    let mut units = 0;
    let mut start = None;
    for (index, character) in text.char_indices() {
        if units == offset {
            start = Some(index);
        }
        if units == end_units {
            return Some(start?..index);
        }
        units += character.len_utf16();
    }
    if units == offset {
        start = Some(text.len());
    }
    if units == end_units { Some(start?..text.len()) } else { None }
}

/// Cuts an oversized text with a note saying so.
fn truncate(text: String) -> String {
    let length = text.chars().count();
    if length <= MAX_TEXT_CHARS {
        return text;
    }
    tracing::warn!(
        characters = length,
        "an inbound Telegram text is too long; delivering its first {MAX_TEXT_CHARS} characters"
    );
    let mut kept: String = text.chars().take(MAX_TEXT_CHARS).collect();
    kept.push_str(&format!("\n[message truncated: {length} characters, the limit is {MAX_TEXT_CHARS}]"));
    kept
}

/// The files of a message: the largest size of a photo, a document, voice note, audio
/// file or video.
fn remote_files(message: &Message) -> Vec<RemoteFile> {
    let mut files = Vec::new();
    let largest_photo = message.photo.iter().max_by_key(|size| (size.width * size.height, size.file_size));
    if let Some(photo) = largest_photo {
        files.push(RemoteFile {
            file_id: photo.file_id.clone(),
            name: "photo.jpg".to_owned(),
            mime: "image/jpeg".to_owned(),
            size: photo.file_size,
        });
    }
    let media = [
        (&message.document, "document", "application/octet-stream"),
        (&message.voice, "voice.ogg", "audio/ogg"),
        (&message.audio, "audio.mp3", "audio/mpeg"),
        (&message.video, "video.mp4", "video/mp4"),
    ];
    for (file, default_name, default_mime) in media {
        if let Some(MediaFile { file_id, file_name, mime_type, file_size }) = file {
            files.push(RemoteFile {
                file_id: file_id.clone(),
                name: file_name.clone().filter(|name| !name.is_empty()).unwrap_or_else(|| default_name.to_owned()),
                mime: mime_type.clone().filter(|mime| !mime.is_empty()).unwrap_or_else(|| default_mime.to_owned()),
                size: *file_size,
            });
        }
    }
    files
}

#[cfg(test)]
mod tests;
