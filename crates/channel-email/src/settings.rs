//! The email channel's settings: the mailbox to read (IMAP), the server to send through
//! (SMTP), limits, and where the receive position is kept.

use std::path::PathBuf;
use std::time::Duration;

use squidbot_channels::ChannelError;
use squidbot_types::Secret;

/// How long to wait between mailbox checks when the server can't IDLE.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// Largest attachment delivered by default; larger ones are skipped with a note.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// Largest message downloaded by default; larger ones are delivered as a short note
/// without their body, so a huge mail never sits in memory.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 30 * 1024 * 1024;

/// How a connection to a mail server is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// TLS from the first byte (IMAPS on 993, SMTPS on 465).
    Tls,
    /// A plain connection upgraded with STARTTLS before logging in (IMAP 143, SMTP 587).
    StartTls,
    /// No encryption: allowed only for a server on this machine (`localhost`,
    /// `127.0.0.1`, `::1`), e.g. a local relay.
    Plain,
}

/// The IMAP server the bot's mail is read from.
#[derive(Debug, Clone)]
pub struct ImapSettings {
    /// Host name (checked against the server's certificate) or IP address.
    pub host: String,
    /// Port (993 for [`Security::Tls`], 143 for [`Security::StartTls`]).
    pub port: u16,
    /// How the connection is protected.
    pub security: Security,
    /// Login name.
    pub username: String,
    /// Login password.
    pub password: Secret,
    /// The mailbox watched for new mail.
    pub mailbox: String,
}

impl ImapSettings {
    /// IMAPS on port 993, watching `INBOX`.
    pub fn new(host: impl Into<String>, username: impl Into<String>, password: Secret) -> Self {
        Self {
            host: host.into(),
            port: 993,
            security: Security::Tls,
            username: username.into(),
            password,
            mailbox: "INBOX".to_owned(),
        }
    }
}

/// The SMTP server replies are sent through.
#[derive(Debug, Clone)]
pub struct SmtpSettings {
    /// Host name (checked against the server's certificate) or IP address.
    pub host: String,
    /// Port (587 for [`Security::StartTls`], 465 for [`Security::Tls`]).
    pub port: u16,
    /// How the connection is protected.
    pub security: Security,
    /// Login name (AUTH PLAIN or LOGIN).
    pub username: String,
    /// Login password.
    pub password: Secret,
}

impl SmtpSettings {
    /// Submission with STARTTLS on port 587.
    pub fn new(host: impl Into<String>, username: impl Into<String>, password: Secret) -> Self {
        Self { host: host.into(), port: 587, security: Security::StartTls, username: username.into(), password }
    }
}

/// Everything the email channel needs.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// The channel's name in the gateway (`email`, `work-mail`).
    pub name: String,
    /// The bot's own address: the From of its replies, and mail from it is never
    /// answered.
    pub address: String,
    /// The name shown with [`EmailSettings::address`] in the From of replies.
    pub display_name: Option<String>,
    /// Where mail is read.
    pub imap: ImapSettings,
    /// Where replies are sent.
    pub smtp: SmtpSettings,
    /// How often the mailbox is checked when the server lacks IDLE.
    pub poll_interval: Duration,
    /// PEM files of certificates trusted as roots besides the built-in web roots (a
    /// company CA, a test CA).
    pub extra_root_certificates: Vec<PathBuf>,
    /// Largest attachment delivered; larger ones are replaced by a note in the text.
    pub max_attachment_bytes: u64,
    /// Largest message downloaded; a larger one is delivered as a note without body.
    pub max_message_bytes: u64,
    /// Where the receive position (last processed UID and the mailbox's UIDVALIDITY)
    /// is kept, so a restart neither answers mail twice nor misses any.
    pub state_dir: PathBuf,
}

