//! Sending: HTML, replies, topics, the plain-text fallback, edits, typing, reactions,
//! uploads.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::json;
use squidbot_channel_telegram::TelegramChannel;
use squidbot_channels::{
    Attachment, AttachmentData, Channel, ChannelErrorKind, Conversation, ConversationKind, InboundMessage,
    OutboundMessage, Sender, SentMessage,
};
use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram};

use crate::{TOKEN, ada, settings};

async fn channel() -> (FakeTelegram, TelegramChannel) {
    let fake = FakeTelegram::start(TOKEN).await;
    let channel = TelegramChannel::new(settings(&fake)).unwrap();
    (fake, channel)
}

fn topic(chat: &str, thread: Option<&str>) -> Conversation {
    Conversation { id: chat.to_owned(), kind: ConversationKind::Group, thread: thread.map(str::to_owned) }
}

fn text_message(conversation: Conversation, reply_to: Option<&str>, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation,
        reply_to: reply_to.map(str::to_owned),
        text: text.to_owned(),
        attachments: Vec::new(),
    }
}

#[tokio::test]
async fn messages_go_out_as_html_replies_in_their_topic() {
    let (fake, channel) = channel().await;
    let outbound = text_message(topic("-100123", Some("77")), Some("-100123:5"), "<b>hi</b> &amp; bye");
    let sent = channel.send(&outbound).await.unwrap();

    let requests = fake.sent();
    let params = &requests[0].params;
    assert_eq!(params["chat_id"], -100123);
    assert_eq!(params["text"], "<b>hi</b> &amp; bye");
    assert_eq!(params["parse_mode"], "HTML");
    assert_eq!(params["reply_parameters"]["message_id"], 5);
    assert_eq!(params["message_thread_id"], 77);
    assert_eq!(params["link_preview_options"], json!({ "is_disabled": true }));
    assert!(sent.platform_message_id.starts_with("-100123:"), "{}", sent.platform_message_id);
    assert_eq!(sent.conversation, outbound.conversation);

    // A reply_to from another chat can't be a Telegram reply.
    channel.send(&text_message(topic("-100123", None), Some("-999:5"), "elsewhere")).await.unwrap();
    let params = &fake.sent()[1].params;
    assert!(params.get("reply_parameters").is_none(), "{params}");
    assert!(params.get("message_thread_id").is_none(), "{params}");
}

#[tokio::test]
async fn html_telegram_cant_parse_is_resent_as_plain_text() {
    let (fake, channel) = channel().await;
    let html = "<b>bold</b> and <blink>x</blink> &amp; <a href=\"https://x.test/\">docs</a>";
    channel.send(&text_message(topic("-100123", None), None, html)).await.unwrap();
    let attempts = fake.requests_for("sendMessage");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].status, 400);
    assert_eq!(attempts[1].status, 200);
    assert!(attempts[1].params.get("parse_mode").is_none());
    assert_eq!(attempts[1].params["text"], "bold and x & docs (https://x.test/)");
}

#[tokio::test]
async fn edits_replace_the_text_and_an_unchanged_edit_is_fine() {
    let (fake, channel) = channel().await;
    let sent = channel.send(&text_message(topic("-100123", None), None, "one")).await.unwrap();
    channel.edit(&sent, "one <i>two</i>").await.unwrap();
    channel.edit(&sent, "one <i>two</i>").await.unwrap();
    let attempts = fake.requests_for("editMessageText");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1].status, 400, "Telegram said: not modified");
    let edits = fake.edits();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0].params["text"], "one <i>two</i>");
    assert_eq!(edits[0].params["parse_mode"], "HTML");
    assert_eq!(
        edits[0].params["message_id"].as_i64().map(|id| format!("-100123:{id}")),
        Some(sent.platform_message_id)
    );

    let gone = SentMessage { conversation: topic("-100123", None), platform_message_id: "-100123:9999".to_owned() };
    assert_eq!(channel.edit(&gone, "x").await.unwrap_err().kind, ChannelErrorKind::Rejected);
}

#[tokio::test]
async fn typing_is_shown_in_the_topic() {
    let (fake, channel) = channel().await;
    channel.typing(&topic("-100123", Some("77"))).await.unwrap();
    let actions = fake.chat_actions();
    assert_eq!(actions[0].params, json!({ "chat_id": -100123, "action": "typing", "message_thread_id": 77 }));
}

