//! Sending against a real Synapse, checked as a person in the room sees it: replies,
//! thread replies, edits, reactions, typing, files both ways, and the one notice an
//! encrypted room gets.

use std::sync::Arc;

use serde_json::{Value, json};
use squidbot_channel_matrix::{InvitePolicy, MatrixSettings};
use squidbot_channels::{Attachment, AttachmentData, Channel, Conversation, ConversationKind, OutboundMessage};

use crate::harness::{Person, RunningBot, settings};
use squidbot_testkit::synapse::Synapse;

fn reply(conversation: &Conversation, reply_to: Option<&str>, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation: conversation.clone(),
        reply_to: reply_to.map(str::to_owned),
        text: text.to_owned(),
        attachments: vec![],
    }
}

pub async fn replies_threads_edits_reactions_and_typing(synapse: Arc<Synapse>) {
    let bot = synapse.register("replybot").await;
    let alice = Person::new(&synapse, synapse.register("replyalice").await);
    let state = tempfile::tempdir().unwrap();
    let mut running = RunningBot::start(settings(&synapse, &bot, state.path(), InvitePolicy::All)).await;
    let room = alice.create_room(json!({"invite": [bot.user_id], "is_direct": true})).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;

    let asked = alice.say(&room, "a question").await;
    let question = running.next().await;
    let html = "<strong>answer</strong> &amp; more";
    let sent = running.channel.send(&reply(&question.conversation, Some(&asked), html)).await.unwrap();
    let answer = alice.wait_for_event(&room, "the reply", |event| event["event_id"] == *sent.platform_message_id).await;
    assert_eq!(answer["sender"], *bot.user_id);
    assert_eq!(
        answer["content"],
        json!({
            "msgtype": "m.text", "body": "answer & more", "format": "org.matrix.custom.html",
            "formatted_body": html, "m.mentions": {}, "m.relates_to": {"m.in_reply_to": {"event_id": asked}},
        })
    );

    let root = alice.say(&room, "a thread root").await;
    assert_eq!(running.next().await.conversation.thread, None);
    let in_thread = alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "inside the thread", "m.relates_to": {
                "rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": {"event_id": root}}}),
        )
        .await;
    let threaded = running.next().await;
    assert_eq!(threaded.platform_message_id, in_thread);
    assert_eq!(threaded.conversation.thread.as_deref(), Some(root.as_str()));
    let sent =
        running.channel.send(&reply(&threaded.conversation, Some(&in_thread), "in the thread too")).await.unwrap();
    let answer =
        alice.wait_for_event(&room, "the thread reply", |event| event["event_id"] == *sent.platform_message_id).await;
    assert_eq!(
        answer["content"]["m.relates_to"],
        json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": {"event_id": in_thread}})
    );

    running.channel.edit(&sent, "<em>edited</em>").await.unwrap();
    let edit = alice
        .wait_for_event(&room, "the edit", |event| {
            event["content"]["m.relates_to"] == json!({"rel_type": "m.replace", "event_id": sent.platform_message_id})
        })
        .await;
    assert_eq!(edit["content"]["body"], "* edited");
    assert_eq!(edit["content"]["m.new_content"]["body"], "edited");
    assert_eq!(edit["content"]["m.new_content"]["formatted_body"], "<em>edited</em>");

    running.channel.acknowledge(&threaded).await.unwrap();
    let reaction = alice.wait_for_event(&room, "the reaction", |event| event["type"] == "m.reaction").await;
    assert_eq!(reaction["sender"], *bot.user_id);
    assert_eq!(
        reaction["content"]["m.relates_to"],
        json!({"rel_type": "m.annotation", "event_id": in_thread, "key": "👀"})
    );

    running.channel.typing(&threaded.conversation).await.unwrap();
    let synced = alice.sync().await;
    let typing: Vec<Value> =
        synced["rooms"]["join"][&room]["ephemeral"]["events"].as_array().cloned().unwrap_or_default();
    assert!(
        typing.iter().any(|event| event["type"] == "m.typing" && event["content"]["user_ids"] == json!([bot.user_id])),
        "the person sees the bot typing: {typing:?}"
    );

    let last = alice.say(&room, "the last word").await;
    assert_eq!(running.next().await.platform_message_id, last, "the bot's own events aren't handed over");
    running.stop().await;
}

