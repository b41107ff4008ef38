//! The mail servers the tests run against, one set per test: a self-signed CA and
//! server certificate (openssl CLI), a Dovecot (IMAP) started in the foreground with its
//! own configuration in a temporary directory, an aiosmtpd server (SMTP) recording
//! what it receives, and the adapter running against them.

mod certificates;
mod dovecot;
mod mailbox;
mod smtp;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use squidbot_channel_email::{EmailChannel, EmailSettings, ImapSettings, Security, SmtpSettings};
use squidbot_channels::{Channel, ChannelError, InboundMessage, InboundSink};
use squidbot_types::Secret;
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use certificates::Certificates;
pub use dovecot::Dovecot;
pub use mailbox::AdminMailbox;
pub use smtp::{SentMail, SmtpServer};

/// The bot's address, IMAP login and SMTP login.
pub const BOT: &str = "bot@example.test";
/// The password of [`BOT`] on both servers.
pub const PASSWORD: &str = "password";

/// How long a test waits for something that should happen quickly.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// The path in an environment variable set by scripts/test; unset fails the test.
pub fn required_tool(variable: &str) -> PathBuf {
    match std::env::var_os(variable) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "{variable} is not set: the email tests need real mail servers. Run scripts/install-mail-servers and \
             export the SQUIDBOT_TEST_DOVECOT and SQUIDBOT_TEST_MAIL_PYTHON it prints (scripts/test does this)."
        ),
    }
}

/// Options for [`MailServers::start`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerOptions {
    /// Dovecot leaves IDLE out of its capabilities, so the adapter must poll.
    pub without_idle: bool,
}

/// A Dovecot and an SMTP server sharing one certificate, in one temporary directory.
pub struct MailServers {
    pub directory: TempDir,
    pub certificates: Certificates,
    pub dovecot: Dovecot,
    pub smtp: SmtpServer,
}

impl MailServers {
    pub async fn start() -> Self {
        Self::start_with(ServerOptions::default()).await
    }

    pub async fn start_with(options: ServerOptions) -> Self {
        let dovecot_binary = required_tool("SQUIDBOT_TEST_DOVECOT");
        let python = required_tool("SQUIDBOT_TEST_MAIL_PYTHON");
        let directory = tempfile::tempdir().unwrap();
        let certificates = Certificates::generate(&directory.path().join("tls")).await;
        let dovecot = Dovecot::start(&dovecot_binary, directory.path(), &certificates, options).await;
        let smtp = SmtpServer::start(&python, directory.path(), &certificates).await;
        Self { directory, certificates, dovecot, smtp }
    }

    /// Settings for the bot against these servers: IMAPS, SMTP with STARTTLS, the
    /// test CA trusted, a fresh state directory.
    pub fn settings(&self) -> EmailSettings {
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

    /// A state directory under the test's temporary directory.
    pub fn state_dir(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    /// A client of the bot's mailbox for the test's own use (append, flags).
    pub async fn mailbox(&self) -> AdminMailbox {
        AdminMailbox::connect(self.dovecot.imaps_port, &self.certificates).await
    }

    /// The Dovecot log, for failure messages.
    pub fn dovecot_log(&self) -> String {
        self.dovecot.log()
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

/// A simple mail from `from` to the bot, CRLF line ends.
pub fn plain_mail(from: &str, subject: &str, message_id: &str, body: &str) -> Vec<u8> {
    format!(
        "From: {from}\r\nTo: {BOT}\r\nSubject: {subject}\r\nMessage-ID: {message_id}\r\n\
         Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    )
    .into_bytes()
}
