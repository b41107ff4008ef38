//! Unit tests of reading Telegram messages: addressing, stripping, UTF-16 offsets.

use serde_json::{Value, json};

use super::*;

fn bot() -> BotIdentity {
    BotIdentity { id: 42, username: "TheBot".to_owned() }
}

fn message(chat_type: &str, text: &str, entities: Value) -> Message {
    serde_json::from_value(json!({
        "message_id": 7,
        "from": { "id": 1, "is_bot": false, "first_name": "Ada", "last_name": "Lovelace", "username": "ada" },
        "chat": { "id": -100, "type": chat_type },
        "date": 0,
        "text": text,
        "entities": entities,
    }))
    .unwrap()
}

fn entity(kind: &str, offset: usize, length: usize) -> Value {
    json!({ "type": kind, "offset": offset, "length": length })
}

#[test]
fn a_mention_of_the_bot_is_removed_with_its_separator() {
    let draft = interpret(&message("group", "@thebot, what's up?", json!([entity("mention", 0, 7)])), &bot()).unwrap();
    assert_eq!(draft.text, "what's up?");
    assert!(draft.mentions_bot);
    assert_eq!(draft.platform_message_id, "-100:7");
    assert_eq!(draft.conversation.kind, ConversationKind::Group);
    assert_eq!(draft.sender.display_name.as_deref(), Some("Ada Lovelace"));
}

#[test]
fn entity_offsets_count_utf16_units() {
    // "🦑" is two UTF-16 units and four bytes.
    let text = "🦑 hi @TheBot ok";
    let draft = interpret(&message("supergroup", text, json!([entity("mention", 6, 7)])), &bot()).unwrap();
    assert_eq!(draft.text, "🦑 hi ok");
    assert!(draft.mentions_bot);
    assert_eq!(utf16_range("🦑x", 2, 1), Some(4..5));
    assert_eq!(utf16_range("🦑x", 1, 1), None, "inside a surrogate pair");
    assert_eq!(utf16_range("ab", 1, 5), None, "past the end");
}

#[test]
fn other_mentions_stay_and_do_not_address_the_bot() {
    let draft = interpret(&message("group", "ask @someone", json!([entity("mention", 4, 8)])), &bot()).unwrap();
    assert_eq!(draft.text, "ask @someone");
    assert!(!draft.mentions_bot);
}

#[test]
fn commands_lose_the_bots_name_and_commands_for_other_bots_are_dropped() {
    let draft = interpret(&message("group", "/new@TheBot now", json!([entity("bot_command", 0, 11)])), &bot()).unwrap();
    assert_eq!(draft.text, "/new now");
    assert!(draft.mentions_bot);
    let other = message("group", "/new@otherbot", json!([entity("bot_command", 0, 13)]));
    assert_eq!(interpret(&other, &bot()), Err(Skip::CommandForAnotherBot));
    let plain = interpret(&message("group", "/status", json!([entity("bot_command", 0, 7)])), &bot()).unwrap();
    assert_eq!(plain.text, "/status");
    assert!(!plain.mentions_bot);
}

#[test]
fn a_text_mention_of_the_bot_addresses_it() {
    let mut entities = json!([entity("text_mention", 0, 7)]);
    entities[0]["user"] = json!({ "id": 42, "is_bot": true, "first_name": "The Bot" });
    let draft = interpret(&message("group", "The Bot help", entities), &bot()).unwrap();
    assert_eq!(draft.text, "help");
    assert!(draft.mentions_bot);
}

#[test]
fn private_chats_are_direct_and_address_the_bot() {
    let draft = interpret(&message("private", "hello", json!([])), &bot()).unwrap();
    assert_eq!(draft.conversation.kind, ConversationKind::Direct);
    assert!(draft.mentions_bot);
}

#[test]
fn the_first_message_of_a_forum_topic_is_no_reply_to_the_bot() {
    let mut in_topic = message("supergroup", "hi", json!([]));
    let mut root = message("supergroup", "topic", json!([]));
    root.message_id = 3;
    root.from = Some(User { id: 42, is_bot: true, first_name: "The Bot".to_owned(), last_name: None, username: None });
    in_topic.reply_to_message = Some(Box::new(root));
    in_topic.message_thread_id = Some(3);
    in_topic.is_topic_message = true;
    let draft = interpret(&in_topic, &bot()).unwrap();
    assert_eq!(draft.conversation.thread.as_deref(), Some("3"));
    assert!(!draft.mentions_bot);
    in_topic.message_thread_id = Some(2);
    assert!(interpret(&in_topic, &bot()).unwrap().mentions_bot, "a real reply to the bot inside a topic");
}

#[test]
fn bots_and_empty_messages_are_skipped() {
    let mut from_bot = message("group", "beep", json!([]));
    from_bot.from.as_mut().unwrap().is_bot = true;
    assert_eq!(interpret(&from_bot, &bot()), Err(Skip::FromBot));
    let mut own = message("group", "mine", json!([]));
    own.from.as_mut().unwrap().id = 42;
    assert_eq!(interpret(&own, &bot()), Err(Skip::OwnMessage));
    assert_eq!(interpret(&message("group", " ", json!([])), &bot()), Err(Skip::Empty));
    let mut anonymous = message("group", "x", json!([]));
    anonymous.from = None;
    assert_eq!(interpret(&anonymous, &bot()), Err(Skip::NoSender));
}

#[test]
fn oversized_texts_are_cut_with_a_note() {
    let long = "é".repeat(MAX_TEXT_CHARS + 10);
    let draft = interpret(&message("private", &long, json!([])), &bot()).unwrap();
    assert!(draft.text.starts_with(&"é".repeat(MAX_TEXT_CHARS)));
    assert!(
        draft.text.ends_with("[message truncated: 16010 characters, the limit is 16000]"),
        "{}",
        &draft.text[32_000..]
    );
}
