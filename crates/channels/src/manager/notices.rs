//! Notes for people outside their turns (approval requests for admins, what became of a
//! request): which conversation reaches a person, and posting there through the runner
//! as a message of its own.

use squidbot_core::people::People;
use squidbot_core::runs::UserMessage;
use squidbot_types::people::{Actor, Identity, User};

use super::ChannelManager;
use crate::people::reaches_sender_directly;
use crate::port::{Conversation, ConversationKind};
use crate::session::{OWNER_CONTEXT, direct_session_key};

/// Who the notes come from, as the session records them.
const NOTICE_FROM: &str = "squidbot";
/// The role they are sent under.
const NOTICE_ROLE: &str = "approvals";

impl ChannelManager {
    /// Remembers that the person of `context` last wrote from the direct-message session
    /// `session_key`.
    pub(super) fn note_last_session(&self, context: &str, session_key: &str) {
        squidbot_core::sync::lock(&self.last_sessions).note(context, session_key);
    }

    /// Tells `person` `text` (about approval request `request_id`): in the direct
    /// conversation they last wrote from, else that of their first linked identity on a
    /// channel that runs here and can write first.
    pub(crate) fn notify_person(&self, person: &User, request_id: &str, text: &str) {
        let last = squidbot_core::sync::lock(&self.last_sessions).get(&person.context).map(str::to_owned);
        let session = last.or_else(|| {
            let people = self.runner.agent().people()?;
            let identities = self.identities_of(people, Some(&person.id), &person.context);
            identities.iter().find_map(|identity| self.open_direct_conversation(identity))
        });
        match session {
            Some(session_key) => self.post_notice(session_key, person.context.clone(), text),
            None => tracing::warn!(
                user = %person.id,
                id = request_id,
                "can't tell them about an approval request: they wrote to no channel since the gateway started and \
                 have no linked identity on a channel that can write to them first"
            ),
        }
    }

    /// Tells the people of `session_key`, where `actor` talks, `text`.
    pub(crate) fn tell_session(&self, actor: &Actor, session_key: &str, text: &str) {
        if self.destination(session_key).is_none() {
            let identities = match self.runner.agent().people() {
                Some(people) => self.identities_of(people, actor.user.as_deref(), &actor.context),
                None => Vec::new(),
            };
            let reached = identities.iter().any(|identity| {
                direct_session_key(&identity.channel, &identity.sender_id) == session_key
                    && self.open_direct_conversation(identity).is_some()
            });
            if !reached {
                tracing::warn!(
                    session = %session_key,
                    "can't tell someone about their request: no conversation of the session is known here"
                );
                return;
            }
        }
        self.post_notice(session_key.to_owned(), actor.context.clone(), text);
    }

    /// The identities a person can be written to at: those linked to `user`, then, for
    /// the owner's context, the channels' owner ids.
    fn identities_of(&self, people: &People, user: Option<&str>, context: &str) -> Vec<Identity> {
        let mut identities = match user.map(|user| people.stores().directory.identities(user)) {
            Some(Ok(identities)) => identities,
            Some(Err(error)) => {
                tracing::warn!(%error, "can't read someone's linked identities");
                Vec::new()
            }
            None => Vec::new(),
        };
        if context == OWNER_CONTEXT {
            for name in &self.order {
                if let Some(entry) = self.channels.get(name) {
                    identities.extend(
                        entry
                            .policy
                            .owners()
                            .iter()
                            .map(|owner| Identity { channel: name.clone(), sender_id: owner.clone() }),
                    );
                }
            }
        }
        identities
    }

    /// The direct-message session of `identity` when its channel runs here and messages
    /// posted to the session can reach them: known since they wrote, or made from their
    /// sender id on a platform that writes to people by their id.
    fn open_direct_conversation(&self, identity: &Identity) -> Option<String> {
        let entry = self.channels.get(&identity.channel)?;
        let session_key = direct_session_key(&identity.channel, &identity.sender_id);
        if self.destination(&session_key).is_some() {
            return Some(session_key);
        }
        if !reaches_sender_directly(&entry.kind) {
            return None;
        }
        let conversation =
            Conversation { id: identity.sender_id.clone(), kind: ConversationKind::Direct, thread: None };
        self.remember_destination(&session_key, &identity.channel, &conversation);
        Some(session_key)
    }

    /// Posts `text` to `session_key` (created in `context` when new, so it is not the
    /// agent's own): the manager sends it to the session's conversation.
    fn post_notice(&self, session_key: String, context: String, text: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(session = %session_key, "can't post a note outside the async runtime");
            return;
        };
        let runner = self.runner.clone();
        let text = text.to_owned();
        self.tracker.spawn_on(
            async move {
                if let Err(error) = runner.session_in(&session_key, &context).await {
                    tracing::warn!(session = %session_key, %error, "can't open the session a note goes to");
                }
                runner.post_user_message(UserMessage {
                    session_key,
                    message_id: uuid::Uuid::new_v4().to_string(),
                    from: NOTICE_FROM.to_owned(),
                    role: NOTICE_ROLE.to_owned(),
                    priority: "normal".to_owned(),
                    text,
                    correlation_id: squidbot_core::ids::correlation_id(),
                });
            },
            &runtime,
        );
    }
}
