//! Files in both directions: downloading the files shared with an inbound message
//! (capped, with a note for each one left out) and the three-step external upload.

use serde_json::{Value, json};
use squidbot_channels::{Attachment, AttachmentData, ChannelError, ReadAttachment};

use crate::events::SlackFile;
use crate::web_api::{DownloadError, Token, WebApi, string_field};

/// The files of an inbound message, and a note for each one that couldn't be fetched.
#[derive(Debug, Default)]
pub(crate) struct Downloaded {
    pub attachments: Vec<Attachment>,
    pub notes: Vec<String>,
}

/// Downloads `files` with the bot token, skipping any over `cap` bytes.
pub(crate) async fn download_all(api: &WebApi, files: &[SlackFile], cap: u64) -> Downloaded {
    let mut downloaded = Downloaded::default();
    for file in files {
        let name = file.display_name().to_owned();
        match file.mode.as_deref() {
            Some("tombstone") => continue,
            Some("hidden_by_limit") => {
                downloaded
                    .notes
                    .push(format!("[attachment {name} unavailable: hidden by the workspace's plan limits]"));
                continue;
            }
            Some(_) | None => {}
        }
        if let Some(size) = file.size
            && size > cap
        {
            downloaded.notes.push(too_large_note(&name, size, cap));
            continue;
        }
        let Some(url) = file.url_private_download.as_deref().or(file.url_private.as_deref()) else {
            downloaded.notes.push(format!("[attachment {name} skipped: Slack gave no download URL]"));
            continue;
        };
        let mime = file
            .mimetype
            .clone()
            .filter(|mime| !mime.is_empty())
            .unwrap_or_else(|| "application/octet-stream".to_owned());
        match api.download(url, &mime, cap).await {
            Ok(bytes) => downloaded.attachments.push(Attachment { name, mime, data: AttachmentData::Bytes(bytes) }),
            Err(DownloadError::TooLarge(size)) => downloaded.notes.push(too_large_note(&name, size, cap)),
            Err(DownloadError::Failed(reason)) => {
                tracing::warn!(file = %file.id, %reason, "can't download a Slack file");
                downloaded.notes.push(format!("[attachment {name} couldn't be downloaded: {reason}]"));
            }
        }
    }
    downloaded
}

fn too_large_note(name: &str, size: u64, cap: u64) -> String {
    format!("[attachment {name} skipped: {} is over the {} limit]", human_size(size), human_size(cap))
}

/// A size as people say it (binary units, named as commonly written).
pub(crate) fn human_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB {
        format!("{} MB", (bytes + MIB / 2) / MIB)
    } else if bytes >= KIB {
        format!("{} KB", (bytes + KIB / 2) / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Uploads `attachments` and shares them in `channel` (and `thread`) as one message
/// with `comment`; returns the message's `ts` when Slack tells it, else the first file
/// id.
pub(crate) async fn upload_all(
    api: &WebApi,
    attachments: &[Attachment],
    channel: &str,
    thread: Option<&str>,
    comment: &str,
) -> Result<String, ChannelError> {
    let mut files = Vec::with_capacity(attachments.len());
    for attachment in attachments {
        let bytes = attachment.bytes().await?;
        let length = bytes.len().to_string();
        let slot = api
            .call_form(
                "files.getUploadURLExternal",
                Token::Bot,
                &[("filename", attachment.name.as_str()), ("length", length.as_str())],
            )
            .await?;
        let (Some(upload_url), Some(file_id)) = (string_field(&slot, "upload_url"), string_field(&slot, "file_id"))
        else {
            return Err(ChannelError::transient(
                "can't upload a file to Slack: files.getUploadURLExternal answered without upload_url or file_id",
            ));
        };
        api.upload(&upload_url, bytes).await?;
        files.push(json!({"id": file_id, "title": attachment.name}));
    }
    let first_file = files.first().and_then(|file| file.get("id")).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut request = json!({"files": files, "channel_id": channel});
    if let Some(thread) = thread {
        request["thread_ts"] = json!(thread);
    }
    if !comment.is_empty() {
        request["initial_comment"] = json!(comment);
    }
    let answer = api.call_json("files.completeUploadExternal", &request).await?;
    Ok(shared_message_ts(&answer, channel).unwrap_or(first_file))
}

/// The `ts` of the message that shares the first file in `channel`, when the answer
/// already lists it (`files[0].shares.public|private.<channel>[0].ts`).
fn shared_message_ts(answer: &Value, channel: &str) -> Option<String> {
    let shares = answer.get("files")?.get(0)?.get("shares")?;
    ["public", "private"]
        .iter()
        .find_map(|visibility| shares.get(visibility)?.get(channel)?.get(0)?.get("ts")?.as_str().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_notes_people_expect() {
        assert_eq!(human_size(25 * 1024 * 1024), "25 MB");
        assert_eq!(human_size(20 * 1024 * 1024), "20 MB");
        assert_eq!(human_size(1536), "2 KB");
        assert_eq!(human_size(12), "12 bytes");
        assert_eq!(
            too_large_note("photo.jpg", 25 * 1024 * 1024, 20 * 1024 * 1024),
            "[attachment photo.jpg skipped: 25 MB is over the 20 MB limit]"
        );
    }

    #[test]
    fn the_shared_message_ts_is_found_when_listed() {
        let answer = json!({"ok": true, "files": [{"id": "F1", "shares": {"private": {"D1": [{"ts": "5.5"}]}}}]});
        assert_eq!(shared_message_ts(&answer, "D1").as_deref(), Some("5.5"));
        assert_eq!(shared_message_ts(&answer, "C1"), None);
        assert_eq!(shared_message_ts(&json!({"ok": true, "files": [{"id": "F1"}]}), "D1"), None);
    }
}