pub async fn files_travel_both_ways(synapse: Arc<Synapse>) {
    let bot = synapse.register("mediabot").await;
    let alice = Person::new(&synapse, synapse.register("mediaalice").await);
    let state = tempfile::tempdir().unwrap();
    let bot_settings =
        MatrixSettings { max_attachment_bytes: 4096, ..settings(&synapse, &bot, state.path(), InvitePolicy::All) };
    let mut running = RunningBot::start(bot_settings).await;
    let room = alice.create_room(json!({"invite": [bot.user_id]})).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;
    let conversation = Conversation { id: room.clone(), kind: ConversationKind::Direct, thread: None };

    let drawing: Vec<u8> =
        b"\x89PNG\r\n\x1a\n".iter().copied().chain((0..200u8).map(|byte| byte.wrapping_mul(7))).collect();
    let outbound = OutboundMessage {
        attachments: vec![Attachment {
            name: "squid.png".to_owned(),
            mime: "image/png".to_owned(),
            data: AttachmentData::Bytes(drawing.clone()),
        }],
        ..reply(&conversation, None, "here is a drawing")
    };
    let sent = running.channel.send(&outbound).await.unwrap();
    let text = alice.wait_for_event(&room, "the text", |event| event["event_id"] == *sent.platform_message_id).await;
    assert_eq!(text["content"]["body"], "here is a drawing");
    let image = alice.wait_for_event(&room, "the image", |event| event["content"]["msgtype"] == "m.image").await;
    assert_eq!(image["sender"], *bot.user_id);
    assert_eq!(image["content"]["body"], "squid.png");
    assert_eq!(image["content"]["info"], json!({"mimetype": "image/png", "size": drawing.len()}));
    assert_eq!(alice.download(image["content"]["url"].as_str().unwrap()).await, drawing);

    let photo: Vec<u8> = (0..=255u8).rev().collect();
    let uri = alice.upload("photo.png", "image/png", photo.clone()).await;
    let content = json!({"msgtype": "m.image", "body": "photo.png", "url": uri,
                         "info": {"mimetype": "image/png", "size": photo.len()}});
    let photo_event = alice.send(&room, "m.room.message", content).await;
    let received = running.next().await;
    assert_eq!(received.platform_message_id, photo_event);
    assert_eq!(received.text, "");
    assert_eq!(
        received.attachments,
        vec![Attachment {
            name: "photo.png".to_owned(),
            mime: "image/png".to_owned(),
            data: AttachmentData::Bytes(photo)
        }]
    );

    // No declared size: the download itself stops at the cap.
    let uri = alice.upload("big.log", "text/plain", vec![b'x'; 10_000]).await;
    let content = json!({"msgtype": "m.file", "body": "the logs", "filename": "big.log", "url": uri});
    alice.send(&room, "m.room.message", content).await;
    let too_big = running.next().await;
    assert!(too_big.attachments.is_empty());
    assert_eq!(too_big.text, "the logs\n[attachment big.log skipped: 9.8 KB is over the 4 KB limit]");
    running.stop().await;
}

pub async fn an_encrypted_room_gets_one_notice(synapse: Arc<Synapse>) {
    let bot = synapse.register("cryptobot").await;
    let alice = Person::new(&synapse, synapse.register("cryptoalice").await);
    let state = tempfile::tempdir().unwrap();
    let mut running = RunningBot::start(settings(&synapse, &bot, state.path(), InvitePolicy::All)).await;
    let encryption =
        json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
    let room = alice.create_room(json!({"invite": [bot.user_id], "initial_state": [encryption]})).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;

    let ciphertext = json!({"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnACgAkLmt6qF84IK++J7UDH2Za1YVchHyprqTqsg",
                            "device_id": "ALICEDEVICE", "sender_key": "IlRMeOPX2e0MurIyfWEucYBRVOEEUMrOHqn/8mLqMjA",
                            "session_id": "X3lUlvLELLYxeTx4yOVu6UDpasGEVO0Jbu+QFnm0cKQ"});
    alice.send(&room, "m.room.encrypted", ciphertext.clone()).await;
    alice.send(&room, "m.room.encrypted", ciphertext).await;
    let plain = alice.say(&room, "plain text is still read").await;
    assert_eq!(running.next().await.platform_message_id, plain);

    let notices: Vec<Value> = alice
        .events(&room)
        .await
        .into_iter()
        .filter(|event| event["sender"] == *bot.user_id && event["content"]["msgtype"] == "m.notice")
        .collect();
    assert_eq!(notices.len(), 1, "{notices:#?}");
    assert!(notices[0]["content"]["body"].as_str().unwrap().contains("encrypted"));
    let remembered = std::fs::read_to_string(state.path().join("matrix.encrypted-rooms")).unwrap();
    assert_eq!(remembered, format!("{room}\n"));
    running.stop().await;
}
