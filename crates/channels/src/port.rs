//! The `Channel` port every chat-platform adapter implements, and the plain data that
//! crosses it: inbound and outbound messages, capabilities, errors.

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use squidbot_core::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::markdown::MarkdownFlavor;

pub use squidbot_types::channel::{Attachment, AttachmentData, Sender};

/// How a channel shows a reply that is still being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamMode {
    /// Sends a first message early and edits it as text arrives (Telegram, Discord and
    /// Slack edits, Matrix replacements).
    EditInPlace,
    /// Sends the finished reply once (email, webhook).
    SendOnce,
}

/// What a platform can do, declared by its adapter; the manager shapes replies to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Whether replies are streamed by editing or sent once.
    pub streams: StreamMode,
    /// Whether [`Channel::typing`] shows anything.
    pub typing: bool,
    /// Whether replies can go into a thread ([`Conversation::thread`]).
    pub threads: bool,
    /// Longest message the platform accepts, in characters; longer replies are split
    /// with [`crate::split_message`].
    pub max_message_chars: usize,
    /// The text format messages are rendered to with [`crate::render`].
    pub markdown: MarkdownFlavor,
}

/// Whether a conversation is one-to-one or shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConversationKind {
    /// A direct message between one person and the bot.
    Direct,
    /// A room, channel or group chat with several people.
    Group,
}

/// Where a message was written or a reply goes, in the platform's own ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Conversation {
    /// The platform's id of the chat, room or channel (for email, the thread's root
    /// message id).
    pub id: String,
    /// Direct message or group.
    pub kind: ConversationKind,
    /// The thread inside the conversation, on platforms with threads.
    pub thread: Option<String>,
}

/// Reading an [`Attachment`]'s bytes, wherever they are.
pub trait ReadAttachment {
    /// Its bytes, read from disk when it is saved to a file. A file that can't be read is
    /// a rejected send: trying again won't help.
    fn bytes(&self) -> impl Future<Output = Result<Vec<u8>, ChannelError>> + Send + '_;
}

impl ReadAttachment for Attachment {
    async fn bytes(&self) -> Result<Vec<u8>, ChannelError> {
        match &self.data {
            AttachmentData::Bytes(bytes) => Ok(bytes.clone()),
            AttachmentData::Path(path) => tokio::fs::read(path).await.map_err(|error| {
                ChannelError::rejected(format!("can't read attachment {} at {}: {error}", self.name, path.display()))
            }),
        }
    }
}

/// A message someone wrote to the bot, as an adapter hands it to the manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundMessage {
    /// The name of the channel it came through (the adapter's [`Channel::name`]).
    pub channel: String,
    /// The platform's id of the message, used to drop redelivered events
    /// ([`crate::Deduplicator`]) and to reply to it.
    pub platform_message_id: String,
    /// Where it was written.
    pub conversation: Conversation,
    /// Who wrote it.
    pub sender: Sender,
    /// Its text, as plain text (platform markup removed by the adapter).
    pub text: String,
    /// Whether the bot is mentioned or replied to; in groups the default policy answers
    /// only then.
    pub mentions_bot: bool,
    /// Files sent with it.
    pub attachments: Vec<Attachment>,
    /// When the adapter received it.
    pub received_at: Timestamp,
}

/// A message the bot sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundMessage {
    /// Where it goes (with the thread to reply in, if any).
    pub conversation: Conversation,
    /// The platform's id of the message this answers, for platforms that show replies.
    pub reply_to: Option<String>,
    /// Its text, already rendered to the channel's [`MarkdownFlavor`] and no longer than
    /// [`Capabilities::max_message_chars`].
    pub text: String,
    /// Files to send with it.
    pub attachments: Vec<Attachment>,
}

/// A message the bot has sent, as needed to edit it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    /// Where it was sent.
    pub conversation: Conversation,
    /// The platform's id of the sent message.
    pub platform_message_id: String,
}

/// What a failed channel operation means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelErrorKind {
    /// The platform asked us to slow down; try again no sooner than `retry_after`.
    RateLimited {
        /// How long the platform asked us to wait.
        retry_after: Duration,
    },
    /// A passing fault (network error, 5xx, dropped socket): try again later.
    Transient,
    /// The platform refused this request (message too long, chat not found, edit of a
    /// deleted message); repeating it won't help but other requests may work.
    Rejected,
    /// The adapter can't work until its configuration changes (credentials refused, bad
    /// settings); restarting it won't help.
    Fatal,
}

