//! Unit tests showing each Anthropic invariant passes a good request and catches a bad one.

use serde_json::{Value, json};

use crate::invariants::{CheckOptions, check_request};
use crate::script::Wire;

fn problems(body: &Value) -> Vec<String> {
    check_request(Wire::Anthropic, body, &CheckOptions::default())
}

fn assert_one_problem(body: &Value, expected: &str) {
    let found = problems(body);
    assert!(
        found.iter().any(|problem| problem.contains(expected)),
        "expected a problem containing {expected:?}, got {found:?}"
    );
}

fn tool() -> Value {
    json!({
        "name": "read_file",
        "description": "Reads a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    })
}

fn good() -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are squidbot.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Read a and b."},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "A"}], "is_error": false},
                {"type": "text", "text": "Both read?"},
            ]},
            {"role": "assistant", "content": "Yes."},
            {"role": "user", "content": [{"type": "text", "text": "Thanks."}]},
        ],
        "tools": [tool(), {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        "stream": true,
    })
}

#[test]
fn a_good_request_passes() {
    assert_eq!(problems(&good()), Vec::<String>::new());
    let mut body = good();
    body["system"] = json!("You are squidbot.");
    body["messages"].as_array_mut().expect("an array").push(json!({"role": "assistant", "content": "Prefilled"}));
    assert_eq!(problems(&body), Vec::<String>::new());
}

#[test]
fn max_tokens_must_be_a_positive_integer() {
    for value in [json!(0), json!(-5), json!(1.5), json!("100"), Value::Null] {
        let mut body = good();
        body["max_tokens"] = value;
        assert_one_problem(&body, "`max_tokens` is missing or not a positive integer");
    }
    let mut body = good();
    body.as_object_mut().map(|object| object.remove("max_tokens"));
    assert_one_problem(&body, "`max_tokens`");
}

#[test]
fn a_system_prompt_is_required_unless_disabled() {
    let mut body = good();
    body.as_object_mut().map(|object| object.remove("system"));
    assert_one_problem(&body, "no non-empty `system` prompt");
    let relaxed = check_request(Wire::Anthropic, &body, &CheckOptions { require_system_prompt: false });
    assert_eq!(relaxed, Vec::<String>::new());
    body["system"] = json!("");
    assert_one_problem(&body, "no non-empty `system` prompt");
    body["system"] = json!([{"type": "text", "text": ""}]);
    assert_one_problem(&body, "system[0] is an empty text block");
}

#[test]
fn messages_start_with_user_and_alternate() {
    let mut body = good();
    body["messages"] = json!([]);
    assert_one_problem(&body, "`messages` is empty");
    let mut body = good();
    body["messages"].as_array_mut().expect("an array").remove(0);
    assert_one_problem(&body, "the first message must be user");
    let mut body = good();
    body["messages"][3]["role"] = json!("user");
    assert_one_problem(&body, "roles must alternate");
    let mut body = good();
    body["messages"][0]["role"] = json!("system");
    assert_one_problem(&body, "the system prompt goes in `system`");
}

#[test]
fn tool_results_answer_the_immediately_preceding_tool_uses() {
    let mut body = good();
    body["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_9");
    assert_one_problem(&body, "answers no tool_use of the immediately preceding assistant message");
    assert_one_problem(&body, "tool_use \"toolu_2\" of messages[1] has no tool_result in messages[2]");
    let mut body = good();
    body["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_1");
    assert_one_problem(&body, "a second time");
    let mut body = good();
    body["messages"][4]["content"] = json!([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "late"}]);
    assert_one_problem(&body, "answers no tool_use of the immediately preceding assistant message");
}

#[test]
fn every_tool_use_is_answered_in_the_next_user_message() {
    let mut body = good();
    body["messages"][2]["content"].as_array_mut().expect("an array").remove(1);
    assert_one_problem(&body, "tool_use \"toolu_1\" of messages[1] has no tool_result in messages[2]");
    let mut body = good();
    body["messages"].as_array_mut().expect("an array").truncate(2);
    assert_one_problem(&body, "is never answered: the request ends first");
}

#[test]
fn tool_results_come_first_in_their_message() {
    let mut body = good();
    body["messages"][2]["content"].as_array_mut().expect("an array").swap(1, 2);
    assert_one_problem(&body, "tool_result blocks must come first");
}

#[test]
fn empty_text_is_rejected() {
    let mut body = good();
    body["messages"][1]["content"][0]["text"] = json!("");
    assert_one_problem(&body, "messages[1].content[0] is an empty text block");
    let mut body = good();
    body["messages"][2]["content"][1]["content"] = json!([{"type": "text", "text": " "}]);
    assert_one_problem(&body, "messages[2].content[1].content[0] is an empty text block");
    let mut body = good();
    body["messages"][0]["content"] = json!("");
    assert_one_problem(&body, "messages[0] has empty content");
    let mut body = good();
    body["messages"][4]["content"] = json!([]);
    assert_one_problem(&body, "messages[4] has empty content");
}

#[test]
fn tools_must_be_well_formed() {
    let cases = [
        ("/name", json!("read.file"), "does not match"),
        ("/description", json!(" "), "empty description"),
        ("/description", Value::Null, "no string description"),
        ("/input_schema", json!({"type": "array"}), "is not \"object\""),
        ("/input_schema", json!(true), "not a JSON object"),
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
}

#[test]
fn tool_use_blocks_are_well_formed() {
    let mut body = good();
    body["messages"][1]["content"][1]["input"] = json!("{\"path\":\"a\"}");
    assert_one_problem(&body, "input that is not a JSON object");
    let mut body = good();
    body["messages"][1]["content"][2]["id"] = json!("toolu_1");
    assert_one_problem(&body, "reuses the tool_use id");
}

#[test]
fn image_blocks_carry_base64_of_a_known_type_in_user_turns() {
    // "\x89PNG\r\n\x1a\n" in base64.
    let image = |media_type: &str, data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}});
    let mut body = good();
    body["messages"][4]["content"] = json!([image("image/png", "iVBORw0KGgo="), {"type": "text", "text": "This?"}]);
    assert_eq!(problems(&body), Vec::<String>::new());
    let cases = [
        (image("image/png", ""), "no image data"),
        (image("image/png", "not base64!"), "not valid base64"),
        (image("image/gif", "iVBORw0KGgo="), "not a image/gif image"),
        (image("image/bmp", "iVBORw0KGgo="), "media type"),
        (json!({"type": "image", "source": {"type": "file"}}), "source type"),
        (json!({"type": "image", "source": {"type": "url"}}), "url source without a url"),
    ];
    for (block, expected) in cases {
        let mut body = good();
        body["messages"][4]["content"] = json!([block]);
        assert_one_problem(&body, expected);
    }
    let mut body = good();
    body["messages"][3]["content"] = json!([image("image/png", "iVBORw0KGgo=")]);
    assert_one_problem(&body, "image block outside a user message");
}
