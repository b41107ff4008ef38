//! One inbound message: de-duplicated, its writer looked up (under the people's
//! policy), checked against the policy, routed, then either a command or a turn whose
//! reply goes back to the chat.

use squidbot_core::events::TurnEventKind;
use squidbot_core::runs::RunRequest;
use squidbot_core::types::ImageRef;
use tokio_util::sync::CancellationToken;

use super::commands::command;
use super::health::Count;
use super::outbound::StreamedReply;
use super::{ChannelEntry, ChannelManager};
use crate::people::{Speaker, actor_of};
use crate::policy::{Decision, pairing_reply};
use crate::port::{Attachment, AttachmentData, ConversationKind, InboundMessage, StreamMode};
use crate::session::{OWNER_CONTEXT, route_for};

/// What the person sees when a turn fails and they are not an owner (owners see why).
const FAILURE_REPLY: &str = "Sorry, something went wrong while answering. Please try again later.";

impl ChannelManager {
    /// Handles one message from an adapter.
    pub(super) async fn handle(&self, message: InboundMessage) {
        let Some(entry) = self.channels.get(&message.channel) else {
            tracing::warn!(channel = %message.channel, "a message came from an unknown channel; dropped");
            return;
        };
        let first_time = {
            let mut dedup = squidbot_core::sync::lock(&self.dedup);
            dedup.first_time(&message.channel, &message.platform_message_id)
        };
        if !first_time {
            tracing::debug!(channel = %message.channel, id = %message.platform_message_id, "redelivered message dropped");
            self.health.count(&message.channel, Count::Duplicate);
            return;
        }
        self.health.count(&message.channel, Count::Received);
        let people = self.runner.agent().people().cloned();
        let speaker = Speaker::of(people.as_deref(), &message);
        let decision = match &speaker {
            // Linking someone is letting them in; rooms keep their own rules.
            Speaker::Linked(_) if message.conversation.kind == ConversationKind::Direct => Decision::Answer,
            Speaker::Disabled(_) => entry.policy.refuse_disabled_user(&message),
            Speaker::Linked(_) | Speaker::Unmanaged | Speaker::Unlinked => entry.policy.decide(&message),
        };
        match decision {
            Decision::Answer => {}
            Decision::Ignore { reason } => {
                tracing::info!(channel = %message.channel, sender = %message.sender.id, %reason, "message not answered");
                self.health.count(&message.channel, Count::Denied);
                return;
            }
            Decision::Refuse { reason, reply } => {
                tracing::info!(channel = %message.channel, sender = %message.sender.id, %reason, "message refused");
                self.health.count(&message.channel, Count::Denied);
                if let Some(reply) = reply {
                    self.send_reply(entry, &message.conversation, Some(&message.platform_message_id), &reply).await;
                }
                return;
            }
            Decision::PairingCode { code } => {
                tracing::info!(channel = %message.channel, sender = %message.sender.id, "pairing code issued; run `squidbot users approve` with it to let them in");
                self.health.count(&message.channel, Count::Denied);
                let reply = pairing_reply(&code);
                self.send_reply(entry, &message.conversation, Some(&message.platform_message_id), &reply).await;
                if let Some(people) = &people {
                    self.tell_admins_about_pairing(people, &message, &code);
                }
                return;
            }
        }
        let route = route_for(&message, entry.policy.owners(), speaker.user());
        let sender_is_owner = entry.policy.is_owner(&message.sender.id);
        let actor = people.as_ref().and_then(|people| {
            actor_of(&speaker, &message, &route, sender_is_owner, || people.actor_for_context(OWNER_CONTEXT))
        });
        let direct = message.conversation.kind == ConversationKind::Direct;
        // Owners see why something failed in their direct messages; so do admins.
        let sees_errors =
            route.context == OWNER_CONTEXT || (direct && actor.as_ref().is_some_and(|actor| actor.is_admin()));
        self.remember_destination(&route.session_key, &message.channel, &message.conversation);
        if direct && (speaker.user().is_some() || route.context == OWNER_CONTEXT) {
            self.note_last_session(&route.context, &route.session_key);
        }
        if let Some(command) = command(&message.text) {
            let reply = self.run_command(command, &route.session_key, actor.as_ref()).await;
            self.send_reply(entry, &message.conversation, Some(&message.platform_message_id), &reply).await;
            return;
        }
        let (input, images) = self.input_of(&message, &route.session_key);
        if input.trim().is_empty() {
            tracing::debug!(channel = %message.channel, id = %message.platform_message_id, "empty message ignored");
            return;
        }
        if let Err(error) = self.runner.session_in(&route.session_key, &route.context).await {
            tracing::error!(channel = %message.channel, session = %route.session_key, %error, "can't open the session");
            let reply = if sees_errors { format!("can't open the session: {error}") } else { FAILURE_REPLY.to_owned() };
            self.send_reply(entry, &message.conversation, Some(&message.platform_message_id), &reply).await;
            return;
        }
        let request = RunRequest {
            session_key: route.session_key.clone(),
            input,
            images,
            origin: message.channel.clone(),
            run_id: None,
            correlation_id: None,
            actor,
        };
        let mut handle = match self.runner.start(request) {
            Ok(handle) => handle,
            Err(error) => {
                tracing::warn!(channel = %message.channel, %error, "can't start a turn");
                let reply = if sees_errors { format!("can't start: {error}") } else { FAILURE_REPLY.to_owned() };
                self.send_reply(entry, &message.conversation, Some(&message.platform_message_id), &reply).await;
                return;
            }
        };
        self.health.count(&message.channel, Count::Answered);
        if let Err(error) = entry.channel.acknowledge_boxed(&message).await {
            tracing::debug!(channel = %message.channel, %error, "can't acknowledge the message");
        }
        let typing = self.keep_typing(entry, &message);
        let capabilities = entry.channel.capabilities();
        let mut reply =
            StreamedReply::new(&message.conversation, &message.platform_message_id, capabilities, self.settings);
        while let Some(event) = handle.events.recv().await {
            match &event.kind {
                TurnEventKind::Delta { text } if capabilities.streams == StreamMode::EditInPlace => {
                    reply.push(text);
                    self.stream_update(entry, &mut reply).await;
                }
                TurnEventKind::StreamReset => reply.reset(),
                TurnEventKind::Waiting { message: waiting } => {
                    self.send_reply(entry, &message.conversation, Some(&message.platform_message_id), waiting).await;
                }
                TurnEventKind::File { path, name, mime } => reply.attach(Attachment {
                    name: name.clone(),
                    mime: mime.clone(),
                    data: AttachmentData::Path(path.into()),
                }),
                TurnEventKind::Finished { reply: text, .. } => {
                    typing.cancel();
                    self.finish_reply(entry, &mut reply, text).await;
                    break;
                }
                TurnEventKind::Aborted { partial, .. } => {
                    typing.cancel();
                    let text =
                        if partial.trim().is_empty() { "(stopped)".to_owned() } else { format!("{partial} (stopped)") };
                    self.finish_reply(entry, &mut reply, &text).await;
                    break;
                }
                TurnEventKind::Failed { error, .. } => {
                    typing.cancel();
                    tracing::warn!(channel = %message.channel, session = %route.session_key, %error, "turn failed");
                    let text = if sees_errors { format!("can't answer: {error}") } else { FAILURE_REPLY.to_owned() };
                    self.finish_reply(entry, &mut reply, &text).await;
                    break;
                }
                _ => {}
            }
        }
        typing.cancel();
    }

