//! Invariants of an Anthropic messages request.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{CheckOptions, Problems, ToolDefinition, check_image_data, check_model};

/// Block types a request may carry besides text, tool_use and tool_result.
const OTHER_BLOCK_TYPES: [&str; 3] = ["document", "thinking", "redacted_thinking"];

pub(super) fn check(body: &Value, options: &CheckOptions, problems: &mut Problems) {
    let Some(object) = body.as_object() else {
        problems.push("the request body is not a JSON object");
        return;
    };
    check_model(object, problems);
    if object.get("max_tokens").and_then(Value::as_u64).is_none_or(|tokens| tokens == 0) {
        problems.push("`max_tokens` is missing or not a positive integer");
    }
    check_system(object.get("system"), options, problems);
    match object.get("messages").and_then(Value::as_array) {
        Some(messages) if messages.is_empty() => problems.push("`messages` is empty"),
        Some(messages) => check_messages(messages, problems),
        None => problems.push("`messages` is missing or not an array"),
    }
    if let Some(tools) = object.get("tools") {
        check_tools(tools, problems);
    }
}

fn check_system(system: Option<&Value>, options: &CheckOptions, problems: &mut Problems) {
    let has_text = match system {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(Value::Array(blocks)) => {
            for (index, block) in blocks.iter().enumerate() {
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    problems.push(format!("system[{index}] is not a text block"));
                } else if block.get("text").and_then(Value::as_str).is_none_or(|text| text.trim().is_empty()) {
                    problems.push(format!("system[{index}] is an empty text block (Anthropic rejects them)"));
                }
            }
            !blocks.is_empty()
        }
        Some(_) => {
            problems.push("`system` is neither a string nor an array of text blocks");
            true
        }
    };
    if options.require_system_prompt && !has_text {
        problems.push("there is no non-empty `system` prompt");
    }
}

fn check_messages(messages: &[Value], problems: &mut Problems) {
    // Tool uses of the previous assistant message, still waiting for the next user message.
    let mut awaiting: Option<(usize, Vec<String>)> = None;
    let mut issued = HashSet::new();
    let mut previous_role = None;
    for (index, message) in messages.iter().enumerate() {
        let Some(message) = message.as_object() else {
            problems.push(format!("messages[{index}] is not a JSON object"));
            continue;
        };
        let role = message.get("role").and_then(Value::as_str);
        match role {
            Some(role @ ("user" | "assistant")) => {
                if index == 0 && role != "user" {
                    problems.push(format!("messages[0] has role {role:?}; the first message must be user"));
                } else if previous_role == Some(role) {
                    problems.push(format!(
                        "messages[{index}] has role {role:?} right after another {role:?} message; roles must alternate"
                    ));
                }
            }
            Some(role) => problems.push(format!(
                "messages[{index}] has role {role:?}; expected user or assistant (the system prompt goes in `system`)"
            )),
            None => problems.push(format!("messages[{index}] has no string role")),
        }
        previous_role = role;
        let is_final = index + 1 == messages.len();
        let blocks = content_blocks(index, message, is_final, problems);
        let answered = if role == Some("user") {
            check_tool_results(index, &blocks, awaiting.as_ref(), problems)
        } else {
            HashSet::new()
        };
        if let Some((asked_at, ids)) = awaiting.take() {
            for id in ids.iter().filter(|id| !answered.contains(*id)) {
                problems
                    .push(format!("tool_use {id:?} of messages[{asked_at}] has no tool_result in messages[{index}]"));
            }
        }
        if role == Some("assistant") {
            let ids = tool_use_ids(index, &blocks, &mut issued, problems);
            if !ids.is_empty() {
                awaiting = Some((index, ids));
            }
        }
        for (position, block) in blocks.iter().enumerate() {
            check_block(&format!("messages[{index}].content[{position}]"), role, block, problems);
        }
    }
    if let Some((asked_at, ids)) = awaiting {
        for id in ids {
            problems.push(format!("tool_use {id:?} of messages[{asked_at}] is never answered: the request ends first"));
        }
    }
}

/// The message's content as blocks (a string becomes one text block), flagging empty content.
fn content_blocks<'a>(
    index: usize,
    message: &'a Map<String, Value>,
    is_final: bool,
    problems: &mut Problems,
) -> Vec<&'a Value> {
    let is_assistant = message.get("role").and_then(Value::as_str) == Some("assistant");
    let may_be_empty = is_final && is_assistant;
    match message.get("content") {
        Some(Value::String(text)) => {
            if text.trim().is_empty() && !may_be_empty {
                problems.push(format!("messages[{index}] has empty content (only a final assistant message may)"));
            }
            if may_be_empty && text.ends_with(char::is_whitespace) && !text.is_empty() {
                problems.push(format!("messages[{index}] is a final assistant message ending in whitespace"));
            }
            Vec::new()
        }
        Some(Value::Array(blocks)) => {
            if blocks.is_empty() && !may_be_empty {
                problems.push(format!("messages[{index}] has empty content (only a final assistant message may)"));
            }
            blocks.iter().collect()
        }
        Some(_) | None => {
            problems.push(format!("messages[{index}] content is neither a string nor an array of blocks"));
            Vec::new()
        }
    }
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

