//! Images of a request, read from disk and encoded just before the request body is built.
//!
//! Messages carry images as paths ([`ImageRef`]); only an adapter whose endpoint is
//! vision-capable reads them. The newest [`MAX_IMAGES`] images of a request are sent;
//! older ones, missing or oversized files and formats the providers don't take become
//! a short note in the message's text instead, so a turn never fails over an image.

use std::collections::HashMap;

use base64::Engine as _;
use squidbot_types::{ChatMessage, ImageRef};

/// Largest image file sent (Anthropic's limit per image; OpenAI takes more).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// Images sent with one request at most, newest first.
pub const MAX_IMAGES: usize = 8;

/// What becomes of one image in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Sent as an image: its media type and base64 data.
    Image {
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
        media_type: &'static str,
        /// The file's bytes in standard base64.
        data: String,
    },
    /// Not sent; the note says why.
    Note(String),
}

impl Shown {
    /// The `data:` URL of an image (OpenAI's `image_url`).
    pub(crate) fn data_url(media_type: &str, data: &str) -> String {
        format!("data:{media_type};base64,{data}")
    }
}

/// The images of one request by path; empty when the endpoint can't see images.
#[derive(Debug, Default)]
pub(crate) struct Images {
    shown: HashMap<String, Shown>,
}

impl Images {
    /// Reads the images of `messages` when `vision` is on; otherwise images are left out
    /// (the message text names the saved files, so tools can still reach them).
    pub(crate) async fn load(messages: &[ChatMessage], vision: bool) -> Images {
        let mut images = Images::default();
        if !vision {
            return images;
        }
        let mut newest_first: Vec<&ImageRef> = Vec::new();
        for message in messages.iter().rev() {
            if let ChatMessage::User { images, .. } = message {
                newest_first.extend(images.iter().rev());
            }
        }
        let mut sent = 0;
        for image in newest_first {
            if images.shown.contains_key(&image.path) {
                continue;
            }
            let shown = if sent < MAX_IMAGES {
                read(image).await
            } else {
                Shown::Note(format!("[image {} was shown earlier]", image.path))
            };
            if matches!(shown, Shown::Image { .. }) {
                sent += 1;
            }
            images.shown.insert(image.path.clone(), shown);
        }
        images
    }

    /// What to send for `image`; `None` when images are left out of this request.
    pub(crate) fn get(&self, image: &ImageRef) -> Option<&Shown> {
        self.shown.get(&image.path)
    }

    /// The parts of a user message: its text with the notes of images not sent appended,
    /// and the images sent, as (media type, base64 data).
    pub(crate) fn parts<'a>(&'a self, content: &str, images: &'a [ImageRef]) -> (String, Vec<(&'static str, &'a str)>) {
        let mut text = content.to_owned();
        let mut sent = Vec::new();
        for image in images {
            match self.get(image) {
                Some(Shown::Image { media_type, data }) => sent.push((*media_type, data.as_str())),
                Some(Shown::Note(note)) => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(note);
                }
                None => {}
            }
        }
        (text, sent)
    }
}

/// Reads and encodes one image, or says why it isn't sent.
async fn read(image: &ImageRef) -> Shown {
    let path = image.path.clone();
    let read = tokio::task::spawn_blocking(move || read_file(&path)).await;
    match read {
        Ok(shown) => shown,
        Err(error) => Shown::Note(format!("[image {} could not be read: {error}]", image.path)),
    }
}

fn read_file(path: &str) -> Shown {
    let size = match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => metadata.len(),
        Ok(_) => return Shown::Note(format!("[image {path} is not a file]")),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Shown::Note(format!("[image {path} is no longer there]"));
        }
        Err(error) => return Shown::Note(format!("[image {path} could not be read: {error}]")),
    };
    if size > MAX_IMAGE_BYTES {
        tracing::info!(path, size, "image not sent: over the size limit");
        return Shown::Note(format!("[image {path} not shown: {size} bytes, over the {MAX_IMAGE_BYTES}-byte limit]"));
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => return Shown::Note(format!("[image {path} could not be read: {error}]")),
    };
    match sniff(&bytes) {
        Some(media_type) => Shown::Image { media_type, data: base64::engine::general_purpose::STANDARD.encode(&bytes) },
        None => Shown::Note(format!("[image {path} not shown: not a PNG, JPEG, GIF or WebP file]")),
    }
}

/// The media type of an image the providers take, from its first bytes.
pub(crate) fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest valid PNG header plus a little data.
    fn png() -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend_from_slice(&[0, 0, 0, 13, b'I', b'H', b'D', b'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]);
        bytes
    }

    #[test]
    fn formats_are_told_apart_by_their_first_bytes() {
        assert_eq!(sniff(&png()), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 16]), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a\x01\x00"), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\x10\x00\x00\x00WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"RIFF\x10\x00\x00\x00WAVEfmt "), None);
        assert_eq!(sniff(b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>"), None);
        assert_eq!(sniff(&[]), None);
    }

    #[tokio::test]
    async fn newest_images_are_sent_and_the_rest_become_notes() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            ImageRef::new(path.to_str().unwrap())
        };
        let old: Vec<ImageRef> = (0..3).map(|index| write(&format!("old{index}.png"), &png())).collect();
        let recent: Vec<ImageRef> = (0..MAX_IMAGES).map(|index| write(&format!("new{index}.png"), &png())).collect();
        let text = write("notes.txt", b"plain text");
        let big = dir.path().join("big.png");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(MAX_IMAGE_BYTES + 1).unwrap();
        let big = ImageRef::new(big.to_str().unwrap());
        let gone = ImageRef::new(dir.path().join("gone.png").to_str().unwrap());
        let messages = vec![
            ChatMessage::user_with_images("old ones", old.clone()),
            ChatMessage::assistant("seen"),
            ChatMessage::user_with_images("new ones", recent.clone()),
            ChatMessage::assistant("seen"),
            ChatMessage::user_with_images("bad ones", vec![text.clone(), big.clone(), gone.clone()]),
        ];

        let images = Images::load(&messages, true).await;
        for image in &recent {
            let Some(Shown::Image { media_type, data }) = images.get(image) else { panic!("{image:?}") };
            assert_eq!(*media_type, "image/png");
            assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), png());
        }
        for image in &old {
            assert_eq!(images.get(image), Some(&Shown::Note(format!("[image {} was shown earlier]", image.path))));
        }
        let bad = [text, big, gone];
        let (text_part, sent) = images.parts("bad ones", &bad);
        assert!(sent.is_empty());
        assert!(text_part.starts_with("bad ones\n"), "{text_part}");
        assert!(text_part.contains("not a PNG, JPEG, GIF or WebP"), "{text_part}");
        assert!(text_part.contains("over the 5242880-byte limit"), "{text_part}");
        assert!(text_part.contains("gone.png is no longer there"), "{text_part}");

        let blind = Images::load(&messages, false).await;
        assert_eq!(blind.parts("new ones", &recent), ("new ones".to_owned(), Vec::new()));
    }
}
