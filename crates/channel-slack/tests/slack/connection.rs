//! The Socket Mode connection: refreshes, drops, pings, fatal refusals, retries and
//! shutdown.

use std::time::{Duration, Instant};

use squidbot_channel_slack::SlackSettings;
use squidbot_channels::ChannelErrorKind;
use squidbot_testkit::fake_slack::{Failure, FakeSlack};
use squidbot_types::Secret;

use super::support::{APP_TOKEN, BOT_TOKEN, Running, finish, settings};

#[tokio::test]
async fn a_refresh_request_opens_a_new_connection_and_loses_nothing() {
    let mut running = Running::start().await;
    running.slack.send_disconnect("refresh_requested");
    // Sent while the adapter is between connections: it waits for the new one.
    running.slack.push_message("D1", "im", "U1", "during the refresh", None, Vec::new());
    assert_eq!(running.next_message().await.text, "during the refresh");
    assert_eq!(running.slack.connections_opened(), 2);
    running.slack.send_disconnect("warning");
    running.slack.push_message("D1", "im", "U1", "after the warning", None, Vec::new());
    assert_eq!(running.next_message().await.text, "after the warning");
    assert_eq!(running.slack.connections_opened(), 3);
    assert_eq!(running.slack.wait_for_acks(2).await.len(), 2);
    assert!(running.slack.unacknowledged().is_empty());
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_dropped_connection_is_replaced() {
    let mut running = Running::start().await;
    running.slack.drop_connection();
    running.slack.push_message("D1", "im", "U1", "after the drop", None, Vec::new());
    assert_eq!(running.next_message().await.text, "after the drop");
    assert_eq!(running.slack.connections_opened(), 2);
    assert_eq!(running.slack.sockets_accepted(), 2);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn slacks_pings_are_answered() {
    let running = Running::start().await;
    running.slack.ping(b"still there?");
    assert_eq!(running.slack.wait_for_pongs(1).await, vec![b"still there?".to_vec()]);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn link_disabled_is_fatal() {
    let running = Running::start().await;
    running.slack.send_disconnect("link_disabled");
    let error = finish(running.task).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert!(error.message.contains("link_disabled"), "{error}");
}

#[tokio::test]
async fn refused_tokens_are_fatal() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let wrong_bot = SlackSettings { bot_token: Secret::new("xoxb-wrong"), ..settings(&slack) };
    let running = Running::spawn(slack.clone(), wrong_bot, 4);
    let error = finish(running.task).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert_eq!(error.message, "can't call Slack's auth.test: invalid_auth");

    let wrong_app = SlackSettings { app_token: Secret::new("xapp-wrong"), ..settings(&slack) };
    let running = Running::spawn(slack.clone(), wrong_app, 4);
    let error = finish(running.task).await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert_eq!(error.message, "can't call Slack's apps.connections.open: invalid_auth");
    assert_eq!(slack.sockets_accepted(), 0);
}

#[tokio::test]
async fn a_failed_connection_attempt_is_retried_after_a_short_wait() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    slack.fail_next("apps.connections.open", Failure::Status(503));
    let started = Instant::now();
    let mut running = Running::start_with(slack.clone(), settings(&slack), 4).await;
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited before retrying");
    running.slack.push_message("D1", "im", "U1", "made it", None, Vec::new());
    assert_eq!(running.next_message().await.text, "made it");
    assert_eq!(running.slack.connections_opened(), 1, "one failed call, one that worked");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_rate_limited_connection_attempt_waits_as_told() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    slack.rate_limit_next("apps.connections.open", Duration::from_secs(2));
    let started = Instant::now();
    let running = Running::start_with(slack.clone(), settings(&slack), 4).await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(2), "waited only {waited:?}");
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn shutdown_ends_the_loop_promptly_even_with_a_full_queue() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let running = Running::start_with(slack.clone(), settings(&slack), 1).await;
    for number in 0..3 {
        running.slack.push_message("D1", "im", "U1", &format!("message {number}"), None, Vec::new());
    }
    // The first fills the queue, the second waits for room; nobody reads.
    assert_eq!(running.slack.wait_for_acks(2).await.len(), 2);
    let started = Instant::now();
    assert_eq!(running.stop().await, Ok(()));
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn shutdown_before_connecting_returns_at_once() {
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    slack.rate_limit_next("apps.connections.open", Duration::from_secs(30));
    let running = Running::spawn(slack.clone(), settings(&slack), 1);
    let started = Instant::now();
    while slack.calls().len() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(running.stop().await, Ok(()));
    assert!(started.elapsed() < Duration::from_secs(2));
}
