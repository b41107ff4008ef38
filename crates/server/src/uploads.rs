//! Files clients send with a turn (`chat.send` attachments, image parts of
//! `/v1/chat/completions`): decoded, capped, kept in the session's files directory the
//! way channel attachments are, and turned into the turn's input note and image parts.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use squidbot_core::attachments::{Attachment, AttachmentData, AttachmentStore};
use squidbot_types::message::ImageRef;

/// Most bytes (decoded) the uploads of one turn may hold together: the WebSocket frame
/// (1 MiB) has to carry them as base64.
pub(crate) const MAX_UPLOAD_BYTES: usize = 640 * 1024;

/// Most files one turn may carry.
pub(crate) const MAX_UPLOADS: usize = 8;

/// Media types sent to the model as image parts; any other file is only mentioned.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One uploaded file, decoded.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    /// The name the client gave (untrusted; the store makes it safe).
    pub(crate) name: String,
    /// Its media type as the client gave it.
    pub(crate) mime: String,
    /// Its content.
    pub(crate) bytes: Vec<u8>,
}

/// Why uploads were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UploadError {
    /// The content is not base64.
    #[error("can't read attachment {name:?}: its content is not base64")]
    NotBase64 {
        /// The attachment's name.
        name: String,
    },
    /// Together they are too large.
    #[error("can't take the attachments: together they exceed {limit} bytes")]
    TooLarge {
        /// [`MAX_UPLOAD_BYTES`].
        limit: usize,
    },
    /// Too many files.
    #[error("can't take more than {limit} attachments with one message")]
    TooMany {
        /// [`MAX_UPLOADS`].
        limit: usize,
    },
    /// An image given by a remote URL: the gateway never fetches URLs for a client.
    #[error("can't use image URL {url:?}: only data: URLs (base64) are accepted, remote images are not fetched")]
    RemoteUrl {
        /// The URL, cut short.
        url: String,
    },
    /// An image URL that is neither remote nor a base64 data URL.
    #[error("can't read an image URL: {reason}")]
    BadDataUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// This gateway keeps no uploaded files.
    #[error("can't keep uploaded files: this gateway has no files directory")]
    NotKept,
    /// Saving failed on the server's side.
    #[error("can't save attachment {name:?}: {reason}")]
    Save {
        /// The attachment's name.
        name: String,
        /// Why.
        reason: String,
    },
}

impl UploadError {
    /// True when the client's request is at fault (a 400 / `INVALID_REQUEST`).
    pub(crate) fn is_client_error(&self) -> bool {
        match self {
            Self::NotBase64 { .. }
            | Self::TooLarge { .. }
            | Self::TooMany { .. }
            | Self::RemoteUrl { .. }
            | Self::BadDataUrl { .. } => true,
            Self::NotKept | Self::Save { .. } => false,
        }
    }
}

impl Upload {
    /// A file sent as base64 `content`; refused as too large before decoding when it
    /// can't fit.
    pub(crate) fn from_base64(name: &str, mime: &str, content: &str) -> Result<Self, UploadError> {
        let content = content.trim();
        if content.len() / 4 * 3 > MAX_UPLOAD_BYTES + 3 {
            return Err(UploadError::TooLarge { limit: MAX_UPLOAD_BYTES });
        }
        let bytes = STANDARD.decode(content).map_err(|_| UploadError::NotBase64 { name: name.to_owned() })?;
        if bytes.len() > MAX_UPLOAD_BYTES {
            return Err(UploadError::TooLarge { limit: MAX_UPLOAD_BYTES });
        }
        let name = if name.trim().is_empty() { "attachment".to_owned() } else { name.to_owned() };
        let mime = if mime.trim().is_empty() { "application/octet-stream".to_owned() } else { mime.to_owned() };
        Ok(Self { name, mime, bytes })
    }

