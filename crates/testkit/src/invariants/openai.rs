//! Invariants of an OpenAI chat-completions request.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{CheckOptions, Problems, ToolDefinition, check_image_data, check_model};

pub(super) fn check(body: &Value, options: &CheckOptions, problems: &mut Problems) {
    let Some(object) = body.as_object() else {
        problems.push("the request body is not a JSON object");
        return;
    };
    check_model(object, problems);
    match object.get("messages").and_then(Value::as_array) {
        Some(messages) if messages.is_empty() => problems.push("`messages` is empty"),
        Some(messages) => check_messages(messages, options, problems),
        None => problems.push("`messages` is missing or not an array"),
    }
    if let Some(tools) = object.get("tools") {
        check_tools(tools, problems);
    }
    let streaming = object.get("stream").and_then(Value::as_bool) == Some(true);
    if object.get("stream_options").is_some_and(|options| !options.is_null()) && !streaming {
        problems.push("`stream_options` is set on a request that does not stream (OpenAI rejects it)");
    }
}

fn check_messages(messages: &[Value], options: &CheckOptions, problems: &mut Problems) {
    if options.require_system_prompt {
        let first = messages.first();
        let role = first.and_then(|message| message.get("role")).and_then(Value::as_str);
        let content = first.and_then(|message| message.get("content")).and_then(Value::as_str);
        if role != Some("system") || content.is_none_or(|content| content.trim().is_empty()) {
            problems.push("messages[0] is not a non-empty system prompt (role \"system\")");
        }
    }
    let mut calls = CallLedger::default();
    for (index, message) in messages.iter().enumerate() {
        let Some(message) = message.as_object() else {
            problems.push(format!("messages[{index}] is not a JSON object"));
            continue;
        };
        match message.get("role").and_then(Value::as_str) {
            Some("system") => {
                calls.close_turn(&format!("messages[{index}] (system)"), problems);
                require_string_content(index, message, problems);
            }
            Some("user") => {
                calls.close_turn(&format!("messages[{index}] (user)"), problems);
                check_user_content(index, message, problems);
            }
            Some("assistant") => {
                calls.close_turn(&format!("messages[{index}] (assistant)"), problems);
                check_assistant(index, message, &mut calls, problems);
            }
            Some("tool") => {
                check_tool_answer(index, message, &mut calls, problems);
                require_string_content(index, message, problems);
            }
            Some(role) => {
                problems.push(format!("messages[{index}] has role {role:?}; expected system, user, assistant or tool"))
            }
            None => problems.push(format!("messages[{index}] has no string role")),
        }
    }
    calls.close_turn("the end of the request", problems);
}

/// Tool-call ids seen so far and which of them still wait for an answer.
#[derive(Debug, Default)]
struct CallLedger {
    /// Every call id of every assistant message so far.
    issued: HashSet<String>,
    /// Call ids already answered by a tool message.
    answered: HashSet<String>,
    /// Calls of the latest assistant message not answered yet: (id, message index).
    pending: Vec<(String, usize)>,
}

impl CallLedger {
    /// A non-tool message (or the end) arrives: every pending call went unanswered.
    fn close_turn(&mut self, before: &str, problems: &mut Problems) {
        for (id, index) in self.pending.drain(..) {
            problems.push(format!(
                "tool call {id:?} of messages[{index}] is not answered by a tool message before {before}"
            ));
        }
    }
}

/// A user message's content: a string, or a non-empty array of text and image parts.
fn check_user_content(index: usize, message: &Map<String, Value>, problems: &mut Problems) {
    let Some(Value::Array(parts)) = message.get("content") else {
        require_string_content(index, message, problems);
        return;
    };
    if parts.is_empty() {
        problems.push(format!("messages[{index}] content is an empty array"));
    }
    for (position, part) in parts.iter().enumerate() {
        let place = format!("messages[{index}].content[{position}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                if part.get("text").and_then(Value::as_str).is_none_or(|text| text.trim().is_empty()) {
                    problems.push(format!("{place} is a text part without text"));
                }
            }
            Some("image_url") => match part.get("image_url").and_then(|image| image.get("url")).and_then(Value::as_str)
            {
                Some(url) if url.starts_with("data:") => {
                    let (head, data) = url.split_once(',').unwrap_or((url, ""));
                    match head.strip_prefix("data:").and_then(|head| head.strip_suffix(";base64")) {
                        Some(media_type) => check_image_data(&place, Some(media_type), Some(data), problems),
                        None => problems.push(format!("{place} has a data URL that is not base64")),
                    }
                }
                Some(url) if url.starts_with("https://") || url.starts_with("http://") => {}
                Some(_) => problems.push(format!("{place} has an image URL that is neither data: nor http(s)")),
                None => problems.push(format!("{place} (image_url) has no string `image_url.url`")),
            },
            other => problems.push(format!("{place} has part type {other:?}; expected text or image_url")),
        }
    }
}

