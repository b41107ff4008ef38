//! squidbot's Discord channel adapter: the gateway WebSocket (API v10, JSON, no
//! compression) for inbound messages and the REST API for replies.
//!
//! - Receiving ([`Channel::run`]): `GET /gateway/bot` (unless
//!   [`DiscordSettings::gateway_url`] is set), HELLO, IDENTIFY, heartbeats with the last
//!   sequence number (the first after a random part of the interval), RESUME after a
//!   dropped connection, a missed heartbeat ACK, RECONNECT or INVALID_SESSION `true`
//!   (to READY's `resume_gateway_url`); a fresh IDENTIFY after INVALID_SESSION `false`
//!   (after 1 to 5 s) and close codes 4007 and 4009. Close codes 4004 and 4010 to 4014
//!   are fatal. Six failed connections in a row end the loop with a transient error so
//!   the manager's backoff takes over.
//! - Messages: `MESSAGE_CREATE` from people (the bot's own and other bots' skipped;
//!   only types `DEFAULT` and `REPLY`); guild messages are group conversations and
//!   mention the bot when `mentions` holds it or they reply to it; direct messages are
//!   always addressed to the bot. The bot's mention is stripped, other users' mentions
//!   read `@name`. Message ids are global snowflakes, used as they are.
//! - Threads: a thread's messages carry the thread's id as `channel_id`. Threads the
//!   gateway has announced (`GUILD_CREATE`, `THREAD_CREATE`/`UPDATE`/`LIST_SYNC`) become
//!   the parent channel's conversation with [`Conversation::thread`] set; others
//!   (an archived thread nobody reopened) stay a conversation of their own. Replies go
//!   to the thread when there is one.
//! - Attachments in are downloaded from the CDN without the bot token, each capped at
//!   [`DiscordSettings::max_attachment_bytes`] (a note in the text when skipped);
//!   attachments out are sent as multipart (`payload_json` plus `files[n]`).
//! - Rate limits: REST calls never sleep. A 429 returns
//!   [`squidbot_channels::ChannelErrorKind::RateLimited`] with Discord's `retry_after`
//!   (the body's, which has milliseconds, else the `Retry-After` header), and the route
//!   (or every route, when Discord says `global`) is refused locally until then without
//!   another request, so nothing hammers Discord; the manager decides whether to retry.
//!   Only `GET /gateway/bot`, inside the receive loop, waits out a 429 itself.
//! - Replies never ping: `allowed_mentions` is `{"parse": []}` on sends and edits.

mod attachments;
mod gateway;
mod inbound;
mod rest;
mod settings;

use std::fmt;

use squidbot_channels::{
    Capabilities, Channel, ChannelError, Conversation, InboundMessage, InboundSink, MarkdownFlavor, OutboundMessage,
    SentMessage, StreamMode,
};
use tokio_util::sync::CancellationToken;

pub use settings::{DEFAULT_API_BASE, DEFAULT_INTENTS, DEFAULT_MAX_ATTACHMENT_BYTES, DiscordSettings, intents};

/// Longest message Discord accepts, in characters.
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// A Discord bot as a squidbot [`Channel`].
pub struct DiscordChannel {
    settings: DiscordSettings,
    rest: rest::Rest,
}

impl fmt::Debug for DiscordChannel {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("DiscordChannel").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl DiscordChannel {
    /// A channel for `settings`; [`squidbot_channels::ChannelErrorKind::Fatal`] when they can't work (empty
    /// token or name, URLs of the wrong scheme, intents without messages).
    pub fn new(settings: DiscordSettings) -> Result<Self, ChannelError> {
        settings.validate()?;
        let rest = rest::Rest::new(&settings)?;
        Ok(Self { settings, rest })
    }
}

/// The channel a message goes to: the thread when there is one (a thread is a channel
/// of its own on Discord).
fn target(conversation: &Conversation) -> &str {
    conversation.thread.as_deref().unwrap_or(&conversation.id)
}

impl Channel for DiscordChannel {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::EditInPlace,
            typing: true,
            threads: true,
            max_message_chars: MAX_MESSAGE_CHARS,
            markdown: MarkdownFlavor::DiscordMarkdown,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        gateway::run(&self.settings, &self.rest, &inbound, &shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let id = self.rest.create_message(target(&message.conversation), message).await?;
        Ok(SentMessage { conversation: message.conversation.clone(), platform_message_id: id })
    }

    async fn edit(&self, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
        self.rest.edit_message(target(&sent.conversation), &sent.platform_message_id, text).await
    }

    async fn typing(&self, conversation: &Conversation) -> Result<(), ChannelError> {
        self.rest.trigger_typing(target(conversation)).await
    }

    async fn acknowledge(&self, message: &InboundMessage) -> Result<(), ChannelError> {
        self.rest.acknowledge(target(&message.conversation), &message.platform_message_id).await
    }
}