/// A failed channel operation: what it means ([`ChannelErrorKind`]) and what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChannelError {
    /// What the failure means for the caller, decided where it happened.
    pub kind: ChannelErrorKind,
    /// What happened, as `can't <action>: <reason>`.
    pub message: String,
}

impl ChannelError {
    /// The platform asked us to wait `retry_after`.
    pub fn rate_limited(retry_after: Duration, message: impl Into<String>) -> Self {
        Self { kind: ChannelErrorKind::RateLimited { retry_after }, message: message.into() }
    }

    /// A passing fault.
    pub fn transient(message: impl Into<String>) -> Self {
        Self { kind: ChannelErrorKind::Transient, message: message.into() }
    }

    /// The platform refused this request.
    pub fn rejected(message: impl Into<String>) -> Self {
        Self { kind: ChannelErrorKind::Rejected, message: message.into() }
    }

    /// The adapter can't work as configured.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self { kind: ChannelErrorKind::Fatal, message: message.into() }
    }

    /// Whether the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            ChannelErrorKind::RateLimited { .. } | ChannelErrorKind::Transient => true,
            ChannelErrorKind::Rejected | ChannelErrorKind::Fatal => false,
        }
    }
}

/// The manager has stopped taking inbound messages (the gateway is shutting down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("can't hand the message over: the channel manager has stopped")]
pub struct SinkClosed;

/// Where an adapter's receive loop puts the messages it receives: a bounded queue to the
/// manager, so a flood of events waits instead of growing memory.
#[derive(Debug, Clone)]
pub struct InboundSink {
    sender: mpsc::Sender<InboundMessage>,
}

impl InboundSink {
    /// A sink and the receiver the manager reads from, holding at most `capacity`
    /// messages (at least one).
    pub fn bounded(capacity: usize) -> (Self, mpsc::Receiver<InboundMessage>) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        (Self { sender }, receiver)
    }

    /// A sink over an existing queue.
    pub fn new(sender: mpsc::Sender<InboundMessage>) -> Self {
        Self { sender }
    }

    /// Hands a message to the manager, waiting while the queue is full. A receive loop
    /// races this with its shutdown token so a full queue can't hold up shutdown.
    pub async fn deliver(&self, message: InboundMessage) -> Result<(), SinkClosed> {
        self.sender.send(message).await.map_err(|_closed| SinkClosed)
    }

    /// Hands every message of `incoming` to the manager until `shutdown` is cancelled or
    /// `incoming` ends (`Ok`), or the manager stops reading (`SinkClosed`). For adapters
    /// whose messages arrive on a queue of their own (the webhook, test channels).
    pub async fn forward(
        &self,
        incoming: &mut mpsc::Receiver<InboundMessage>,
        shutdown: &CancellationToken,
    ) -> Result<(), SinkClosed> {
        loop {
            let message = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                message = incoming.recv() => match message {
                    Some(message) => message,
                    None => return Ok(()),
                },
            };
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                delivered = self.deliver(message) => delivered?,
            }
        }
    }

    /// Whether the manager has stopped reading, so the receive loop can end.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

/// A chat-platform adapter, driven by the channel manager.
///
/// The manager runs [`Channel::run`] as a tracked task and restarts it with
/// [`crate::RestartBackoff`] when it fails; replies go out through [`Channel::send`] and,
/// while streaming, [`Channel::edit`]. Use [`DynChannel`] where a trait object is needed.
pub trait Channel: Send + Sync {
    /// The channel's configured name (`telegram`, `work-slack`), unique in the gateway.
    fn name(&self) -> &str;

    /// What the platform can do.
    fn capabilities(&self) -> Capabilities;

    /// The receive loop: connects, hands every received message to `inbound`, and
    /// returns `Ok(())` once `shutdown` is cancelled. Returning an error means the loop
    /// failed; the manager restarts it after a backoff (or not at all for
    /// [`ChannelErrorKind::Fatal`]).
    fn run(
        &self,
        inbound: InboundSink,
        shutdown: CancellationToken,
    ) -> impl Future<Output = Result<(), ChannelError>> + Send + '_;