    /// The text handed to the model: the message (cut at the limit, with a note) and a
    /// line per attachment saying where it was saved; and the saved images, which a
    /// vision-capable model is shown.
    fn input_of(&self, message: &InboundMessage, session_key: &str) -> (String, Vec<ImageRef>) {
        let limit = self.settings.max_input_chars;
        let mut input = if message.text.chars().count() > limit {
            tracing::warn!(channel = %message.channel, id = %message.platform_message_id, limit, "inbound text cut at the limit");
            let kept: String = message.text.chars().take(limit).collect();
            format!("{kept}\n[the message was cut here: it was longer than {limit} characters]")
        } else {
            message.text.clone()
        };
        let mut images = Vec::new();
        for attachment in &message.attachments {
            let size = match &attachment.data {
                AttachmentData::Bytes(bytes) => format!(", {} bytes", bytes.len()),
                AttachmentData::Path(_) => String::new(),
            };
            if !input.is_empty() {
                input.push('\n');
            }
            match self.attachments.save(session_key, attachment) {
                Ok(path) => {
                    input.push_str(&format!(
                        "[attachment {} ({}{size}) saved at {}]",
                        attachment.name,
                        attachment.mime,
                        path.display()
                    ));
                    if attachment.mime.starts_with("image/") {
                        images.push(ImageRef::new(path.to_string_lossy()));
                    }
                }
                Err(error) => {
                    tracing::warn!(channel = %message.channel, name = %attachment.name, %error, "can't save an attachment");
                    input.push_str(&format!("[attachment {} could not be saved: {error}]", attachment.name));
                }
            }
        }
        (input, images)
    }

    /// Shows typing in the message's conversation until the returned token is cancelled.
    fn keep_typing(&self, entry: &ChannelEntry, message: &InboundMessage) -> CancellationToken {
        let stop = CancellationToken::new();
        if !entry.channel.capabilities().typing {
            return stop;
        }
        let channel = entry.channel.clone();
        let conversation = message.conversation.clone();
        let interval = self.settings.typing_interval;
        let token = stop.clone();
        self.tracker.spawn(async move {
            loop {
                if let Err(error) = channel.typing_boxed(&conversation).await {
                    tracing::debug!(channel = %channel.name(), %error, "can't show typing");
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
            }
        });
        stop
    }
}
