//! Sending: messages (`sendMessage`), files (`sendPhoto`, `sendDocument`), edits
//! (`editMessageText`), typing (`sendChatAction`) and the 👀 reaction
//! (`setMessageReaction`), with a plain-text resend when Telegram refuses the HTML.

use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use squidbot_channels::{Attachment, ChannelError, Conversation, OutboundMessage, ReadAttachment, SentMessage};

use crate::api::{Api, CALL_TIMEOUT, Failure};
use crate::plain::html_to_plain;
use crate::wire::Message;

/// Longest caption Telegram accepts, in characters.
const MAX_CAPTION_CHARS: usize = 1024;

/// Largest image `sendPhoto` takes; larger ones go as documents.
const MAX_PHOTO_BYTES: usize = 10 * 1024 * 1024;

/// The reaction that marks a message as being worked on.
const ACKNOWLEDGE_EMOJI: &str = "👀";

/// How a text or caption is marked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Markup {
    /// Telegram HTML (`parse_mode` HTML), as the manager renders it.
    Html,
    /// Plain text (no `parse_mode`), for resending what Telegram couldn't parse.
    Plain,
}

/// Where a message goes, in the Bot API's parameters.
struct Target {
    chat_id: Value,
    thread: Option<i64>,
    reply_to: Option<i64>,
}

impl Target {
    fn of(conversation: &Conversation, reply_to: Option<&str>) -> Result<Self, ChannelError> {
        let chat_id = chat_id(&conversation.id)?;
        let thread = match &conversation.thread {
            Some(thread) => Some(thread.parse::<i64>().map_err(|_not_a_number| {
                ChannelError::rejected(format!("can't send to Telegram: thread {thread:?} is not a topic id"))
            })?),
            None => None,
        };
        // Replies only work inside the same chat; the id is "<chat_id>:<message_id>".
        let reply_to = reply_to.and_then(|id| {
            let (chat, message) = id.split_once(':')?;
            if chat == conversation.id { message.parse::<i64>().ok() } else { None }
        });
        Ok(Self { chat_id, thread, reply_to })
    }

    /// The JSON parameters every message method shares.
    fn parameters(&self) -> serde_json::Map<String, Value> {
        let mut parameters = serde_json::Map::new();
        parameters.insert("chat_id".to_owned(), self.chat_id.clone());
        if let Some(thread) = self.thread {
            parameters.insert("message_thread_id".to_owned(), thread.into());
        }
        if let Some(message_id) = self.reply_to {
            // Still sends if the message answered was deleted meanwhile.
            parameters.insert(
                "reply_parameters".to_owned(),
                json!({ "message_id": message_id, "allow_sending_without_reply": true }),
            );
        }
        parameters
    }
}

/// A chat id as the Bot API takes it: a number, or `@channelname`.
fn chat_id(id: &str) -> Result<Value, ChannelError> {
    if let Ok(number) = id.parse::<i64>() {
        return Ok(number.into());
    }
    if id.starts_with('@') && id.len() > 1 {
        return Ok(id.into());
    }
    Err(ChannelError::rejected(format!("can't send to Telegram: {id:?} is not a chat id")))
}

/// `<chat_id>:<message_id>` split into the Bot API's two parameters.
fn message_address(platform_message_id: &str, action: &str) -> Result<(Value, i64), ChannelError> {
    let unusable =
        || ChannelError::rejected(format!("can't {action}: {platform_message_id:?} is not a Telegram message id"));
    let (chat, message) = platform_message_id.split_once(':').ok_or_else(unusable)?;
    Ok((chat_id(chat).map_err(|_bad_chat| unusable())?, message.parse().map_err(|_not_a_number| unusable())?))
}

fn sent(conversation: &Conversation, message: &Message) -> SentMessage {
    SentMessage {
        conversation: conversation.clone(),
        platform_message_id: format!("{}:{}", message.chat.id, message.message_id),
    }
}

/// Sends `message`: its text as one message, its files after it (the first file
/// carries the text as its caption when the text is short enough).
pub(crate) async fn send(api: &Api, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
    let mut target = Target::of(&message.conversation, message.reply_to.as_deref())?;
    let caption_fits = message.text.chars().count() <= MAX_CAPTION_CHARS;
    let mut first: Option<SentMessage> = None;
    if !message.text.is_empty() && (message.attachments.is_empty() || !caption_fits) {
        let text_message = send_text(api, &target, &message.text).await?;
        first = Some(sent(&message.conversation, &text_message));
        target.reply_to = None;
    }
    for attachment in &message.attachments {
        let caption = if first.is_none() && !message.text.is_empty() { Some(message.text.as_str()) } else { None };
        let file_message = send_file(api, &target, attachment, caption).await?;
        if first.is_none() {
            first = Some(sent(&message.conversation, &file_message));
        }
        target.reply_to = None;
    }
    first.ok_or_else(|| ChannelError::rejected("can't send to Telegram: the message has neither text nor files"))
}

/// `sendMessage` with HTML, resent as plain text if Telegram can't parse the HTML.
async fn send_text(api: &Api, target: &Target, text: &str) -> Result<Message, ChannelError> {
    let build = |text: &str, markup: Markup| {
        let mut parameters = target.parameters();
        parameters.insert("text".to_owned(), text.into());
        parameters.insert("link_preview_options".to_owned(), json!({ "is_disabled": true }));
        if markup == Markup::Html {
            parameters.insert("parse_mode".to_owned(), "HTML".into());
        }
        Value::Object(parameters)
    };
    match api.call::<Message>("sendMessage", &build(text, Markup::Html), CALL_TIMEOUT).await {
        Ok(message) => Ok(message),
        Err(failure) if failure.is_unparsable_html() => {
            tracing::warn!("{}; resending as plain text", failure.into_channel_error("send HTML to Telegram"));
            let plain = html_to_plain(text);
            api.call("sendMessage", &build(&plain, Markup::Plain), CALL_TIMEOUT)
                .await
                .map_err(|failure| failure.into_channel_error("send a message to Telegram"))
        }
        Err(failure) => Err(failure.into_channel_error("send a message to Telegram")),
    }
}

