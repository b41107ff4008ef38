//! Reading one raw mail into what the bot gets: sender, thread ids, text without quoted
//! history, attachments within the cap; or the reason it is skipped.
//!
//! The text is the body (the text/plain part, or the HTML part as text when there is no
//! plain one) without the quoted history at its end. A mail that starts a thread (no
//! `In-Reply-To`, no `References`) gets its subject as a first line, `Subject: …`,
//! followed by a blank line, because people often put the question there; replies
//! don't, their subject is `Re: …` of the same thread. The subject of every mail is kept
//! for the reply ([`crate::threads`]).

use mail_parser::{HeaderName, HeaderValue, Message, MessageParser, MimeHeaders, PartType};
use squidbot_channels::{Attachment, AttachmentData};

use crate::filter::{SkipReason, judge_headers};
use crate::text::{format_size, html_to_text, strip_quoted_reply};

/// What the receive loop knows about a mail besides its bytes.
#[derive(Debug, Clone)]
pub(crate) struct MailContext<'a> {
    /// The bot's own address, lowercase.
    pub bot_address: &'a str,
    /// The id used when the mail has no Message-ID (`<uid.uidvalidity@mailbox>`).
    pub fallback_message_id: String,
    /// Attachments larger than this are skipped with a note.
    pub max_attachment_bytes: u64,
}

/// A mail to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedMail {
    /// Its Message-ID in angle brackets.
    pub message_id: String,
    /// The From address, lowercase.
    pub sender_address: String,
    /// The From display name.
    pub sender_name: Option<String>,
    /// The decoded subject (empty when none).
    pub subject: String,
    /// The References ids in angle brackets, oldest first.
    pub references: Vec<String>,
    /// The thread's root Message-ID: the first reference, else In-Reply-To, else its own.
    pub conversation_id: String,
    /// The text for the bot (see the module documentation).
    pub text: String,
    /// The attachments within the cap.
    pub attachments: Vec<Attachment>,
}

/// What to do with a mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Hand it to the bot.
    Deliver(Box<ParsedMail>),
    /// Leave it (logged by the caller).
    Skip(SkipReason),
}

/// Reads a whole mail.
pub(crate) fn read_mail(raw: &[u8], context: &MailContext<'_>) -> Verdict {
    let Some(message) = MessageParser::default().parse(raw) else {
        return Verdict::Skip(SkipReason::Unreadable);
    };
    let mut notes = Vec::new();
    let attachments = attachments(&message, context.max_attachment_bytes, &mut notes);
    let body = body_text(&message);
    assemble(&message, context, &strip_quoted_reply(&body), attachments, &notes)
}

/// Reads the header of a mail too large to download, delivering a note instead of its
/// body so the sender hears why there is no answer to its content.
pub(crate) fn read_oversized(header: &[u8], size: u64, limit: u64, context: &MailContext<'_>) -> Verdict {
    let Some(message) = MessageParser::default().parse_headers(header) else {
        return Verdict::Skip(SkipReason::Unreadable);
    };
    let note = format!("[message skipped: {} is over the {} limit]", format_size(size), format_size(limit));
    assemble(&message, context, "", Vec::new(), &[note])
}

fn assemble(
    message: &Message<'_>,
    context: &MailContext<'_>,
    body: &str,
    attachments: Vec<Attachment>,
    notes: &[String],
) -> Verdict {
    if let Some(reason) = judge_headers(message.headers_raw()) {
        return Verdict::Skip(reason);
    }
    let (sender_address, sender_name) = match sender(message) {
        Ok(sender) => sender,
        Err(reason) => return Verdict::Skip(reason),
    };
    if sender_address == context.bot_address {
        return Verdict::Skip(SkipReason::OwnAddress);
    }
    let message_id = message.message_id().map(bracketed).unwrap_or_else(|| context.fallback_message_id.clone());
    let references = message_ids(message.references());
    let in_reply_to = message_ids(message.in_reply_to()).into_iter().next_back();
    let starts_thread = references.is_empty() && in_reply_to.is_none();
    let conversation_id = references.first().cloned().or(in_reply_to).unwrap_or_else(|| message_id.clone());
    let subject = message.subject().map(|subject| subject.trim().to_owned()).unwrap_or_default();

    let mut text = String::new();
    if starts_thread && !subject.is_empty() {
        text.push_str("Subject: ");
        text.push_str(&subject);
    }
    for paragraph in std::iter::once(body.trim()).chain(notes.iter().map(String::as_str)) {
        if paragraph.is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(paragraph);
    }
    Verdict::Deliver(Box::new(ParsedMail {
        message_id,
        sender_address,
        sender_name,
        subject,
        references,
        conversation_id,
        text,
        attachments,
    }))
}

/// The single From address (lowercase) and its display name.
fn sender(message: &Message<'_>) -> Result<(String, Option<String>), SkipReason> {
    if message.header_values(HeaderName::From).count() > 1 {
        return Err(SkipReason::SeveralSenders);
    }
    let addresses: Vec<_> = message.from().map(|from| from.iter().collect()).unwrap_or_default();
    let [address] = addresses.as_slice() else {
        return Err(if addresses.is_empty() { SkipReason::NoSender } else { SkipReason::SeveralSenders });
    };
    let email = address.address().map(str::trim).filter(|email| email.contains('@')).ok_or(SkipReason::NoSender)?;
    let name = address.name().map(str::trim).filter(|name| !name.is_empty() && *name != email);
    Ok((email.to_lowercase(), name.map(str::to_owned)))
}

/// Message ids of a header in angle brackets.
fn message_ids(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![bracketed(id)],
        HeaderValue::TextList(ids) => ids.iter().map(|id| bracketed(id)).collect(),
        _ => Vec::new(),
    }
}

fn bracketed(id: &str) -> String {
    format!("<{}>", id.trim().trim_start_matches('<').trim_end_matches('>'))
}

/// The body parts as text, HTML converted.
fn body_text(message: &Message<'_>) -> String {
    let parts: Vec<String> = message
        .text_bodies()
        .filter_map(|part| match &part.body {
            PartType::Text(text) => Some(text.replace("\r\n", "\n")),
            PartType::Html(html) => Some(html_to_text(html)),
            PartType::Binary(_) | PartType::InlineBinary(_) | PartType::Message(_) | PartType::Multipart(_) => None,
        })
        .filter(|text| !text.trim().is_empty())
        .collect();
    parts.join("\n\n")
}

/// The attachments within `limit`; a note for each one skipped.
fn attachments(message: &Message<'_>, limit: u64, notes: &mut Vec<String>) -> Vec<Attachment> {
    let mut kept = Vec::new();
    for (index, part) in message.attachments().enumerate() {
        let mime = part
            .content_type()
            .map(|content_type| match content_type.subtype() {
                Some(subtype) => format!("{}/{}", content_type.ctype(), subtype),
                None => content_type.ctype().to_owned(),
            })
            .unwrap_or_else(|| "application/octet-stream".to_owned())
            .to_ascii_lowercase();
        let name = part
            .attachment_name()
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map_or_else(|| format!("attachment-{}", index + 1), str::to_owned);
        let contents = part.contents();
        let size = u64::try_from(contents.len()).unwrap_or(u64::MAX);
        if size > limit {
            notes.push(format!(
                "[attachment {name} skipped: {} is over the {} limit]",
                format_size(size),
                format_size(limit)
            ));
            continue;
        }
        kept.push(Attachment { name, mime, data: AttachmentData::Bytes(contents.to_vec()) });
    }
    kept
}

#[cfg(test)]
mod tests;
