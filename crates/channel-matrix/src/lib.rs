//! squidbot's Matrix client-server API (/sync loop) channel adapter.
//!
//! [`MatrixChannel`] implements the [`Channel`] port over the client-server API v3 with
//! plain HTTP (no Matrix SDK), as a bot account on any homeserver:
//!
//! - **Authentication**: a configured access token, or a password login
//!   (`m.login.password`) whose token is kept in memory. `whoami` at start learns the
//!   bot's user id; a refused token (401 `M_UNKNOWN_TOKEN`) is fatal.
//! - **Receiving**: a `/sync` long-poll loop (30 s) with an inline filter. The sync
//!   token is stored in `<state_dir>/<name>.sync` once a batch is handed over, so a
//!   restart resumes where it stopped: no message is lost, and one handed over twice
//!   (a crash between handing over and storing) keeps its id for the manager's
//!   de-duplication. The very first start only takes the current position: history
//!   is never answered, nor is a newly joined room's history from before the join.
//!   When more events came than a sync returns (50 per room), the ones in between are
//!   not fetched. (Synapse answers a repeated first sync of one device from a cache
//!   for two minutes: a bot whose state directory is wiped and that restarts sooner
//!   with the same token may get an older position.)
//! - **Invitations** are accepted or rejected by [`InvitePolicy`] (the inviter is the
//!   invite event's sender).
//! - **Messages**: `m.text`, `m.emote` and files (`m.image`, `m.file`, `m.audio`,
//!   `m.video`, downloaded through the authenticated media API up to
//!   `max_attachment_bytes`). Notices (what bots send), edits and the bot's own events
//!   are not answered. `platform_message_id` is the event id (unique across rooms);
//!   `Conversation::thread` is the thread's root event id. A room with exactly two
//!   joined members is direct, more is a group; a room flagged direct (the bot's
//!   `m.direct` account data, or an accepted `is_direct` invitation) is direct while
//!   no third member is joined, or when the count can't be learned. The bot is
//!   mentioned when `m.mentions` names it, the body names it (user id, display name
//!   or localpart), or the message replies to one of its events; the mention and the
//!   reply fallback are removed from the text.
//! - **Sending**: `m.text` with the rendered HTML as `formatted_body` and a plain-text
//!   `body`, replies by `m.in_reply_to`, thread replies by an `m.thread` relation, no
//!   pings (`m.mentions: {}`); attachments are uploaded and sent as file messages.
//!   Edits are `m.replace` events, typing is the typing notification, acknowledging
//!   is a 👀 reaction.
//! - **No end-to-end encryption**: implementing Olm/Megolm needs a crypto stack the
//!   adapter doesn't carry. In an encrypted room the adapter logs once and sends one
//!   plain notice that it can't read encrypted messages (remembered in
//!   `<state_dir>/<name>.encrypted-rooms`, so once per room for good); unencrypted
//!   events in such rooms are still read.
//! - **Failures**: 429 `M_LIMIT_EXCEEDED` waits the `Retry-After` header or the body's
//!   `retry_after_ms`; 5xx and network faults are transient (the sync loop retries
//!   after 1 s, doubling to 30 s); 401 is fatal; other 4xx reject one request.

mod api;
mod event;
mod failure;
mod inbound;
mod mention;
mod outbound;
mod receive;
mod rooms;
mod sending;
mod settings;
mod state;
mod sync;

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use squidbot_channels::{
    Capabilities, Channel, ChannelError, Conversation, InboundMessage, InboundSink, MarkdownFlavor, OutboundMessage,
    SentMessage, StreamMode,
};
use tokio_util::sync::CancellationToken;

pub use settings::{DEFAULT_MAX_ATTACHMENT_BYTES, InvitePolicy, KnownInviter, MatrixSettings};

use crate::api::{Api, Credentials};
use crate::mention::BotNames;
use crate::state::StateFiles;

/// The longest message sent, in characters. An event may be 65,536 bytes and an edit
/// carries the text three times (fallback body, new plain body, new HTML), so 8,000
/// characters leave room for multi-byte scripts and HTML markup.
pub const MAX_MESSAGE_CHARS: usize = 8_000;