fn require_string_content(index: usize, message: &Map<String, Value>, problems: &mut Problems) {
    if !message.get("content").is_some_and(Value::is_string) {
        problems.push(format!("messages[{index}] content is not a string"));
    }
}

fn check_assistant(index: usize, message: &Map<String, Value>, calls: &mut CallLedger, problems: &mut Problems) {
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(tool_calls)) => tool_calls.as_slice(),
        Some(_) => {
            problems.push(format!("messages[{index}] `tool_calls` is not an array"));
            &[][..]
        }
    };
    match message.get("content") {
        Some(Value::String(_)) => {}
        None | Some(Value::Null) if !tool_calls.is_empty() => {}
        None | Some(Value::Null) => {
            problems.push(format!("messages[{index}] (assistant) has null content and no tool calls"));
        }
        Some(_) => problems.push(format!("messages[{index}] content is neither a string nor null")),
    }
    for (position, call) in tool_calls.iter().enumerate() {
        let place = format!("messages[{index}].tool_calls[{position}]");
        if call.get("type").and_then(Value::as_str) != Some("function") {
            problems.push(format!("{place} has a type other than \"function\""));
        }
        let function = call.get("function");
        if !function.and_then(|function| function.get("name")).is_some_and(Value::is_string) {
            problems.push(format!("{place} has no string function.name"));
        }
        if !function.and_then(|function| function.get("arguments")).is_some_and(Value::is_string) {
            problems.push(format!("{place} has no string function.arguments"));
        }
        match call.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => {
                if calls.issued.insert(id.to_owned()) {
                    calls.pending.push((id.to_owned(), index));
                } else {
                    problems.push(format!("{place} reuses the tool call id {id:?} of an earlier call"));
                }
            }
            Some(_) | None => problems.push(format!("{place} has no id")),
        }
    }
}

fn check_tool_answer(index: usize, message: &Map<String, Value>, calls: &mut CallLedger, problems: &mut Problems) {
    let Some(id) = message.get("tool_call_id").and_then(Value::as_str) else {
        problems.push(format!("messages[{index}] (tool) has no string tool_call_id"));
        return;
    };
    if let Some(position) = calls.pending.iter().position(|(pending, _)| pending == id) {
        calls.pending.remove(position);
        calls.answered.insert(id.to_owned());
    } else if calls.answered.contains(id) {
        problems.push(format!("messages[{index}] answers tool call {id:?} a second time"));
    } else if calls.issued.contains(id) {
        problems.push(format!(
            "messages[{index}] answers tool call {id:?} after other messages came between the call and its answer"
        ));
    } else {
        problems.push(format!(
            "messages[{index}] has tool_call_id {id:?}, which answers no tool call of an earlier assistant message"
        ));
    }
}

