//! Images on user messages: read from disk and sent as image parts to a vision-capable
//! endpoint (OpenAI `image_url` data URLs, Anthropic base64 `image` blocks), left out for
//! one without vision, and replaced by a note when the file is gone. The scripted server
//! checks every request against the provider's rules, image parts included.

use base64::Engine as _;
use squidbot_core::provider::{LlmProvider, ProviderError};
use squidbot_llm::{AnthropicProvider, OpenAiProvider};
use squidbot_testkit::Reply;
use squidbot_types::{ChatMessage, ImageRef};

use crate::{Recorder, endpoint, request, server};

/// A one-pixel PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

fn photo_request(path: &str, model: &str) -> squidbot_core::provider::CompletionRequest {
    let mut request = request(model, true);
    request.messages = vec![
        ChatMessage::user("first"),
        ChatMessage::assistant("ok"),
        ChatMessage::user_with_images("What is in this photo?", vec![ImageRef::new(path)]),
    ];
    request
}

fn encoded() -> String {
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

#[tokio::test]
async fn openai_sends_a_data_url_only_when_the_endpoint_has_vision() -> Result<(), ProviderError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("photo.png");
    std::fs::write(&path, PNG).unwrap();
    let server = server().await;
    let seeing = OpenAiProvider::new(endpoint(&server).with_vision(true))?;
    let blind = OpenAiProvider::new(endpoint(&server))?;
    let request = photo_request(path.to_str().unwrap(), "gpt-test");
    for provider in [&seeing, &blind] {
        server.push(Reply::text("A single pixel."));
        let completion = provider.complete(&request, &Recorder::default()).await?;
        assert_eq!(completion.content, "A single pixel.");
    }
    let requests = server.requests();
    let content = &requests[0].body["messages"][3]["content"];
    assert_eq!(content[0], serde_json::json!({"type": "text", "text": "What is in this photo?"}));
    assert_eq!(content[1]["type"], "image_url");
    assert_eq!(content[1]["image_url"]["url"], format!("data:image/png;base64,{}", encoded()));
    assert_eq!(content.as_array().unwrap().len(), 2);
    assert_eq!(requests[0].body["messages"][1]["content"], "first", "messages without images stay strings");
    assert_eq!(requests[1].body["messages"][3]["content"], "What is in this photo?", "no vision: text only");

    // The file removed since: the request still goes, with a note instead of the image.
    std::fs::remove_file(&path).unwrap();
    server.push(Reply::text("I can't see it any more."));
    seeing.complete(&request, &Recorder::default()).await?;
    let note = server.requests()[2].body["messages"][3]["content"].as_str().unwrap().to_owned();
    assert!(note.starts_with("What is in this photo?\n[image ") && note.ends_with("is no longer there]"), "{note}");
    server.assert_clean();
    Ok(())
}

#[tokio::test]
async fn anthropic_sends_a_base64_image_block_before_the_text() -> Result<(), ProviderError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("photo.bin");
    std::fs::write(&path, PNG).unwrap();
    let server = server().await;
    let seeing = AnthropicProvider::new(endpoint(&server).with_vision(true))?;
    let blind = AnthropicProvider::new(endpoint(&server))?;
    let request = photo_request(path.to_str().unwrap(), "claude-test");
    for provider in [&seeing, &blind] {
        server.push(Reply::text("A single pixel."));
        provider.complete(&request, &Recorder::default()).await?;
    }
    let requests = server.requests();
    let blocks = requests[0].body["messages"][2]["content"].as_array().unwrap().clone();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(
        blocks[0],
        serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded()}}),
        "the media type comes from the bytes, not the file name"
    );
    assert_eq!(blocks[1], serde_json::json!({"type": "text", "text": "What is in this photo?"}));
    let blind_blocks = requests[1].body["messages"][2]["content"].as_array().unwrap().clone();
    assert_eq!(blind_blocks, vec![serde_json::json!({"type": "text", "text": "What is in this photo?"})]);
    server.assert_clean();
    Ok(())
}
