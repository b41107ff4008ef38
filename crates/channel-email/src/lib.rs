//! squidbot's email: IMAP to receive (IDLE or polling), SMTP to reply channel adapter.
//!
//! - Receiving ([`Channel::run`]): logs in to the IMAP server (implicit TLS, STARTTLS,
//!   or plain to this machine only), selects the mailbox, hands over the new mail,
//!   flags it `\Seen`, and waits for more with IDLE (renewed every 25 minutes), or
//!   polls every [`EmailSettings::poll_interval`] when the server can't IDLE. The last
//!   handled UID is saved under [`EmailSettings::state_dir`] so a restart answers
//!   nothing twice. A dropped connection is retried with a backoff (1 s doubling to
//!   30 s); after six failed attempts in a row the loop ends with a transient error
//!   and the manager restarts it. Refused credentials, an untrusted certificate or a
//!   missing mailbox end it with a fatal error.
//! - Each mail becomes one direct message: the sender is the lowercase From address,
//!   the conversation is the thread's root Message-ID (first of References, else
//!   In-Reply-To, else its own), the text is the plain body (or the HTML body as text)
//!   without the quoted history at its end, with `Subject: …` as first line when the
//!   mail starts a thread. Attachments over [`EmailSettings::max_attachment_bytes`]
//!   are replaced by a note; a mail over [`EmailSettings::max_message_bytes`] is never
//!   downloaded, only its header, and arrives as a note.
//! - Not answered (logged, left unseen): mail from the bot's own address, with several
//!   or no From addresses, found forged by the receiving server (its
//!   `Authentication-Results` reports `dmarc=fail`, or `spf=fail` without a DKIM
//!   pass), and automatic mail (`Auto-Submitted`, `Precedence: bulk/list/junk`,
//!   `List-Id`, bounces), so the bot never joins a mail loop.
//! - Sending ([`Channel::send`]): a reply to the sender of the mail answered
//!   (`reply_to`, else the conversation's latest mail), `Re: <subject>`, `In-Reply-To`
//!   and `References` continuing the thread, the text as plain and HTML alternatives,
//!   attachments as MIME parts, `Auto-Submitted: auto-replied` so other robots don't
//!   answer. A conversation id that is a bare address (no mail remembered) starts a
//!   new thread to it. SMTP 4xx answers are transient, 5xx rejections, a refused login
//!   or an untrusted certificate fatal, connection failures transient.

mod filter;
mod imap;
mod parse;
mod receive;
mod send;
mod settings;
mod state;
mod text;
mod threads;
mod tls;

use std::time::Duration;

use squidbot_channels::{
    Capabilities, Channel, ChannelError, InboundSink, MarkdownFlavor, OutboundMessage, SentMessage, StreamMode,
};
use tokio_util::sync::CancellationToken;

pub use settings::{
    DEFAULT_MAX_ATTACHMENT_BYTES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_POLL_INTERVAL, EmailSettings, ImapSettings,
    Security, SmtpSettings,
};

use crate::receive::Receiver;
use crate::send::{Draft, Outbox};
use crate::settings::domain_of;
use crate::threads::{ThreadEntry, Threads};
use crate::tls::Trust;

/// Longest reply text sent in one mail; mail has no real limit, this keeps a runaway
/// answer from becoming a book.
pub const MAX_MESSAGE_CHARS: usize = 100_000;

/// After shutdown, how long the receive loop may take to record the mail it has just
/// handed over (flag and saved position) before it is dropped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The email channel: receives from an IMAP mailbox, replies over SMTP.
pub struct EmailChannel {
    settings: EmailSettings,
    trust: Trust,
    outbox: Outbox,
    threads: Threads,
}

impl std::fmt::Debug for EmailChannel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("EmailChannel").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl EmailChannel {
    /// Checks the settings and reads the extra root certificates; nothing connects
    /// yet. Bad settings are [`squidbot_channels::ChannelErrorKind::Fatal`].
    pub fn new(settings: EmailSettings) -> Result<Self, ChannelError> {
        settings.validate()?;
        let trust = Trust::load(&settings.extra_root_certificates)?;
        let outbox = Outbox::new(&settings, &trust)?;
        Ok(Self { settings, trust, outbox, threads: Threads::default() })
    }
}

impl Channel for EmailChannel {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::SendOnce,
            typing: false,
            threads: true,
            max_message_chars: MAX_MESSAGE_CHARS,
            markdown: MarkdownFlavor::PlainText,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let receiver = Receiver::new(self, inbound, shutdown.clone());
        let receiving = receiver.run();
        tokio::pin!(receiving);
        tokio::select! {
            result = &mut receiving => result,
            () = shutdown.cancelled() => {
                // The loop stops at its next wait; give it a moment to record the mail
                // it is handling so a restart doesn't answer it again.
                tokio::time::timeout(SHUTDOWN_GRACE, receiving).await.unwrap_or(Ok(()))
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let conversation_id = &message.conversation.id;
        let message_id = self.outbox.new_message_id();
        let target = self.threads.reply_target(message.reply_to.as_deref(), conversation_id);
        let draft = match &target {
            Some(target) => Draft::reply(target, &message_id, &message.text, &message.attachments),
            None if domain_of(conversation_id).is_some() && !conversation_id.starts_with('<') => {
                Draft::new_thread(conversation_id, &message_id, &message.text, &message.attachments)
            }
            None => {
                return Err(ChannelError::rejected(format!(
                    "can't reply in email conversation {conversation_id}: no mail of it is remembered (the gateway \
                     restarted since it arrived?)"
                )));
            }
        };
        let entry = ThreadEntry {
            recipient: draft.recipient.to_owned(),
            recipient_name: draft.recipient_name.map(str::to_owned),
            subject: draft.subject.clone(),
            message_id: message_id.clone(),
            references: draft.references.clone(),
        };
        let mail = self.outbox.compose(draft).await?;
        self.outbox.deliver(mail).await?;
        let thread_root = entry.references.first().cloned().unwrap_or_else(|| message_id.clone());
        self.threads.remember(if target.is_some() { conversation_id } else { &thread_root }, entry);
        Ok(SentMessage { conversation: message.conversation.clone(), platform_message_id: message_id })
    }
}
