//! Outbound: posting, editing, reacting, uploading files, and how failures are
//! classified.

use std::time::Duration;

use squidbot_channel_slack::{MAX_MESSAGE_CHARS, SlackChannel, SlackSettings};
use squidbot_channels::{
    Attachment, AttachmentData, Channel as _, ChannelErrorKind, Conversation, ConversationKind, MarkdownFlavor,
    OutboundMessage, SentMessage, StreamMode,
};
use squidbot_testkit::fake_slack::{Failure, FakeSlack};
use squidbot_types::Secret;

use super::support::{APP_TOKEN, BOT_TOKEN, Running, settings};

fn in_channel(channel: &str, thread: Option<&str>, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation: Conversation {
            id: channel.to_owned(),
            kind: ConversationKind::Group,
            thread: thread.map(str::to_owned),
        },
        reply_to: None,
        text: text.to_owned(),
        attachments: Vec::new(),
    }
}

async fn channel_for(slack: &FakeSlack) -> SlackChannel {
    SlackChannel::new(settings(slack)).unwrap()
}

#[tokio::test]
async fn capabilities_and_settings_checks() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let channel = channel_for(&slack).await;
    let capabilities = squidbot_channels::Channel::capabilities(&channel);
    assert_eq!(capabilities.streams, StreamMode::EditInPlace);
    assert!(!capabilities.typing);
    assert!(capabilities.threads);
    assert_eq!(capabilities.max_message_chars, MAX_MESSAGE_CHARS);
    assert_eq!(capabilities.max_message_chars, 4_000);
    assert_eq!(capabilities.markdown, MarkdownFlavor::SlackMrkdwn);
    assert_eq!(squidbot_channels::Channel::name(&channel), "work-slack");
    let swapped =
        SlackSettings { app_token: Secret::new(BOT_TOKEN), bot_token: Secret::new(APP_TOKEN), ..settings(&slack) };
    assert_eq!(SlackChannel::new(swapped).unwrap_err().kind, ChannelErrorKind::Fatal);
}

#[tokio::test]
async fn a_sent_message_can_be_edited_in_place() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let channel = channel_for(&slack).await;
    let sent = channel.send(&in_channel("C1", None, "thinking…")).await.unwrap();
    let posted = slack.posted();
    assert_eq!(sent.platform_message_id, format!("C1:{}", posted[0].ts));
    channel.edit(&sent, "the answer is *42*").await.unwrap();
    let updates = slack.updates();
    assert_eq!(updates.len(), 1);
    assert_eq!((updates[0].channel.as_str(), updates[0].ts.as_str()), ("C1", posted[0].ts.as_str()));
    assert_eq!(updates[0].text, "the answer is *42*");
    let calls = slack.calls();
    assert!(calls.iter().all(|call| call.encoding == "json"), "{calls:?}");

    let gone = SentMessage { conversation: sent.conversation.clone(), platform_message_id: "C1:1.000009".to_owned() };
    let error = channel.edit(&gone, "x").await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Rejected);
    assert_eq!(error.message, "can't call Slack's chat.update: message_not_found");
    let empty = channel.send(&in_channel("C1", None, "  ")).await.unwrap_err();
    assert_eq!(empty.kind, ChannelErrorKind::Rejected);
}

