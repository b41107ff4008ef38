//! Outbound calls: send (replies, threads, files), edit, typing, reactions, and how
//! failures and rate limits come back.

use std::time::Duration;

use serde_json::json;
use squidbot_channel_discord::{DiscordChannel, MAX_MESSAGE_CHARS};
use squidbot_channels::{
    Attachment, AttachmentData, Channel, ChannelErrorKind, Conversation, ConversationKind, InboundMessage,
    MarkdownFlavor, OutboundMessage, Sender, SentMessage, StreamMode,
};
use squidbot_testkit::fake_discord::{FakeDiscord, FakeFile, FakeRoute};

use crate::support::{TOKEN, settings};

fn channel(discord: &FakeDiscord) -> DiscordChannel {
    DiscordChannel::new(settings(discord)).unwrap()
}

fn group(id: &str, thread: Option<&str>) -> Conversation {
    Conversation { id: id.to_owned(), kind: ConversationKind::Group, thread: thread.map(str::to_owned) }
}

fn text(conversation: Conversation, text: &str) -> OutboundMessage {
    OutboundMessage { conversation, reply_to: None, text: text.to_owned(), attachments: Vec::new() }
}

#[tokio::test]
async fn capabilities_match_discord() {
    let discord = FakeDiscord::start(TOKEN).await;
    let capabilities = channel(&discord).capabilities();
    assert_eq!(capabilities.streams, StreamMode::EditInPlace);
    assert!(capabilities.typing && capabilities.threads);
    assert_eq!(capabilities.max_message_chars, MAX_MESSAGE_CHARS);
    assert_eq!(capabilities.max_message_chars, 2000);
    assert_eq!(capabilities.markdown, MarkdownFlavor::DiscordMarkdown);
}

#[tokio::test]
async fn a_reply_references_the_message_and_pings_nobody() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    let mut message = text(group("200", None), "**hello** @everyone");
    message.reply_to = Some("1234".to_owned());
    let sent = channel.send(&message).await.unwrap();

    let record = &discord.sent()[0];
    assert_eq!(sent.platform_message_id, record.message_id);
    assert_eq!(sent.conversation, group("200", None));
    assert_eq!(record.channel_id, "200");
    assert_eq!(record.content, "**hello** @everyone");
    assert_eq!(record.message_reference, Some(json!({"message_id": "1234", "fail_if_not_exists": false})));
    assert_eq!(record.allowed_mentions, Some(json!({"parse": []})));
}

#[tokio::test]
async fn replies_in_a_thread_go_to_the_thread_and_edits_follow_them() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    let sent = channel.send(&text(group("200", Some("610")), "in the thread")).await.unwrap();
    assert_eq!(discord.sent()[0].channel_id, "610");
    assert_eq!(discord.sent()[0].message_reference, None);

    channel.edit(&sent, "in the thread, edited").await.unwrap();
    let edit = &discord.edits()[0];
    assert_eq!((edit.channel_id.as_str(), edit.message_id.as_str()), ("610", sent.platform_message_id.as_str()));
    assert_eq!(edit.content, "in the thread, edited");
    assert_eq!(edit.allowed_mentions, Some(json!({"parse": []})));
}

#[tokio::test]
async fn editing_a_message_discord_does_not_know_is_rejected() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    let unknown = SentMessage { conversation: group("200", None), platform_message_id: "999".to_owned() };
    let error = channel.edit(&unknown, "new text").await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Rejected);
    assert!(error.message.contains("Unknown Message (code 10008)"), "{error}");
}

#[tokio::test]
async fn typing_and_acknowledging_reach_the_right_channel() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    channel.typing(&group("200", Some("610"))).await.unwrap();
    channel.typing(&group("201", None)).await.unwrap();
    assert_eq!(discord.typing(), ["610", "201"]);

    let inbound = InboundMessage {
        channel: "discord".to_owned(),
        platform_message_id: "4321".to_owned(),
        conversation: group("200", None),
        sender: Sender { id: "42".to_owned(), display_name: None },
        text: "hi".to_owned(),
        mentions_bot: true,
        attachments: Vec::new(),
        received_at: jiff::Timestamp::UNIX_EPOCH,
    };
    channel.acknowledge(&inbound).await.unwrap();
    let reaction = &discord.reactions()[0];
    assert_eq!((reaction.channel_id.as_str(), reaction.message_id.as_str()), ("200", "4321"));
    assert_eq!(reaction.emoji, "👀");
}

#[tokio::test]
async fn files_are_sent_as_multipart_with_their_descriptions() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("report.csv");
    std::fs::write(&path, "a,b\n1,2\n").unwrap();
    let mut message = text(group("200", None), "two files");
    message.reply_to = Some("77".to_owned());
    message.attachments = vec![
        Attachment {
            name: "chart.png".to_owned(),
            mime: "image/png".to_owned(),
            data: AttachmentData::Bytes(vec![1, 2, 3]),
        },
        Attachment {
            name: "../report.csv".to_owned(),
            mime: "not a type".to_owned(),
            data: AttachmentData::Path(path),
        },
    ];
    channel.send(&message).await.unwrap();

    let record = &discord.sent()[0];
    assert_eq!(record.content, "two files");
    assert_eq!(record.message_reference, Some(json!({"message_id": "77", "fail_if_not_exists": false})));
    assert_eq!(record.allowed_mentions, Some(json!({"parse": []})));
    assert_eq!(
        record.payload["attachments"],
        json!([{"id": 0, "filename": "chart.png"}, {"id": 1, "filename": "report.csv"}])
    );
    assert_eq!(
        record.files,
        [
            FakeFile::new("chart.png", "image/png", vec![1, 2, 3]),
            FakeFile::new("report.csv", "application/octet-stream", "a,b\n1,2\n"),
        ]
    );
}

