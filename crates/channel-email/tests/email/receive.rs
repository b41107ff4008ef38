//! Receiving: mail put into the bot's mailbox reaches the manager, decoded, filtered,
//! exactly once.

use std::time::Duration;

use squidbot_channels::{AttachmentData, ConversationKind};
use squidbot_testkit::mail::{BOT, MailServers, plain_mail};

use super::harness::{BotSettings, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_mail_arrives_through_idle_and_is_flagged_seen() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    let mut running = Running::start(servers.settings());

    let first = mailbox
        .append(&plain_mail("Ann Example <Ann@Example.org>", "Lunch?", "<lunch-1@example.org>", "Shall we have lunch?"))
        .await;
    let message = running.next().await;
    assert_eq!(message.channel, "email");
    assert_eq!(message.sender.id, "ann@example.org");
    assert_eq!(message.sender.display_name.as_deref(), Some("Ann Example"));
    assert_eq!(message.text, "Subject: Lunch?\n\nShall we have lunch?");
    assert_eq!(message.platform_message_id, "<lunch-1@example.org>");
    assert_eq!(message.conversation.id, "<lunch-1@example.org>");
    assert_eq!(message.conversation.kind, ConversationKind::Direct);
    assert!(message.mentions_bot);

    // The loop is idling now; with the default 60 s poll interval only IDLE can bring
    // the next mail within the test's patience.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second =
        mailbox.append(&plain_mail("bob@example.org", "Re: Lunch?", "<lunch-2@example.org>", "Count me in.")).await;
    let message = running.next().await;
    assert_eq!(message.platform_message_id, "<lunch-2@example.org>");
    assert_eq!(message.sender.id, "bob@example.org");

    // The flag is stored right after the mail is handed over, so it may trail it a little.
    let mut seen = mailbox.seen().await;
    for _ in 0..50 {
        if seen[&first] && seen[&second] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = mailbox.seen().await;
    }
    assert_eq!((seen[&first], seen[&second]), (true, true), "{}", servers.dovecot_log());
    let (result, _took) = running.stop().await;
    assert_eq!(result, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_only_and_legacy_charset_mail_is_decoded() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    mailbox
        .append(
            b"From: ann@example.org\r\nSubject: Menu\r\nMessage-ID: <html@example.org>\r\n\
              Content-Type: text/html; charset=utf-8\r\n\r\n\
              <html><head><style>p {}</style></head><body><p>Soup &amp; salad</p><ul><li>tea</li></ul></body></html>\r\n",
        )
        .await;
    mailbox
        .append(
            b"From: =?ISO-8859-1?Q?Andr=E9?= <andre@example.org>\r\nSubject: =?iso-8859-1?q?Caf=E9?=\r\n\
              Message-ID: <latin1@example.org>\r\nContent-Type: text/plain; charset=ISO-8859-1\r\n\
              Content-Transfer-Encoding: quoted-printable\r\n\r\nUn caf=E9 cr=E8me.\r\n",
        )
        .await;
    let mut windows =
        b"From: ann@example.org\r\nSubject: =?UTF-8?B?4pyTIGRvbmU=?=\r\nMessage-ID: <cp1252@example.org>\r\n\
        Content-Type: text/plain; charset=windows-1252\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
            .to_vec();
    windows.extend_from_slice(b"\x93Quoted\x94 costs \x80 5\r\n");
    mailbox.append(&windows).await;

    let mut running = Running::start(servers.settings());
    assert_eq!(running.next().await.text, "Subject: Menu\n\nSoup & salad\n\n- tea");
    let latin1 = running.next().await;
    assert_eq!(latin1.text, "Subject: Café\n\nUn café crème.");
    assert_eq!(latin1.sender.display_name.as_deref(), Some("André"));
    assert_eq!(running.next().await.text, "Subject: ✓ done\n\n“Quoted” costs € 5");
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_mail_does_not_stop_the_loop() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    let mut running = Running::start(servers.settings());
    // Not a mail at all, then a multipart whose boundary never closes with broken
    // base64 and an unknown charset.
    mailbox.append(b"\x00\xff\xfe garbage without any header\r\n").await;
    mailbox
        .append(
            b"From: ann@example.org\r\nMessage-ID: <broken@example.org>\r\n\
              Content-Type: multipart/mixed; boundary=\"never\"\r\n\r\n--never\r\n\
              Content-Type: text/plain; charset=x-unheard-of\r\nContent-Transfer-Encoding: base64\r\n\r\n\
              !!!not base64\xff\r\n",
        )
        .await;
    mailbox.append(&plain_mail("ann@example.org", "After", "<after@example.org>", "still here")).await;

    let mut delivered = Vec::new();
    while delivered.last().is_none_or(|id| id != "<after@example.org>") {
        delivered.push(running.next().await.platform_message_id);
    }
    assert!(delivered.len() <= 2, "{delivered:?}");
    assert!(running.is_running());
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_arrive_byte_for_byte_and_oversized_ones_as_a_note() {
    let servers = MailServers::start().await;
    let mut settings = servers.settings();
    settings.max_attachment_bytes = 64 * 1024;
    let small: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let large = vec![7u8; 100 * 1024];
    let mail = format!(
        "From: ann@example.org\r\nSubject: Files\r\nMessage-ID: <files@example.org>\r\n\
         Content-Type: multipart/mixed; boundary=b\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nTwo files.\r\n\
         --b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"bytes.bin\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n\
         --b\r\nContent-Type: image/png\r\nContent-Disposition: attachment; filename=\"huge.png\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--b--\r\n",
        wrapped_base64(&small),
        wrapped_base64(&large),
    );
    servers.mailbox().await.append(mail.as_bytes()).await;

    let mut running = Running::start(settings);
    let message = running.next().await;
    assert_eq!(message.attachments.len(), 1);
    assert_eq!(message.attachments[0].name, "bytes.bin");
    assert_eq!(message.attachments[0].mime, "application/octet-stream");
    assert_eq!(message.attachments[0].data, AttachmentData::Bytes(small));
    assert_eq!(
        message.text,
        "Subject: Files\n\nTwo files.\n\n[attachment huge.png skipped: 100 KB is over the 64 KB limit]"
    );
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mail_over_the_size_limit_arrives_as_a_note_without_its_body() {
    let servers = MailServers::start().await;
    let mut settings = servers.settings();
    settings.max_message_bytes = 200 * 1024;
    let body = "all work and no play\r\n".repeat(15_000);
    servers.mailbox().await.append(&plain_mail("ann@example.org", "Huge", "<huge@example.org>", &body)).await;

    let mut running = Running::start(settings);
    let message = running.next().await;
    assert_eq!(message.platform_message_id, "<huge@example.org>");
    assert!(message.text.starts_with("Subject: Huge\n\n[message skipped: 322."), "{}", message.text);
    assert!(message.text.ends_with("KB is over the 200 KB limit]"), "{}", message.text);
    assert!(!message.text.contains("all work"));
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_automatic_and_own_mail_is_not_answered() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    let forged = mailbox
        .append(
            b"Authentication-Results: mx.example.test; spf=pass smtp.mailfrom=evil.example;\r\n dkim=none;\r\n \
              dmarc=fail (p=reject) header.from=example.org\r\n\
              Authentication-Results: evil.example; dmarc=pass\r\n\
              From: ceo@example.org\r\nSubject: Wire money\r\nMessage-ID: <forged@evil.example>\r\n\r\nNow.\r\n",
        )
        .await;
    let headers = [
        "Auto-Submitted: auto-replied\r\n",
        "Precedence: bulk\r\n",
        "List-Id: Team <team.example.org>\r\n",
        "Return-Path: <>\r\n",
    ];
    for (index, header) in headers.iter().enumerate() {
        let raw = format!(
            "{header}From: robot@example.org\r\nSubject: Out of office\r\nMessage-ID: <auto-{index}@example.org>\r\n\r\naway\r\n"
        );
        mailbox.append(raw.as_bytes()).await;
    }
    mailbox
        .append(&plain_mail(
            &format!("Squid Bot <{}>", BOT.to_uppercase()),
            "Re: x",
            "<own@example.test>",
            "my own reply",
        ))
        .await;
    mailbox.append(b"From: a@example.org, b@example.org\r\nMessage-ID: <two@example.org>\r\n\r\nwho?\r\n").await;
    mailbox.append(&plain_mail("ann@example.org", "Real", "<real@example.org>", "a real question")).await;

    let mut running = Running::start(servers.settings());
    assert_eq!(running.next().await.platform_message_id, "<real@example.org>");
    running.assert_nothing_within(Duration::from_millis(300)).await;
    let seen = mailbox.seen().await;
    assert!(!seen[&forged], "a skipped mail stays unseen for a person to look at");
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_delivers_new_mail_exactly_once() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    let first = mailbox.append(&plain_mail("ann@example.org", "One", "<one@example.org>", "first")).await;

    let mut running = Running::start(servers.settings());
    assert_eq!(running.next().await.platform_message_id, "<one@example.org>");
    assert_eq!(running.stop().await.0, Ok(()));

    // While the bot is down: a new mail, and someone marks the old one unread; only the
    // saved position keeps the old one from being answered again.
    mailbox.append(&plain_mail("ann@example.org", "Two", "<two@example.org>", "second")).await;
    mailbox.mark_unseen(first).await;

    let mut running = Running::start(servers.settings());
    assert_eq!(running.next().await.platform_message_id, "<two@example.org>");
    running.assert_nothing_within(Duration::from_millis(500)).await;
    assert_eq!(running.stop().await.0, Ok(()));

    // A fresh state directory starts from the unseen mail.
    let mut settings = servers.settings();
    settings.state_dir = servers.state_dir("fresh-state");
    let mut running = Running::start(settings);
    assert_eq!(running.next().await.platform_message_id, "<one@example.org>");
    running.assert_nothing_within(Duration::from_millis(300)).await;
    assert_eq!(running.stop().await.0, Ok(()));
}

fn wrapped_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = String::new();
    for chunk in bytes.chunks(3) {
        let value =
            chunk.iter().enumerate().fold(0u32, |value, (index, byte)| value | u32::from(*byte) << (16 - 8 * index));
        for index in 0..4 {
            if index <= chunk.len() {
                encoded.push(char::from(ALPHABET[(value >> (18 - 6 * index) & 63) as usize]));
            } else {
                encoded.push('=');
            }
        }
    }
    encoded.as_bytes().chunks(76).map(|line| std::str::from_utf8(line).unwrap()).collect::<Vec<_>>().join("\r\n")
}
