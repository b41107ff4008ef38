//! Tests of reading raw mails.

use super::*;

fn context() -> MailContext<'static> {
    MailContext {
        bot_address: "bot@example.test",
        fallback_message_id: "<7.42@INBOX>".to_owned(),
        max_attachment_bytes: 1024,
    }
}

fn deliver(raw: &str) -> ParsedMail {
    match read_mail(raw.as_bytes(), &context()) {
        Verdict::Deliver(mail) => *mail,
        Verdict::Skip(reason) => panic!("skipped: {reason}"),
    }
}

fn skip_reason(raw: &str) -> SkipReason {
    match read_mail(raw.as_bytes(), &context()) {
        Verdict::Deliver(mail) => panic!("delivered: {mail:?}"),
        Verdict::Skip(reason) => reason,
    }
}

#[test]
fn a_plain_mail_starting_a_thread_carries_its_subject() {
    let mail = deliver(
        "From: Ann Example <Ann@Example.ORG>\r\nTo: bot@example.test\r\nSubject: Lunch?\r\n\
         Message-ID: <abc@example.org>\r\n\r\nShall we have lunch?\r\n",
    );
    assert_eq!(mail.sender_address, "ann@example.org");
    assert_eq!(mail.sender_name.as_deref(), Some("Ann Example"));
    assert_eq!(mail.message_id, "<abc@example.org>");
    assert_eq!(mail.conversation_id, "<abc@example.org>");
    assert_eq!(mail.subject, "Lunch?");
    assert_eq!(mail.text, "Subject: Lunch?\n\nShall we have lunch?");
    assert!(mail.attachments.is_empty());
}

#[test]
fn a_reply_belongs_to_its_thread_root_and_loses_its_quote() {
    let mail = deliver(
        "From: ann@example.org\r\nSubject: Re: Lunch?\r\nMessage-ID: <c@example.org>\r\n\
         In-Reply-To: <b@example.test>\r\nReferences: <a@example.org>\r\n <b@example.test>\r\n\r\n\
         Yes, at noon.\r\n\r\nOn Mon, 1 Jan 2024, Bot <bot@example.test> wrote:\r\n> Where?\r\n",
    );
    assert_eq!(mail.conversation_id, "<a@example.org>");
    assert_eq!(mail.references, vec!["<a@example.org>".to_owned(), "<b@example.test>".to_owned()]);
    assert_eq!(mail.text, "Yes, at noon.");
    assert_eq!(mail.sender_name, None);
}

#[test]
fn in_reply_to_is_the_root_when_there_are_no_references() {
    let mail = deliver("From: ann@example.org\r\nIn-Reply-To: <root@example.org>\r\n\r\nok\r\n");
    assert_eq!(mail.conversation_id, "<root@example.org>");
    assert_eq!(mail.message_id, "<7.42@INBOX>");
    assert_eq!(mail.text, "ok");
}

#[test]
fn html_only_mail_becomes_text() {
    let mail = deliver(
        "From: ann@example.org\r\nSubject: Hi\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
         <html><body><p>Hello &amp; welcome</p><p>Line<br>two</p><script>x()</script></body></html>\r\n",
    );
    assert_eq!(mail.text, "Subject: Hi\n\nHello & welcome\n\nLine\ntwo");
}

#[test]
fn the_plain_part_of_an_alternative_wins() {
    let mail = deliver(
        "From: ann@example.org\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nplain version\r\n\
         --b\r\nContent-Type: text/html\r\n\r\n<p>html version</p>\r\n--b--\r\n",
    );
    assert_eq!(mail.text, "plain version");
}

#[test]
fn legacy_charsets_and_encoded_words_are_decoded() {
    let latin1 = deliver(
        "From: =?ISO-8859-1?Q?Andr=E9?= <andre@example.org>\r\nSubject: =?iso-8859-1?q?Caf=E9_cr=E8me?=\r\n\
         Content-Type: text/plain; charset=ISO-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
         Un caf=E9, s'il vous pla=EEt.\r\n",
    );
    assert_eq!(latin1.sender_name.as_deref(), Some("André"));
    assert_eq!(latin1.text, "Subject: Café crème\n\nUn café, s'il vous plaît.");

    let mut windows = b"From: ann@example.org\r\nSubject: =?UTF-8?B?4pyTIGRvbmU=?=\r\n\
        Content-Type: text/plain; charset=windows-1252\r\n\r\n"
        .to_vec();
    windows.extend_from_slice(b"\x93quoted\x94 \x80 5\r\n");
    let Verdict::Deliver(windows) = read_mail(&windows, &context()) else { panic!("skipped") };
    assert_eq!(windows.text, "Subject: ✓ done\n\n“quoted” € 5");
}

