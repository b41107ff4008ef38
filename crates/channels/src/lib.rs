//! squidbot's chat channels, platform-independent part: everything the channel manager
//! and the platform adapters (Telegram, Discord, Slack, Matrix, email, each in its own
//! crate) share, and the webhook channel, which needs no SDK. Apart from reading
//! attachments and the webhook's callback posts, no network or file IO.
//!
//! - The [`Channel`] port an adapter implements ([`DynChannel`] for trait
//!   objects). The manager runs an adapter's receive loop ([`Channel::run`]) as a tracked
//!   task with a cancellation token; the loop hands every received message to an
//!   [`InboundSink`] (a bounded queue); replies go out with [`Channel::send`] and, for
//!   adapters that [`StreamMode::EditInPlace`], are updated with [`Channel::edit`].
//!   Adapters classify their failures at the source ([`ChannelErrorKind`]).
//! - [`split_message`]: cuts a reply that is longer than the platform allows
//!   ([`Capabilities::max_message_chars`]) on paragraph, line, sentence or word
//!   boundaries, closing and reopening code fences when a code block must be cut.
//! - [`render`]: the model's Markdown in the platform's format ([`MarkdownFlavor`]:
//!   Telegram HTML, Slack mrkdwn, Discord Markdown, Matrix HTML, plain text), escaped as
//!   each requires.
//! - [`AccessPolicy`]: whether a message is answered: direct messages `owner_only`
//!   (default), `allowlist`, `pairing` or `open`; groups on `mention` (default),
//!   `always` or `allowlist`. Strangers get nothing or one polite refusal a day, or
//!   under `pairing` a one-time code ([`PairingCodes`]) that the owner approves;
//!   approvals are kept by an [`ApprovedSenders`] store (core's port, re-exported here
//!   with [`PendingCodes`], [`AttachmentStore`] and their data).
//! - [`route`]: the memory context and session key of a message (the sender's own
//!   context for direct messages, the owner's for the owner, the room's for groups),
//!   safe as file names; [`route_for`] the same for a sender linked to a user of the
//!   people's policy (their direct messages go to the user's context from any channel).
//! - [`ChannelNotifier`]: core's `PeopleNotifier` over the channels: approval requests
//!   go to the admins' direct conversations, notes about a request to its session.
//! - [`RestartBackoff`]: when to restart an adapter whose loop failed (5 s doubling to
//!   5 min, ±10 % jitter, reset after a minute of healthy running, at least the
//!   platform's `retry_after`, never after a fatal error).
//! - [`Deduplicator`]: drops redelivered events by platform message id, remembering the
//!   last 4,096 ids per channel.
//!
//! - [`ChannelManager`]: runs the adapters (restarting failed ones), reports their
//!   [`ChannelHealth`], and turns inbound messages into turns of core's `Runner` and
//!   their replies into platform messages.
//! - [`WebhookChannel`]: messages posted to `POST /webhook/<name>`, signed with
//!   HMAC-SHA256; [`Webhooks`] is core's `WebhookHandler` the server hands them to.
//!
//! The order of work for an inbound message: de-duplicate, look up who wrote (under
//! the people's policy), decide with the policy, route to a session, run the turn as
//! that person, render the reply, split it, send (or edit).
//! Randomness (jitter, pairing codes) comes from a [`RandomSource`] passed in, and time
//! from core's [`squidbot_core::clock::Clock`], so all of it is testable.

#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![warn(missing_docs)]

mod backoff;
mod dedup;
mod manager;
mod markdown;
mod pairing;
mod people;
mod policy;
mod port;
mod session;
mod split;
mod webhook;

pub use backoff::{BackoffSettings, Restart, RestartBackoff};
pub use dedup::{DEFAULT_REMEMBERED_IDS, Deduplicator};
pub use manager::{
    AttachmentError, AttachmentStore, ChannelEntry, ChannelHealth, ChannelManager, ChannelState, ManagerSettings,
};
pub use markdown::{MarkdownFlavor, render};
pub use pairing::{
    AccessStoreError, ApprovedSender, ApprovedSenders, Issued, MemoryApprovedSenders, MemoryPendingCodes,
    PAIRING_CODE_ALPHABET, PAIRING_CODE_LENGTH, PAIRING_CODE_LIFETIME, PairingCodes, PairingError, PendingCodes,
    PendingPairing,
};
pub use people::ChannelNotifier;
pub use policy::{
    AccessConfig, AccessPolicy, Decision, DenyReason, DirectPolicy, GroupPolicy, REFUSAL_INTERVAL, pairing_reply,
};
pub use port::{
    Attachment, AttachmentData, Capabilities, Channel, ChannelError, ChannelErrorKind, Conversation, ConversationKind,
    DynChannel, InboundMessage, InboundSink, OutboundMessage, ReadAttachment, Sender, SentMessage, SinkClosed,
    StreamMode,
};
pub use session::{MAX_KEY_FILE_BYTES, OWNER_CONTEXT, Route, direct_session_key, route, route_for, stranger_context};
pub use split::split_message;
/// Core's retry policy, for the adapters' own reconnect and retry loops.
pub use squidbot_core::backoff::Backoff;
pub use squidbot_core::random::{RandomSource, SeededRandom, SystemRandom};
pub use webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookChannel, Webhooks};
