//! The Discord adapter's settings: bot token, API base, gateway override, intents and the
//! attachment cap.

use squidbot_channels::ChannelError;
use squidbot_types::Secret;

/// Discord's REST API, version 10.
pub const DEFAULT_API_BASE: &str = "https://discord.com/api/v10";

/// Largest inbound attachment downloaded: 20 MiB. Bigger files are skipped with a note
/// in the message text.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// Gateway intents: which events Discord sends (bit flags of the gateway's `intents`).
pub mod intents {
    /// Guild and channel life cycle, and the `GUILD_CREATE` and `THREAD_*` events the
    /// adapter reads to tell thread channels from plain ones.
    pub const GUILDS: u64 = 1 << 0;
    /// Messages in guild channels and threads.
    pub const GUILD_MESSAGES: u64 = 1 << 9;
    /// Reactions in guilds (not needed to add the bot's own reactions).
    pub const GUILD_MESSAGE_REACTIONS: u64 = 1 << 10;
    /// Messages in direct-message channels.
    pub const DIRECT_MESSAGES: u64 = 1 << 12;
    /// The text of guild messages that don't mention the bot. Privileged: switch on
    /// "Message Content Intent" for the bot in the developer portal, or Discord closes
    /// the gateway with 4014.
    pub const MESSAGE_CONTENT: u64 = 1 << 15;
}

/// What the adapter asks for by default: guilds (threads), guild and direct messages,
/// and message content. Reactions are left out: the adapter only adds its own.
pub const DEFAULT_INTENTS: u64 =
    intents::GUILDS | intents::GUILD_MESSAGES | intents::DIRECT_MESSAGES | intents::MESSAGE_CONTENT;

/// Settings of one Discord bot connection.
#[derive(Debug, Clone)]
pub struct DiscordSettings {
    /// The channel's name in the gateway (`discord`, `work-discord`).
    pub name: String,
    /// The bot token, sent as `Authorization: Bot <token>` and in the gateway's IDENTIFY.
    pub token: Secret,
    /// Base URL of the REST API, without a trailing slash ([`DEFAULT_API_BASE`]; tests
    /// point it at a local fake).
    pub api_base: String,
    /// The gateway's WebSocket URL; `None` asks `GET /gateway/bot` for it.
    pub gateway_url: Option<String>,
    /// Gateway intents ([`DEFAULT_INTENTS`]; see [`intents`]).
    pub intents: u64,
    /// Largest inbound attachment downloaded ([`DEFAULT_MAX_ATTACHMENT_BYTES`]).
    pub max_attachment_bytes: u64,
}

impl DiscordSettings {
    /// Settings with the defaults for everything but the name and token.
    pub fn new(name: impl Into<String>, token: Secret) -> Self {
        Self {
            name: name.into(),
            token,
            api_base: DEFAULT_API_BASE.to_owned(),
            gateway_url: None,
            intents: DEFAULT_INTENTS,
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
        }
    }

    /// Checks what can be checked without the network.
    pub(crate) fn validate(&self) -> Result<(), ChannelError> {
        if self.name.trim().is_empty() {
            return Err(ChannelError::fatal("can't set up the Discord channel: its name is empty"));
        }
        let token = self.token.expose();
        if token.trim().is_empty() {
            return Err(ChannelError::fatal(format!(
                "can't set up Discord channel {}: the bot token is empty",
                self.name
            )));
        }
        if token.chars().any(|character| character.is_whitespace() || character.is_control()) {
            return Err(ChannelError::fatal(format!(
                "can't set up Discord channel {}: the bot token contains spaces or control characters",
                self.name
            )));
        }
        if !(self.api_base.starts_with("https://") || self.api_base.starts_with("http://")) {
            return Err(ChannelError::fatal(format!(
                "can't set up Discord channel {}: api_base `{}` is not an http(s) URL",
                self.name, self.api_base
            )));
        }
        if let Some(url) = &self.gateway_url
            && !(url.starts_with("wss://") || url.starts_with("ws://"))
        {
            return Err(ChannelError::fatal(format!(
                "can't set up Discord channel {}: gateway_url `{url}` is not a ws(s) URL",
                self.name
            )));
        }
        if self.intents & (intents::GUILD_MESSAGES | intents::DIRECT_MESSAGES) == 0 {
            return Err(ChannelError::fatal(format!(
                "can't set up Discord channel {}: the intents include neither GUILD_MESSAGES nor DIRECT_MESSAGES, so no message would arrive",
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

    #[test]
    fn the_default_intents_cover_guild_and_direct_messages_with_their_content() {
        assert_eq!(DEFAULT_INTENTS, 1 | 512 | 4096 | 32768);
        let settings = DiscordSettings::new("discord", Secret::new("token"));
        assert_eq!(settings.api_base, "https://discord.com/api/v10");
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn bad_settings_are_fatal() {
        let mut empty_token = DiscordSettings::new("discord", Secret::new(" "));
        assert_eq!(empty_token.validate().map_err(|error| error.kind), Err(ChannelErrorKind::Fatal));
        empty_token.token = Secret::new("abc def");
        assert_eq!(empty_token.validate().map_err(|error| error.kind), Err(ChannelErrorKind::Fatal));

        let mut bad_gateway = DiscordSettings::new("discord", Secret::new("token"));
        bad_gateway.gateway_url = Some("https://gateway.example".to_owned());
        assert!(bad_gateway.validate().is_err());

        let mut no_messages = DiscordSettings::new("discord", Secret::new("token"));
        no_messages.intents = intents::GUILDS;
        let error = no_messages.validate().unwrap_err();
        assert!(error.message.starts_with("can't set up"), "{error}");
    }

    #[test]
    fn the_token_is_not_printed() {
        let settings = DiscordSettings::new("discord", Secret::new("very-secret-token"));
        assert!(!format!("{settings:?}").contains("very-secret-token"));
    }
}
