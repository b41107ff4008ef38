//! The JSON body of a chat-completions request, serialized straight from the request's
//! own data: the system prompt and the tools' schemas go into every request, and
//! copying them into a `serde_json::Value` tree first cost more than writing them.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use squidbot_core::provider::CompletionRequest;
use squidbot_types::{ChatMessage, ToolCall, ToolSpec};

use crate::images::{Images, Shown};

/// The body of one request.
#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// One message of the conversation.
enum Message<'a> {
    System(&'a str),
    User(&'a str),
    /// A user message with the images that could be shown.
    UserWithImages {
        text: String,
        images: Vec<(&'static str, &'a str)>,
    },
    Assistant {
        content: &'a str,
        tool_calls: &'a [ToolCall],
    },
    Tool {
        call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> RequestBody<'a> {
    pub(super) fn new(request: &'a CompletionRequest, images: &'a Images) -> Self {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(Message::System(&request.system));
        }
        messages.extend(request.messages.iter().map(|message| Message::of(message, images)));
        Self {
            model: &request.model,
            messages,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            tools: request.tools.iter().map(Tool::of).collect(),
            stream: request.stream,
            stream_options: request.stream.then_some(StreamOptions { include_usage: true }),
        }
    }
}

impl<'a> Tool<'a> {
    fn of(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: Function { name: &spec.name, description: &spec.description, parameters: &spec.parameters },
        }
    }
}

impl<'a> Message<'a> {
    fn of(message: &'a ChatMessage, images: &'a Images) -> Self {
        match message {
            ChatMessage::User { content, images: attached } if !attached.is_empty() => {
                let (text, images) = images.parts(content, attached);
                Message::UserWithImages { text, images }
            }
            ChatMessage::User { content, .. } => Message::User(content),
            ChatMessage::Assistant { content, tool_calls } => Message::Assistant { content, tool_calls },
            ChatMessage::Tool { call_id, content, .. } => Message::Tool { call_id, content },
        }
    }
}

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Message::System(content) => {
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", content)?;
            }
            Message::User(content) => {
                map.serialize_entry("role", "user")?;
                map.serialize_entry("content", content)?;
            }
            Message::UserWithImages { text, images } => {
                map.serialize_entry("role", "user")?;
                if images.is_empty() {
                    // None of them could be shown: the notes about them are in the text.
                    map.serialize_entry("content", text)?;
                } else {
                    map.serialize_entry("content", &ContentParts { text, images })?;
                }
            }
            Message::Assistant { content, tool_calls } => {
                map.serialize_entry("role", "assistant")?;
                if tool_calls.is_empty() {
                    map.serialize_entry("content", content)?;
                } else {
                    map.serialize_entry("content", &(!content.is_empty()).then_some(content))?;
                    let calls: Vec<Call<'_>> = tool_calls.iter().map(Call::of).collect();
                    map.serialize_entry("tool_calls", &calls)?;
                }
            }
            Message::Tool { call_id, content } => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", call_id)?;
                map.serialize_entry("content", content)?;
            }
        }
        map.end()
    }
}

/// A user message's text (when there is any) and its images, as content parts.
struct ContentParts<'a> {
    text: &'a str,
    images: &'a [(&'static str, &'a str)],
}

impl Serialize for ContentParts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut parts = serializer.serialize_seq(None)?;
        if !self.text.trim().is_empty() {
            parts.serialize_element(&serde_json::json!({"type": "text", "text": self.text}))?;
        }
        for (media_type, data) in self.images {
            let url = Shown::data_url(media_type, data);
            parts.serialize_element(&serde_json::json!({"type": "image_url", "image_url": {"url": url}}))?;
        }
        parts.end()
    }
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl<'a> Call<'a> {
    fn of(call: &'a ToolCall) -> Self {
        // Servers that parse arguments choke on an empty string; `{}` means the same.
        let arguments = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
        Self { id: &call.id, kind: "function", function: CallFunction { name: &call.name, arguments } }
    }
}
