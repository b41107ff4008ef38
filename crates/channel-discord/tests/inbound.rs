//! Inbound messages: guild mentions and replies, messages that are not delivered, and
//! attachments downloaded or skipped.

use squidbot_channels::{AttachmentData, ConversationKind};
use squidbot_testkit::fake_discord::{FAKE_BOT_ID, FakeDiscord, FakeFile, FakeMessage, FakeRoute};

use crate::support::{TOKEN, settings, start, start_with};

#[tokio::test]
async fn guild_messages_mention_the_bot_only_when_they_name_or_answer_it() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;

    discord.push_message_create(FakeMessage::guild("300", "200", "42", "talking among ourselves"));
    let plain = running.next_message().await;
    assert_eq!(plain.conversation.kind, ConversationKind::Group);
    assert_eq!(plain.conversation.id, "200");
    assert!(!plain.mentions_bot);
    assert_eq!(plain.text, "talking among ourselves");

    let content = format!("<@{FAKE_BOT_ID}> what's the weather?");
    discord.push_message_create(FakeMessage::guild("300", "200", "42", &content).mentioning_bot());
    let mentioned = running.next_message().await;
    assert!(mentioned.mentions_bot);
    assert_eq!(mentioned.text, "what's the weather?");

    let nickname_form = format!("and tomorrow, <@!{FAKE_BOT_ID}>?");
    discord.push_message_create(FakeMessage::guild("300", "200", "42", &nickname_form).mentioning_bot());
    assert_eq!(running.next_message().await.text, "and tomorrow, ?");

    discord.push_message_create(FakeMessage::guild("300", "200", "42", "thanks!").replying_to_bot());
    let reply = running.next_message().await;
    assert!(reply.mentions_bot, "a reply to the bot counts as a mention");
    assert_eq!(reply.text, "thanks!");
    running.stop().await;
}

#[tokio::test]
async fn the_bot_s_own_and_other_bots_messages_are_not_delivered() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.push_message_create(FakeMessage::guild("300", "200", FAKE_BOT_ID, "my own echo").by_the_bot_itself());
    discord.push_message_create(FakeMessage::guild("300", "200", "77", "beep").by_a_bot("77"));
    discord.push_message_create(FakeMessage::direct("500", "77", "boop").by_a_bot("77"));
    discord.push_message_create(FakeMessage::guild("300", "200", "42", "a person"));
    let message = running.next_message().await;
    assert_eq!(message.text, "a person");
    assert!(running.receiver.try_recv().is_err());
    running.stop().await;
}

#[tokio::test]
async fn attachments_are_downloaded_with_name_and_type() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    let photo = FakeFile::new("photo.png", "image/png", vec![0x89, b'P', b'N', b'G', 1, 2, 3]);
    let notes = FakeFile::new("notes.txt", "text/plain", "some notes");
    discord.push_message_create(
        FakeMessage::direct("500", "42", "have a look").with_attachment(photo).with_attachment(notes),
    );
    let message = running.next_message().await;
    assert_eq!(message.text, "have a look");
    assert_eq!(message.attachments.len(), 2);
    assert_eq!(message.attachments[0].name, "photo.png");
    assert_eq!(message.attachments[0].mime, "image/png");
    assert_eq!(message.attachments[0].data, AttachmentData::Bytes(vec![0x89, b'P', b'N', b'G', 1, 2, 3]));
    assert_eq!(message.attachments[1].data, AttachmentData::Bytes(b"some notes".to_vec()));
    running.stop().await;
}

#[tokio::test]
async fn attachments_over_the_cap_or_unreachable_are_skipped_with_a_note() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut settings = settings(&discord);
    settings.max_attachment_bytes = 1024;
    let mut running = start_with(&discord, settings).await;

    let announced_big = FakeFile::new("big.bin", "application/octet-stream", vec![7; 2048]);
    let mut understated = FakeFile::new("sly.bin", "application/octet-stream", vec![7; 3072]);
    understated.announced_size = Some(10);
    let small = FakeFile::new("small.txt", "text/plain", "fits");
    discord.push_message_create(
        FakeMessage::direct("500", "42", "three files")
            .with_attachment(announced_big)
            .with_attachment(understated)
            .with_attachment(small),
    );
    let message = running.next_message().await;
    assert_eq!(
        message.text,
        "three files\n[attachment big.bin skipped: 2 KB is over the 1 KB limit]\n[attachment sly.bin skipped: 3 KB is over the 1 KB limit]"
    );
    assert_eq!(message.attachments.len(), 1);
    assert_eq!(message.attachments[0].name, "small.txt");
    assert_eq!(discord.request_count(FakeRoute::Attachment), 2, "the announced-too-big file is not fetched");

    discord.fail_next(FakeRoute::Attachment, 404);
    discord.push_message_create(FakeMessage::direct("500", "42", "").with_attachment(FakeFile::new(
        "gone.txt",
        "text/plain",
        "x",
    )));
    let message = running.next_message().await;
    assert!(message.text.starts_with("[attachment gone.txt skipped: can't download it:"), "{}", message.text);
    assert!(message.attachments.is_empty());
    running.stop().await;
}
