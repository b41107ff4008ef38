//! People at the gateway: whose a presented token is, which scopes their role gives their
//! connection, which sessions are theirs, and the audit of every login. Without a people
//! policy none of this applies and every client is the owner, as before.

use std::collections::HashSet;
use std::net::IpAddr;

use serde_json::{Value, json};
use squidbot_core::agent::AgentError;
use squidbot_core::people::People;
use squidbot_core::people::tokens::{TOKEN_PREFIX, token_hash};
use squidbot_core::runs::Runner;
use squidbot_core::store::StoreError;
use squidbot_types::people::{Actor, AuditKind, User};

/// The scope to read.
pub(crate) const READ_SCOPE: &str = "operator.read";
/// The scope to run turns and change things.
pub(crate) const WRITE_SCOPE: &str = "operator.write";
/// The scope of the admin methods.
pub(crate) const ADMIN_SCOPE: &str = "operator.admin";

/// Who presented the credentials of a request or connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// The gateway's own token or password (or no auth at all): the owner, who sees and
    /// does everything as before people existed.
    Owner,
    /// A person with their own gateway token.
    Person(Actor),
}

impl Caller {
    /// The person, `None` for the owner.
    pub(crate) fn person(&self) -> Option<&Actor> {
        match self {
            Caller::Owner => None,
            Caller::Person(actor) => Some(actor),
        }
    }

    /// Whether the caller may use the admin methods (given the admin scope): the owner
    /// always, a person when their role is `admin`.
    pub(crate) fn is_admin(&self) -> bool {
        match self {
            Caller::Owner => true,
            Caller::Person(actor) => actor.is_admin(),
        }
    }
}

/// Where credentials were presented, for the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    /// A WebSocket `connect` (protocol clients and the web UI's login).
    WebSocket,
    /// An HTTP request with a bearer token, by route.
    Http(&'static str),
}

impl Door {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Door::WebSocket => "websocket",
            Door::Http(route) => route,
        }
    }
}

/// What a presented credential says about a person.
pub(crate) enum TokenLookup {
    /// Not a person's token (no people policy, or no `sqb_` prefix).
    NotPersonal,
    /// The enabled user holding it.
    Person(User),
    /// A disabled user's token.
    Disabled(User),
    /// A `sqb_` token nobody holds (or the directory could not be read).
    Unknown,
}

/// Whose `presented` is, when people are on and it looks like a person's token.
pub(crate) fn lookup(people: Option<&People>, presented: &str) -> TokenLookup {
    let Some(people) = people else { return TokenLookup::NotPersonal };
    if !presented.starts_with(TOKEN_PREFIX) {
        return TokenLookup::NotPersonal;
    }
    match people.stores().directory.by_token_hash(&token_hash(presented)) {
        Ok(Some(user)) if user.disabled => TokenLookup::Disabled(user),
        Ok(Some(user)) => TokenLookup::Person(user),
        Ok(None) => TokenLookup::Unknown,
        Err(error) => {
            tracing::warn!(%error, "can't look up a gateway token; refusing it");
            TokenLookup::Unknown
        }
    }
}

/// How one login attempt went, for the audit trail.
pub(crate) enum LoginOutcome<'a> {
    /// The gateway's own credentials.
    Owner,
    /// A person's token.
    Person(&'a User),
    /// A disabled user's token.
    Disabled(&'a User),
    /// A `sqb_` token nobody holds.
    UnknownToken,
    /// Missing or wrong gateway credentials.
    WrongCredentials,
}

/// Writes one login attempt to the audit trail (never the credential itself).
pub(crate) fn audit_login(people: &People, peer: IpAddr, door: Door, outcome: &LoginOutcome<'_>) {
    let address = peer.to_string();
    let via = door.name();
    let (who, ok, detail): (&str, bool, Value) = match outcome {
        LoginOutcome::Owner => ("owner", true, json!({"via": via, "credential": "gateway"})),
        LoginOutcome::Person(user) => {
            (user.id.as_str(), true, json!({"via": via, "credential": "person token", "user": user.id}))
        }
        LoginOutcome::Disabled(user) => (
            user.id.as_str(),
            false,
            json!({"via": via, "credential": "person token", "user": user.id, "refused": "the user is disabled"}),
        ),
        LoginOutcome::UnknownToken => {
            ("unknown", false, json!({"via": via, "credential": "person token", "refused": "no user holds this token"}))
        }
        LoginOutcome::WrongCredentials => {
            ("unknown", false, json!({"via": via, "credential": "gateway", "refused": "missing or wrong credentials"}))
        }
    };
    people.audit_as(AuditKind::Login, who, &address, ok, detail);
}

/// The scopes `actor`'s role allows a connection: admins everything, everyone else reading
/// and running turns.
pub(crate) fn allowed_scopes(actor: &Actor) -> &'static [&'static str] {
    if actor.is_admin() { &[READ_SCOPE, WRITE_SCOPE, ADMIN_SCOPE] } else { &[READ_SCOPE, WRITE_SCOPE] }
}

