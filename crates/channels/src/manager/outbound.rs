//! Replies going out: rendered to the platform's format, split at its limit, streamed
//! into one message by editing it (at most one edit per interval) on channels that edit
//! in place, and sent again after rate limits and passing faults.

use std::time::Duration;

use squidbot_core::backoff::Backoff;
use tokio::time::Instant;

use super::health::Count;
use super::{ChannelEntry, ChannelManager, ManagerSettings};
use crate::markdown::{MarkdownFlavor, render};
use crate::port::{Attachment, Capabilities, ChannelErrorKind, Conversation, OutboundMessage, SentMessage};
use crate::split::split_message;

/// Fewest characters of streamed text worth a first message (a lone "I" isn't).
const FIRST_MESSAGE_CHARS: usize = 24;

/// Wait after a passing failure before the next attempt: 500 ms, doubling per attempt,
/// with no cap of its own (a wait past `max_send_wait` gives up instead).
const SEND_BACKOFF: Backoff = Backoff::doubling(Duration::from_millis(500), Duration::MAX);

/// A reply being streamed into a message.
pub(super) struct StreamedReply {
    conversation: Conversation,
    reply_to: String,
    capabilities: Capabilities,
    settings: ManagerSettings,
    text: String,
    /// The message being edited, once sent.
    sent: Option<SentMessage>,
    /// What it shows now.
    shown: String,
    last_edit: Option<Instant>,
    /// Set when streaming stopped (the text outgrew one message or an edit failed for
    /// good): the final reply is sent in full at the end.
    gave_up: bool,
    /// Files the turn's tools handed over, sent with the final reply.
    files: Vec<Attachment>,
}

impl StreamedReply {
    pub(super) fn new(
        conversation: &Conversation,
        reply_to: &str,
        capabilities: Capabilities,
        settings: ManagerSettings,
    ) -> Self {
        Self {
            conversation: conversation.clone(),
            reply_to: reply_to.to_owned(),
            capabilities,
            settings,
            text: String::new(),
            sent: None,
            shown: String::new(),
            last_edit: None,
            gave_up: false,
            files: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, delta: &str) {
        self.text.push_str(delta);
    }

    /// A file to send with the final reply.
    pub(super) fn attach(&mut self, file: Attachment) {
        self.files.push(file);
    }

    /// The streamed text was void (the model call is retried): start over.
    pub(super) fn reset(&mut self) {
        self.text.clear();
    }
}

/// `text` in the platform's format, in pieces no longer than its limit: the Markdown is
/// split on paragraph and code-block boundaries first, then each piece is rendered; a
/// piece that grew past the limit when rendered (escaping) is split smaller.
pub(super) fn fit(text: &str, capabilities: Capabilities) -> Vec<String> {
    let limit = capabilities.max_message_chars.max(1);
    let mut pieces = Vec::new();
    for chunk in split_message(text, limit) {
        fit_chunk(&chunk, capabilities.markdown, limit, limit, &mut pieces);
    }
    pieces
}

fn fit_chunk(chunk: &str, flavor: MarkdownFlavor, limit: usize, budget: usize, pieces: &mut Vec<String>) {
    let rendered = render(chunk, flavor);
    if rendered.chars().count() <= limit {
        if !rendered.trim().is_empty() {
            pieces.push(rendered);
        }
        return;
    }
    let smaller = budget / 2;
    if smaller < 16 {
        // Rendering can't be made to fit (escaping everywhere): send it as plain text.
        pieces.extend(split_message(chunk, limit));
        return;
    }
    for part in split_message(chunk, smaller) {
        fit_chunk(&part, flavor, limit, smaller, pieces);
    }
}

impl ChannelManager {
    /// Shows the streamed text so far: a first message once there is enough of it, then
    /// an edit at most once per interval.
    pub(super) async fn stream_update(&self, entry: &ChannelEntry, reply: &mut StreamedReply) {
        if reply.gave_up {
            return;
        }
        if reply.last_edit.is_some_and(|last| last.elapsed() < reply.settings.edit_interval) {
            return;
        }
        if reply.sent.is_none() && reply.text.trim().chars().count() < FIRST_MESSAGE_CHARS {
            return;
        }
        let rendered = render(&reply.text, reply.capabilities.markdown);
        if rendered.chars().count() > reply.capabilities.max_message_chars {
            // The rest arrives with the final reply, split into several messages.
            reply.gave_up = true;
            return;
        }
        if rendered == reply.shown || rendered.trim().is_empty() {
            return;
        }
        reply.last_edit = Some(Instant::now());
        match &reply.sent {
            None => {
                let message = OutboundMessage {
                    conversation: reply.conversation.clone(),
                    reply_to: Some(reply.reply_to.clone()),
                    text: rendered.clone(),
                    attachments: Vec::new(),
                };
                match entry.channel.send_boxed(&message).await {
                    Ok(sent) => {
                        self.health.count(entry.channel.name(), Count::Sent);
                        reply.sent = Some(sent);
                        reply.shown = rendered;
                    }
                    Err(error) => {
                        tracing::debug!(channel = %entry.channel.name(), %error, "can't start streaming; the reply is sent when done");
                        reply.gave_up = true;
                    }
                }
            }
            Some(sent) => match entry.channel.edit_boxed(sent, &rendered).await {
                Ok(()) => {
                    self.health.count(entry.channel.name(), Count::Sent);
                    reply.shown = rendered;
                }
                Err(error) if matches!(error.kind, ChannelErrorKind::RateLimited { .. }) => {
                    tracing::debug!(channel = %entry.channel.name(), %error, "edit rate-limited; the next one catches up");
                }
                Err(error) => {
                    tracing::debug!(channel = %entry.channel.name(), %error, "can't edit the streamed reply; it is sent when done");
                    reply.gave_up = true;
                }
            },
        }
    }

