//! The adapter against the mail servers of `squidbot_testkit::mail`: the bot's settings
//! for those servers and the adapter's receive loop running in a task.

use std::sync::Arc;
use std::time::{Duration, Instant};

use squidbot_channel_email::{EmailChannel, EmailSettings, ImapSettings, Security, SmtpSettings};
use squidbot_channels::{Channel, ChannelError, InboundMessage, InboundSink};
use squidbot_testkit::mail::{BOT, MailServers, PASSWORD, PATIENCE};
use squidbot_types::Secret;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The adapter's settings for a set of test mail servers.
pub trait BotSettings {
    /// Settings for the bot against these servers: IMAPS, SMTP with STARTTLS, the
    /// test CA trusted, a fresh state directory.
    fn settings(&self) -> EmailSettings;
}

impl BotSettings for MailServers {
    fn settings(&self) -> EmailSettings {
        let imap = ImapSettings {
            host: "127.0.0.1".to_owned(),
            port: self.dovecot.imaps_port,
            security: Security::Tls,
            username: BOT.to_owned(),
            password: Secret::new(PASSWORD),
            mailbox: "INBOX".to_owned(),
        };
        let smtp = SmtpSettings {
            host: "127.0.0.1".to_owned(),
            port: self.smtp.starttls_port,
            security: Security::StartTls,
            username: BOT.to_owned(),
            password: Secret::new(PASSWORD),
        };
        let mut settings = EmailSettings::new("email", BOT, imap, smtp, self.state_dir("state"));
        settings.display_name = Some("Squid Bot".to_owned());
        settings.extra_root_certificates = vec![self.certificates.ca.clone()];
        settings
    }
}

/// An adapter's receive loop running in a task.
pub struct Running {
    pub channel: Arc<EmailChannel>,
    pub inbound: mpsc::Receiver<InboundMessage>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ChannelError>>,
}

impl Running {
    pub fn start(settings: EmailSettings) -> Self {
        let channel = Arc::new(EmailChannel::new(settings).unwrap());
        let (sink, inbound) = InboundSink::bounded(16);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let channel = Arc::clone(&channel);
            let shutdown = shutdown.clone();
            async move { channel.run(sink, shutdown).await }
        });
        Self { channel, inbound, shutdown, task }
    }

    /// The next delivered message; fails the test after [`PATIENCE`] or when the loop
    /// ended.
    pub async fn next(&mut self) -> InboundMessage {
        match tokio::time::timeout(PATIENCE, self.inbound.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the receive loop ended: {:?}", self.task.is_finished()),
            Err(_elapsed) => panic!("no message delivered within {PATIENCE:?}"),
        }
    }

    /// Asserts nothing more is delivered for `quiet`.
    pub async fn assert_nothing_within(&mut self, quiet: Duration) {
        if let Ok(Some(message)) = tokio::time::timeout(quiet, self.inbound.recv()).await {
            panic!("unexpected delivery: {message:?}");
        }
    }

    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Requests shutdown and returns the loop's result and how long it took.
    pub async fn stop(self) -> (Result<(), ChannelError>, Duration) {
        let started = Instant::now();
        self.shutdown.cancel();
        let result = tokio::time::timeout(PATIENCE, self.task).await.expect("the loop did not stop").unwrap();
        (result, started.elapsed())
    }

    /// Waits for the loop to end on its own (an error).
    pub async fn finished(self) -> Result<(), ChannelError> {
        tokio::time::timeout(PATIENCE, self.task).await.expect("the loop did not end").unwrap()
    }
}