/// Uploads one file: images as photos (documents if Telegram refuses the photo), the
/// rest as documents.
async fn send_file(
    api: &Api,
    target: &Target,
    attachment: &Attachment,
    caption: Option<&str>,
) -> Result<Message, ChannelError> {
    let bytes = attachment.bytes().await?;
    // GIFs would lose their animation and SVGs aren't taken as photos.
    let as_photo = attachment.mime.starts_with("image/")
        && !matches!(attachment.mime.as_str(), "image/gif" | "image/svg+xml")
        && bytes.len() <= MAX_PHOTO_BYTES;
    if as_photo {
        match upload(api, target, "sendPhoto", "photo", attachment, &bytes, caption).await {
            Err(error) if error.kind == squidbot_channels::ChannelErrorKind::Rejected => {
                tracing::warn!("{error}; sending it as a document");
            }
            result => return result,
        }
    }
    upload(api, target, "sendDocument", "document", attachment, &bytes, caption).await
}

/// One multipart upload, resent with a plain caption if Telegram can't parse its HTML.
async fn upload(
    api: &Api,
    target: &Target,
    method: &str,
    field: &str,
    attachment: &Attachment,
    bytes: &[u8],
    caption: Option<&str>,
) -> Result<Message, ChannelError> {
    let action = format!("send attachment {} to Telegram", attachment.name);
    let build = |caption: Option<(&str, Markup)>| {
        let mut form = Form::new();
        for (key, value) in target.parameters() {
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            form = form.text(key, text);
        }
        if let Some((caption, markup)) = caption {
            form = form.text("caption", caption.to_owned());
            if markup == Markup::Html {
                form = form.text("parse_mode", "HTML");
            }
        }
        let part = Part::bytes(bytes.to_vec()).file_name(attachment.name.clone());
        let part = match part.mime_str(&attachment.mime) {
            Ok(part) => part,
            Err(_unparsable_mime) => Part::bytes(bytes.to_vec()).file_name(attachment.name.clone()),
        };
        form.part(field.to_owned(), part)
    };
    match api.call_multipart::<Message>(method, build(caption.map(|caption| (caption, Markup::Html)))).await {
        Ok(message) => Ok(message),
        Err(failure) if failure.is_unparsable_html() && caption.is_some() => {
            tracing::warn!("{}; resending with a plain caption", failure.into_channel_error(&action));
            let plain = caption.map(html_to_plain);
            api.call_multipart(method, build(plain.as_deref().map(|caption| (caption, Markup::Plain))))
                .await
                .map_err(|failure| failure.into_channel_error(&action))
        }
        Err(failure) => Err(failure.into_channel_error(&action)),
    }
}

/// `editMessageText` with HTML; an edit that changes nothing is a success.
pub(crate) async fn edit(api: &Api, message: &SentMessage, text: &str) -> Result<(), ChannelError> {
    let action = "edit a Telegram message";
    let (chat_id, message_id) = message_address(&message.platform_message_id, action)?;
    let build = |text: &str, markup: Markup| {
        let mut parameters = json!({
            "chat_id": chat_id,
            "message_id": message_id,
            "text": text,
            "link_preview_options": { "is_disabled": true },
        });
        if markup == Markup::Html {
            parameters["parse_mode"] = "HTML".into();
        }
        parameters
    };
    let failure = match api.call::<Value>("editMessageText", &build(text, Markup::Html), CALL_TIMEOUT).await {
        Ok(_) => return Ok(()),
        Err(failure) => failure,
    };
    let failure = if failure.is_unparsable_html() {
        tracing::warn!("{}; editing with plain text", failure.into_channel_error(action));
        match api.call::<Value>("editMessageText", &build(&html_to_plain(text), Markup::Plain), CALL_TIMEOUT).await {
            Ok(_) => return Ok(()),
            Err(failure) => failure,
        }
    } else {
        failure
    };
    if failure.is_not_modified() {
        return Ok(());
    }
    Err(failure.into_channel_error(action))
}

/// `sendChatAction` "typing" (shown for about five seconds).
pub(crate) async fn typing(api: &Api, conversation: &Conversation) -> Result<(), ChannelError> {
    let mut parameters = Target::of(conversation, None)?.parameters();
    parameters.insert("action".to_owned(), "typing".into());
    api.call::<Value>("sendChatAction", &Value::Object(parameters), CALL_TIMEOUT)
        .await
        .map(drop)
        .map_err(|failure: Failure| failure.into_channel_error("show typing on Telegram"))
}

/// `setMessageReaction` 👀 on an inbound message.
pub(crate) async fn react(api: &Api, platform_message_id: &str) -> Result<(), ChannelError> {
    let action = "react to a Telegram message";
    let (chat_id, message_id) = message_address(platform_message_id, action)?;
    let parameters = json!({
        "chat_id": chat_id,
        "message_id": message_id,
        "reaction": [{ "type": "emoji", "emoji": ACKNOWLEDGE_EMOJI }],
    });
    api.call::<Value>("setMessageReaction", &parameters, CALL_TIMEOUT)
        .await
        .map(drop)
        .map_err(|failure| failure.into_channel_error(action))
}
