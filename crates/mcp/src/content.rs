//! A tool result as text for the model: text blocks as they are, images, audio and binary
//! resources summarized in a line each, everything capped with a note.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use squidbot_core::text::floor_char_boundary;

/// Bytes of result text at most; the rest is cut with a note.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The text of a result and whether the server flagged it as an error.
pub fn render(result: &CallToolResult) -> (String, bool) {
    let mut parts: Vec<String> = result.content.iter().map(render_block).collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(serde_json::to_string_pretty(structured).unwrap_or_else(|_| structured.to_string()));
    }
    let text = if parts.is_empty() { "(no output)".to_owned() } else { parts.join("\n") };
    (cap(text), result.is_error == Some(true))
}

/// One content block as text.
fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!("[image: {}, {} bytes, not shown]", image.mime_type, decoded_len(&image.data))
        }
        ContentBlock::Audio(audio) => {
            format!("[audio: {}, {} bytes, not shown]", audio.mime_type, decoded_len(&audio.data))
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource {uri}]\n{text}"),
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                "[resource {uri}: {}, {} bytes of binary data, not shown]",
                mime_type.as_deref().unwrap_or("unknown type"),
                decoded_len(blob)
            ),
            _ => "[resource of an unknown kind, not shown]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => {
            let mut line = format!("[resource link {}: {}", link.name, link.uri);
            if let Some(mime_type) = &link.mime_type {
                line.push_str(&format!(", {mime_type}"));
            }
            if let Some(description) = &link.description {
                line.push_str(&format!(", {description}"));
            }
            line.push(']');
            line
        }
        _ => "[content of an unknown kind, not shown]".to_owned(),
    }
}

/// Size of base64 data once decoded.
fn decoded_len(base64: &str) -> usize {
    let trimmed = base64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// Cuts `text` to [`MAX_RESULT_BYTES`] with a note saying how much was left out.
pub fn cap(mut text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let total = text.len();
    let cut = floor_char_boundary(&text, MAX_RESULT_BYTES);
    text.truncate(cut);
    text.push_str(&format!(
        "\n[result cut at {MAX_RESULT_BYTES} of {total} bytes; ask the tool for less, e.g. a smaller range]"
    ));
    text
}

#[cfg(test)]
mod tests {
    use rmcp::model::{EmbeddedResource, ImageContent, TextContent};

    use super::*;

    #[test]
    fn non_text_content_is_summarized() {
        let result = CallToolResult::success(vec![
            ContentBlock::Text(TextContent::new("here it is")),
            ContentBlock::Image(ImageContent::new("aGVsbG8=", "image/png")),
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::BlobResourceContents {
                uri: "file:///x.bin".into(),
                mime_type: Some("application/octet-stream".into()),
                blob: "AAAA".into(),
                meta: None,
            })),
        ]);
        let (text, is_error) = render(&result);
        assert!(!is_error);
        assert_eq!(
            text,
            "here it is\n[image: image/png, 5 bytes, not shown]\n\
             [resource file:///x.bin: application/octet-stream, 3 bytes of binary data, not shown]"
        );
    }

    #[test]
    fn huge_results_are_capped_with_a_note() {
        let capped = cap("é".repeat(MAX_RESULT_BYTES));
        assert!(capped.len() < MAX_RESULT_BYTES + 200);
        assert!(capped.ends_with("a smaller range]"), "{}", &capped[capped.len() - 100..]);
        assert_eq!(cap("short".into()), "short");
    }

    #[test]
    fn errors_and_structured_content_come_through() {
        let mut result = CallToolResult::error(vec![ContentBlock::Text(TextContent::new("no such file"))]);
        assert_eq!(render(&result), ("no such file".to_owned(), true));
        result.content.clear();
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        assert!(render(&result).0.contains("\"sum\": 3"));
    }
}
