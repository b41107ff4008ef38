//! The Slack adapter's settings: its name, the two tokens, where the Web API is, and the
//! attachment cap.

use squidbot_channels::ChannelError;
use squidbot_types::Secret;

/// Slack's Web API, where every method lives as `<api_base>/<method>`.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// The largest inbound attachment downloaded (20 MiB); larger files are skipped with a
/// note in the message text.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// How to reach one Slack app (plain data; `Debug` redacts the tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackSettings {
    /// The channel's name in the gateway (`slack`, `work-slack`).
    pub name: String,
    /// The app-level token (`xapp-…`, scope `connections:write`), used only to open
    /// Socket Mode connections.
    pub app_token: Secret,
    /// The bot token (`xoxb-…`) every Web API call and file download uses.
    pub bot_token: Secret,
    /// The Web API's base URL, [`DEFAULT_API_BASE`] unless tests point it elsewhere.
    pub api_base: String,
    /// The largest inbound attachment downloaded, in bytes.
    pub max_attachment_bytes: u64,
}

impl SlackSettings {
    /// Settings with the default API base and attachment cap.
    pub fn new(name: impl Into<String>, app_token: Secret, bot_token: Secret) -> Self {
        Self {
            name: name.into(),
            app_token,
            bot_token,
            api_base: DEFAULT_API_BASE.to_owned(),
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
        }
    }

    /// Checks what can be checked without the network; every problem is fatal.
    pub(crate) fn validate(&self) -> Result<(), ChannelError> {
        if self.name.trim().is_empty() {
            return Err(ChannelError::fatal("can't set up a Slack channel: its name is empty"));
        }
        // Swapped tokens are the usual set-up mistake; say so before Slack answers
        // `not_allowed_token_type`.
        if !self.app_token.expose().starts_with("xapp-") {
            return Err(ChannelError::fatal(format!(
                "can't set up Slack channel {}: the app token must be an app-level token starting with xapp-",
                self.name
            )));
        }
        if !self.bot_token.expose().starts_with("xoxb-") {
            return Err(ChannelError::fatal(format!(
                "can't set up Slack channel {}: the bot token must start with xoxb-",
                self.name
            )));
        }
        let base = self.api_base.trim();
        if !(base.starts_with("https://") || base.starts_with("http://")) || reqwest::Url::parse(base).is_err() {
            return Err(ChannelError::fatal(format!(
                "can't set up Slack channel {}: api_base {base:?} is not an http(s) URL",
                self.name
            )));
        }
        if self.max_attachment_bytes == 0 {
            return Err(ChannelError::fatal(format!(
                "can't set up Slack channel {}: max_attachment_bytes must be above zero",
                self.name
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use squidbot_channels::ChannelErrorKind;

    use super::*;

    fn settings() -> SlackSettings {
        SlackSettings::new("slack", Secret::new("xapp-1-A-1-abc"), Secret::new("xoxb-1-abc"))
    }

    #[test]
    fn defaults_point_at_slack_with_a_twenty_mebibyte_cap() {
        let settings = settings();
        assert_eq!(settings.api_base, "https://slack.com/api");
        assert_eq!(settings.max_attachment_bytes, 20 * 1024 * 1024);
        assert_eq!(settings.validate(), Ok(()));
    }

    #[test]
    fn debug_output_hides_both_tokens() {
        let printed = format!("{:?}", settings());
        assert!(!printed.contains("xapp-1"), "{printed}");
        assert!(!printed.contains("xoxb-1"), "{printed}");
    }

    #[test]
    fn swapped_tokens_bad_urls_and_empty_names_are_fatal() {
        let swapped =
            SlackSettings { app_token: Secret::new("xoxb-1"), bot_token: Secret::new("xapp-1"), ..settings() };
        let bad_base = SlackSettings { api_base: "slack.com/api".to_owned(), ..settings() };
        let no_name = SlackSettings { name: " ".to_owned(), ..settings() };
        let no_cap = SlackSettings { max_attachment_bytes: 0, ..settings() };
        for broken in [swapped, bad_base, no_name, no_cap] {
            let error = broken.validate().unwrap_err();
            assert_eq!(error.kind, ChannelErrorKind::Fatal);
            assert!(error.message.starts_with("can't set up"), "{error}");
        }
    }
}
