//! Receiving: conversations, senders, mentions, commands, attachments, odd updates.

use serde_json::json;
use squidbot_channels::{AttachmentData, Channel, Conversation, ConversationKind, OutboundMessage, Sender};
use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram, FakeUser, IncomingMessage};

use crate::{Running, TOKEN, ada, settings};

#[tokio::test]
async fn a_direct_message_is_delivered_with_its_conversation_sender_and_id() {
    let mut running = Running::start().await;
    let pushed = running.fake.push_user_message(501, ChatKind::Private, &ada(), "hello there");
    let message = running.next().await;
    assert_eq!(message.channel, "telegram");
    assert_eq!(message.platform_message_id, format!("501:{}", pushed.message_id));
    assert_eq!(
        message.conversation,
        Conversation { id: "501".to_owned(), kind: ConversationKind::Direct, thread: None }
    );
    assert_eq!(message.sender, Sender { id: "501".to_owned(), display_name: Some("Ada Lovelace".to_owned()) });
    assert_eq!(message.text, "hello there");
    assert!(message.mentions_bot, "a private chat addresses the bot");
    assert!(message.attachments.is_empty());
    // getMe first, then long polls asking for messages only.
    let polls = running.fake.requests_for("getUpdates");
    assert_eq!(running.fake.requests()[0].method, "getMe");
    assert_eq!(polls[0].params["allowed_updates"], json!(["message"]));
    assert_eq!(polls[0].params["timeout"], 5);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn group_messages_address_the_bot_only_by_mention_or_reply() {
    let mut running = Running::start().await;
    let group = -200;
    let user = FakeUser::new(502, "").with_username("grace");
    running.fake.push_user_message(group, ChatKind::Group, &user, "just chatting, @ada");
    running.fake.push_user_message(group, ChatKind::Group, &user, "@thebot what time is it?");

    let chatting = running.next().await;
    assert_eq!(chatting.conversation.kind, ConversationKind::Group);
    assert_eq!(chatting.conversation.id, "-200");
    assert_eq!(chatting.sender.display_name.as_deref(), Some("grace"), "the username when there is no name");
    assert_eq!(chatting.text, "just chatting, @ada");
    assert!(!chatting.mentions_bot);

    let mentioned = running.next().await;
    assert_eq!(mentioned.text, "what time is it?");
    assert!(mentioned.mentions_bot);

    // A reply to one of the bot's messages addresses it too.
    let conversation = mentioned.conversation.clone();
    let outbound = OutboundMessage { conversation, reply_to: None, text: "noon".to_owned(), attachments: Vec::new() };
    let sent = running.channel.send(&outbound).await.unwrap();
    let bot_message_id: i64 = sent.platform_message_id.split_once(':').unwrap().1.parse().unwrap();
    running.fake.push(IncomingMessage::new(group, ChatKind::Group, &user).text("thanks").reply_to_bot(bot_message_id));
    let reply = running.next().await;
    assert_eq!(reply.text, "thanks");
    assert!(reply.mentions_bot);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn commands_lose_the_bot_name_and_commands_for_other_bots_are_dropped() {
    let mut running = Running::start().await;
    running.fake.push_user_message(-300, ChatKind::Supergroup, &ada(), "/new@thebot");
    running.fake.push_user_message(-300, ChatKind::Supergroup, &ada(), "/new@otherbot");
    running.fake.push_user_message(-300, ChatKind::Supergroup, &ada(), "/status");
    let new = running.next().await;
    assert_eq!(new.text, "/new");
    assert!(new.mentions_bot);
    let status = running.next().await;
    assert_eq!(status.text, "/status", "the command for another bot was not delivered");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn messages_from_bots_are_not_delivered() {
    let mut running = Running::start().await;
    let other_bot = FakeUser::new(900, "Other").with_username("otherbot").as_bot();
    let itself = FakeUser::new(running.fake.bot_id(), "The Bot").with_username("thebot").as_bot();
    running.fake.push_user_message(-400, ChatKind::Group, &other_bot, "@thebot beep");
    running.fake.push_user_message(-400, ChatKind::Group, &itself, "my own words");
    running.fake.push_user_message(-400, ChatKind::Group, &ada(), "human here");
    assert_eq!(running.next().await.text, "human here");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn forum_topics_are_threads() {
    let mut running = Running::start().await;
    let pushed = running.fake.push(IncomingMessage::new(-500, ChatKind::Forum, &ada()).text("in a topic").in_topic(77));
    let message = running.next().await;
    assert_eq!(message.conversation.thread.as_deref(), Some("77"));
    assert_eq!(message.conversation.kind, ConversationKind::Group);
    assert_eq!(message.platform_message_id, format!("-500:{}", pushed.message_id));
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn photos_and_documents_are_downloaded() {
    let mut running = Running::start().await;
    let photo: Vec<u8> = (0..=255).cycle().take(5000).collect();
    let document = b"%PDF-1.7 pretend".to_vec();
    running.fake.push(IncomingMessage::new(501, ChatKind::Private, &ada()).text("look").photo(photo.clone()));
    running.fake.push(IncomingMessage::new(501, ChatKind::Private, &ada()).document(
        "report.pdf",
        "application/pdf",
        document.clone(),
    ));

    let with_photo = running.next().await;
    assert_eq!(with_photo.text, "look", "the caption is the text");
    assert_eq!(with_photo.attachments.len(), 1, "only the largest size");
    assert_eq!(with_photo.attachments[0].mime, "image/jpeg");
    assert_eq!(with_photo.attachments[0].data, AttachmentData::Bytes(photo));

    let with_document = running.next().await;
    assert_eq!(with_document.text, "");
    assert_eq!(with_document.attachments[0].name, "report.pdf");
    assert_eq!(with_document.attachments[0].mime, "application/pdf");
    assert_eq!(with_document.attachments[0].data, AttachmentData::Bytes(document));
    assert_eq!(running.fake.requests_for("getFile").len(), 2);
    assert_eq!(running.fake.requests_for("file").len(), 2);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn an_attachment_over_the_cap_is_skipped_with_a_note() {
    let fake = FakeTelegram::start(TOKEN).await;
    let settings = squidbot_channel_telegram::TelegramSettings { max_attachment_bytes: 1024, ..settings(&fake) };
    let mut running = Running::start_with(fake, settings);
    let big = vec![7; 4096];
    running.fake.push(IncomingMessage::new(501, ChatKind::Private, &ada()).text("see file").document(
        "big.bin",
        "application/octet-stream",
        big,
    ));
    let message = running.next().await;
    assert_eq!(message.text, "see file\n[attachment big.bin skipped: 4 KB is over the 1 KB limit]");
    assert!(message.attachments.is_empty());
    assert!(running.fake.requests_for("file").is_empty(), "nothing downloaded");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn unreadable_and_unknown_updates_are_skipped_and_later_messages_still_arrive() {
    let mut running = Running::start().await;
    let malformed = running.fake.push_raw_update(json!({ "message": { "message_id": "seven", "chat": 1 } }));
    let unknown = running.fake.push_raw_update(json!({ "poll": { "id": "1", "question": "?", "options": [] } }));
    let empty = running.fake.push_raw_update(json!({ "message": {
        "message_id": 3, "date": 0, "chat": { "id": 501, "type": "private" },
        "from": { "id": 501, "is_bot": false, "first_name": "Ada" }, "sticker": { "file_id": "s" } } }));
    let long_text = "x".repeat(20_000);
    running.fake.push_raw_update(json!({ "message": {
        "message_id": 4, "date": 0, "chat": { "id": 501, "type": "private" },
        "from": { "id": 501, "is_bot": false, "first_name": "Ada" }, "text": long_text } }));
    let pushed = running.fake.push_user_message(501, ChatKind::Private, &ada(), "still here");
    assert!(malformed < unknown && unknown < empty && empty < pushed.update_id);

    let oversized = running.next().await;
    assert_eq!(oversized.platform_message_id, "501:4");
    assert!(oversized.text.starts_with(&"x".repeat(16_000)));
    assert!(oversized.text.ends_with("\n[message truncated: 20000 characters, the limit is 16000]"));
    let note = "\n[message truncated: 20000 characters, the limit is 16000]";
    assert_eq!(oversized.text.chars().count(), 16_000 + note.chars().count());
    assert_eq!(running.next().await.text, "still here");
    // The skipped updates were confirmed too: the next poll starts past all of them.
    let deadline = tokio::time::Instant::now() + crate::PATIENCE;
    while !running.fake.requests_for("getUpdates").iter().any(|poll| poll.params["offset"] == pushed.update_id + 1) {
        assert!(tokio::time::Instant::now() < deadline, "no poll past the last update");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_redelivered_update_keeps_its_platform_message_id() {
    let mut running = Running::start().await;
    let pushed = running.fake.push_user_message(501, ChatKind::Private, &ada(), "once");
    let first = running.next().await;
    running.fake.push_duplicate(pushed.update_id);
    let again = running.next().await;
    assert_eq!(again.platform_message_id, first.platform_message_id);
    assert_eq!(again.text, "once");
    assert_eq!(running.stop().await, Ok(()));
}
