//! What a Telegram channel is configured with, and the checks on it.

use std::time::Duration;

use squidbot_channels::ChannelError;
use squidbot_types::Secret;

/// The public Bot API server.
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";

/// How long one `getUpdates` long poll waits for news.
pub const DEFAULT_POLL_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest inbound attachment downloaded (20 MiB, also the Bot API's own limit for
/// `getFile`).
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// Settings of one Telegram bot channel. `Debug` redacts the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramSettings {
    /// The channel's name in the gateway (`telegram`, `family-bot`).
    pub name: String,
    /// The bot token from @BotFather (`123456:ABC...`).
    pub token: Secret,
    /// The Bot API server, without a trailing `/bot...` (tests point it at a fake).
    pub api_base: String,
    /// How long one long poll waits for updates (at least one second; Telegram holds
    /// the request open that long when nothing happens).
    pub poll_timeout: Duration,
    /// Inbound attachments larger than this are skipped with a note in the text.
    pub max_attachment_bytes: u64,
}

impl TelegramSettings {
    /// Settings for the public Bot API with the default poll timeout and attachment cap.
    pub fn new(name: impl Into<String>, token: Secret) -> Self {
        Self {
            name: name.into(),
            token,
            api_base: DEFAULT_API_BASE.to_owned(),
            poll_timeout: DEFAULT_POLL_TIMEOUT,
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
        }
    }

    /// Refuses settings the adapter can't work with.
    pub(crate) fn check(&self) -> Result<(), ChannelError> {
        let problem = if self.name.trim().is_empty() {
            Some("the channel name is empty".to_owned())
        } else if self.token.is_empty() {
            Some("the bot token is empty".to_owned())
        } else if self.token.expose().chars().any(|character| character == '/' || character.is_whitespace()) {
            // The token is a path segment of every request URL.
            Some("the bot token holds a '/' or a space".to_owned())
        } else if !(self.api_base.starts_with("https://") || self.api_base.starts_with("http://")) {
            Some(format!("the API base {:?} is not an http(s) URL", self.api_base))
        } else if self.poll_timeout < Duration::from_secs(1) {
            // A zero timeout is short polling: a request after request, hammering the API.
            Some("the poll timeout is shorter than one second".to_owned())
        } else {
            None
        };
        match problem {
            Some(reason) => {
                Err(ChannelError::fatal(format!("can't set up Telegram channel {:?}: {reason}", self.name)))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_point_at_the_public_api() {
        let settings = TelegramSettings::new("telegram", Secret::new("1:abc"));
        assert_eq!(settings.api_base, "https://api.telegram.org");
        assert_eq!(settings.poll_timeout, Duration::from_secs(30));
        assert_eq!(settings.max_attachment_bytes, 20 * 1024 * 1024);
        assert_eq!(settings.check(), Ok(()));
        assert!(!format!("{settings:?}").contains("1:abc"));
    }

    #[test]
    fn unusable_settings_are_fatal() {
        let good = TelegramSettings::new("telegram", Secret::new("1:abc"));
        let broken = [
            TelegramSettings { name: " ".to_owned(), ..good.clone() },
            TelegramSettings { token: Secret::new(""), ..good.clone() },
            TelegramSettings { token: Secret::new("1:a/b"), ..good.clone() },
            TelegramSettings { api_base: "api.telegram.org".to_owned(), ..good.clone() },
            TelegramSettings { poll_timeout: Duration::ZERO, ..good.clone() },
        ];
        for settings in broken {
            let error = settings.check().unwrap_err();
            assert_eq!(error.kind, squidbot_channels::ChannelErrorKind::Fatal, "{settings:?}");
            assert!(error.message.starts_with("can't set up Telegram channel"), "{error}");
        }
    }
}