fn check_block(place: &str, role: Option<&str>, block: &Value, problems: &mut Problems) {
    match block_type(block) {
        Some("text") => {
            if block.get("text").and_then(Value::as_str).is_none_or(|text| text.trim().is_empty()) {
                problems.push(format!("{place} is an empty text block (Anthropic rejects them)"));
            }
        }
        Some("tool_use") => {
            if role != Some("assistant") {
                problems.push(format!("{place} is a tool_use block outside an assistant message"));
            }
            if !block.get("name").is_some_and(Value::is_string) {
                problems.push(format!("{place} (tool_use) has no string name"));
            }
            if !block.get("input").is_some_and(Value::is_object) {
                problems.push(format!("{place} (tool_use) has an input that is not a JSON object"));
            }
        }
        Some("tool_result") => {
            if role != Some("user") {
                problems.push(format!("{place} is a tool_result block outside a user message"));
            }
            match block.get("content") {
                None | Some(Value::String(_)) => {}
                Some(Value::Array(inner)) => {
                    for (position, inner_block) in inner.iter().enumerate() {
                        check_block(&format!("{place}.content[{position}]"), role, inner_block, problems);
                    }
                }
                Some(_) => problems.push(format!("{place} (tool_result) content is neither a string nor blocks")),
            }
            if block.get("is_error").is_some_and(|is_error| !is_error.is_boolean()) {
                problems.push(format!("{place} (tool_result) has a non-boolean is_error"));
            }
        }
        Some("image") => {
            if role != Some("user") {
                problems.push(format!("{place} is an image block outside a user message"));
            }
            let source = block.get("source");
            match source.and_then(|source| source.get("type")).and_then(Value::as_str) {
                Some("base64") => {
                    let field = |name: &str| source.and_then(|source| source.get(name)).and_then(Value::as_str);
                    check_image_data(place, field("media_type"), field("data"), problems);
                }
                Some("url") => {
                    if !source.and_then(|source| source.get("url")).is_some_and(Value::is_string) {
                        problems.push(format!("{place} (image) has a url source without a url"));
                    }
                }
                other => problems.push(format!("{place} (image) has source type {other:?}; expected base64 or url")),
            }
        }
        Some(other) if OTHER_BLOCK_TYPES.contains(&other) => {}
        Some(other) => problems.push(format!("{place} has unknown block type {other:?}")),
        None => problems.push(format!("{place} has no string type")),
    }
}

fn tool_use_ids(index: usize, blocks: &[&Value], issued: &mut HashSet<String>, problems: &mut Problems) -> Vec<String> {
    let mut ids = Vec::new();
    for (position, block) in blocks.iter().enumerate() {
        if block_type(block) != Some("tool_use") {
            continue;
        }
        match block.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => {
                if issued.insert(id.to_owned()) {
                    ids.push(id.to_owned());
                } else {
                    problems.push(format!("messages[{index}].content[{position}] reuses the tool_use id {id:?}"));
                }
            }
            Some(_) | None => problems.push(format!("messages[{index}].content[{position}] (tool_use) has no id")),
        }
    }
    ids
}

/// Checks the tool_result blocks of a user message against the tool uses it should answer;
/// returns the ids it answered.
fn check_tool_results(
    index: usize,
    blocks: &[&Value],
    awaiting: Option<&(usize, Vec<String>)>,
    problems: &mut Problems,
) -> HashSet<String> {
    let mut answered = HashSet::new();
    let mut seen_other_block = false;
    for (position, block) in blocks.iter().enumerate() {
        if block_type(block) != Some("tool_result") {
            seen_other_block = true;
            continue;
        }
        let place = format!("messages[{index}].content[{position}]");
        if seen_other_block {
            problems.push(format!("{place} is a tool_result after other content; tool_result blocks must come first"));
        }
        let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
            problems.push(format!("{place} (tool_result) has no string tool_use_id"));
            continue;
        };
        let expected = awaiting.is_some_and(|(_, ids)| ids.iter().any(|awaited| awaited == id));
        if !expected {
            problems.push(format!(
                "{place} has tool_use_id {id:?}, which answers no tool_use of the immediately preceding assistant message"
            ));
        } else if !answered.insert(id.to_owned()) {
            problems.push(format!("{place} answers tool_use {id:?} a second time"));
        }
    }
    answered
}

fn check_tools(tools: &Value, problems: &mut Problems) {
    let Some(tools) = tools.as_array() else {
        problems.push("`tools` is not an array");
        return;
    };
    let mut seen_names = HashSet::new();
    for (index, tool) in tools.iter().enumerate() {
        // Server tools (web search, code execution, ...) carry a versioned `type` and no schema.
        if tool.get("type").and_then(Value::as_str).is_some_and(|kind| kind != "custom") {
            continue;
        }
        let definition = ToolDefinition {
            place: format!("tools[{index}]"),
            name: tool.get("name"),
            description: tool.get("description"),
            schema_field: "input_schema",
            schema: tool.get("input_schema"),
        };
        definition.check(&mut seen_names, problems);
    }
}

#[cfg(test)]
mod tests;
