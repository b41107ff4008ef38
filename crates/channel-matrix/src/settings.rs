//! The Matrix adapter's settings: homeserver, account and credentials, where the sync
//! token is kept, and whose invitations the bot accepts.

use std::path::PathBuf;

use reqwest::Url;
use squidbot_channels::ChannelError;
use squidbot_types::Secret;

/// The largest inbound attachment downloaded by default (20 MiB); larger files are
/// skipped with a note in the message text.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// How the adapter connects to a Matrix homeserver. `Debug` never prints the access
/// token or the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixSettings {
    /// The channel's name (`matrix`, `work-matrix`): unique in the gateway, also the
    /// file name of the sync token (`<name>.sync`), so letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// The homeserver's client-server API base URL, e.g. `https://matrix.example.org`
    /// (tests point it at a local Synapse or stub).
    pub homeserver: String,
    /// The bot's full user id, e.g. `@squidbot:example.org`.
    pub user_id: String,
    /// An access token of the bot's account; when absent the adapter logs in with
    /// `password` and keeps the token it gets in memory only.
    pub access_token: Option<Secret>,
    /// The account's password, used with `m.login.password` when there is no
    /// `access_token`.
    pub password: Option<Secret>,
    /// The device to log in as with `password`, so restarts reuse one device instead
    /// of creating a new one per login.
    pub device_id: Option<String>,
    /// Where the adapter keeps its state: the sync token (`<name>.sync`) and the rooms
    /// already told that encryption isn't supported (`<name>.encrypted-rooms`).
    pub state_dir: PathBuf,
    /// Whose room invitations the bot accepts.
    pub invites: InvitePolicy,
    /// The largest inbound attachment downloaded, in bytes
    /// ([`DEFAULT_MAX_ATTACHMENT_BYTES`] by default in configuration).
    pub max_attachment_bytes: u64,
}

/// Whose room invitations the bot accepts; the others are rejected (with a log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvitePolicy {
    /// Joins every room it is invited to.
    All,
    /// Joins only when the inviter is one of these user ids.
    From(Vec<String>),
    /// Joins when the inviter is one of these user ids or someone the check knows (a
    /// person linked to this channel, looked up when the invitation comes).
    FromOrKnown(Vec<String>, KnownInviter),
    /// Rejects every invitation (the bot is added to rooms by other means).
    None,
}

/// Whether a Matrix user id belongs to someone squidbot knows (a linked person).
#[derive(Clone)]
pub struct KnownInviter(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for KnownInviter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("KnownInviter")
    }
}