/// What the client asked for that `actor`'s role allows, in the client's order, once each.
pub(crate) fn granted_scopes(actor: &Actor, requested: &[String]) -> Vec<String> {
    let allowed = allowed_scopes(actor);
    let mut granted: Vec<String> = Vec::new();
    for scope in requested {
        if allowed.contains(&scope.as_str()) && !granted.contains(scope) {
            granted.push(scope.clone());
        }
    }
    granted
}

/// The person's id as it appears in their session keys (their context when, oddly, the
/// actor names no user).
fn key_id(actor: &Actor) -> &str {
    actor.user.as_deref().unwrap_or(&actor.context)
}

/// The person's main session (`agent:main:user:<id>`): where their requests go that name
/// none, as `agent:main:main` is the owner's.
pub(crate) fn main_session(actor: &Actor) -> String {
    format!("agent:main:user:{}", key_id(actor))
}

/// The `mainKey` of the person's main session (what follows `agent:main:`).
pub(crate) fn main_key(actor: &Actor) -> String {
    format!("user:{}", key_id(actor))
}

/// The session an OpenAI API request of the person names with its `user` field: prefixed
/// with their id, so it can't be anyone else's.
pub(crate) fn openai_session(actor: &Actor, user_field: &str) -> String {
    format!("openai:{}:{user_field}", key_id(actor))
}

/// Whether a new session named `key` may be made for the person: their main session, a
/// key under it, or one of their OpenAI sessions. Any other name could be a session
/// someone else starts later (a channel's `telegram:<id>`, the owner's `agent:main:main`):
/// made first in the person's context it would capture that conversation.
pub(crate) fn may_create(actor: &Actor, key: &str) -> bool {
    let main = main_session(actor);
    let under = |prefix: &str| key.strip_prefix(prefix).is_some_and(|rest| rest.starts_with(':'));
    key == main || under(&main) || key.starts_with(&format!("openai:{}:", key_id(actor)))
}

/// Whose a session a person names is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// It exists in the person's context.
    Mine,
    /// It doesn't exist yet and its name is one the person may create.
    Fresh,
    /// Someone else's, or a name the person may not create: it reads as missing.
    Theirs,
}

/// Whose the session `key` is for `actor`, from its stored header (a session keeps the
/// context it was created in).
pub(crate) async fn ownership(runner: &Runner, actor: &Actor, key: &str) -> Result<Ownership, StoreError> {
    match runner.agent().store().load_boxed(key).await? {
        Some(loaded) if loaded.header.context == actor.context => Ok(Ownership::Mine),
        Some(_) => Ok(Ownership::Theirs),
        None if may_create(actor, key) => Ok(Ownership::Fresh),
        None => Ok(Ownership::Theirs),
    }
}

/// Why a session could not be opened for a person.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimError {
    /// It is (now) someone else's.
    #[error("no session {0:?} of yours")]
    Theirs(String),
    /// A first turn is being written to it right now; its owner can't be told yet.
    #[error("session {0:?} is busy starting; try again in a moment")]
    Busy(String),
    /// The store failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// Opens `key` for `actor` before a turn or a reset: a session that doesn't exist yet is
/// made in their context (a session keeps its context, so the turn then runs there); an
/// open one is checked to be theirs.
pub(crate) async fn claim(runner: &Runner, actor: &Actor, key: &str) -> Result<(), ClaimError> {
    let session = runner.session_in(key, &actor.context).await?;
    let context = match session.try_lock() {
        Ok(session) => session.header().context.clone(),
        // A turn holds it; what is stored says whose it is (its header is written first).
        Err(_) => match runner.agent().store().load_boxed(key).await.map_err(AgentError::from)? {
            Some(loaded) => loaded.header.context,
            None => return Err(ClaimError::Busy(key.to_owned())),
        },
    };
    if context == actor.context { Ok(()) } else { Err(ClaimError::Theirs(key.to_owned())) }
}

/// The keys of the stored sessions in `context`.
pub(crate) async fn session_keys_in(runner: &Runner, context: &str) -> Result<HashSet<String>, StoreError> {
    let summaries = runner.agent().store().list_boxed().await?;
    Ok(summaries.into_iter().filter(|summary| summary.context == context).map(|summary| summary.key).collect())
}

#[cfg(test)]
mod tests;
