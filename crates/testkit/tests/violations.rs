//! Each request invariant, broken over real HTTP, shows up in `violations()`; good requests pass.

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm, Wire};

use crate::support::{anthropic_body, openai_body, post};

fn with(mut body: Value, pointer: &str, value: Value) -> Value {
    match body.pointer_mut(pointer) {
        Some(slot) => *slot = value,
        None => panic!("no {pointer} in {body}"),
    }
    body
}

fn openai_conversation(tool_messages: Value) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are squidbot."}),
        json!({"role": "user", "content": "Read a."}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        ]}),
    ];
    messages.extend(tool_messages.as_array().cloned().unwrap_or_default());
    with(openai_body(false), "/messages", Value::Array(messages))
}

fn anthropic_conversation(answer: Value) -> Value {
    let messages = json!([
        {"role": "user", "content": "Read a."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}]},
        {"role": "user", "content": answer},
    ]);
    with(anthropic_body(false), "/messages", messages)
}

fn openai_cases() -> Vec<(Value, &'static str)> {
    let good_answer = json!([{"role": "tool", "tool_call_id": "call_1", "content": "A"}]);
    vec![
        (json!("just a string"), "not a JSON object"),
        (with(openai_body(false), "/model", json!("")), "`model` is empty"),
        (with(openai_body(false), "/messages", json!([])), "`messages` is empty"),
        (with(openai_body(false), "/messages/0/role", json!("user")), "system prompt"),
        (
            openai_conversation(json!([{"role": "tool", "tool_call_id": "call_7", "content": "?"}])),
            "answers no tool call of an earlier assistant message",
        ),
        (
            openai_conversation(json!([
                {"role": "tool", "tool_call_id": "call_1", "content": "A"},
                {"role": "tool", "tool_call_id": "call_1", "content": "A again"},
            ])),
            "a second time",
        ),
        (
            openai_conversation(json!([{"role": "user", "content": "well?"}])),
            "is not answered by a tool message before messages[3]",
        ),
        (openai_conversation(json!([])), "before the end of the request"),
        (with(openai_conversation(good_answer.clone()), "/tools/0/type", json!("fn")), "type other than \"function\""),
        (with(openai_body(false), "/tools/0/function/name", json!("read file")), "does not match"),
        (with(openai_body(false), "/tools/0/function/description", json!("")), "empty description"),
        (with(openai_body(false), "/tools/0/function/parameters", json!({"type": "string"})), "is not \"object\""),
        (
            with(openai_body(false), "/tools", json!([openai_body(false)["tools"][0], openai_body(false)["tools"][0]])),
            "must be unique",
        ),
        (with(openai_body(false), "/messages/1/role", json!("robot")), "has role \"robot\""),
        (with(openai_body(false), "/messages/1/content", json!(42)), "content is not a string"),
        (
            with(openai_conversation(good_answer.clone()), "/messages/2/content", json!({"text": "x"})),
            "neither a string nor null",
        ),
        (openai_conversation(good_answer), ""),
    ]
}

fn anthropic_cases() -> Vec<(Value, &'static str)> {
    let tool_result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "A"});
    vec![
        (with(anthropic_body(false), "/max_tokens", json!(0)), "`max_tokens`"),
        (with(anthropic_body(false), "/system", json!(" ")), "no non-empty `system` prompt"),
        (with(anthropic_body(false), "/messages", json!([])), "`messages` is empty"),
        (with(anthropic_body(false), "/messages/0/role", json!("assistant")), "the first message must be user"),
        (
            with(
                anthropic_body(false),
                "/messages",
                json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
            ),
            "roles must alternate",
        ),
        (anthropic_conversation(json!([tool_result("toolu_9")])), "answers no tool_use of the immediately preceding"),
        (anthropic_conversation(json!([{"type": "text", "text": "never mind"}])), "has no tool_result in messages[2]"),
        (anthropic_conversation(json!([tool_result("toolu_1"), {"type": "text", "text": "go on"}])), ""),
        (with(anthropic_body(false), "/tools/0/name", json!("bad name!")), "does not match"),
        (with(anthropic_body(false), "/tools/0/description", json!("")), "empty description"),
        (with(anthropic_body(false), "/tools/0/input_schema", json!([])), "not a JSON object"),
        (
            with(
                anthropic_body(false),
                "/tools",
                json!([anthropic_body(false)["tools"][0], anthropic_body(false)["tools"][0]]),
            ),
            "must be unique",
        ),
        (with(anthropic_body(false), "/messages/0/content", json!([{"type": "text", "text": ""}])), "empty text block"),
    ]
}

async fn assert_each_case_is_caught(wire: Wire, cases: Vec<(Value, &'static str)>) {
    let llm = ScriptedLlm::start().await;
    for (body, expected) in cases {
        llm.push(Reply::text("answered anyway"));
        let before = llm.violations().len();
        let response = post(&llm, wire, &body).await;
        assert_eq!(response.status(), 200, "a violating request is still answered");
        let new_violations = llm.violations().split_off(before);
        if expected.is_empty() {
            assert!(new_violations.is_empty(), "{body} should pass: {new_violations:?}");
        } else {
            assert!(
                new_violations.iter().any(|violation| violation.contains(expected)),
                "{body} should produce a violation containing {expected:?}, got {new_violations:?}"
            );
        }
    }
}

#[tokio::test]
async fn each_openai_invariant_catches_a_bad_request() {
    assert_each_case_is_caught(Wire::OpenAi, openai_cases()).await;
}

#[tokio::test]
async fn each_anthropic_invariant_catches_a_bad_request() {
    assert_each_case_is_caught(Wire::Anthropic, anthropic_cases()).await;
}

#[tokio::test]
async fn violations_name_the_request_and_wire() {
    let llm = ScriptedLlm::start().await;
    llm.push_all([Reply::text("ok"), Reply::text("ok")]);
    post(&llm, Wire::OpenAi, &openai_body(false)).await;
    post(&llm, Wire::Anthropic, &with(anthropic_body(false), "/max_tokens", json!(-1))).await;
    assert_eq!(
        llm.violations(),
        vec!["request 2 (anthropic /v1/messages): `max_tokens` is missing or not a positive integer".to_owned()]
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_violation() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::text("ok"));
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", llm.base_url()))
        .body("{\"model\":")
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    assert!(llm.violations()[0].contains("the body is not valid JSON"));
    assert_eq!(llm.requests()[0].body, json!("{\"model\":"));
}

#[tokio::test]
async fn the_system_prompt_requirement_can_be_switched_off() {
    let llm = ScriptedLlm::start().await;
    llm.set_require_system_prompt(false);
    llm.push_all([Reply::text("ok"), Reply::text("ok")]);
    let mut openai = openai_body(false);
    openai["messages"].as_array_mut().expect("an array").remove(0);
    post(&llm, Wire::OpenAi, &openai).await;
    let mut anthropic = anthropic_body(false);
    anthropic.as_object_mut().map(|object| object.remove("system"));
    post(&llm, Wire::Anthropic, &anthropic).await;
    llm.assert_clean();
}
