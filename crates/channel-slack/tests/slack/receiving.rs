//! Inbound: events become messages once, with plain text, threads and files.

use serde_json::json;
use squidbot_channel_slack::SlackSettings;
use squidbot_channels::{AttachmentData, Channel as _, Conversation, ConversationKind, OutboundMessage};
use squidbot_testkit::fake_slack::{BOT_ID, BOT_USER_ID, FakeFile, FakeSlack};

use super::support::{APP_TOKEN, BOT_TOKEN, Running, settings};

#[tokio::test]
async fn a_direct_message_is_delivered_and_acknowledged() {
    let mut running = Running::start().await;
    let ts = running.slack.push_message("D1", "im", "U1", "hello there", None, Vec::new());
    let message = running.next_message().await;
    assert_eq!(message.channel, "work-slack");
    assert_eq!(message.platform_message_id, format!("D1:{ts}"));
    assert_eq!(
        message.conversation,
        Conversation { id: "D1".to_owned(), kind: ConversationKind::Direct, thread: None }
    );
    assert_eq!(message.sender.id, "U1");
    assert_eq!(message.text, "hello there");
    assert!(message.mentions_bot, "a direct message is addressed to the bot");
    assert!(message.attachments.is_empty());
    assert_eq!(running.slack.wait_for_acks(1).await.len(), 1);
    assert!(running.slack.unacknowledged().is_empty());
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_channel_message_without_a_mention_is_not_addressed_to_the_bot() {
    let mut running = Running::start().await;
    running.slack.push_message("C1", "channel", "U1", "lunch anyone?", None, Vec::new());
    let message = running.next_message().await;
    assert_eq!(message.conversation.kind, ConversationKind::Group);
    assert!(!message.mentions_bot);
    assert_eq!(message.text, "lunch anyone?");
    running.slack.push_message("G1", "group", "U1", "private", None, Vec::new());
    running.slack.push_message("G2", "mpim", "U1", "group dm", None, Vec::new());
    for _ in 0..2 {
        assert_eq!(running.next_message().await.conversation.kind, ConversationKind::Group);
    }
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_mention_is_delivered_once_with_the_mention_stripped() {
    let mut running = Running::start().await;
    let ts = running.slack.push_mention("C1", "U1", &format!("<@{BOT_USER_ID}> what's the weather?"), None);
    let message = running.next_message().await;
    assert_eq!(message.platform_message_id, format!("C1:{ts}"));
    assert!(message.mentions_bot);
    assert_eq!(message.text, "what's the weather?");

    // The pair in the other order: app_mention first.
    let event = |kind: &str| {
        json!({"type": kind, "channel": "C1", "channel_type": "channel", "user": "U2",
               "text": format!("thanks <@{BOT_USER_ID}>"), "ts": "1800000000.000001"})
    };
    running.slack.push_event(event("app_mention"));
    running.slack.push_event(event("message"));
    let second = running.next_message().await;
    assert_eq!(second.platform_message_id, "C1:1800000000.000001");
    assert_eq!(second.text, "thanks");
    running.slack.push_message("C1", "channel", "U1", "after", None, Vec::new());
    assert_eq!(running.next_message().await.text, "after", "the second halves of both pairs were dropped");
    assert_eq!(running.slack.wait_for_acks(5).await.len(), 5, "every envelope is acknowledged");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_reply_lands_in_the_thread_the_message_came_from() {
    let mut running = Running::start().await;
    let parent = running.slack.push_message("C1", "channel", "U1", "topic", None, Vec::new());
    running.slack.push_message("C1", "channel", "U1", &format!("<@{BOT_USER_ID}> and?"), Some(&parent), Vec::new());
    let top = running.next_message().await;
    let threaded = running.next_message().await;
    assert_eq!(threaded.conversation.thread.as_deref(), Some(parent.as_str()));
    assert!(threaded.mentions_bot);
    for inbound in [&threaded, &top] {
        let reply = OutboundMessage {
            conversation: inbound.conversation.clone(),
            reply_to: Some(inbound.platform_message_id.clone()),
            text: "*noted*".to_owned(),
            attachments: Vec::new(),
        };
        running.channel.send(&reply).await.unwrap();
    }
    let posted = running.slack.posted();
    assert_eq!(posted.len(), 2);
    let (in_thread, in_channel) = (&posted[0], &posted[1]);
    assert_eq!(in_thread.channel, "C1");
    assert_eq!(in_thread.thread_ts.as_deref(), Some(parent.as_str()));
    assert_eq!(in_thread.text, "*noted*");
    assert_eq!((in_thread.mrkdwn, in_thread.unfurl_links), (Some(true), Some(false)));
    assert_eq!(in_channel.thread_ts, None, "a message that wasn't threaded is answered in the channel");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn the_bots_own_and_other_bots_messages_and_edits_are_ignored() {
    let mut running = Running::start().await;
    let own = json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": BOT_USER_ID,
                     "bot_id": BOT_ID, "text": "my reply", "ts": "1.000001"});
    let own_without_bot_id = json!({"type": "message", "channel": "D1", "channel_type": "im", "user": BOT_USER_ID,
                                    "text": "my reply", "ts": "1.000002"});
    let other_bot = json!({"type": "message", "subtype": "bot_message", "channel": "C1", "channel_type": "channel",
                           "bot_id": "B999", "text": "beep", "ts": "1.000003"});
    let edit = json!({"type": "message", "subtype": "message_changed", "channel": "C1", "channel_type": "channel",
                      "message": {"user": "U1", "text": "edited"}, "ts": "1.000004"});
    for event in [own, own_without_bot_id, other_bot, edit] {
        running.slack.push_event(event);
    }
    running.slack.push_message("D1", "im", "U1", "a person", None, Vec::new());
    assert_eq!(running.next_message().await.text, "a person");
    running.assert_nothing_more().await;
    assert_eq!(running.slack.wait_for_acks(5).await.len(), 5);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn unknown_and_malformed_frames_are_skipped_and_still_acknowledged() {
    let mut running = Running::start().await;
    running.slack.push_raw_frame("this is not json");
    running.slack.push_raw_frame(r#"{"type":"brand_new_frame"}"#);
    running.slack.push_raw_envelope(json!({"envelope_id": "slash-1", "type": "slash_commands",
        "payload": {"command": "/squid", "text": "hi"}, "accepts_response_payload": true}));
    running.slack.push_raw_envelope(json!({"envelope_id": "interactive-1", "type": "interactive", "payload": {}}));
    running.slack.push_raw_envelope(json!({"envelope_id": "broken-1", "type": "events_api",
        "payload": {"event": {"type": "message", "files": "not a list"}}, "retry_attempt": 0}));
    running.slack.push_event(json!({"type": "reaction_added", "user": "U1", "reaction": "tada"}));
    running.slack.push_message("D1", "im", "U1", "still here", None, Vec::new());
    assert_eq!(running.next_message().await.text, "still here");
    let acks = running.slack.wait_for_acks(5).await;
    for id in ["slash-1", "interactive-1", "broken-1"] {
        assert!(acks.iter().any(|ack| ack == id), "{id} was not acknowledged: {acks:?}");
    }
    assert!(running.slack.unexpected_frames().is_empty(), "{:?}", running.slack.unexpected_frames());
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn slacks_escapes_and_link_markup_become_plain_text() {
    let mut running = Running::start().await;
    let text = "1 &lt; 2 &amp;&amp; 3 &gt; 2, see <https://example.com/a?b=1&amp;c=2|the docs> or \
                <https://example.org>, ask <@U123> in <#C9|general> <!here>";
    running.slack.push_message("D1", "im", "U1", text, None, Vec::new());
    assert_eq!(
        running.next_message().await.text,
        "1 < 2 && 3 > 2, see the docs (https://example.com/a?b=1&c=2) or https://example.org, ask @U123 in #general @here"
    );
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_redelivered_envelope_keeps_its_message_id() {
    let mut running = Running::start().await;
    running.slack.set_redelivery_after(std::time::Duration::from_millis(300));
    running.slack.lose_next_acks(1);
    let ts = running.slack.push_message("C1", "channel", "U1", "are you there?", None, Vec::new());
    let first = running.next_message().await;
    let again = running.next_message().await;
    assert_eq!(first.platform_message_id, format!("C1:{ts}"));
    assert_eq!(again.platform_message_id, first.platform_message_id, "the manager drops it by id");
    assert_eq!(again.text, first.text);
    let envelopes = running.slack.sent_envelopes();
    let retried = envelopes.last().unwrap();
    assert_eq!(retried["retry_attempt"], 1);
    assert_eq!(retried["retry_reason"], "timeout");
    let acks = running.slack.wait_for_acks(1).await;
    assert_eq!(acks, vec![retried["envelope_id"].as_str().unwrap().to_owned()]);
    assert!(running.slack.unacknowledged().is_empty());
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn shared_files_are_downloaded_with_the_bot_token() {
    let mut running = Running::start().await;
    let file = FakeFile::new("notes (1).txt", "text/plain", b"hello file".to_vec());
    running.slack.push_message("D1", "im", "U1", "see attached", None, vec![file]);
    let message = running.next_message().await;
    assert_eq!(message.text, "see attached");
    assert_eq!(message.attachments.len(), 1);
    let attachment = &message.attachments[0];
    assert_eq!(attachment.name, "notes (1).txt");
    assert_eq!(attachment.mime, "text/plain");
    assert_eq!(attachment.data, AttachmentData::Bytes(b"hello file".to_vec()));
    assert_eq!(running.slack.downloads().len(), 1);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn files_over_the_cap_or_off_slack_are_skipped_with_a_note() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let settings = SlackSettings { max_attachment_bytes: 8, ..settings(&slack) };
    let mut running = Running::start_with(slack, settings, 16).await;
    let big = FakeFile::new("big.bin", "application/octet-stream", vec![7; 100]);
    let small = FakeFile::new("ok.txt", "text/plain", b"tiny".to_vec());
    running.slack.push_message("D1", "im", "U1", "two files", None, vec![big, small]);
    let message = running.next_message().await;
    assert_eq!(message.text, "two files\n[attachment big.bin skipped: 100 bytes is over the 8 bytes limit]");
    assert_eq!(message.attachments.len(), 1);
    assert_eq!(message.attachments[0].name, "ok.txt");
    assert_eq!(running.slack.downloads().len(), 1, "the big file was never fetched");

    running.slack.push_event(json!({"type": "message", "subtype": "file_share", "channel": "D1", "channel_type": "im",
        "user": "U1", "text": "", "ts": "1.5",
        "files": [{"id": "F9", "name": "elsewhere.txt", "size": 3, "url_private_download": "https://files.example.net/F9"}]}));
    let message = running.next_message().await;
    assert!(message.attachments.is_empty());
    assert!(
        message.text.starts_with("[attachment elsewhere.txt couldn't be downloaded: its URL is not on Slack"),
        "{}",
        message.text
    );
    assert_eq!(running.stop().await, Ok(()));
}