impl PartialEq for KnownInviter {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for KnownInviter {}

impl InvitePolicy {
    /// Whether an invitation from `inviter` (a user id) is accepted.
    pub fn accepts(&self, inviter: &str) -> bool {
        match self {
            InvitePolicy::All => true,
            InvitePolicy::From(allowed) => allowed.iter().any(|user_id| user_id == inviter),
            InvitePolicy::FromOrKnown(allowed, known) => {
                allowed.iter().any(|user_id| user_id == inviter) || (known.0)(inviter)
            }
            InvitePolicy::None => false,
        }
    }
}

impl MatrixSettings {
    /// Checks the settings and returns the homeserver's base URL.
    pub(crate) fn validate(&self) -> Result<Url, ChannelError> {
        let valid_name = !self.name.is_empty()
            && self.name.chars().all(|character| character.is_ascii_alphanumeric() || "-_.".contains(character))
            && !self.name.starts_with('.');
        if !valid_name {
            return Err(ChannelError::fatal(format!(
                "can't set up matrix channel {:?}: the name must be letters, digits, '-', '_' or '.'",
                self.name
            )));
        }
        let homeserver = Url::parse(&self.homeserver).map_err(|error| {
            ChannelError::fatal(format!(
                "can't set up channel {}: homeserver {:?}: {error}",
                self.name, self.homeserver
            ))
        })?;
        if !matches!(homeserver.scheme(), "http" | "https") || homeserver.cannot_be_a_base() {
            return Err(ChannelError::fatal(format!(
                "can't set up channel {}: homeserver {:?} is not an http(s) URL",
                self.name, self.homeserver
            )));
        }
        if localpart(&self.user_id).is_none() {
            return Err(ChannelError::fatal(format!(
                "can't set up channel {}: user id {:?} is not of the form @name:server",
                self.name, self.user_id
            )));
        }
        let has_token = self.access_token.as_ref().is_some_and(|token| !token.is_empty());
        let has_password = self.password.as_ref().is_some_and(|password| !password.is_empty());
        if !has_token && !has_password {
            return Err(ChannelError::fatal(format!(
                "can't set up channel {}: neither an access token nor a password is set",
                self.name
            )));
        }
        Ok(homeserver)
    }
}

/// The localpart of a user id (`squidbot` of `@squidbot:example.org`), if it is one.
pub(crate) fn localpart(user_id: &str) -> Option<&str> {
    let rest = user_id.strip_prefix('@')?;
    let (localpart, server) = rest.split_once(':')?;
    (!localpart.is_empty() && !server.is_empty()).then_some(localpart)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> MatrixSettings {
        MatrixSettings {
            name: "matrix".to_owned(),
            homeserver: "http://127.0.0.1:8008".to_owned(),
            user_id: "@bot:localhost".to_owned(),
            access_token: Some(Secret::new("syt_token")),
            password: None,
            device_id: None,
            state_dir: PathBuf::from("/tmp"),
            invites: InvitePolicy::All,
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
        }
    }

    #[test]
    fn valid_settings_give_the_homeserver_url() {
        assert_eq!(settings().validate().unwrap().as_str(), "http://127.0.0.1:8008/");
    }

    #[test]
    fn bad_settings_are_fatal() {
        let cases = [
            MatrixSettings { name: "../up".to_owned(), ..settings() },
            MatrixSettings { homeserver: "matrix.example.org".to_owned(), ..settings() },
            MatrixSettings { user_id: "bot".to_owned(), ..settings() },
            MatrixSettings { access_token: None, ..settings() },
            MatrixSettings { access_token: Some(Secret::new("")), ..settings() },
        ];
        for case in cases {
            let error = case.validate().unwrap_err();
            assert_eq!(error.kind, squidbot_channels::ChannelErrorKind::Fatal, "{case:?}");
            assert!(error.message.starts_with("can't set up"), "{error}");
        }
        assert!(
            MatrixSettings { access_token: None, password: Some(Secret::new("pw")), ..settings() }.validate().is_ok()
        );
    }

    #[test]
    fn debug_output_hides_credentials() {
        let shown = format!("{:?}", MatrixSettings { password: Some(Secret::new("hunter2")), ..settings() });
        assert!(!shown.contains("syt_token") && !shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn invite_policy_decides_by_inviter() {
        assert!(InvitePolicy::All.accepts("@anyone:localhost"));
        assert!(!InvitePolicy::None.accepts("@anyone:localhost"));
        let known = InvitePolicy::FromOrKnown(
            vec!["@owner:localhost".to_owned()],
            KnownInviter(std::sync::Arc::new(|inviter: &str| inviter == "@linked:localhost")),
        );
        assert!(known.accepts("@owner:localhost") && known.accepts("@linked:localhost"));
        assert!(!known.accepts("@stranger:localhost"));
        let from = InvitePolicy::From(vec!["@owner:localhost".to_owned()]);
        assert!(from.accepts("@owner:localhost"));
        assert!(!from.accepts("@stranger:localhost"));
    }

    #[test]
    fn localparts_come_from_user_ids() {
        assert_eq!(localpart("@squidbot:example.org"), Some("squidbot"));
        assert_eq!(localpart("squidbot:example.org"), None);
        assert_eq!(localpart("@:example.org"), None);
        assert_eq!(localpart("@squidbot"), None);
    }
}