fn check_tools(tools: &Value, problems: &mut Problems) {
    let Some(tools) = tools.as_array() else {
        problems.push("`tools` is not an array");
        return;
    };
    if tools.is_empty() {
        problems.push("`tools` is an empty array (OpenAI rejects it; omit the field instead)");
    }
    let mut seen_names = HashSet::new();
    for (index, tool) in tools.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            problems.push(format!("tools[{index}] has a type other than \"function\""));
        }
        let function = tool.get("function");
        let definition = ToolDefinition {
            place: format!("tools[{index}]"),
            name: function.and_then(|function| function.get("name")),
            description: function.and_then(|function| function.get("description")),
            schema_field: "parameters",
            schema: function.and_then(|function| function.get("parameters")),
        };
        definition.check(&mut seen_names, problems);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::invariants::{CheckOptions, check_request};
    use crate::script::Wire;

    fn problems(body: &Value) -> Vec<String> {
        check_request(Wire::OpenAi, body, &CheckOptions::default())
    }

    fn tool() -> Value {
        json!({"type": "function", "function": {
            "name": "read_file",
            "description": "Reads a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }})
    }

    fn good() -> Value {
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are squidbot."},
                {"role": "user", "content": "Read a and b."},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_2", "content": "B"},
                {"role": "tool", "tool_call_id": "call_1", "content": "A"},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "Thanks."},
            ],
            "tools": [tool()],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    }

    fn assert_one_problem(body: &Value, expected: &str) {
        let found = problems(body);
        assert!(
            found.iter().any(|problem| problem.contains(expected)),
            "expected a problem containing {expected:?}, got {found:?}"
        );
    }

    #[test]
    fn a_good_request_passes() {
        assert_eq!(problems(&good()), Vec::<String>::new());
    }

    #[test]
    fn user_content_may_be_text_and_image_parts() {
        // "\x89PNG\r\n\x1a\n" in base64.
        let png = "data:image/png;base64,iVBORw0KGgo=";
        let mut body = good();
        body["messages"][1]["content"] =
            json!([{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": png}}]);
        assert_eq!(problems(&body), Vec::<String>::new());
        let cases = [
            (json!([]), "empty array"),
            (json!([{"type": "text", "text": " "}]), "text part without text"),
            (json!([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]), "not valid base64"),
            (
                json!([{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,iVBORw0KGgo="}}]),
                "not a image/jpeg image",
            ),
            (json!([{"type": "image_url", "image_url": {"url": "data:image/tiff;base64,iVBORw0KGgo="}}]), "media type"),
            (json!([{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]), "neither data: nor http(s)"),
            (json!([{"type": "image_url"}]), "no string `image_url.url`"),
            (json!([{"type": "audio"}]), "part type"),
        ];
        for (content, expected) in cases {
            let mut body = good();
            body["messages"][1]["content"] = content;
            assert_one_problem(&body, expected);
        }
        let mut body = good();
        body["messages"][0]["content"] = json!([{"type": "text", "text": "system as parts"}]);
        assert_one_problem(&body, "messages[0] content is not a string");
    }

    #[test]
    fn the_body_must_be_an_object_with_model_and_messages() {
        assert_one_problem(&json!([1]), "not a JSON object");
        let mut body = good();
        body["model"] = json!("");
        assert_one_problem(&body, "`model` is empty");
        body.as_object_mut().map(|object| object.remove("model"));
        assert_one_problem(&body, "`model` is missing");
        let mut body = good();
        body["messages"] = json!([]);
        assert_one_problem(&body, "`messages` is empty");
    }

    #[test]
    fn a_system_prompt_is_required_unless_disabled() {
        let mut body = good();
        body["messages"][0] = json!({"role": "system", "content": "  "});
        assert_one_problem(&body, "system prompt");
        let mut body = good();
        body["messages"].as_array_mut().expect("an array").remove(0);
        assert_one_problem(&body, "system prompt");
        let relaxed = check_request(Wire::OpenAi, &body, &CheckOptions { require_system_prompt: false });
        assert_eq!(relaxed, Vec::<String>::new());
    }

    #[test]
    fn tool_messages_must_answer_an_earlier_call_once() {
        let mut body = good();
        body["messages"][4]["tool_call_id"] = json!("call_9");
        assert_one_problem(&body, "answers no tool call of an earlier assistant message");
        let mut body = good();
        body["messages"][4]["tool_call_id"] = json!("call_2");
        assert_one_problem(&body, "a second time");
        let mut body = good();
        let answer = json!({"role": "tool", "tool_call_id": "call_1", "content": "early"});
        body["messages"].as_array_mut().expect("an array").insert(2, answer);
        assert_one_problem(&body, "answers no tool call of an earlier assistant message");
    }

    #[test]
    fn every_call_is_answered_before_the_next_turn_and_the_end() {
        let mut body = good();
        body["messages"].as_array_mut().expect("an array").remove(4);
        assert_one_problem(
            &body,
            "tool call \"call_1\" of messages[2] is not answered by a tool message before messages[4]",
        );
        let mut body = good();
        body["messages"].as_array_mut().expect("an array").truncate(4);
        assert_one_problem(&body, "before the end of the request");
        let mut body = good();
        body["messages"].as_array_mut().expect("an array").swap(4, 5);
        assert_one_problem(&body, "after other messages came between");
    }

    #[test]
    fn tools_must_be_well_formed() {
        let cases = [
            ("/type", json!("tool"), "type other than \"function\""),
            ("/function/name", json!("read file"), "does not match"),
            ("/function/description", json!(""), "empty description"),
            ("/function/parameters", json!({"type": "string"}), "is not \"object\""),
            ("/function/parameters", json!("{}"), "not a JSON object"),
        ];
        for (pointer, value, expected) in cases {
            let mut body = good();
            if let Some(slot) = body.pointer_mut(&format!("/tools/0{pointer}")) {
                *slot = value;
            }
            assert_one_problem(&body, expected);
        }
        let mut body = good();
        body["tools"] = json!([tool(), tool()]);
        assert_one_problem(&body, "must be unique");
        body["tools"] = json!([]);
        assert_one_problem(&body, "empty array");
    }

    #[test]
    fn roles_and_content_types_are_checked() {
        let mut body = good();
        body["messages"][1]["role"] = json!("developer");
        assert_one_problem(&body, "has role \"developer\"");
        let mut body = good();
        body["messages"][1]["content"] = json!(42);
        assert_one_problem(&body, "messages[1] content is not a string");
        let mut body = good();
        body["messages"][5]["content"] = Value::Null;
        assert_one_problem(&body, "null content and no tool calls");
    }

    #[test]
    fn stream_options_need_streaming() {
        let mut body = good();
        body["stream"] = json!(false);
        assert_one_problem(&body, "`stream_options` is set");
    }
}
