//! Connecting: implicit TLS and STARTTLS, refused certificates and passwords, polling
//! without IDLE, reconnecting after a drop, shutdown.

use std::time::Duration;

use squidbot_channel_email::{EmailChannel, EmailSettings, ImapSettings, Security, SmtpSettings};
use squidbot_channels::{Channel, ChannelErrorKind, InboundSink};
use squidbot_testkit::mail::{MailServers, ServerOptions, plain_mail};
use squidbot_types::Secret;
use tokio_util::sync::CancellationToken;

use super::harness::{BotSettings, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implicit_tls_and_starttls_both_work() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    mailbox.append(&plain_mail("ann@example.org", "One", "<tls@example.org>", "over IMAPS")).await;
    let mut running = Running::start(servers.settings());
    assert_eq!(running.next().await.platform_message_id, "<tls@example.org>");
    assert_eq!(running.stop().await.0, Ok(()));

    let mut settings = servers.settings();
    settings.imap.port = servers.dovecot.imap_port;
    settings.imap.security = Security::StartTls;
    settings.state_dir = servers.state_dir("starttls-state");
    mailbox.append(&plain_mail("ann@example.org", "Two", "<starttls@example.org>", "over STARTTLS")).await;
    let mut running = Running::start(settings);
    assert_eq!(running.next().await.platform_message_id, "<starttls@example.org>");
    assert_eq!(running.stop().await.0, Ok(()));
    // Dovecot would take a plaintext login from 127.0.0.1 too; its log shows the login
    // on the plain port was over TLS.
    let log = servers.dovecot_log();
    let plain_port_login = format!("lport={}", servers.dovecot.imap_port);
    assert!(
        log.lines().any(|line| line.contains("Login: user=<bot@example.test>")
            && line.contains(&plain_port_login)
            && line.contains(" TLS")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused_with_a_clear_error() {
    let servers = MailServers::start().await;
    for security in [Security::Tls, Security::StartTls] {
        let mut settings = servers.settings();
        settings.extra_root_certificates.clear();
        if security == Security::StartTls {
            settings.imap.port = servers.dovecot.imap_port;
        }
        settings.imap.security = security;
        let error = Running::start(settings).finished().await.unwrap_err();
        assert_eq!(error.kind, ChannelErrorKind::Fatal, "{error}");
        assert!(error.message.contains("TLS certificate is not trusted"), "{error}");
    }

    let mut settings = servers.settings();
    settings.extra_root_certificates.clear();
    let channel = EmailChannel::new(settings).unwrap();
    let error = channel.send(&super::reply::new_thread_to("ann@example.org", "hello")).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal, "{error}");
    assert!(error.message.contains("TLS certificate is not trusted"), "{error}");
    assert!(servers.smtp.sent().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_fatal_on_both_servers() {
    let servers = MailServers::start().await;
    let mut settings = servers.settings();
    settings.imap.password = Secret::new("wrong");
    settings.smtp.password = Secret::new("wrong");
    let error = Running::start(settings.clone()).finished().await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal, "{error}");
    assert!(error.message.contains("refused the credentials"), "{error}");
    assert!(!error.message.contains("wrong"), "the password must not be in the error: {error}");

    let channel = EmailChannel::new(settings).unwrap();
    let error = channel.send(&super::reply::new_thread_to("ann@example.org", "hello")).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal, "{error}");
    assert!(error.message.contains("535"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_idle_returns_promptly() {
    let servers = MailServers::start().await;
    let mut mailbox = servers.mailbox().await;
    let mut running = Running::start(servers.settings());
    mailbox.append(&plain_mail("ann@example.org", "Hi", "<hi@example.org>", "hello")).await;
    running.next().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (result, took) = running.stop().await;
    assert_eq!(result, Ok(()));
    assert!(took < Duration::from_millis(500), "shutdown took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_reestablished() {
    let mut servers = MailServers::start().await;
    let mut running = Running::start(servers.settings());
    servers.mailbox().await.append(&plain_mail("ann@example.org", "Before", "<before@example.org>", "1")).await;
    assert_eq!(running.next().await.platform_message_id, "<before@example.org>");

    servers.dovecot.stop().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    servers.dovecot.restart().await;
    servers.mailbox().await.append(&plain_mail("ann@example.org", "After", "<after@example.org>", "2")).await;
    assert_eq!(running.next().await.platform_message_id, "<after@example.org>");
    running.assert_nothing_within(Duration::from_millis(300)).await;
    assert_eq!(running.stop().await.0, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_idle_the_mailbox_is_polled() {
    let servers = MailServers::start_with(ServerOptions { without_idle: true }).await;
    let mut settings = servers.settings();
    settings.poll_interval = Duration::from_millis(200);
    let mut mailbox = servers.mailbox().await;
    let mut running = Running::start(settings);
    mailbox.append(&plain_mail("ann@example.org", "One", "<poll-1@example.org>", "1")).await;
    assert_eq!(running.next().await.platform_message_id, "<poll-1@example.org>");
    tokio::time::sleep(Duration::from_millis(300)).await;
    mailbox.append(&plain_mail("ann@example.org", "Two", "<poll-2@example.org>", "2")).await;
    assert_eq!(running.next().await.platform_message_id, "<poll-2@example.org>");
    assert_eq!(running.stop().await.0, Ok(()));
}

/// No server at all: the loop retries with its backoff, then gives up with a
/// transient error for the manager to restart it later.
#[tokio::test(start_paused = true)]
async fn an_unreachable_server_ends_in_a_transient_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let directory = tempfile::tempdir().unwrap();
    let mut imap = ImapSettings::new("127.0.0.1", "bot@example.test", Secret::new("password"));
    imap.port = port;
    imap.security = Security::Plain;
    let mut smtp = SmtpSettings::new("127.0.0.1", "bot@example.test", Secret::new("password"));
    smtp.port = port;
    let settings = EmailSettings::new("email", "bot@example.test", imap, smtp, directory.path());
    let channel = EmailChannel::new(settings).unwrap();
    let (sink, _receiver) = InboundSink::bounded(1);
    let started = tokio::time::Instant::now();
    let error = channel.run(sink, CancellationToken::new()).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Transient, "{error}");
    assert!(error.message.starts_with("can't connect to IMAP server 127.0.0.1:"), "{error}");
    assert!(error.message.contains("gave up after 6 failed attempts"), "{error}");
    // 1 + 2 + 4 + 8 + 16 s of backoff between the six attempts.
    assert_eq!(started.elapsed().as_secs(), 31);
}