/// How many of the bot's own event ids are remembered, to recognise replies to them
/// without asking the homeserver.
const REMEMBERED_OWN_EVENTS: usize = 1_024;

/// A Matrix channel: one bot account on one homeserver.
pub struct MatrixChannel {
    name: String,
    api: Api,
    state: StateFiles,
    invites: InvitePolicy,
    max_attachment_bytes: u64,
    /// The bot's names, refined by `whoami` and its profile when the loop starts.
    names: Mutex<BotNames>,
    own_events: Mutex<OwnEvents>,
    /// Transaction ids are `<prefix>.<counter>`; the prefix (start time) keeps them
    /// unique across restarts so the homeserver never takes a new message for a retry.
    transaction_prefix: String,
    transactions: AtomicU64,
}

impl std::fmt::Debug for MatrixChannel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MatrixChannel").field("name", &self.name).finish_non_exhaustive()
    }
}

impl MatrixChannel {
    /// A channel of `settings`; fatal when they are unusable (bad homeserver URL or
    /// user id, no credentials).
    pub fn new(settings: MatrixSettings) -> Result<Self, ChannelError> {
        let homeserver = settings.validate()?;
        let localpart = settings::localpart(&settings.user_id).unwrap_or_default().to_owned();
        let names = BotNames { user_id: settings.user_id.clone(), localpart, display_name: None };
        let credentials = Credentials {
            user_id: settings.user_id,
            access_token: settings.access_token,
            password: settings.password,
            device_id: settings.device_id,
        };
        let api = Api::new(homeserver, credentials)?;
        Ok(Self {
            state: StateFiles::new(&settings.state_dir, &settings.name),
            name: settings.name,
            api,
            invites: settings.invites,
            max_attachment_bytes: settings.max_attachment_bytes,
            names: Mutex::new(names),
            own_events: Mutex::new(OwnEvents::default()),
            transaction_prefix: format!("squidbot.{}", jiff::Timestamp::now().as_millisecond()),
            transactions: AtomicU64::new(0),
        })
    }

    fn bot_names(&self) -> Result<BotNames, ChannelError> {
        self.names
            .lock()
            .map(|names| names.clone())
            .map_err(|_poisoned| ChannelError::fatal("can't read the bot's names: lock poisoned"))
    }

    fn remember_own_event(&self, event_id: &str) {
        squidbot_core::sync::lock(&self.own_events).insert(event_id);
    }

    fn is_known_own_event(&self, event_id: &str) -> bool {
        squidbot_core::sync::lock(&self.own_events).ids.contains(event_id)
    }
}

/// The bot's most recent event ids.
#[derive(Debug, Default)]
struct OwnEvents {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl OwnEvents {
    fn insert(&mut self, event_id: &str) {
        if self.ids.insert(event_id.to_owned()) {
            self.order.push_back(event_id.to_owned());
        }
        while self.order.len() > REMEMBERED_OWN_EVENTS {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }
}

impl Channel for MatrixChannel {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::EditInPlace,
            typing: true,
            threads: true,
            max_message_chars: MAX_MESSAGE_CHARS,
            markdown: MarkdownFlavor::MatrixHtml,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        self.receive(inbound, shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.send_message(message).await
    }

    async fn edit(&self, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
        self.edit_message(sent, text).await
    }

    async fn typing(&self, conversation: &Conversation) -> Result<(), ChannelError> {
        self.show_typing(conversation).await
    }

    async fn acknowledge(&self, message: &InboundMessage) -> Result<(), ChannelError> {
        self.react(message).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_events_are_remembered_up_to_a_limit() {
        let mut own = OwnEvents::default();
        for index in 0..=REMEMBERED_OWN_EVENTS {
            own.insert(&format!("$event{index}"));
        }
        own.insert("$event5");
        assert_eq!(own.ids.len(), REMEMBERED_OWN_EVENTS);
        assert!(!own.ids.contains("$event0"));
        assert!(own.ids.contains(&format!("$event{REMEMBERED_OWN_EVENTS}")));
    }
}
