//! The receive loop: `whoami`, then `/sync` after `/sync` from the stored token, each
//! batch handled (account data, invitations, left rooms, joined rooms' timelines) and
//! its messages handed over before the next token is stored.

use std::collections::{BTreeSet, HashSet};

use reqwest::Method;
use serde_json::{Value, json};
use squidbot_channels::{ChannelError, ChannelErrorKind, InboundSink};
use tokio_util::sync::CancellationToken;

use crate::MatrixChannel;
use crate::api::REQUEST_TIMEOUT;
use crate::event::{self, TimelineEvent};
use crate::failure::{self, RequestKind};
use crate::mention::BotNames;
use crate::outbound;
use crate::rooms::Rooms;
use crate::settings::localpart;
use crate::sync::{self, Backoff, FILTER, InvitedRoom, SyncResponse};

/// How long the homeserver may hold a sync open.
const SYNC_TIMEOUT_MS: u64 = 30_000;
/// How long a sync request may take: the long poll plus slack for a busy homeserver.
const SYNC_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// How many events known not to be the bot's are remembered before starting over.
const REMEMBERED_FOREIGN_EVENTS: usize = 4_096;

/// What the loop knows between batches.
pub(crate) struct Session {
    /// How the bot is named.
    pub names: BotNames,
    /// Joined rooms.
    pub rooms: Rooms,
    /// Encrypted rooms already sent the notice.
    encrypted_noticed: BTreeSet<String>,
    /// Events known not to be the bot's (replies to them don't mention it).
    pub foreign_events: HashSet<String>,
}

/// Whether the loop goes on after a batch.
enum Outcome {
    Continue,
    Stop,
}

impl MatrixChannel {
    /// The receive loop of [`squidbot_channels::Channel::run`].
    pub(crate) async fn receive(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let names = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            names = self.identify() => names?,
        };
        let mut session = Session {
            names,
            rooms: Rooms::default(),
            encrypted_noticed: self.state.encrypted_rooms().await?,
            foreign_events: HashSet::new(),
        };
        let mut since = self.state.sync_token().await?;
        if since.is_none() {
            tracing::info!(channel = %self.name, "first matrix sync: earlier messages won't be answered");
        }
        let mut backoff = Backoff::new();
        loop {
            let synced = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                synced = self.sync_once(since.as_deref()) => synced,
            };
            let failed = match synced {
                Ok(response) => {
                    match self.handle_batch(&mut session, &response, since.is_none(), &inbound, &shutdown).await {
                        Ok(Outcome::Stop) => return Ok(()),
                        Ok(Outcome::Continue) => {
                            self.state.store_sync_token(&response.next_batch).await?;
                            since = Some(response.next_batch);
                            backoff.reset();
                            continue;
                        }
                        Err(error) => error,
                    }
                }
                Err(error) => error,
            };
            let delay = match failed.kind {
                ChannelErrorKind::RateLimited { retry_after } => retry_after,
                ChannelErrorKind::Transient => backoff.next_delay(),
                ChannelErrorKind::Rejected | ChannelErrorKind::Fatal => return Err(failed),
            };
            tracing::warn!(
                channel = %self.name, error = %failed, retry_in_ms = delay.as_millis() as u64,
                "matrix sync failed, retrying"
            );
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Checks the token (`whoami`), learns the bot's user id and display name.
    async fn identify(&self) -> Result<BotNames, ChannelError> {
        let action = "check the access token (whoami)";
        let url = self.api.client_url(&["account", "whoami"]);
        let answer = self
            .api
            .call(action, RequestKind::Authentication, Method::GET, url, crate::api::Body::Empty, REQUEST_TIMEOUT)
            .await?;
        let user_id = answer
            .get("user_id")
            .and_then(Value::as_str)
            .filter(|user_id| localpart(user_id).is_some())
            .ok_or_else(|| failure::malformed(action, "no user_id"))?
            .to_owned();
        let configured = self.bot_names()?;
        if user_id != configured.user_id {
            tracing::warn!(
                channel = %self.name, configured = %configured.user_id, actual = %user_id,
                "the access token belongs to another user than configured; acting as the token's user"
            );
        }
        let display_name =
            match self.api.get("read the bot's display name", &["profile", &user_id, "displayname"]).await {
                Ok(profile) => profile.get("displayname").and_then(Value::as_str).map(str::to_owned),
                Err(error) => {
                    tracing::debug!(channel = %self.name, error = %error, "no display name");
                    None
                }
            };
        let names = BotNames { localpart: localpart(&user_id).unwrap_or_default().to_owned(), user_id, display_name };
        match self.names.lock() {
            Ok(mut current) => *current = names.clone(),
            Err(_poisoned) => return Err(ChannelError::fatal("can't store the bot's names: lock poisoned")),
        }
        tracing::info!(channel = %self.name, user_id = %names.user_id, "matrix channel signed in");
        Ok(names)
    }

