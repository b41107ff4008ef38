//! Real mail servers for the tests, one set per test: a self-signed CA and server certificate (openssl CLI), a Dovecot (IMAP) started in the foreground with its own configuration in a temporary directory, an aiosmtpd server (SMTP) recording what it receives, and an IMAP client of the bot's mailbox.
//!
//! scripts/install-mail-servers installs the servers and prints `SQUIDBOT_TEST_DOVECOT`
//! and `SQUIDBOT_TEST_MAIL_PYTHON`; scripts/test exports them.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test servers that fail loudly on any setup problem")]

mod certificates;
mod dovecot;
mod mailbox;
mod smtp;

use std::path::PathBuf;
use std::time::Duration;

use tempfile::TempDir;

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

/// Options for [`MailServers::start_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerOptions {
    /// Dovecot leaves IDLE out of its capabilities, so a client must poll.
    pub without_idle: bool,
}

/// A Dovecot and an SMTP server sharing one certificate, in one temporary directory.
pub struct MailServers {
    /// Holds the configuration, state, mail and certificates; removed on drop.
    pub directory: TempDir,
    /// The test CA and the servers' certificate.
    pub certificates: Certificates,
    /// IMAPS and IMAP with STARTTLS.
    pub dovecot: Dovecot,
    /// SMTP with STARTTLS and with implicit TLS.
    pub smtp: SmtpServer,
}

impl MailServers {
    /// Starts both servers with the default options.
    pub async fn start() -> Self {
        Self::start_with(ServerOptions::default()).await
    }

    /// Starts both servers.
    pub async fn start_with(options: ServerOptions) -> Self {
        let dovecot_binary = required_tool("SQUIDBOT_TEST_DOVECOT");
        let python = required_tool("SQUIDBOT_TEST_MAIL_PYTHON");
        let directory = tempfile::tempdir().unwrap();
        let certificates = Certificates::generate(&directory.path().join("tls")).await;
        let dovecot = Dovecot::start(&dovecot_binary, directory.path(), &certificates, options).await;
        let smtp = SmtpServer::start(&python, directory.path(), &certificates).await;
        Self { directory, certificates, dovecot, smtp }
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

/// A simple mail from `from` to the bot, CRLF line ends.
pub fn plain_mail(from: &str, subject: &str, message_id: &str, body: &str) -> Vec<u8> {
    format!(
        "From: {from}\r\nTo: {BOT}\r\nSubject: {subject}\r\nMessage-ID: {message_id}\r\n\
         Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    )
    .into_bytes()
}
