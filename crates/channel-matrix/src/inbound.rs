//! A received room message made into the [`InboundMessage`] the manager takes: direct
//! or group, mention of the bot, text without the mention and reply fallback, files
//! downloaded up to the cap (or a note saying why not).

use serde_json::Value;
use squidbot_channels::{Attachment, AttachmentData, Conversation, ConversationKind, InboundMessage, Sender};

use crate::MatrixChannel;
use crate::api::Download;
use crate::event::{MediaFile, RoomMessage, strip_reply_fallback};
use crate::receive::Session;

impl MatrixChannel {
    /// The inbound message of a room message from someone else.
    pub(crate) async fn inbound_message(
        &self,
        session: &mut Session,
        room_id: &str,
        message: RoomMessage,
    ) -> InboundMessage {
        let kind = self.conversation_kind(session, room_id).await;
        let body = if message.has_reply_fallback { strip_reply_fallback(&message.body) } else { &message.body };
        let replied = message.in_reply_to.as_deref().or(message.thread_root.as_deref());
        let mentions_bot = message.mentioned_user_ids.contains(&session.names.user_id)
            || session.names.mentioned_in(body)
            || match replied {
                Some(event_id) => self.is_bot_event(session, room_id, event_id).await,
                None => false,
            };
        let mut text = session.names.strip_from(body);
        let mut attachments = Vec::new();
        if let Some(file) = &message.file {
            match self.fetch_file(file).await {
                Ok(attachment) => attachments.push(attachment),
                Err(note) => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&note);
                }
            }
        }
        let display_name = session.rooms.room(room_id).display_names.get(&message.sender).cloned();
        InboundMessage {
            channel: self.name.clone(),
            platform_message_id: message.event_id,
            conversation: Conversation { id: room_id.to_owned(), kind, thread: message.thread_root },
            sender: Sender { id: message.sender, display_name },
            text,
            mentions_bot,
            attachments,
            received_at: jiff::Timestamp::now(),
        }
    }

    /// Direct or group, counting the joined members when the count is unknown or stale.
    async fn conversation_kind(&self, session: &mut Session, room_id: &str) -> ConversationKind {
        if session.rooms.room(room_id).joined_members.is_none() {
            let action = format!("count the members of {room_id}");
            match self.api.get(&action, &["rooms", room_id, "joined_members"]).await {
                Ok(answer) => {
                    let count = answer.get("joined").and_then(Value::as_object).map(|joined| joined.len() as u64);
                    session.rooms.room(room_id).joined_members = count;
                }
                Err(error) => tracing::warn!(channel = %self.name, error = %error, "can't tell direct from group"),
            }
        }
        session.rooms.kind(room_id)
    }

    /// Downloads a message's file, or says in a note why it was skipped.
    async fn fetch_file(&self, file: &MediaFile) -> Result<Attachment, String> {
        let cap = self.max_attachment_bytes;
        if let Some(size) = file.size.filter(|size| *size > cap) {
            return Err(too_large_note(&file.name, size, cap));
        }
        match self.api.download(&file.url, cap).await {
            Ok(Download::Complete(bytes)) => Ok(Attachment {
                name: file.name.clone(),
                mime: file.mime.clone().unwrap_or_else(|| "application/octet-stream".to_owned()),
                data: AttachmentData::Bytes(bytes),
            }),
            Ok(Download::TooLarge { size }) => Err(too_large_note(&file.name, size, cap)),
            Err(error) => {
                tracing::warn!(channel = %self.name, file = %file.name, error = %error, "can't download an attachment");
                Err(format!("[attachment {} skipped: {}]", file.name, error.message))
            }
        }
    }
}

/// The note that replaces a file over the cap.
fn too_large_note(name: &str, size: u64, cap: u64) -> String {
    format!("[attachment {name} skipped: {} is over the {} limit]", human_size(size), human_size(cap))
}

/// A size for people: bytes, KB or MB (of 1,024), whole numbers past 10.
fn human_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let value = bytes as f64;
    let (amount, unit) = match bytes {
        0..1_024 => return format!("{bytes} bytes"),
        1_024..1_048_576 => (value / KIB, "KB"),
        _ => (value / (KIB * KIB), "MB"),
    };
    if amount >= 10.0 || amount.fract() == 0.0 {
        format!("{} {unit}", amount.round())
    } else {
        format!("{amount:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human_size(900), "900 bytes");
        assert_eq!(human_size(1_536), "1.5 KB");
        assert_eq!(human_size(20 * 1024 * 1024), "20 MB");
        assert_eq!(human_size(25 * 1024 * 1024 + 300_000), "25 MB");
        assert_eq!(
            too_large_note("photo.jpg", 25 * 1024 * 1024, 20 * 1024 * 1024),
            "[attachment photo.jpg skipped: 25 MB is over the 20 MB limit]"
        );
    }
}