impl EmailSettings {
    /// Settings with the default poll interval and limits and no extra roots.
    pub fn new(
        name: impl Into<String>,
        address: impl Into<String>,
        imap: ImapSettings,
        smtp: SmtpSettings,
        state_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            name: name.into(),
            address: address.into(),
            display_name: None,
            imap,
            smtp,
            poll_interval: DEFAULT_POLL_INTERVAL,
            extra_root_certificates: Vec::new(),
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            state_dir: state_dir.into(),
        }
    }

    /// Checks what can be checked without a network: a usable address, no plain
    /// connection to a remote host, a mailbox name, a positive poll interval.
    pub(crate) fn validate(&self) -> Result<(), ChannelError> {
        if self.name.trim().is_empty() {
            return Err(ChannelError::fatal("can't set up the email channel: the name is empty"));
        }
        if domain_of(&self.address).is_none() {
            return Err(ChannelError::fatal(format!(
                "can't set up email channel {}: the bot's address {:?} is not an email address",
                self.name, self.address
            )));
        }
        for (protocol, host, security) in
            [("IMAP", &self.imap.host, self.imap.security), ("SMTP", &self.smtp.host, self.smtp.security)]
        {
            if host.trim().is_empty() {
                return Err(ChannelError::fatal(format!(
                    "can't set up email channel {}: the {protocol} host is empty",
                    self.name
                )));
            }
            if security == Security::Plain && !is_local_host(host) {
                return Err(ChannelError::fatal(format!(
                    "can't set up email channel {}: an unencrypted {protocol} connection is only allowed to \
                     this machine, not to {host}",
                    self.name
                )));
            }
        }
        if self.imap.mailbox.trim().is_empty() {
            return Err(ChannelError::fatal(format!(
                "can't set up email channel {}: the IMAP mailbox name is empty",
                self.name
            )));
        }
        if self.poll_interval.is_zero() {
            return Err(ChannelError::fatal(format!(
                "can't set up email channel {}: the poll interval is zero",
                self.name
            )));
        }
        Ok(())
    }
}

/// The domain part of an address (`bot@example.org` → `example.org`).
pub(crate) fn domain_of(address: &str) -> Option<&str> {
    let (local, domain) = address.rsplit_once('@')?;
    let valid = !local.is_empty()
        && !domain.is_empty()
        && !address.chars().any(|character| character.is_whitespace() || "<>,;\"".contains(character));
    valid.then_some(domain)
}

fn is_local_host(host: &str) -> bool {
    matches!(host.trim().to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "::1" | "[::1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> EmailSettings {
        EmailSettings::new(
            "email",
            "bot@example.org",
            ImapSettings::new("imap.example.org", "bot", Secret::new("pw")),
            SmtpSettings::new("smtp.example.org", "bot", Secret::new("pw")),
            "/tmp/state",
        )
    }

    #[test]
    fn defaults_are_the_usual_ports_and_limits() {
        let settings = settings();
        assert_eq!((settings.imap.port, settings.imap.security), (993, Security::Tls));
        assert_eq!((settings.smtp.port, settings.smtp.security), (587, Security::StartTls));
        assert_eq!(settings.imap.mailbox, "INBOX");
        assert_eq!(settings.poll_interval, Duration::from_secs(60));
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn passwords_are_not_printed() {
        let printed = format!("{:?}", settings());
        assert!(!printed.contains("pw\""), "{printed}");
        assert!(printed.contains("[redacted]"), "{printed}");
    }

    #[test]
    fn plain_connections_only_go_to_this_machine() {
        let mut settings = settings();
        settings.imap.security = Security::Plain;
        let error = settings.validate().unwrap_err();
        assert!(error.message.contains("only allowed to this machine"), "{error}");
        settings.imap.host = "127.0.0.1".to_owned();
        settings.smtp.security = Security::Plain;
        settings.smtp.host = "localhost".to_owned();
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn the_bot_address_must_be_an_address() {
        let mut settings = settings();
        settings.address = "not an address".to_owned();
        assert!(settings.validate().is_err());
        assert_eq!(domain_of("bot@example.org"), Some("example.org"));
        assert_eq!(domain_of("@example.org"), None);
        assert_eq!(domain_of("bot@"), None);
    }

    #[test]
    fn a_zero_poll_interval_is_refused() {
        let mut settings = settings();
        settings.poll_interval = Duration::ZERO;
        assert!(settings.validate().is_err());
    }
}
