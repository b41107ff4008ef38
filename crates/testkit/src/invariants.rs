//! The request invariants the scripted LLM checks on every request, one wire per submodule.

mod anthropic;
mod embeddings;
mod openai;

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::script::Wire;

/// Which optional invariants apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Whether a non-empty system prompt is required.
    pub require_system_prompt: bool,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions { require_system_prompt: true }
    }
}

/// Every invariant the request `body` breaks on `wire`, each as a readable sentence;
/// empty when the request is one the real provider would accept.
pub fn check_request(wire: Wire, body: &Value, options: &CheckOptions) -> Vec<String> {
    let mut problems = Problems::default();
    match wire {
        Wire::OpenAi => openai::check(body, options, &mut problems),
        Wire::Anthropic => anthropic::check(body, options, &mut problems),
        Wire::Embeddings => embeddings::check(body, &mut problems),
    }
    problems.list
}

/// Collects violation sentences.
#[derive(Debug, Default)]
struct Problems {
    list: Vec<String>,
}

impl Problems {
    fn push(&mut self, problem: impl Into<String>) {
        self.list.push(problem.into());
    }
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the tool-name rule of both providers.
fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().all(|character| character.is_ascii_alphanumeric() || character == '_' || character == '-')
}

/// Media types both providers take as images.
const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Checks base64 image data of `media_type`: a type the providers take, data that decodes
/// and whose first bytes are of that type.
fn check_image_data(place: &str, media_type: Option<&str>, data: Option<&str>, problems: &mut Problems) {
    use base64::Engine as _;
    let Some(media_type) = media_type.filter(|media_type| IMAGE_MEDIA_TYPES.contains(media_type)) else {
        problems.push(format!("{place} has media type {media_type:?}; expected one of {IMAGE_MEDIA_TYPES:?}"));
        return;
    };
    let Some(data) = data.filter(|data| !data.is_empty()) else {
        problems.push(format!("{place} has no image data"));
        return;
    };
    match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(bytes) => {
            let matches = match media_type {
                "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
                "image/jpeg" => bytes.starts_with(&[0xFF, 0xD8, 0xFF]),
                "image/gif" => bytes.starts_with(b"GIF8"),
                _ => bytes.len() >= 12 && &bytes[8..12] == b"WEBP",
            };
            if !matches {
                problems.push(format!("{place} data is not a {media_type} image"));
            }
        }
        Err(error) => problems.push(format!("{place} data is not valid base64: {error}")),
    }
}

/// Checks `model` is a non-empty string.
fn check_model(object: &Map<String, Value>, problems: &mut Problems) {
    match object.get("model").and_then(Value::as_str) {
        Some(model) if !model.trim().is_empty() => {}
        Some(_) => problems.push("`model` is empty"),
        None => problems.push("`model` is missing or not a string"),
    }
}

/// One tool definition as either wire spells it, ready to be checked.
struct ToolDefinition<'a> {
    /// Where the tool sits, for sentences: e.g. `tools[2]`.
    place: String,
    name: Option<&'a Value>,
    description: Option<&'a Value>,
    /// The wire's name for the schema field: `parameters` or `input_schema`.
    schema_field: &'static str,
    schema: Option<&'a Value>,
}

impl ToolDefinition<'_> {
    /// Checks the name (valid and not in `seen_names`), description and schema.
    fn check(&self, seen_names: &mut HashSet<String>, problems: &mut Problems) {
        let place = &self.place;
        match self.name.and_then(Value::as_str) {
            Some(name) if !is_valid_tool_name(name) => {
                problems.push(format!("{place} has name {name:?}, which does not match ^[a-zA-Z0-9_-]{{1,64}}$"));
            }
            Some(name) => {
                if !seen_names.insert(name.to_owned()) {
                    problems.push(format!("{place} repeats the tool name {name:?}; tool names must be unique"));
                }
            }
            None => problems.push(format!("{place} has no string name")),
        }
        match self.description.and_then(Value::as_str) {
            Some(description) if !description.trim().is_empty() => {}
            Some(_) => problems.push(format!("{place} has an empty description")),
            None => problems.push(format!("{place} has no string description")),
        }
        let field = self.schema_field;
        match self.schema {
            Some(Value::Object(schema)) => {
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    problems.push(format!("{place} has a `{field}` whose \"type\" is not \"object\""));
                }
            }
            Some(_) => problems.push(format!("{place} has a `{field}` that is not a JSON object")),
            None => problems.push(format!("{place} has no `{field}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_provider_pattern() {
        assert!(is_valid_tool_name("read_file"));
        assert!(is_valid_tool_name("mcp-server_tool9"));
        assert!(is_valid_tool_name(&"a".repeat(64)));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        assert!(!is_valid_tool_name("read file"));
        assert!(!is_valid_tool_name("server.tool"));
        assert!(!is_valid_tool_name("outil_é"));
    }
}
