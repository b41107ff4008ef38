//! Tool descriptions as advertised to models.

use serde::{Deserialize, Serialize};

/// What a model is told about one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name the model calls it by (`[A-Za-z0-9_-]{1,64}`).
    pub name: String,
    /// One or two sentences written for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

impl ToolSpec {
    /// Characters this spec adds to a request, as serialized JSON.
    pub fn serialized_len(&self) -> usize {
        serde_json::to_string(self).map(|text| text.len()).unwrap_or(0)
    }
}

/// True when `name` is acceptable to every provider we speak to.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}
