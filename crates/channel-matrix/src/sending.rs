//! What the bot does in rooms: send messages with attachments, edit them, show typing,
//! react to acknowledge, and send any event with a fresh transaction id.

use std::sync::atomic::Ordering;

use reqwest::Method;
use serde_json::{Value, json};
use squidbot_channels::{ChannelError, Conversation, InboundMessage, OutboundMessage, ReadAttachment, SentMessage};

use crate::MatrixChannel;
use crate::failure;
use crate::outbound::{self, ACKNOWLEDGE_KEY, Placement};

impl MatrixChannel {
    /// Sends the text (when there is any) and then each attachment; the text's event
    /// is the one returned, for edits.
    pub(crate) async fn send_message(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let room_id = &message.conversation.id;
        let placement =
            Placement { reply_to: message.reply_to.as_deref(), thread_root: message.conversation.thread.as_deref() };
        let mut first_event = None;
        if !message.text.trim().is_empty() || message.attachments.is_empty() {
            let content = outbound::text_message(&message.text, placement);
            first_event = Some(self.send_event(room_id, "m.room.message", content).await?);
        }
        for attachment in &message.attachments {
            let bytes = attachment.bytes().await?;
            let size = bytes.len();
            let mxc = self.api.upload(&attachment.name, &attachment.mime, bytes).await?;
            // Only the first event of the message is the reply; all stay in the thread.
            let placement = match first_event {
                Some(_) => Placement { reply_to: None, ..placement },
                None => placement,
            };
            let content = outbound::file_message(&attachment.name, &attachment.mime, size, &mxc, placement);
            let event_id = self.send_event(room_id, "m.room.message", content).await?;
            first_event.get_or_insert(event_id);
        }
        let platform_message_id =
            first_event.ok_or_else(|| ChannelError::rejected("can't send a message: it has no text and no files"))?;
        Ok(SentMessage { conversation: message.conversation.clone(), platform_message_id })
    }

    /// Replaces the text of a message the bot sent.
    pub(crate) async fn edit_message(&self, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
        let content = outbound::edit(&sent.platform_message_id, text);
        self.send_event(&sent.conversation.id, "m.room.message", content).await.map(|_event_id| ())
    }

    /// Shows the bot typing in the room for up to 30 seconds.
    pub(crate) async fn show_typing(&self, conversation: &Conversation) -> Result<(), ChannelError> {
        let user_id = self.bot_names()?.user_id;
        let action = format!("show typing in {}", conversation.id);
        let body = json!({"typing": true, "timeout": 30_000});
        self.api.send_json(&action, Method::PUT, &["rooms", &conversation.id, "typing", &user_id], &body).await?;
        Ok(())
    }

    /// Reacts with 👀 to an inbound message.
    pub(crate) async fn react(&self, message: &InboundMessage) -> Result<(), ChannelError> {
        let content = outbound::reaction(&message.platform_message_id, ACKNOWLEDGE_KEY);
        self.send_event(&message.conversation.id, "m.reaction", content).await.map(|_event_id| ())
    }

    /// Sends one event to a room and returns its id.
    pub(crate) async fn send_event(
        &self,
        room_id: &str,
        event_type: &str,
        mut content: Value,
    ) -> Result<String, ChannelError> {
        outbound::fit_event_size(&mut content);
        let transaction = self.transactions.fetch_add(1, Ordering::Relaxed);
        let transaction_id = format!("{}.{transaction}", self.transaction_prefix);
        let action = format!("send {event_type} to {room_id}");
        let answer = self
            .api
            .send_json(&action, Method::PUT, &["rooms", room_id, "send", event_type, &transaction_id], &content)
            .await?;
        let event_id = answer
            .get("event_id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure::malformed(&action, "no event_id"))?
            .to_owned();
        self.remember_own_event(&event_id);
        Ok(event_id)
    }
}