    /// Sends one message (already rendered and split to fit).
    fn send<'a>(
        &'a self,
        message: &'a OutboundMessage,
    ) -> impl Future<Output = Result<SentMessage, ChannelError>> + Send + 'a;

    /// Replaces the text of a message sent earlier (streaming). Channels that
    /// [`StreamMode::SendOnce`] keep the default, which refuses.
    fn edit<'a>(
        &'a self,
        _sent: &'a SentMessage,
        _text: &'a str,
    ) -> impl Future<Output = Result<(), ChannelError>> + Send + 'a {
        std::future::ready(Err(ChannelError::rejected(format!(
            "can't edit a message on {}: the channel sends replies once",
            self.name()
        ))))
    }

    /// Shows that a reply is being written. Channels without typing indicators keep the
    /// default, which does nothing.
    fn typing<'a>(
        &'a self,
        _conversation: &'a Conversation,
    ) -> impl Future<Output = Result<(), ChannelError>> + Send + 'a {
        std::future::ready(Ok(()))
    }

    /// Marks an inbound message as seen and being worked on (a reaction on Matrix,
    /// Slack and Discord). Channels without reactions keep the default, which does
    /// nothing. A failure here is logged by the manager and never stops the turn.
    fn acknowledge<'a>(
        &'a self,
        _message: &'a InboundMessage,
    ) -> impl Future<Output = Result<(), ChannelError>> + Send + 'a {
        std::future::ready(Ok(()))
    }
}

/// Object-safe companion of [`Channel`], implemented for every `Channel`.
pub trait DynChannel: Send + Sync {
    /// See [`Channel::name`].
    fn name(&self) -> &str;
    /// See [`Channel::capabilities`].
    fn capabilities(&self) -> Capabilities;
    /// See [`Channel::run`].
    fn run_boxed(&self, inbound: InboundSink, shutdown: CancellationToken) -> BoxFuture<'_, Result<(), ChannelError>>;
    /// See [`Channel::send`].
    fn send_boxed<'a>(&'a self, message: &'a OutboundMessage) -> BoxFuture<'a, Result<SentMessage, ChannelError>>;
    /// See [`Channel::edit`].
    fn edit_boxed<'a>(&'a self, sent: &'a SentMessage, text: &'a str) -> BoxFuture<'a, Result<(), ChannelError>>;
    /// See [`Channel::typing`].
    fn typing_boxed<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Result<(), ChannelError>>;
    /// See [`Channel::acknowledge`].
    fn acknowledge_boxed<'a>(&'a self, message: &'a InboundMessage) -> BoxFuture<'a, Result<(), ChannelError>>;
}

impl<T: Channel> DynChannel for T {
    fn name(&self) -> &str {
        Channel::name(self)
    }

    fn capabilities(&self) -> Capabilities {
        Channel::capabilities(self)
    }