#[tokio::test]
async fn acknowledging_reacts_with_eyes_and_refusals_are_rejected() {
    let (fake, channel) = channel().await;
    let pushed = fake.push_user_message(501, ChatKind::Private, &ada(), "hi");
    let mut inbound = InboundMessage {
        channel: "telegram".to_owned(),
        platform_message_id: format!("501:{}", pushed.message_id),
        conversation: Conversation { id: "501".to_owned(), kind: ConversationKind::Direct, thread: None },
        sender: Sender { id: "501".to_owned(), display_name: None },
        text: "hi".to_owned(),
        mentions_bot: true,
        attachments: Vec::new(),
        received_at: Timestamp::UNIX_EPOCH,
    };
    channel.acknowledge(&inbound).await.unwrap();
    let reactions = fake.reactions();
    assert_eq!(reactions[0].params["chat_id"], 501);
    assert_eq!(reactions[0].params["message_id"], pushed.message_id);
    assert_eq!(reactions[0].params["reaction"], json!([{ "type": "emoji", "emoji": "👀" }]));

    inbound.platform_message_id = "501:424242".to_owned();
    assert_eq!(channel.acknowledge(&inbound).await.unwrap_err().kind, ChannelErrorKind::Rejected);
}

#[tokio::test]
async fn attachments_are_uploaded_with_the_text_as_caption_when_it_fits() {
    let (fake, channel) = channel().await;
    let image = Attachment {
        name: "chart.png".to_owned(),
        mime: "image/png".to_owned(),
        data: AttachmentData::Bytes(vec![1, 2, 3]),
    };
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("notes.txt");
    std::fs::write(&path, "file on disk").unwrap();
    let notes =
        Attachment { name: "notes.txt".to_owned(), mime: "text/plain".to_owned(), data: AttachmentData::Path(path) };
    let outbound = OutboundMessage {
        conversation: topic("-100123", Some("77")),
        reply_to: Some("-100123:5".to_owned()),
        text: "<b>here</b>".to_owned(),
        attachments: vec![image, notes.clone()],
    };
    let sent = channel.send(&outbound).await.unwrap();
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 2);
    assert!(fake.sent().is_empty(), "the text went as a caption");
    assert_eq!(uploads[0].method, "sendPhoto");
    assert_eq!(uploads[0].params["caption"], "<b>here</b>");
    assert_eq!(uploads[0].params["parse_mode"], "HTML");
    assert_eq!(uploads[0].params["chat_id"], -100123);
    assert_eq!(uploads[0].params["message_thread_id"], 77);
    assert_eq!(uploads[0].params["reply_parameters"]["message_id"], 5);
    assert_eq!(uploads[0].files[0].field, "photo");
    assert_eq!(uploads[0].files[0].file_name.as_deref(), Some("chart.png"));
    assert_eq!(uploads[0].files[0].bytes, vec![1, 2, 3]);
    assert_eq!(uploads[1].method, "sendDocument");
    assert!(uploads[1].params.get("caption").is_none());
    assert!(uploads[1].params.get("reply_parameters").is_none(), "only the first message replies");
    assert_eq!(uploads[1].files[0].mime.as_deref(), Some("text/plain"));
    assert_eq!(uploads[1].files[0].bytes, b"file on disk");
    assert!(sent.platform_message_id.starts_with("-100123:"));

    // Too long for a caption: the text first, then the file.
    let long = OutboundMessage { text: "x".repeat(2000), attachments: vec![notes], ..outbound };
    let sent = channel.send(&long).await.unwrap();
    assert_eq!(fake.sent().len(), 1);
    assert_eq!(fake.uploads().len(), 3);
    assert!(fake.uploads()[2].params.get("caption").is_none());
    // The message returned is the text one: only text messages can be edited.
    channel.edit(&sent, "shorter").await.unwrap();
}

#[tokio::test]
async fn a_rate_limited_send_says_how_long_to_wait() {
    let (fake, channel) = channel().await;
    fake.rate_limit_next("sendMessage", 3);
    let error = channel.send(&text_message(topic("-100123", None), None, "hi")).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(3) });
    assert!(error.message.starts_with("can't send a message to Telegram: Telegram answered 429"), "{error}");
    assert!(!error.message.contains("fake-secret"));
}

#[tokio::test]
async fn an_unreachable_api_is_transient_and_the_token_stays_out_of_the_error() {
    // A port nothing listens on: bind one, then free it.
    let address = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let settings = squidbot_channel_telegram::TelegramSettings {
        api_base: format!("http://{address}"),
        ..squidbot_channel_telegram::TelegramSettings::new("telegram", squidbot_types::Secret::new(TOKEN))
    };
    let channel = TelegramChannel::new(settings).unwrap();
    let error = channel.send(&text_message(topic("-100123", None), None, "hi")).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Transient);
    assert!(error.message.starts_with("can't send a message to Telegram:"), "{error}");
    assert!(!error.message.contains("fake-secret"), "{error}");
}