#[tokio::test]
async fn an_inbound_message_is_acknowledged_with_eyes_once() {
    let mut running = Running::start().await;
    let ts = running.slack.push_message("C1", "channel", "U1", "do it", None, Vec::new());
    let message = running.next_message().await;
    running.channel.acknowledge(&message).await.unwrap();
    running.channel.acknowledge(&message).await.unwrap();
    let reactions = running.slack.reactions();
    assert_eq!(reactions.len(), 1, "already_reacted counts as done");
    assert_eq!((reactions[0].channel.as_str(), reactions[0].timestamp.as_str()), ("C1", ts.as_str()));
    assert_eq!(reactions[0].name, "eyes");
    // Someone else's message can't be edited.
    let theirs =
        SentMessage { conversation: message.conversation.clone(), platform_message_id: message.platform_message_id };
    assert_eq!(running.channel.edit(&theirs, "x").await.unwrap_err().kind, ChannelErrorKind::Rejected);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn files_go_out_through_the_three_step_upload() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let channel = channel_for(&slack).await;
    let path = std::env::temp_dir().join(format!("squidbot-slack-upload-{}.csv", std::process::id()));
    std::fs::write(&path, "a,b\n1,2\n").unwrap();
    let mut message = in_channel("C1", Some("1700000001.000001"), "here you go");
    message.attachments = vec![
        Attachment {
            name: "report.txt".to_owned(),
            mime: "text/plain".to_owned(),
            data: AttachmentData::Bytes(b"all good".to_vec()),
        },
        Attachment {
            name: "data.csv".to_owned(),
            mime: "text/csv".to_owned(),
            data: AttachmentData::Path(path.clone()),
        },
    ];
    let sent = channel.send(&message).await.unwrap();
    std::fs::remove_file(&path).unwrap();
    let uploads = slack.uploads();
    assert_eq!(uploads.len(), 2);
    assert_eq!(uploads[0].filename, "report.txt");
    assert_eq!(uploads[0].title.as_deref(), Some("report.txt"));
    assert_eq!(uploads[0].bytes, b"all good");
    assert_eq!(uploads[1].bytes, b"a,b\n1,2\n");
    for upload in &uploads {
        assert_eq!(upload.channel_id.as_deref(), Some("C1"));
        assert_eq!(upload.thread_ts.as_deref(), Some("1700000001.000001"));
        assert_eq!(upload.initial_comment.as_deref(), Some("here you go"));
    }
    assert!(slack.posted().is_empty(), "the text went with the files");
    assert_eq!(sent.platform_message_id, format!("C1:{}", uploads[0].message_ts.clone().unwrap()));
    let methods: Vec<String> = slack.calls().into_iter().map(|call| call.method).collect();
    assert_eq!(methods, ["files.getUploadURLExternal", "files.getUploadURLExternal", "files.completeUploadExternal"]);
    // The message sharing the files can be edited like any other.
    channel.edit(&sent, "here you go (updated)").await.unwrap();
    assert_eq!(slack.updates().len(), 1);
}

#[tokio::test]
async fn a_rate_limit_says_how_long_to_wait() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let channel = channel_for(&slack).await;
    slack.rate_limit_next("chat.postMessage", Duration::from_secs(7));
    let error = channel.send(&in_channel("C1", None, "hi")).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(7) });
    assert!(error.is_retryable());
    channel.send(&in_channel("C1", None, "hi")).await.unwrap();
    assert_eq!(slack.posted().len(), 1);
}

#[tokio::test]
async fn failures_are_classified_at_the_source() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let channel = channel_for(&slack).await;
    let cases = [
        (Failure::Status(502), ChannelErrorKind::Transient),
        (Failure::Status(500), ChannelErrorKind::Transient),
        (
            Failure::Error("ratelimited".to_owned()),
            ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(5) },
        ),
        (Failure::Error("invalid_auth".to_owned()), ChannelErrorKind::Fatal),
        (Failure::Error("token_revoked".to_owned()), ChannelErrorKind::Fatal),
        (Failure::Error("channel_not_found".to_owned()), ChannelErrorKind::Rejected),
        (Failure::Error("msg_too_long".to_owned()), ChannelErrorKind::Rejected),
        (Failure::Error("internal_error".to_owned()), ChannelErrorKind::Transient),
    ];
    for (failure, expected) in cases {
        slack.fail_next("chat.postMessage", failure.clone());
        let error = channel.send(&in_channel("C1", None, "hi")).await.unwrap_err();
        assert_eq!(error.kind, expected, "{failure:?}: {error}");
        assert!(error.message.starts_with("can't "), "{error}");
    }
    slack.fail_next("files.getUploadURLExternal", Failure::Status(503));
    let mut with_file = in_channel("C1", None, "");
    with_file.attachments = vec![Attachment {
        name: "a.txt".to_owned(),
        mime: "text/plain".to_owned(),
        data: AttachmentData::Bytes(vec![1]),
    }];
    assert_eq!(channel.send(&with_file).await.unwrap_err().kind, ChannelErrorKind::Transient);
    let too_long = in_channel("C1", None, &"x".repeat(40_001));
    let error = channel.send(&too_long).await.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ChannelErrorKind::Rejected, "can't call Slack's chat.postMessage: msg_too_long")
    );
    assert!(slack.posted().is_empty());
}
