//! Faults and lifecycle: rate limits, server errors, refused tokens, webhooks,
//! shutdown.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use squidbot_channel_telegram::TelegramSettings;
use squidbot_channels::{Channel, ChannelErrorKind, InboundSink};
use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram};
use squidbot_types::Secret;
use tokio_util::sync::CancellationToken;

use crate::{PATIENCE, Running, TOKEN, ada, settings};

/// Waits until the fake holds a `getUpdates` request with `offset`.
async fn wait_for_poll_at(fake: &FakeTelegram, offset: i64) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !fake.requests_for("getUpdates").iter().any(|poll| poll.params["offset"] == offset) {
        assert!(tokio::time::Instant::now() < deadline, "no poll at offset {offset}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_rate_limited_poll_waits_the_retry_after_telegram_asks() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.rate_limit_next("getUpdates", 1);
    fake.push_user_message(501, ChatKind::Private, &ada(), "after the pause");
    let mut running = Running::start_on(fake);

    assert_eq!(running.next().await.text, "after the pause");
    let polls = running.fake.requests_for("getUpdates");
    assert_eq!(polls[0].status, 429);
    let waited = polls[1].at - polls[0].at;
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    assert!(waited < Duration::from_millis(2500), "retried after {waited:?}");
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn server_errors_are_retried_without_losing_or_repeating_messages() {
    let mut running = Running::start().await;
    let first = running.fake.push_user_message(501, ChatKind::Private, &ada(), "one");
    assert_eq!(running.next().await.text, "one");
    // The poll after "one" is open and returns "two"; the one after "two" fails.
    wait_for_poll_at(&running.fake, first.update_id + 1).await;
    running.fake.fail_next("getUpdates", 502, json!({ "ok": false, "error_code": 502, "description": "Bad Gateway" }));
    let second = running.fake.push_user_message(501, ChatKind::Private, &ada(), "two");
    assert_eq!(running.next().await.text, "two");
    running.fake.push_user_message(501, ChatKind::Private, &ada(), "three");
    assert_eq!(running.next().await.text, "three");
    let polls = running.fake.requests_for("getUpdates");
    let failed: Vec<_> = polls.iter().enumerate().filter(|(_, poll)| poll.status == 502).collect();
    assert_eq!(failed.len(), 1);
    let (index, failed) = failed[0];
    let retry = &polls[index + 1];
    assert_eq!(retry.params["offset"], failed.params["offset"], "the offset survives the failure");
    assert!(retry.at - failed.at >= Duration::from_secs(1), "backed off {:?}", retry.at - failed.at);
    assert_eq!(failed.params["offset"], second.update_id + 1);
    // Nothing twice: the next poll is open and nothing else is queued for delivery.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(running.received.try_recv().is_err());
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_malformed_answer_is_retried() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.fail_next_raw("getUpdates", 200, "<html>proxy error</html>");
    fake.push_user_message(501, ChatKind::Private, &ada(), "still delivered");
    let mut running = Running::start_on(fake);
    assert_eq!(running.next().await.text, "still delivered");
    assert_eq!(running.fake.requests_for("getUpdates")[0].status, 200);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn a_refused_token_is_fatal() {
    let fake = FakeTelegram::start(TOKEN).await;
    let settings = TelegramSettings { token: Secret::new("4242:wrong"), ..settings(&fake) };
    let running = Running::start_with(fake, settings);
    let result = tokio::time::timeout(PATIENCE, running.task).await.unwrap().unwrap();
    let error = result.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert!(error.message.starts_with("can't check the bot token with getMe: Telegram answered 401"), "{error}");
    assert!(!error.message.contains("wrong"), "the token stays out of errors: {error}");
    assert_eq!(running.fake.requests_for("getMe")[0].status, 401);
    assert!(running.fake.requests_for("getUpdates").is_empty());
}

#[tokio::test]
async fn a_token_revoked_while_polling_is_fatal() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.fail_next("getUpdates", 401, json!({ "ok": false, "error_code": 401, "description": "Unauthorized" }));
    let running = Running::start_on(fake);
    let result = tokio::time::timeout(PATIENCE, running.task).await.unwrap().unwrap();
    assert_eq!(result.unwrap_err().kind, ChannelErrorKind::Fatal);
}

#[tokio::test]
async fn a_webhook_is_deleted_so_polling_works() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.set_webhook("https://example.invalid/hook");
    fake.push_user_message(501, ChatKind::Private, &ada(), "via polling");
    let mut running = Running::start_on(fake);
    assert_eq!(running.next().await.text, "via polling");
    assert_eq!(running.fake.webhook(), None);
    assert_eq!(running.fake.requests_for("getUpdates")[0].status, 409);
    assert_eq!(running.fake.requests_for("deleteWebhook").len(), 1);
    assert_eq!(running.stop().await, Ok(()));
}

#[tokio::test]
async fn shutdown_during_a_long_poll_returns_at_once() {
    let fake = FakeTelegram::start(TOKEN).await;
    let settings = TelegramSettings { poll_timeout: Duration::from_secs(30), ..settings(&fake) };
    let running = Running::start_with(fake, settings);
    running.fake.wait_for_requests("getUpdates", 1, PATIENCE).await;
    let started = tokio::time::Instant::now();
    running.shutdown.cancel();
    let result = tokio::time::timeout(Duration::from_secs(1), running.task).await;
    assert_eq!(result.expect("stopped within a second").unwrap(), Ok(()));
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());
}

