//! Email end to end: the real gateway against a real Dovecot and aiosmtpd from testkit. The owner's mail is answered in its thread through SMTP; a stranger's mail runs no turn and gets no reply.

use std::time::Duration;

use serde_json::Value;
use squidbot_testkit::mail::{BOT, MailServers, PASSWORD, plain_mail};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, start_gateway};
use crate::harness::messages;

const OWNER: &str = "owner@example.test";

async fn health(base: &str) -> Value {
    // The details of /health are for the gateway's token; strangers learn only that it lives.
    let client = reqwest::Client::new();
    client.get(format!("{base}/health")).bearer_auth(crate::gateway::TOKEN).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_is_answered_in_the_thread_and_a_stranger_is_not() {
    let server = ScriptedLlm::start().await;
    let mail = MailServers::start().await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.mail]\nkind = \"email\"\naddress = \"{BOT}\"\ndisplay_name = \"Squid Bot\"\n\
         password = \"{PASSWORD}\"\nimap_host = \"127.0.0.1\"\nimap_port = {imap_port}\nimap_security = \"tls\"\n\
         smtp_host = \"127.0.0.1\"\nsmtp_port = {smtp_port}\nsmtp_security = \"starttls\"\n\
         ca_files = [\"{ca}\"]\nowners = [\"{OWNER}\"]\n",
        imap_port = mail.dovecot.imaps_port,
        smtp_port = mail.smtp.starttls_port,
        ca = mail.certificates.ca.display(),
    ));
    let gateway = start_gateway(&home).await;

    // The stranger's mail comes first, so by the time the owner's reply is out the
    // stranger's has been read too.
    server.push(Reply::text("The backup ran at 03:00 without errors."));
    let mut mailbox = mail.mailbox().await;
    mailbox
        .append(&plain_mail("Mallory <mallory@example.org>", "Hello", "<stranger-1@example.org>", "who are you?"))
        .await;
    mailbox
        .append(&plain_mail(&format!("Olga <{OWNER}>"), "Backup", "<backup-1@example.test>", "Did the backup run?"))
        .await;

    let sent = mail.smtp.wait_for(1).await;
    let reply = String::from_utf8_lossy(&sent[0].raw).into_owned();
    assert_eq!(sent[0].recipients, [OWNER], "{reply}");
    assert_eq!(sent[0].envelope_from, BOT);
    assert!(reply.contains("\r\nSubject: Re: Backup\r\n"), "{reply}");
    assert!(reply.contains("\r\nIn-Reply-To: <backup-1@example.test>\r\n"), "{reply}");
    assert!(reply.contains("The backup ran at 03:00 without errors."), "{reply}");
    let request = server.requests().remove(0);
    let asked = messages(&request.body);
    assert!(
        asked
            .iter()
            .any(|message| message["content"].as_str().is_some_and(|text| text.contains("Did the backup run?"))),
        "{:?}",
        request.body
    );

    // The stranger: denied (counted by the channel's health), no turn, no reply.
    let mut report = health(&gateway.base).await;
    for _ in 0..100 {
        if report["components"]["channels"]["mail"]["denied"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        report = health(&gateway.base).await;
    }
    assert_eq!(report["components"]["channels"]["mail"]["status"], "running", "{report}");
    assert_eq!(report["components"]["channels"]["mail"]["denied"], 1, "{report}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.requests().len(), 1, "no turn for the stranger");
    assert_eq!(mail.smtp.sent().len(), 1, "no reply to the stranger");
    server.assert_clean();
}
