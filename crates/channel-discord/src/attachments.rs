//! Downloading inbound attachments from Discord's CDN, each capped; a file that is too
//! big or can't be fetched becomes a note in the message text instead.

use reqwest::header::CONTENT_TYPE;
use squidbot_channels::{Attachment, AttachmentData, InboundMessage};

use crate::inbound::AttachmentInfo;

/// Downloads `infos` into `message`, adding a note to its text for each file skipped.
pub(crate) async fn download_into(
    client: &reqwest::Client,
    message: &mut InboundMessage,
    infos: Vec<AttachmentInfo>,
    max_bytes: u64,
) {
    let mut notes = Vec::new();
    for info in infos {
        match download(client, &info, max_bytes).await {
            Ok(attachment) => message.attachments.push(attachment),
            Err(reason) => {
                tracing::warn!(file = %info.filename, %reason, "skipping a Discord attachment");
                notes.push(format!("[attachment {} skipped: {reason}]", info.filename));
            }
        }
    }
    if !notes.is_empty() {
        let notes = notes.join("\n");
        message.text = if message.text.is_empty() { notes } else { format!("{}\n{notes}", message.text) };
    }
}

/// Fetches one file, refusing it when its announced or real size passes `max_bytes`.
async fn download(client: &reqwest::Client, info: &AttachmentInfo, max_bytes: u64) -> Result<Attachment, String> {
    let over = |size: u64| format!("{} is over the {} limit", human_size(size), human_size(max_bytes));
    if info.size > max_bytes {
        return Err(over(info.size));
    }
    let mut response = client.get(&info.url).send().await.map_err(|error| format!("can't download it: {error}"))?;
    if !response.status().is_success() {
        return Err(format!("can't download it: the CDN answered {}", response.status()));
    }
    if let Some(length) = response.content_length()
        && length > max_bytes
    {
        return Err(over(length));
    }
    let header_type = response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|error| format!("can't download it: {error}"))? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max_bytes {
            return Err(over(bytes.len() as u64));
        }
    }
    let mime = info.content_type.clone().or(header_type).unwrap_or_else(|| "application/octet-stream".to_owned());
    Ok(Attachment { name: info.filename.clone(), mime, data: AttachmentData::Bytes(bytes) })
}

/// A size as people read it: `512 bytes`, `3.5 KB`, `25 MB` (binary units).
pub(crate) fn human_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    let value = bytes as f64;
    let (amount, unit) = if value >= MIB {
        (value / MIB, "MB")
    } else if value >= KIB {
        (value / KIB, "KB")
    } else {
        return format!("{bytes} bytes");
    };
    let rounded = (amount * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 { format!("{rounded:.0} {unit}") } else { format!("{rounded:.1} {unit}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_note_in_the_brief() {
        assert_eq!(human_size(25 * 1024 * 1024), "25 MB");
        assert_eq!(human_size(20 * 1024 * 1024), "20 MB");
        assert_eq!(human_size(1536), "1.5 KB");
        assert_eq!(human_size(900), "900 bytes");
    }
}
