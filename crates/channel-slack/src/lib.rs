//! squidbot's Slack channel adapter: events arrive over Socket Mode (a WebSocket the app
//! opens, so no public URL is needed) and replies go out through the Web API.
//!
//! - Start: `auth.test` with the bot token learns the bot's user and bot ids; then
//!   `apps.connections.open` with the app-level token gives a single-use WebSocket URL.
//! - Receive: every envelope is acknowledged (`{"envelope_id": …}`) as soon as it is
//!   read, whatever its type. `message` events (direct messages, channels, private
//!   channels, group DMs) and `app_mention` events become [`InboundMessage`]s with the
//!   id `<channel>:<ts>`; Slack sends both events for a mention in a channel and only
//!   the first is delivered. Retried envelopes keep their id, so the manager drops them.
//!   Slack's markup (`<@U1>`, `<url|label>`, `&amp;`) is turned into plain text and the
//!   bot's own mention removed. Shared files are downloaded with the bot token.
//! - Connection: `disconnect` frames (`refresh_requested`, `warning`), a dropped socket
//!   or 30 s of silence (with a ping halfway) lead to a new connection;
//!   `link_disabled` and refused tokens are fatal.
//! - Send: `chat.postMessage` (mrkdwn, no link unfurling), into the thread the message
//!   came from; `chat.update` to edit while streaming; the 👀 reaction to acknowledge;
//!   files through `files.getUploadURLExternal`, the upload URL and
//!   `files.completeUploadExternal`, with the text as the files' comment. Slack has no
//!   typing indicator for Socket Mode bots.

mod attachments;
mod events;
mod outbound;
mod settings;
mod socket;
mod text;
mod web_api;

use squidbot_channels::{
    Capabilities, Channel, ChannelError, InboundMessage, InboundSink, MarkdownFlavor, OutboundMessage, SentMessage,
    StreamMode,
};
use tokio_util::sync::CancellationToken;

pub use settings::{DEFAULT_API_BASE, DEFAULT_MAX_ATTACHMENT_BYTES, SlackSettings};

use crate::web_api::WebApi;

/// The longest message sent in one piece: Slack cuts text after 40,000 characters and
/// recommends at most 4,000 per message.
pub const MAX_MESSAGE_CHARS: usize = 4_000;

/// A Slack app as a squidbot channel.
#[derive(Debug)]
pub struct SlackChannel {
    settings: SlackSettings,
    api: WebApi,
}

impl SlackChannel {
    /// An adapter for the app `settings` describe; fatal when they can't work (empty
    /// name, tokens of the wrong kind, an `api_base` that isn't an http(s) URL).
    pub fn new(settings: SlackSettings) -> Result<Self, ChannelError> {
        settings.validate()?;
        let api = WebApi::new(&settings)?;
        Ok(Self { settings, api })
    }
}

impl Channel for SlackChannel {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::EditInPlace,
            typing: false,
            threads: true,
            max_message_chars: MAX_MESSAGE_CHARS,
            markdown: MarkdownFlavor::SlackMrkdwn,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        socket::run(&self.api, &self.settings, inbound, shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        outbound::send(&self.api, message).await
    }

    async fn edit(&self, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
        outbound::edit(&self.api, sent, text).await
    }

    async fn acknowledge(&self, message: &InboundMessage) -> Result<(), ChannelError> {
        outbound::acknowledge(&self.api, message).await
    }
}
