//! squidbot's Telegram channel: the Bot API over HTTPS with `getUpdates` long polling.
//!
//! - **Receiving** ([`Channel::run`]): `getMe` once to learn the bot's id and username
//!   (a refused token is [`ChannelErrorKind::Fatal`](squidbot_channels::ChannelErrorKind)),
//!   then `getUpdates` long polls for `message` updates. The offset (last `update_id` + 1)
//!   is kept in memory, also across restarts of the loop, so an update is handed on
//!   once; Telegram forgets an update when a later poll names a higher offset, and a last
//!   short poll at shutdown confirms the final batch. A 409 (a webhook is set) deletes the
//!   webhook once and goes on. A 429 waits its `retry_after`; network errors and 5xx
//!   retry after 1 s doubling to 30 s, and after ten in a row the loop ends with a
//!   transient error for the manager to restart it. Updates that can't be read, of other
//!   types, or without text and files are skipped with a log line.
//! - **Messages in**: text or caption; private chats are direct messages, groups and
//!   supergroups groups; forum topics are threads. The id is `<chat_id>:<message_id>`.
//!   The bot is addressed by `@botname`, by a `text_mention` of it, by a reply to one of
//!   its messages, by `/command@botname`, or in a private chat; the mention and the
//!   command's `@botname` are removed from the text. Commands for other bots and messages
//!   from bots (this one included) are dropped. Photos (largest size), documents, voice
//!   notes, audio and video are downloaded up to
//!   [`TelegramSettings::max_attachment_bytes`]; larger ones leave a note in the text.
//!   Texts over 16,000 characters are cut with a note.
//! - **Sending**: `sendMessage` with `parse_mode` HTML (the manager renders Telegram
//!   HTML), replies and topics, link previews off; HTML Telegram can't parse is resent
//!   as plain text. Files go with `sendPhoto` (images) or `sendDocument`, the first one
//!   carrying the text as caption when it fits in 1,024 characters. Edits use
//!   `editMessageText` ("message is not modified" is fine), typing `sendChatAction`, and
//!   acknowledging a 👀 `setMessageReaction`.
//!
//! Webhook mode is not implemented: long polling needs no public address, which a
//! self-hosted gateway often lacks. Editing a message sent with its text as a caption
//! (`editMessageCaption`) is not supported either; the manager edits streamed text
//! replies, which are sent without files.

mod api;
mod fetch;
mod inbound;
mod outbound;
mod plain;
mod polling;
mod settings;
mod wire;

use std::sync::atomic::AtomicI64;

use squidbot_channels::{
    Capabilities, Channel, ChannelError, Conversation, InboundMessage, InboundSink, MarkdownFlavor, OutboundMessage,
    SentMessage, StreamMode,
};
use tokio_util::sync::CancellationToken;

pub use settings::{DEFAULT_API_BASE, DEFAULT_MAX_ATTACHMENT_BYTES, DEFAULT_POLL_TIMEOUT, TelegramSettings};

/// Longest message Telegram accepts, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// A Telegram bot, as a squidbot [`Channel`].
#[derive(Debug)]
pub struct TelegramChannel {
    settings: TelegramSettings,
    api: api::Api,
    /// The next `getUpdates` offset: the last handled `update_id` + 1 (0 before any).
    offset: AtomicI64,
}

impl TelegramChannel {
    /// A channel with `settings`; fatal when they can't work (empty token, bad URL).
    pub fn new(settings: TelegramSettings) -> Result<Self, ChannelError> {
        settings.check()?;
        let api = api::Api::new(&settings.api_base, settings.token.clone())?;
        Ok(Self { settings, api, offset: AtomicI64::new(0) })
    }
}

impl Channel for TelegramChannel {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::EditInPlace,
            typing: true,
            threads: true,
            max_message_chars: MAX_MESSAGE_CHARS,
            markdown: MarkdownFlavor::TelegramHtml,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        polling::run(self, inbound, shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        outbound::send(&self.api, message).await
    }

    async fn edit(&self, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
        outbound::edit(&self.api, sent, text).await
    }

    async fn typing(&self, conversation: &Conversation) -> Result<(), ChannelError> {
        outbound::typing(&self.api, conversation).await
    }

    async fn acknowledge(&self, message: &InboundMessage) -> Result<(), ChannelError> {
        outbound::react(&self.api, &message.platform_message_id).await
    }
}
