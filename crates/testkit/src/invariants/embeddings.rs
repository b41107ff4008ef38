//! Invariants of an OpenAI embeddings request.

use serde_json::Value;

use super::{Problems, check_model};
use crate::embeddings::MAX_EMBEDDING_DIMENSIONS;

/// Most inputs OpenAI accepts in one request.
const MAX_INPUTS: usize = 2048;

pub(super) fn check(body: &Value, problems: &mut Problems) {
    let Some(object) = body.as_object() else {
        problems.push("the request body is not a JSON object");
        return;
    };
    check_model(object, problems);
    match object.get("input") {
        Some(Value::String(text)) if text.is_empty() => problems.push("`input` is an empty string"),
        Some(Value::String(_)) => {}
        Some(Value::Array(items)) if items.is_empty() => problems.push("`input` is an empty array"),
        Some(Value::Array(items)) if items.len() > MAX_INPUTS => {
            problems.push(format!("`input` holds {} texts; OpenAI accepts at most {MAX_INPUTS}", items.len()));
        }
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some("") => problems.push(format!("input[{index}] is an empty string")),
                    Some(_) => {}
                    None => problems.push(format!("input[{index}] is not a string")),
                }
            }
        }
        Some(_) => problems.push("`input` is neither a string nor an array of strings"),
        None => problems.push("`input` is missing"),
    }
    if let Some(dimensions) = object.get("dimensions") {
        match dimensions.as_u64() {
            Some(0) | None => problems.push("`dimensions` is not a positive integer"),
            Some(size) if size > MAX_EMBEDDING_DIMENSIONS => {
                problems.push(format!(
                    "`dimensions` is {size}; the scripted server serves at most {MAX_EMBEDDING_DIMENSIONS}"
                ));
            }
            Some(_) => {}
        }
    }
    match object.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => {}
        Some(format) => {
            problems.push(format!("`encoding_format` is {format:?}; the scripted server only answers \"float\""))
        }
    }
}