    /// An image part's `url`: `data:<mime>;base64,<content>` only.
    pub(crate) fn from_image_url(url: &str, position: usize) -> Result<Self, UploadError> {
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            return Err(UploadError::RemoteUrl { url: url.chars().take(80).collect() });
        }
        let Some(rest) = url.strip_prefix("data:") else {
            return Err(UploadError::BadDataUrl { reason: "it must be a data: URL".into() });
        };
        let Some((header, content)) = rest.split_once(',') else {
            return Err(UploadError::BadDataUrl { reason: "the data: URL has no comma".into() });
        };
        let Some(mime) = header.strip_suffix(";base64") else {
            return Err(UploadError::BadDataUrl { reason: "the data: URL must be base64".into() });
        };
        if !IMAGE_TYPES.contains(&mime) {
            return Err(UploadError::BadDataUrl { reason: format!("{mime:?} is not an image type taken here") });
        }
        let extension = mime.trim_start_matches("image/");
        Self::from_base64(&format!("image-{}.{extension}", position + 1), mime, content)
    }
}

/// Refuses `uploads` that are too many or too large together.
pub(crate) fn check(uploads: &[Upload]) -> Result<(), UploadError> {
    if uploads.len() > MAX_UPLOADS {
        return Err(UploadError::TooMany { limit: MAX_UPLOADS });
    }
    if uploads.iter().map(|upload| upload.bytes.len()).sum::<usize>() > MAX_UPLOAD_BYTES {
        return Err(UploadError::TooLarge { limit: MAX_UPLOAD_BYTES });
    }
    Ok(())
}

/// Saves `uploads` in `session_key`'s files directory and appends a note per file to
/// `input` (as the channels do); images go to the model as image parts.
pub(crate) fn save(
    store: Option<&dyn AttachmentStore>,
    session_key: &str,
    uploads: Vec<Upload>,
    mut input: String,
) -> Result<(String, Vec<ImageRef>), UploadError> {
    check(&uploads)?;
    if uploads.is_empty() {
        return Ok((input, Vec::new()));
    }
    let Some(store) = store else { return Err(UploadError::NotKept) };
    let mut images = Vec::new();
    for upload in uploads {
        let size = upload.bytes.len();
        let attachment = Attachment { name: upload.name, mime: upload.mime, data: AttachmentData::Bytes(upload.bytes) };
        let path = store
            .save(session_key, &attachment)
            .map_err(|error| UploadError::Save { name: attachment.name.clone(), reason: error.to_string() })?;
        if !input.is_empty() {
            input.push('\n');
        }
        input.push_str(&format!(
            "[attachment {} ({}, {size} bytes) saved at {}]",
            attachment.name,
            attachment.mime,
            path.display()
        ));
        if IMAGE_TYPES.contains(&attachment.mime.as_str()) {
            images.push(ImageRef::new(path.to_string_lossy()));
        }
    }
    Ok((input, images))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_image_urls_are_refused_without_fetching() {
        let error = Upload::from_image_url("https://example.invalid/cat.png", 0).unwrap_err();
        assert!(matches!(error, UploadError::RemoteUrl { .. }), "{error}");
        assert!(error.is_client_error());
    }

    #[test]
    fn data_urls_decode_to_named_images() {
        let upload = Upload::from_image_url("data:image/png;base64,iVBORw0KGgo=", 1).unwrap();
        assert_eq!(upload.name, "image-2.png");
        assert_eq!(upload.mime, "image/png");
        assert_eq!(upload.bytes, b"\x89PNG\r\n\x1a\n");
        let error = Upload::from_image_url("data:text/html;base64,PGI+", 0).unwrap_err();
        assert!(matches!(error, UploadError::BadDataUrl { .. }), "{error}");
    }

    #[test]
    fn uploads_past_the_cap_are_refused() {
        let big = STANDARD.encode(vec![0u8; MAX_UPLOAD_BYTES + 1]);
        assert_eq!(
            Upload::from_base64("big.bin", "", &big).unwrap_err(),
            UploadError::TooLarge { limit: MAX_UPLOAD_BYTES }
        );
        let half = Upload { name: "a".into(), mime: "image/png".into(), bytes: vec![0; MAX_UPLOAD_BYTES / 2 + 1] };
        assert!(check(&[half.clone(), half]).is_err());
    }

    #[test]
    fn saving_without_a_store_is_refused_and_without_uploads_is_a_no_op() {
        let (input, images) = save(None, "agent:main:main", Vec::new(), "hi".into()).unwrap();
        assert_eq!((input.as_str(), images.len()), ("hi", 0));
        let upload = Upload { name: "a.txt".into(), mime: "text/plain".into(), bytes: b"x".to_vec() };
        assert_eq!(save(None, "agent:main:main", vec![upload], String::new()).unwrap_err(), UploadError::NotKept);
    }
}
