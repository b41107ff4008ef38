//! Downloading an inbound message's files (`getFile`, then the file URL), each within
//! the size cap; files that can't be fetched leave a note in the text instead.

use jiff::Timestamp;
use serde_json::json;
use squidbot_channels::{Attachment, AttachmentData, InboundMessage};

use crate::api::{Api, CALL_TIMEOUT, Download};
use crate::inbound::{Draft, RemoteFile};
use crate::wire::File;

/// The inbound message of `draft` with its files downloaded (or noted as skipped).
pub(crate) async fn complete(api: &Api, draft: Draft, cap: u64, channel: &str) -> InboundMessage {
    let mut attachments = Vec::new();
    let mut notes = Vec::new();
    for file in &draft.files {
        match fetch(api, file, cap).await {
            Ok(bytes) => attachments.push(Attachment {
                name: file.name.clone(),
                mime: file.mime.clone(),
                data: AttachmentData::Bytes(bytes),
            }),
            Err(note) => {
                tracing::warn!(channel, message = %draft.platform_message_id, "{note}");
                notes.push(note);
            }
        }
    }
    let mut text = draft.text;
    for note in notes {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&note);
    }
    InboundMessage {
        channel: channel.to_owned(),
        platform_message_id: draft.platform_message_id,
        conversation: draft.conversation,
        sender: draft.sender,
        text,
        mentions_bot: draft.mentions_bot,
        attachments,
        received_at: Timestamp::now(),
    }
}

/// One file's bytes, or the note saying why it is missing.
async fn fetch(api: &Api, file: &RemoteFile, cap: u64) -> Result<Vec<u8>, String> {
    let over_cap = |size: u64| {
        format!("[attachment {} skipped: {} is over the {} limit]", file.name, size_text(size), size_text(cap))
    };
    if let Some(size) = file.size.filter(|size| *size > cap) {
        return Err(over_cap(size));
    }
    let unavailable = |reason: String| format!("[attachment {} could not be downloaded: {reason}]", file.name);
    let located: File = api
        .call("getFile", &json!({ "file_id": file.file_id }), CALL_TIMEOUT)
        .await
        .map_err(|failure| unavailable(failure.into_channel_error("get the file's location").message))?;
    if let Some(size) = located.file_size.filter(|size| *size > cap) {
        return Err(over_cap(size));
    }
    let Some(path) = located.file_path.filter(|path| !path.is_empty()) else {
        return Err(unavailable("Telegram gave no download path".to_owned()));
    };
    match api.download(&path, cap).await {
        Ok(Download::Complete(bytes)) => Ok(bytes),
        Ok(Download::TooLarge(size)) => Err(over_cap(size)),
        Err(failure) => Err(unavailable(failure.into_channel_error("download the file").message)),
    }
}

/// A size as people write it: `900 bytes`, `12 KB`, `25 MB`, `20.5 MB` (binary units).
pub(crate) fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    let (unit, name) = match bytes {
        0..KIB => return format!("{bytes} bytes"),
        KIB..MIB => (KIB, "KB"),
        _ => (MIB, "MB"),
    };
    let tenths = bytes.saturating_mul(10).div_ceil(unit);
    if tenths % 10 == 0 { format!("{} {name}", tenths / 10) } else { format!("{}.{} {name}", tenths / 10, tenths % 10) }
}

#[cfg(test)]
mod tests {
    use super::size_text;

    #[test]
    fn sizes_read_like_the_limit_they_are_compared_with() {
        assert_eq!(size_text(900), "900 bytes");
        assert_eq!(size_text(2048), "2 KB");
        assert_eq!(size_text(20 * 1024 * 1024), "20 MB");
        assert_eq!(size_text(25 * 1024 * 1024), "25 MB");
        // Rounded up, so a file just over the cap never reads as equal to it.
        assert_eq!(size_text(20 * 1024 * 1024 + 1), "20.1 MB");
    }
}