    /// Sends the final reply: the streamed message edited to the first piece (or a new
    /// message), the other pieces after it, the files with the last new message (or on
    /// their own after an edited one).
    pub(super) async fn finish_reply(&self, entry: &ChannelEntry, reply: &mut StreamedReply, text: &str) {
        let pieces = fit(text, reply.capabilities);
        let mut rest = pieces.as_slice();
        if let (Some(sent), Some((first, others))) = (&reply.sent, pieces.split_first()) {
            if *first == reply.shown {
                rest = others;
            } else {
                match self.edit_with_retry(entry, sent, first).await {
                    Ok(()) => rest = others,
                    Err(error) => {
                        tracing::warn!(channel = %entry.channel.name(), %error, "can't edit the streamed reply; sending the reply as new messages");
                    }
                }
            }
        }
        let files = std::mem::take(&mut reply.files);
        let (last, before) = match rest.split_last() {
            Some((last, before)) => (last.clone(), before),
            None if files.is_empty() => return,
            None => (String::new(), rest),
        };
        for piece in before {
            let message = OutboundMessage {
                conversation: reply.conversation.clone(),
                reply_to: Some(reply.reply_to.clone()),
                text: piece.clone(),
                attachments: Vec::new(),
            };
            self.send_with_retry(entry, &message).await;
        }
        let message = OutboundMessage {
            conversation: reply.conversation.clone(),
            reply_to: Some(reply.reply_to.clone()),
            text: last,
            attachments: files,
        };
        if self.send_with_retry(entry, &message).await.is_some() || message.attachments.is_empty() {
            return;
        }
        // The platform refused the files (too big, a type it won't take): the text still
        // goes, then a note naming them.
        let names: Vec<String> = message.attachments.iter().map(|file| file.name.clone()).collect();
        if !message.text.is_empty() {
            let text_only = OutboundMessage { attachments: Vec::new(), ..message.clone() };
            self.send_with_retry(entry, &text_only).await;
        }
        let note = render(
            &format!("(couldn't send {}: the platform refused it)", names.join(", ")),
            reply.capabilities.markdown,
        );
        let message = OutboundMessage { text: note, attachments: Vec::new(), ..message };
        self.send_with_retry(entry, &message).await;
    }

    /// Sends `text` (Markdown) to `conversation` as one or more messages.
    pub(super) async fn send_reply(
        &self,
        entry: &ChannelEntry,
        conversation: &Conversation,
        reply_to: Option<&str>,
        text: &str,
    ) {
        for piece in fit(text, entry.channel.capabilities()) {
            let message = OutboundMessage {
                conversation: conversation.clone(),
                reply_to: reply_to.map(str::to_owned),
                text: piece,
                attachments: Vec::new(),
            };
            self.send_with_retry(entry, &message).await;
        }
    }

    /// Sends one message, waiting out rate limits and passing faults; a message that
    /// can't be sent is logged with its reason.
    pub(super) async fn send_with_retry(&self, entry: &ChannelEntry, message: &OutboundMessage) -> Option<SentMessage> {
        let name = entry.channel.name();
        for attempt in 1..=self.settings.send_attempts.max(1) {
            match entry.channel.send_boxed(message).await {
                Ok(sent) => {
                    self.health.count(name, Count::Sent);
                    return Some(sent);
                }
                Err(error) => {
                    let wait = match error.kind {
                        ChannelErrorKind::RateLimited { retry_after } => retry_after,
                        ChannelErrorKind::Transient => SEND_BACKOFF.nominal(attempt),
                        ChannelErrorKind::Rejected | ChannelErrorKind::Fatal => {
                            tracing::warn!(channel = %name, %error, "reply not sent: the platform refused it");
                            break;
                        }
                    };
                    if attempt == self.settings.send_attempts.max(1) || wait > self.settings.max_send_wait {
                        tracing::warn!(channel = %name, %error, attempt, "reply not sent: giving up");
                        break;
                    }
                    tracing::info!(channel = %name, %error, attempt, wait_ms = wait.as_millis() as u64, "sending again after a wait");
                    tokio::time::sleep(wait).await;
                }
            }
        }
        self.health.count(name, Count::SendFailure);
        None
    }

    async fn edit_with_retry(
        &self,
        entry: &ChannelEntry,
        sent: &SentMessage,
        text: &str,
    ) -> Result<(), crate::port::ChannelError> {
        let name = entry.channel.name();
        let mut attempt = 1;
        loop {
            match entry.channel.edit_boxed(sent, text).await {
                Ok(()) => {
                    self.health.count(name, Count::Sent);
                    return Ok(());
                }
                Err(error) => {
                    let wait = match error.kind {
                        ChannelErrorKind::RateLimited { retry_after } => retry_after,
                        ChannelErrorKind::Transient => SEND_BACKOFF.nominal(attempt),
                        ChannelErrorKind::Rejected | ChannelErrorKind::Fatal => return Err(error),
                    };
                    if attempt >= self.settings.send_attempts.max(1) || wait > self.settings.max_send_wait {
                        return Err(error);
                    }
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }
}