    async fn sync_once(&self, since: Option<&str>) -> Result<SyncResponse, ChannelError> {
        let mut url = self.api.client_url(&["sync"]);
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("filter", FILTER);
            // The first sync only takes the current position: no need to wait.
            let timeout = if since.is_some() { SYNC_TIMEOUT_MS } else { 0 };
            query.append_pair("timeout", &timeout.to_string());
            query.append_pair("set_presence", "offline");
            if let Some(since) = since {
                query.append_pair("since", since);
            }
        }
        let body = crate::api::Body::Empty;
        let answer = self.api.call("sync", RequestKind::Ordinary, Method::GET, url, body, SYNC_REQUEST_TIMEOUT).await?;
        serde_json::from_value(answer).map_err(|error| failure::malformed("sync", error))
    }

    /// Handles one batch. `initial`: the first sync ever, whose history isn't answered.
    /// A retryable error leaves the sync token where it was, so the batch comes again.
    async fn handle_batch(
        &self,
        session: &mut Session,
        response: &SyncResponse,
        initial: bool,
        inbound: &InboundSink,
        shutdown: &CancellationToken,
    ) -> Result<Outcome, ChannelError> {
        for account_data in &response.account_data.events {
            if account_data.get("type").and_then(Value::as_str) == Some("m.direct") {
                session.rooms.apply_direct_account_data(account_data.get("content").unwrap_or(&Value::Null));
            }
        }
        for (room_id, invited) in &response.rooms.invite {
            self.answer_invitation(session, room_id, invited).await?;
        }
        for room_id in response.rooms.leave.keys() {
            tracing::debug!(channel = %self.name, room_id, "left room");
            session.rooms.forget(room_id);
        }
        for (room_id, joined) in &response.rooms.join {
            let was_encrypted = session.rooms.room(room_id).encrypted;
            session.rooms.apply_events(room_id, joined.state.events.iter().chain(&joined.timeline.events));
            if let Some(count) = joined.summary.joined_member_count {
                session.rooms.room(room_id).joined_members = Some(count);
            }
            if initial {
                continue;
            }
            if !was_encrypted && session.rooms.room(room_id).encrypted {
                self.refuse_encryption(session, room_id).await;
            }
            if joined.timeline.limited {
                tracing::debug!(channel = %self.name, room_id, "more events came than one sync holds; older ones skipped");
            }
            let live = sync::live_start(&joined.timeline.events, &session.names.user_id);
            for event in joined.timeline.events.iter().skip(live) {
                let Some(message) = self.handle_event(session, room_id, event).await else {
                    continue;
                };
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(Outcome::Stop),
                    delivered = inbound.deliver(message) => if let Err(closed) = delivered {
                        tracing::debug!(channel = %self.name, error = %closed, "stopping the matrix loop");
                        return Ok(Outcome::Stop);
                    },
                }
            }
        }
        Ok(Outcome::Continue)
    }

    /// Joins or rejects an invitation by the invite policy.
    async fn answer_invitation(
        &self,
        session: &mut Session,
        room_id: &str,
        invited: &InvitedRoom,
    ) -> Result<(), ChannelError> {
        let Some(invitation) = sync::invitation(invited, &session.names.user_id) else {
            tracing::warn!(channel = %self.name, room_id, "invitation without the bot's invite event; ignored");
            return Ok(());
        };
        let accept = self.invites.accepts(&invitation.inviter);
        let (verb, segment) = if accept { ("join", "join") } else { ("reject the invitation to", "leave") };
        if !accept {
            tracing::info!(
                channel = %self.name, room_id, inviter = %invitation.inviter,
                "rejecting a room invitation: the invite policy doesn't allow this inviter"
            );
        }
        let action = format!("{verb} {room_id}");
        match self.api.send_json(&action, Method::POST, &["rooms", room_id, segment], &json!({})).await {
            Ok(_answer) if accept => {
                tracing::info!(channel = %self.name, room_id, inviter = %invitation.inviter, "joined room");
                if invitation.is_direct {
                    session.rooms.flag_direct(room_id);
                }
                Ok(())
            }
            Ok(_answer) => Ok(()),
            Err(error) if error.kind == ChannelErrorKind::Rejected => {
                tracing::warn!(channel = %self.name, room_id, error = %error, "can't answer the invitation");
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Reads a timeline event; a message to hand over comes back.
    async fn handle_event(
        &self,
        session: &mut Session,
        room_id: &str,
        event: &Value,
    ) -> Option<squidbot_channels::InboundMessage> {
        match event::parse(event) {
            TimelineEvent::Message(message) if message.sender == session.names.user_id => {
                self.remember_own_event(&message.event_id);
                None
            }
            TimelineEvent::Message(message) => Some(self.inbound_message(session, room_id, message).await),
            TimelineEvent::Edit { event_id, sender } => {
                if sender != session.names.user_id {
                    tracing::debug!(channel = %self.name, room_id, event_id, "ignoring an edit");
                }
                None
            }
            TimelineEvent::Encrypted { sender, .. } => {
                if sender != session.names.user_id {
                    self.refuse_encryption(session, room_id).await;
                }
                None
            }
            TimelineEvent::Ignored { event_id, reason } => {
                tracing::debug!(channel = %self.name, room_id, event_id, reason, "ignoring an event");
                None
            }
            TimelineEvent::Malformed { reason } => {
                tracing::warn!(channel = %self.name, room_id, reason, "skipping a malformed event");
                None
            }
        }
    }

    /// Logs once and tells an encrypted room, once, that the bot can't read it. A
    /// notice that can't be sent for a passing fault is tried again on the next
    /// encrypted event.
    async fn refuse_encryption(&self, session: &mut Session, room_id: &str) {
        if session.encrypted_noticed.contains(room_id) {
            return;
        }
        tracing::warn!(
            channel = %self.name, room_id,
            "room is end-to-end encrypted, which the matrix channel doesn't support; telling the room"
        );
        if let Err(error) = self.send_event(room_id, "m.room.message", outbound::encryption_notice()).await {
            tracing::warn!(channel = %self.name, room_id, error = %error, "can't send the encryption notice");
            if error.is_retryable() {
                return;
            }
        }
        session.encrypted_noticed.insert(room_id.to_owned());
        if let Err(error) = self.state.store_encrypted_rooms(&session.encrypted_noticed).await {
            tracing::warn!(channel = %self.name, error = %error, "can't remember the encrypted room");
        }
    }

    /// Whether `event_id` in `room_id` is one of the bot's events.
    pub(crate) async fn is_bot_event(&self, session: &mut Session, room_id: &str, event_id: &str) -> bool {
        if self.is_known_own_event(event_id) {
            return true;
        }
        if session.foreign_events.contains(event_id) {
            return false;
        }
        let action = format!("read event {event_id}");
        match self.api.get(&action, &["rooms", room_id, "event", event_id]).await {
            Ok(event) if event.get("sender").and_then(Value::as_str) == Some(session.names.user_id.as_str()) => {
                self.remember_own_event(event_id);
                true
            }
            Ok(_event) => {
                if session.foreign_events.len() >= REMEMBERED_FOREIGN_EVENTS {
                    session.foreign_events.clear();
                }
                session.foreign_events.insert(event_id.to_owned());
                false
            }
            Err(error) => {
                tracing::debug!(channel = %self.name, room_id, error = %error, "can't tell who sent a replied event");
                false
            }
        }
    }
}