#[tokio::test]
async fn a_missing_file_is_rejected_without_a_request() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut message = text(group("200", None), "here");
    message.attachments = vec![Attachment {
        name: "gone".to_owned(),
        mime: "text/plain".to_owned(),
        data: AttachmentData::Path("/nonexistent/gone".into()),
    }];
    let error = channel(&discord).send(&message).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Rejected);
    assert_eq!(discord.request_count(FakeRoute::CreateMessage), 0);
}

#[tokio::test]
async fn a_429_returns_the_wait_and_holds_the_route_until_it_passes() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    let message = text(group("200", None), "hello");
    discord.rate_limit_next(FakeRoute::CreateMessage, Duration::from_millis(1500));
    let error = channel.send(&message).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::RateLimited { retry_after: Duration::from_millis(1500) });
    assert!(error.is_retryable());

    // Asking again before the wait is over doesn't reach Discord.
    let again = channel.send(&message).await.unwrap_err();
    let ChannelErrorKind::RateLimited { retry_after } = again.kind else { panic!("{again:?}") };
    assert!(retry_after <= Duration::from_millis(1500) && retry_after > Duration::from_millis(1000), "{retry_after:?}");
    assert_eq!(discord.request_count(FakeRoute::CreateMessage), 1);
    // Other routes are not held.
    channel.typing(&group("200", None)).await.unwrap();
}

#[tokio::test]
async fn a_short_rate_limit_lets_requests_through_once_it_passed() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    discord.rate_limit_next(FakeRoute::CreateMessage, Duration::from_millis(200));
    assert!(channel.send(&text(group("200", None), "early")).await.is_err());
    tokio::time::sleep(Duration::from_millis(250)).await;
    channel.send(&text(group("200", None), "on time")).await.unwrap();
    assert_eq!(discord.sent()[0].content, "on time");
}

#[tokio::test]
async fn a_global_rate_limit_holds_every_route() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    discord.rate_limit_next_globally(FakeRoute::Typing, Duration::from_secs(2));
    let error = channel.typing(&group("200", None)).await.unwrap_err();
    assert!(matches!(error.kind, ChannelErrorKind::RateLimited { .. }), "{error:?}");
    let error = channel.send(&text(group("201", None), "hello")).await.unwrap_err();
    assert!(matches!(error.kind, ChannelErrorKind::RateLimited { .. }), "{error:?}");
    assert_eq!(discord.request_count(FakeRoute::CreateMessage), 0);
}

#[tokio::test]
async fn statuses_map_to_error_kinds() {
    let discord = FakeDiscord::start(TOKEN).await;
    let channel = channel(&discord);
    let message = text(group("200", None), "hello");
    for (status, kind) in [
        (500, ChannelErrorKind::Transient),
        (502, ChannelErrorKind::Transient),
        (401, ChannelErrorKind::Fatal),
        (403, ChannelErrorKind::Rejected),
        (404, ChannelErrorKind::Rejected),
        (400, ChannelErrorKind::Rejected),
    ] {
        discord.fail_next(FakeRoute::CreateMessage, status);
        let error = channel.send(&message).await.unwrap_err();
        assert_eq!(error.kind, kind, "status {status}: {error}");
        assert!(error.message.starts_with("can't send a Discord message to channel 200"), "{error}");
    }
    discord.fail_next(FakeRoute::Reaction, 503);
    let inbound = InboundMessage {
        channel: "discord".to_owned(),
        platform_message_id: "1".to_owned(),
        conversation: group("200", None),
        sender: Sender { id: "42".to_owned(), display_name: None },
        text: String::new(),
        mentions_bot: false,
        attachments: Vec::new(),
        received_at: jiff::Timestamp::UNIX_EPOCH,
    };
    assert_eq!(channel.acknowledge(&inbound).await.unwrap_err().kind, ChannelErrorKind::Transient);
    channel.send(&message).await.unwrap();
}

#[tokio::test]
async fn a_too_long_message_is_rejected_by_discord() {
    let discord = FakeDiscord::start(TOKEN).await;
    let error = channel(&discord).send(&text(group("200", None), &"x".repeat(2001))).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Rejected);
}

#[tokio::test]
async fn ids_that_are_not_snowflakes_never_reach_a_url() {
    let discord = FakeDiscord::start(TOKEN).await;
    let error = channel(&discord).send(&text(group("../gateway", None), "hello")).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Rejected);
    assert_eq!(discord.request_count(FakeRoute::CreateMessage), 0);
}

#[tokio::test]
async fn a_nonsense_configuration_is_fatal() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut bad = settings(&discord);
    bad.api_base = "ftp://example".to_owned();
    assert_eq!(DiscordChannel::new(bad).unwrap_err().kind, ChannelErrorKind::Fatal);
}