#[tokio::test]
async fn handled_updates_are_confirmed_at_shutdown_so_a_restart_skips_them() {
    let fake = FakeTelegram::start(TOKEN).await;
    let pushed = fake.push_user_message(501, ChatKind::Private, &ada(), "answered");
    let mut running = Running::start_on(fake.clone());
    assert_eq!(running.next().await.text, "answered");
    assert_eq!(running.stop().await, Ok(()));
    // The open long poll may not have reached Telegram, so a last short poll confirms.
    let polls = fake.requests_for("getUpdates");
    let last = polls.last().unwrap();
    assert_eq!((&last.params["offset"], &last.params["timeout"]), (&json!(pushed.update_id + 1), &json!(0)));

    // A new process (fresh channel, no memory) does not see "answered" again.
    fake.push_user_message(501, ChatKind::Private, &ada(), "new");
    let mut restarted = Running::start_on(fake);
    assert_eq!(restarted.next().await.text, "new");
    assert_eq!(restarted.stop().await, Ok(()));
}

#[tokio::test]
async fn a_restarted_loop_continues_from_its_offset() {
    let mut running = Running::start().await;
    let before = running.fake.push_user_message(501, ChatKind::Private, &ada(), "before");
    assert_eq!(running.next().await.text, "before");
    wait_for_poll_at(&running.fake, before.update_id + 1).await;
    running.fake.fail_next(
        "getUpdates",
        400,
        json!({ "ok": false, "error_code": 400, "description": "Bad Request: wrong offset" }),
    );
    // Wake the open poll so the next one meets the 400 and the loop ends.
    running.fake.push_user_message(501, ChatKind::Private, &ada(), "during");
    assert_eq!(running.next().await.text, "during");
    let ended = tokio::time::timeout(PATIENCE, &mut running.task).await.unwrap().unwrap();
    assert_eq!(ended.unwrap_err().kind, ChannelErrorKind::Rejected);
    // The manager restarts the same channel: "during" is not handed over twice.
    let channel = Arc::clone(&running.channel);
    let (sink, mut received) = InboundSink::bounded(4);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { channel.run(sink, shutdown).await }
    });
    running.fake.push_user_message(501, ChatKind::Private, &ada(), "after");
    let next = tokio::time::timeout(PATIENCE, received.recv()).await.unwrap().unwrap();
    assert_eq!(next.text, "after");
    shutdown.cancel();
    assert_eq!(task.await.unwrap(), Ok(()));
}
