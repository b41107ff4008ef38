//! The Telegram Bot API objects the adapter reads, with the API's own field names.

use serde::Deserialize;

/// The envelope around every Bot API answer: `{"ok":true,"result":...}` or
/// `{"ok":false,"error_code":...,"description":...,"parameters":{...}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope {
    pub ok: bool,
    pub result: Option<serde_json::Value>,
    pub error_code: Option<u16>,
    pub description: Option<String>,
    pub parameters: Option<ResponseParameters>,
}

/// Extra information on a failed request.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ResponseParameters {
    /// Seconds to wait before repeating a rate-limited request.
    pub retry_after: Option<u64>,
    /// The new id of a group that was upgraded to a supergroup.
    pub migrate_to_chat_id: Option<i64>,
}

/// A Telegram user or bot.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub last_name: Option<String>,
    pub username: Option<String>,
}

/// A chat: private, group, supergroup or channel.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Chat {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: String,
}

/// A special part of a message's text (`mention`, `bot_command`, `text_mention`, ...).
/// `offset` and `length` count UTF-16 code units.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MessageEntity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
    pub user: Option<User>,
}

/// One size of a photo.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub width: u64,
    #[serde(default)]
    pub height: u64,
    pub file_size: Option<u64>,
}

/// The fields a document, voice note, audio file or video share.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MediaFile {
    pub file_id: String,
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    pub file_size: Option<u64>,
}

/// A message, with the fields the adapter uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Message {
    pub message_id: i64,
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub is_topic_message: bool,
    pub from: Option<User>,
    pub chat: Chat,
    pub text: Option<String>,
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    pub caption: Option<String>,
    #[serde(default)]
    pub caption_entities: Vec<MessageEntity>,
    pub reply_to_message: Option<Box<Message>>,
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    pub document: Option<MediaFile>,
    pub voice: Option<MediaFile>,
    pub audio: Option<MediaFile>,
    pub video: Option<MediaFile>,
}

/// The answer to `getFile`: where to download a file from.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct File {
    pub file_size: Option<u64>,
    pub file_path: Option<String>,
}