    fn run_boxed(&self, inbound: InboundSink, shutdown: CancellationToken) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.run(inbound, shutdown))
    }

    fn send_boxed<'a>(&'a self, message: &'a OutboundMessage) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send(message))
    }

    fn edit_boxed<'a>(&'a self, sent: &'a SentMessage, text: &'a str) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.edit(sent, text))
    }

    fn typing_boxed<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.typing(conversation))
    }

    fn acknowledge_boxed<'a>(&'a self, message: &'a InboundMessage) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.acknowledge(message))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn attachment_bytes_come_from_memory_or_the_file_and_a_missing_file_is_rejected() {
        let in_memory =
            Attachment { name: "a.txt".into(), mime: "text/plain".into(), data: AttachmentData::Bytes(b"hi".to_vec()) };
        assert_eq!(in_memory.bytes().await.unwrap(), b"hi");
        let path = std::env::temp_dir().join(format!("squidbot-attachment-{}", std::process::id()));
        std::fs::write(&path, b"on disk").unwrap();
        let saved =
            Attachment { name: "b.txt".into(), mime: "text/plain".into(), data: AttachmentData::Path(path.clone()) };
        assert_eq!(saved.bytes().await.unwrap(), b"on disk");
        std::fs::remove_file(&path).unwrap();
        let error = saved.bytes().await.unwrap_err();
        assert_eq!(error.kind, ChannelErrorKind::Rejected);
        assert!(error.message.starts_with("can't read attachment b.txt at "), "{}", error.message);
    }

    /// A channel that echoes a fixed list of messages, then waits for shutdown.
    struct ScriptedChannel {
        incoming: Vec<InboundMessage>,
        sent: Mutex<Vec<OutboundMessage>>,
    }

    impl Channel for ScriptedChannel {
        fn name(&self) -> &str {
            "scripted"
        }

        fn capabilities(&self) -> Capabilities {
            Capabilities {
                streams: StreamMode::SendOnce,
                typing: false,
                threads: false,
                max_message_chars: 100,
                markdown: MarkdownFlavor::PlainText,
            }
        }

        async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
            for message in &self.incoming {
                inbound.deliver(message.clone()).await.map_err(|closed| ChannelError::transient(closed.to_string()))?;
            }
            shutdown.cancelled().await;
            Ok(())
        }

        async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
            let mut sent = self.sent.lock().map_err(|_poisoned| ChannelError::fatal("can't send: poisoned"))?;
            sent.push(message.clone());
            Ok(SentMessage { conversation: message.conversation.clone(), platform_message_id: sent.len().to_string() })
        }
    }

    fn direct(id: &str) -> Conversation {
        Conversation { id: id.to_owned(), kind: ConversationKind::Direct, thread: None }
    }

    fn inbound(text: &str) -> InboundMessage {
        InboundMessage {
            channel: "scripted".to_owned(),
            platform_message_id: text.to_owned(),
            conversation: direct("chat-1"),
            sender: Sender { id: "user-1".to_owned(), display_name: None },
            text: text.to_owned(),
            mentions_bot: false,
            attachments: Vec::new(),
            received_at: Timestamp::UNIX_EPOCH,
        }
    }

    #[tokio::test]
    async fn a_channel_is_driven_through_the_object_safe_port() {
        let channel: Arc<dyn DynChannel> =
            Arc::new(ScriptedChannel { incoming: vec![inbound("one"), inbound("two")], sent: Mutex::new(Vec::new()) });
        let (sink, mut receiver) = InboundSink::bounded(4);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let channel = Arc::clone(&channel);
            let shutdown = shutdown.clone();
            async move { channel.run_boxed(sink, shutdown).await }
        });
        assert_eq!(receiver.recv().await.map(|message| message.text), Some("one".to_owned()));
        assert_eq!(receiver.recv().await.map(|message| message.text), Some("two".to_owned()));
        shutdown.cancel();
        assert_eq!(task.await.unwrap(), Ok(()));

        let outbound = OutboundMessage {
            conversation: direct("chat-1"),
            reply_to: None,
            text: "hi".to_owned(),
            attachments: vec![],
        };
        let sent = channel.send_boxed(&outbound).await.unwrap();
        assert_eq!(sent.platform_message_id, "1");
        assert_eq!(channel.name(), "scripted");
        assert_eq!(channel.capabilities().streams, StreamMode::SendOnce);
    }

    #[tokio::test]
    async fn send_once_channels_refuse_edits_and_ignore_typing_by_default() {
        let channel = ScriptedChannel { incoming: Vec::new(), sent: Mutex::new(Vec::new()) };
        let sent = SentMessage { conversation: direct("chat-1"), platform_message_id: "1".to_owned() };
        let error = channel.edit_boxed(&sent, "new text").await.unwrap_err();
        assert_eq!(error.kind, ChannelErrorKind::Rejected);
        assert!(error.to_string().starts_with("can't edit"), "{error}");
        assert!(!error.is_retryable());
        assert_eq!(channel.typing_boxed(&direct("chat-1")).await, Ok(()));
    }

    #[tokio::test]
    async fn delivering_after_the_manager_stopped_is_an_error() {
        let (sink, receiver) = InboundSink::bounded(0);
        assert!(!sink.is_closed());
        drop(receiver);
        assert!(sink.is_closed());
        assert_eq!(sink.deliver(inbound("late")).await, Err(SinkClosed));
    }

    #[test]
    fn error_kinds_say_whether_to_retry() {
        assert!(ChannelError::rate_limited(Duration::from_secs(3), "can't send: 429").is_retryable());
        assert!(ChannelError::transient("can't connect: reset").is_retryable());
        assert!(!ChannelError::fatal("can't log in: token refused").is_retryable());
    }
}
