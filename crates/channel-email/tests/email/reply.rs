//! Replying: the mail that reaches the SMTP server, its threading over two exchanges,
//! attachments, and what SMTP refusals mean.

use mail_parser::{MessageParser, MimeHeaders};
use squidbot_channel_email::{EmailChannel, Security};
use squidbot_channels::{
    Attachment, AttachmentData, Channel, ChannelErrorKind, Conversation, ConversationKind, InboundMessage,
    OutboundMessage,
};
use squidbot_testkit::mail::{BOT, MailServers, SentMail, plain_mail};

use super::harness::{BotSettings, Running};

/// A message starting a new thread to `address`.
pub fn new_thread_to(address: &str, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation: Conversation { id: address.to_owned(), kind: ConversationKind::Direct, thread: None },
        reply_to: None,
        text: text.to_owned(),
        attachments: Vec::new(),
    }
}

fn reply_to(message: &InboundMessage, text: &str, attachments: Vec<Attachment>) -> OutboundMessage {
    OutboundMessage {
        conversation: message.conversation.clone(),
        reply_to: Some(message.platform_message_id.clone()),
        text: text.to_owned(),
        attachments,
    }
}

fn header<'a>(mail: &'a mail_parser::Message<'a>, name: &str) -> String {
    mail.header_raw(name).unwrap_or_else(|| panic!("no {name} header")).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_continue_the_thread_over_two_exchanges() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    let mut running = Running::start(servers.settings());

    mailbox
        .append(&plain_mail("Ann Example <ann@example.org>", "Lunch", "<m1@example.org>", "Where shall we eat?"))
        .await;
    let first = running.next().await;
    let sent =
        running.channel.send(&reply_to(&first, "At the <harbour> café.\n\nSee you & bye", Vec::new())).await.unwrap();
    assert_eq!(sent.conversation, first.conversation);
    assert!(sent.platform_message_id.starts_with('<') && sent.platform_message_id.ends_with("@example.test>"));

    let [reply]: [SentMail; 1] = servers.smtp.wait_for(1).await.try_into().unwrap();
    assert_eq!(reply.recipients, ["ann@example.org"]);
    assert_eq!(reply.envelope_from, BOT);
    assert!(reply.authenticated && reply.encrypted, "{reply:?}");
    let parsed = MessageParser::default().parse(&reply.raw).unwrap();
    assert_eq!(parsed.subject(), Some("Re: Lunch"));
    let from = parsed.from().unwrap().first().unwrap();
    assert_eq!((from.name(), from.address()), (Some("Squid Bot"), Some(BOT)));
    assert_eq!(parsed.to().unwrap().first().unwrap().address(), Some("ann@example.org"));
    assert_eq!(header(&parsed, "In-Reply-To"), "<m1@example.org>");
    assert_eq!(header(&parsed, "References"), "<m1@example.org>");
    assert_eq!(format!("<{}>", parsed.message_id().unwrap()), sent.platform_message_id);
    assert_eq!(header(&parsed, "Auto-Submitted"), "auto-replied");
    assert!(
        parsed.root_part().content_type().is_some_and(|content_type| content_type.subtype() == Some("alternative"))
    );
    assert_eq!(
        parsed.body_text(0).unwrap().replace("\r\n", "\n").trim_end(),
        "At the <harbour> café.\n\nSee you & bye"
    );
    let html = parsed.body_html(0).unwrap();
    assert!(html.contains("<p>At the &lt;harbour&gt; café.</p>"), "{html}");
    assert!(html.contains("<p>See you &amp; bye</p>"), "{html}");

    // Ann answers the bot's reply, quoting it.
    let answer = format!(
        "From: Ann Example <ann@example.org>\r\nTo: {BOT}\r\nSubject: Re: Lunch\r\nMessage-ID: <m2@example.org>\r\n\
         In-Reply-To: {bot}\r\nReferences: <m1@example.org> {bot}\r\n\r\nPerfect, noon?\r\n\r\n\
         On Mon, 1 Jan 2024 at 10:05, Squid Bot <{BOT}> wrote:\r\n> At the harbour cafe.\r\n",
        bot = sent.platform_message_id
    );
    mailbox.append(answer.as_bytes()).await;
    let second = running.next().await;
    assert_eq!(second.conversation.id, "<m1@example.org>");
    assert_eq!(second.text, "Perfect, noon?");
    running.channel.send(&reply_to(&second, "Noon it is.", Vec::new())).await.unwrap();

    let sent_mails = servers.smtp.wait_for(2).await;
    let parsed = MessageParser::default().parse(&sent_mails[1].raw).unwrap();
    assert_eq!(parsed.subject(), Some("Re: Lunch"));
    assert_eq!(header(&parsed, "In-Reply-To"), "<m2@example.org>");
    assert_eq!(
        header(&parsed, "References"),
        format!("<m1@example.org> {} <m2@example.org>", sent.platform_message_id)
    );
    assert_eq!(sent_mails[1].recipients, ["ann@example.org"]);
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_go_out_as_mime_parts_over_implicit_tls() {
    let servers = MailServers::start().await;
    let mut settings = servers.settings();
    settings.smtp.port = servers.smtp.tls_port;
    settings.smtp.security = Security::Tls;
    let on_disk = servers.directory.path().join("report.csv");
    std::fs::write(&on_disk, "a,b\n1,2\n").unwrap();
    let binary: Vec<u8> = (0..=255u8).rev().cycle().take(5000).collect();
    let channel = EmailChannel::new(settings).unwrap();
    let mut message = new_thread_to("ann@example.org", "Here are the files.\nTwo of them.");
    message.attachments = vec![
        Attachment {
            name: "../../etc/chart.png".to_owned(),
            mime: "image/png".to_owned(),
            data: AttachmentData::Bytes(binary.clone()),
        },
        Attachment { name: "report.csv".to_owned(), mime: "text/csv".to_owned(), data: AttachmentData::Path(on_disk) },
    ];
    channel.send(&message).await.unwrap();

    let [mail]: [SentMail; 1] = servers.smtp.wait_for(1).await.try_into().unwrap();
    assert!(mail.authenticated && mail.encrypted, "{mail:?}");
    let parsed = MessageParser::default().parse(&mail.raw).unwrap();
    assert_eq!(parsed.subject(), Some("Here are the files."));
    assert!(parsed.header_raw("In-Reply-To").is_none());
    assert_eq!(parsed.body_text(0).unwrap().replace("\r\n", "\n").trim_end(), "Here are the files.\nTwo of them.");
    assert!(parsed.body_html(0).unwrap().contains("Here are the files.<br>"));
    let attachments: Vec<_> = parsed.attachments().collect();
    assert_eq!(attachments.len(), 2);
    assert_eq!(attachments[0].attachment_name(), Some("chart.png"));
    assert_eq!(attachments[0].contents(), binary.as_slice());
    assert!(attachments[0].is_content_type("image", "png"));
    assert_eq!(attachments[1].attachment_name(), Some("report.csv"));
    assert_eq!(attachments[1].contents(), b"a,b\n1,2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtp_refusals_are_classified() {
    let servers = MailServers::start().await;
    let channel = EmailChannel::new(servers.settings()).unwrap();
    let rejected = channel.send(&new_thread_to("reject-me@example.org", "hello")).await.unwrap_err();
    assert_eq!(rejected.kind, ChannelErrorKind::Rejected, "{rejected}");
    assert!(rejected.message.starts_with("can't send mail through 127.0.0.1:"), "{rejected}");
    let deferred = channel.send(&new_thread_to("defer-me@example.org", "hello")).await.unwrap_err();
    assert_eq!(deferred.kind, ChannelErrorKind::Transient, "{deferred}");
    assert!(servers.smtp.sent().is_empty());

    let unknown = OutboundMessage {
        conversation: Conversation {
            id: "<never-seen@example.org>".to_owned(),
            kind: ConversationKind::Direct,
            thread: None,
        },
        reply_to: Some("<never-seen@example.org>".to_owned()),
        text: "hello".to_owned(),
        attachments: Vec::new(),
    };
    let error = channel.send(&unknown).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Rejected, "{error}");
    assert!(error.message.contains("no mail of it is remembered"), "{error}");
}