#[test]
fn multi_byte_charsets_are_decoded() {
    let mail = deliver(
        "From: taro@example.jp\r\nSubject: =?ISO-2022-JP?B?GyRCJUYlOSVIGyhC?=\r\n\
         Content-Type: text/plain; charset=ISO-2022-JP\r\nContent-Transfer-Encoding: base64\r\n\r\n\
         GyRCJDMkcyRLJEEkTxsoQg==\r\n",
    );
    assert_eq!(mail.text, "Subject: テスト\n\nこんにちは");
}

#[test]
fn broken_charsets_decode_lossily() {
    let mut raw = b"From: ann@example.org\r\nSubject: =?x-unknown?Q?a=FFb?=\r\n\
        Content-Type: text/plain; charset=x-no-such-charset\r\n\r\n"
        .to_vec();
    raw.extend_from_slice(b"caf\xe9 ok\r\n");
    let Verdict::Deliver(mail) = read_mail(&raw, &context()) else { panic!("skipped") };
    assert!(mail.text.contains("ok"), "{}", mail.text);
    assert!(mail.text.starts_with("Subject: "), "{}", mail.text);
}

#[test]
fn attachments_within_the_cap_are_kept_and_larger_ones_noted() {
    let small = "aGVsbG8gd29ybGQ="; // "hello world"
    let large = "QUFB".repeat(400); // 1200 bytes of 'A'
    let mail = deliver(&format!(
        "From: ann@example.org\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n\
         --b\r\nContent-Type: application/octet-stream; name=small.bin\r\n\
         Content-Disposition: attachment; filename=\"small.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{small}\r\n\
         --b\r\nContent-Type: image/png\r\nContent-Disposition: attachment; filename=big.png\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{large}\r\n--b--\r\n"
    ));
    assert_eq!(mail.attachments.len(), 1);
    assert_eq!(mail.attachments[0].name, "small.bin");
    assert_eq!(mail.attachments[0].mime, "application/octet-stream");
    assert_eq!(mail.attachments[0].data, AttachmentData::Bytes(b"hello world".to_vec()));
    assert_eq!(mail.text, "See attached.\n\n[attachment big.png skipped: 1.2 KB is over the 1 KB limit]");
}

#[test]
fn an_oversized_mail_is_a_note() {
    let Verdict::Deliver(mail) = read_oversized(
        b"From: ann@example.org\r\nSubject: Photos\r\nMessage-ID: <p@example.org>\r\n\r\n",
        31 * 1024 * 1024,
        30 * 1024 * 1024,
        &context(),
    ) else {
        panic!("skipped")
    };
    assert_eq!(mail.text, "Subject: Photos\n\n[message skipped: 31 MB is over the 30 MB limit]");
    assert_eq!(mail.message_id, "<p@example.org>");
}

#[test]
fn senders_that_are_not_answered() {
    assert_eq!(skip_reason("From: BOT@example.test\r\n\r\nloop\r\n"), SkipReason::OwnAddress);
    assert_eq!(skip_reason("From: a@example.org, b@example.org\r\n\r\nx\r\n"), SkipReason::SeveralSenders);
    assert_eq!(skip_reason("From: a@example.org\r\nFrom: b@example.org\r\n\r\nx\r\n"), SkipReason::SeveralSenders);
    assert_eq!(skip_reason("Subject: nobody\r\n\r\nx\r\n"), SkipReason::NoSender);
    assert_eq!(skip_reason("From: undisclosed\r\n\r\nx\r\n"), SkipReason::NoSender);
    assert!(matches!(
        skip_reason("Authentication-Results: mx; dmarc=fail\r\nFrom: ceo@example.org\r\n\r\nwire money\r\n"),
        SkipReason::Forged(_)
    ));
    assert!(matches!(
        skip_reason("From: ann@example.org\r\nAuto-Submitted: auto-replied\r\n\r\nI'm away\r\n"),
        SkipReason::Automatic(_)
    ));
}

#[test]
fn garbage_does_not_panic() {
    for raw in [&b""[..], b"\xff\xfe\x00", b"From: \r\n\r\n", b"Content-Type: multipart/mixed; boundary=\r\n\r\n--\r\n"]
    {
        let _verdict = read_mail(raw, &context());
    }
}
