//! `[channels.<name>]`: the chat platforms the gateway answers on. One flat table per
//! channel: what every channel has (enabled, access policy, `api_base`) and the
//! credentials and settings of its kind; the binary checks that a channel has what its
//! kind needs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

/// The platforms a channel can be.
pub const CHANNEL_KINDS: [&str; 6] = ["telegram", "discord", "slack", "matrix", "email", "webhook"];

/// `[channels.<name>]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelConfig {
    /// False leaves the channel off.
    pub enabled: bool,
    /// The platform: `telegram`, `discord`, `slack`, `matrix`, `email` or `webhook`;
    /// unset means the table's name (`[channels.telegram]`).
    pub kind: Option<String>,
    /// Direct messages: `owner_only` (default), `allowlist`, `pairing` or `open`.
    pub policy: String,
    /// The owner's sender ids on this platform (their messages go to the owner's
    /// context).
    pub owners: Vec<String>,
    /// Sender ids answered under `allowlist` and `pairing` (email: addresses).
    pub allow_from: Vec<String>,
    /// Rooms and group chats: `mention` (default), `always` or `allowlist`.
    pub groups: String,
    /// Room ids answered under `groups = "allowlist"`.
    pub allow_rooms: Vec<String>,
    /// Sent (at most once a day per sender) to refused direct messages; unset sends
    /// nothing.
    pub refusal: Option<String>,
    /// The platform's API address, to point the channel at another server (tests,
    /// proxies); each kind has its default.
    pub api_base: Option<String>,
    /// Largest attachment accepted, in MiB.
    pub max_attachment_mb: u64,
    /// The bot's token (Telegram, Discord, Slack's `xoxb-` bot token, a Matrix access
    /// token).
    pub token: Option<Secret>,
    /// Environment variable holding the token.
    pub token_env: Option<String>,
    /// Slack's app-level `xapp-` token for Socket Mode.
    pub app_token: Option<Secret>,
    /// Environment variable holding the app token.
    pub app_token_env: Option<String>,
    /// Matrix: the homeserver's base URL.
    pub homeserver: Option<String>,
    /// Matrix: the bot's user id (`@bot:example.org`).
    pub user_id: Option<String>,
    /// Matrix: the device id to log in as.
    pub device_id: Option<String>,
    /// Matrix: whose room invitations are accepted: `allowed` (owners and `allow_from`,
    /// the default), `all` or `none`.
    pub auto_join: String,
    /// Matrix (without a token) and email: the login password.
    pub password: Option<Secret>,
    /// Environment variable holding the password.
    pub password_env: Option<String>,
    /// Email: the bot's address (the From of replies).
    pub address: Option<String>,
    /// Email: the name shown with the address.
    pub display_name: Option<String>,
    /// Email: the login name on both servers; unset means `address`.
    pub username: Option<String>,
    /// Email: the IMAP server.
    pub imap_host: Option<String>,
    /// Email: its port; unset means 993 for `tls`, 143 otherwise.
    pub imap_port: Option<u16>,
    /// Email: `tls` (default), `starttls` or `plain` (loopback only).
    pub imap_security: String,
    /// Email: the mailbox read.
    pub mailbox: String,
    /// Email: the SMTP server.
    pub smtp_host: Option<String>,
    /// Email: its port; unset means 465 for `tls`, 587 for `starttls`, 25 for `plain`.
    pub smtp_port: Option<u16>,
    /// Email: `starttls` (default), `tls` or `plain` (loopback only).
    pub smtp_security: String,
    /// Email: how often the mailbox is checked when the server can't push (IDLE).
    pub poll_interval_secs: u64,
    /// PEM files of certificate authorities trusted besides the built-in ones
    /// (self-hosted servers).
    pub ca_files: Vec<PathBuf>,
    /// Webhook: the shared secret that signs requests (HMAC-SHA256).
    pub secret: Option<Secret>,
    /// Environment variable holding the webhook secret.
    pub secret_env: Option<String>,
    /// Webhook: how long a request waits for the reply before it is answered `202` and
    /// the reply goes to the request's callback URL.
    pub reply_timeout_secs: u64,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            kind: None,
            policy: "owner_only".to_owned(),
            owners: Vec::new(),
            allow_from: Vec::new(),
            groups: "mention".to_owned(),
            allow_rooms: Vec::new(),
            refusal: None,
            api_base: None,
            max_attachment_mb: 20,
            token: None,
            token_env: None,
            app_token: None,
            app_token_env: None,
            homeserver: None,
            user_id: None,
            device_id: None,
            auto_join: "allowed".to_owned(),
            password: None,
            password_env: None,
            address: None,
            display_name: None,
            username: None,
            imap_host: None,
            imap_port: None,
            imap_security: "tls".to_owned(),
            mailbox: "INBOX".to_owned(),
            smtp_host: None,
            smtp_port: None,
            smtp_security: "starttls".to_owned(),
            poll_interval_secs: 60,
            ca_files: Vec::new(),
            secret: None,
            secret_env: None,
            reply_timeout_secs: 25,
        }
    }
}

impl ChannelConfig {
    /// The platform of the channel named `name`.
    pub fn kind_of<'a>(&'a self, name: &'a str) -> &'a str {
        self.kind.as_deref().unwrap_or(name)
    }
}
