//! The gateway life cycle: identify, heartbeats, resuming after RECONNECT, dropped
//! connections and missed ACKs, new sessions, fatal close codes, shutdown.

use std::time::Duration;

use serde_json::json;
use squidbot_channel_discord::DEFAULT_INTENTS;
use squidbot_channels::{Channel, ChannelErrorKind, ConversationKind, OutboundMessage};
use squidbot_testkit::fake_discord::{FakeDiscord, FakeMessage, FakeRoute};
use tokio::time::Instant;

use crate::support::{TOKEN, settings, spawn, start};

#[tokio::test]
async fn identify_gets_ready_and_a_direct_message_is_delivered() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;

    let identify = &discord.identifies()[0];
    assert_eq!(identify["token"], TOKEN);
    assert_eq!(identify["intents"], DEFAULT_INTENTS);
    let connection = &discord.connections()[0];
    assert_eq!((connection.path.as_str(), connection.query.as_str()), ("/gateway", "v=10&encoding=json"));

    let id = discord.push_message_create(FakeMessage::direct("500", "42", "hello bot"));
    let message = running.next_message().await;
    assert_eq!(message.platform_message_id, id);
    assert_eq!(message.channel, "discord");
    assert_eq!(message.text, "hello bot");
    assert_eq!(message.conversation.id, "500");
    assert_eq!(message.conversation.kind, ConversationKind::Direct);
    assert_eq!(message.conversation.thread, None);
    assert_eq!(message.sender.id, "42");
    assert_eq!(message.sender.display_name.as_deref(), Some("user42"));
    assert!(message.mentions_bot, "a direct message is addressed to the bot");
    running.stop().await;
    discord.wait_for_client_closes(1).await;
    assert_eq!(discord.client_close_codes(), [1000], "shutdown ends the session with a normal close");
}

#[tokio::test]
async fn heartbeats_go_out_at_the_interval_carry_the_sequence_and_are_acknowledged() {
    let interval = Duration::from_millis(100);
    let discord = FakeDiscord::start_with_heartbeat(TOKEN, interval).await;
    let mut running = start(&discord).await;
    discord.push_message_create(FakeMessage::direct("500", "42", "tick"));
    running.next_message().await;
    discord.wait_for_heartbeats(6).await;

    let beats = discord.heartbeats();
    let mut gaps: Vec<Duration> = beats.windows(2).map(|pair| pair[1].at.duration_since(pair[0].at)).collect();
    assert!(gaps.iter().all(|gap| *gap >= interval / 2), "never faster than the interval: {gaps:?}");
    gaps.sort();
    let median = gaps[gaps.len() / 2];
    assert!(median >= interval * 4 / 5 && median <= interval * 2, "heartbeats {median:?} apart, interval {interval:?}");
    // READY is dispatch 1 and the message dispatch 2: later beats carry 2.
    let sequence = discord.sequence();
    assert_eq!(sequence, Some(2));
    discord
        .wait_until("a heartbeat carrying sequence 2", |discord| {
            discord.heartbeats().last().unwrap().sequence == sequence
        })
        .await;
    // Every beat was ACKed, so the first connection is still the only one.
    assert_eq!(discord.connections().len(), 1);
    assert_eq!((discord.identify_count(), discord.resume_count()), (1, 0));
    running.stop().await;
}

#[tokio::test]
async fn a_heartbeat_the_server_asks_for_is_sent_at_once() {
    let discord = FakeDiscord::start_with_heartbeat(TOKEN, Duration::from_secs(60)).await;
    let running = start(&discord).await;
    let before = discord.heartbeats().len();
    let asked = Instant::now();
    discord.request_heartbeat();
    discord.wait_until("the requested heartbeat", |discord| discord.heartbeats().len() > before).await;
    assert!(asked.elapsed() < Duration::from_secs(1), "answered after {:?}", asked.elapsed());
    running.stop().await;
}

#[tokio::test]
async fn a_missing_heartbeat_ack_reconnects_and_resumes() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.stop_acking_heartbeats();
    discord.wait_for_resume_count(1).await;

    let resume = &discord.resumes()[0];
    assert_eq!(resume["session_id"], "fake-session-1");
    assert_eq!(resume["seq"], 1);
    assert_eq!(discord.connections()[1].path, "/resume-gateway", "resumes go to READY's resume_gateway_url");
    discord.wait_for_client_closes(1).await;
    assert_ne!(discord.client_close_codes()[0], 1000, "closing with 1000 would end the session");
    discord.push_message_create(FakeMessage::direct("500", "42", "still there?"));
    assert_eq!(running.next_message().await.text, "still there?");
    assert_eq!(discord.identify_count(), 1);
    running.stop().await;
}

#[tokio::test]
async fn reconnect_resumes_and_the_events_missed_meanwhile_are_delivered_once() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.push_message_create(FakeMessage::direct("500", "42", "one"));
    assert_eq!(running.next_message().await.text, "one");

    discord.send_reconnect();
    discord.push_message_create(FakeMessage::direct("500", "42", "two"));
    discord.push_message_create(FakeMessage::guild("300", "200", "43", "three"));
    discord.wait_for_resume_count(1).await;
    assert_eq!(discord.resumes()[0]["seq"], 2, "the resume names the last handled dispatch");
    discord.push_message_create(FakeMessage::direct("500", "42", "four"));

    assert_eq!(running.next_texts(3).await, ["two", "three", "four"]);
    assert_eq!(discord.identify_count(), 1);
    running.stop().await;
}

#[tokio::test]
async fn a_dropped_connection_is_resumed() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.drop_connection();
    discord.push_message_create(FakeMessage::direct("500", "42", "after the drop"));
    discord.wait_for_resume_count(1).await;
    assert_eq!(running.next_message().await.text, "after the drop");
    assert_eq!(discord.identify_count(), 1);
    running.stop().await;
}

#[tokio::test]
async fn an_invalid_session_that_may_be_resumed_is_resumed() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.invalidate_session(true);
    discord.wait_for_resume_count(1).await;
    discord.push_message_create(FakeMessage::direct("500", "42", "resumed"));
    assert_eq!(running.next_message().await.text, "resumed");
    assert_eq!(discord.identify_count(), 1);
    running.stop().await;
}

#[tokio::test]
async fn an_invalid_session_that_can_t_be_resumed_identifies_anew_after_a_pause() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    let invalidated = Instant::now();
    discord.invalidate_session(false);
    discord.wait_for_identify_count(2).await;
    let pause = invalidated.elapsed();
    assert!(pause >= Duration::from_secs(1) && pause < Duration::from_secs(6), "identified again after {pause:?}");
    assert_eq!(discord.resume_count(), 0);

    discord.wait_for_live().await;
    discord.push_message_create(FakeMessage::direct("500", "42", "new session"));
    assert_eq!(running.next_message().await.text, "new session");
    running.stop().await;
}

#[tokio::test]
async fn close_code_4009_starts_a_new_session_and_4000_resumes() {
    let discord = FakeDiscord::start(TOKEN).await;
    let running = start(&discord).await;
    discord.close_connection(4000);
    discord.wait_for_resume_count(1).await;
    discord.wait_for_live().await;
    discord.close_connection(4009);
    discord.wait_for_identify_count(2).await;
    assert_eq!(discord.resume_count(), 1);
    running.stop().await;
}

#[tokio::test]
async fn a_refused_token_at_identify_is_fatal() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut settings = settings(&discord);
    settings.token = squidbot_types::Secret::new("wrong-token");
    settings.gateway_url = Some(discord.gateway_url());
    let error = spawn(settings).outcome().await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert!(error.message.contains("4004"), "{error}");
    assert_eq!(discord.identify_count(), 1, "no second try with a refused token");
}

#[tokio::test]
async fn a_refused_token_at_the_gateway_url_is_fatal() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut settings = settings(&discord);
    settings.token = squidbot_types::Secret::new("wrong-token");
    let error = spawn(settings).outcome().await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert!(error.message.starts_with("can't ask Discord for the gateway URL"), "{error}");
    assert!(discord.connections().is_empty());
}

#[tokio::test]
async fn disallowed_intents_are_fatal() {
    let discord = FakeDiscord::start(TOKEN).await;
    let running = start(&discord).await;
    discord.close_connection(4014);
    let error = running.outcome().await.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert!(error.message.contains("Message Content intent"), "{error}");
}

#[tokio::test]
async fn a_rate_limited_gateway_url_is_asked_again_after_the_wait() {
    let discord = FakeDiscord::start(TOKEN).await;
    discord.rate_limit_next(FakeRoute::GatewayBot, Duration::from_millis(300));
    let started = Instant::now();
    let running = start(&discord).await;
    assert!(started.elapsed() >= Duration::from_millis(300), "asked again after {:?}", started.elapsed());
    assert_eq!(discord.request_count(FakeRoute::GatewayBot), 2);
    running.stop().await;
}

#[tokio::test]
async fn unknown_events_and_malformed_frames_are_skipped() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.push_raw_dispatch("SOME_FUTURE_EVENT", json!({"anything": [1, 2, 3]}));
    discord.push_raw_dispatch("MESSAGE_CREATE", json!({"id": 5, "content": null}));
    discord.send_raw_frame("{this is not json");
    discord.send_raw_frame(r#"{"op": 42, "d": null}"#);
    discord.push_message_create(FakeMessage::direct("500", "42", "still listening"));
    assert_eq!(running.next_message().await.text, "still listening");
    assert_eq!(discord.connections().len(), 1, "nothing above cost the connection");

    // The skipped dispatches count as handled: the sequence moves past them.
    let sequence = discord.sequence();
    assert_eq!(sequence, Some(4));
    discord
        .wait_until("a heartbeat carrying the latest sequence", |discord| {
            discord.heartbeats().last().is_some_and(|beat| beat.sequence == sequence)
        })
        .await;
    running.stop().await;
}

#[tokio::test]
async fn messages_in_announced_threads_belong_to_the_parent_channel() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    discord.push_raw_dispatch("THREAD_CREATE", json!({"id": "610", "parent_id": "200", "guild_id": "300", "type": 11}));
    discord.push_message_create(FakeMessage::guild("300", "610", "42", "in the thread"));
    let message = running.next_message().await;
    assert_eq!(message.conversation.id, "200");
    assert_eq!(message.conversation.thread.as_deref(), Some("610"));
    let reply = OutboundMessage {
        conversation: message.conversation.clone(),
        reply_to: Some(message.platform_message_id.clone()),
        text: "answer in the thread".to_owned(),
        attachments: Vec::new(),
    };
    running.channel.send(&reply).await.unwrap();
    let sent = &discord.sent()[0];
    assert_eq!(sent.channel_id, "610");
    assert_eq!(sent.message_reference.as_ref().unwrap()["message_id"], message.platform_message_id.as_str());

    discord.push_message_create(FakeMessage::guild("300", "611", "42", "in an unknown thread"));
    let message = running.next_message().await;
    assert_eq!((message.conversation.id.as_str(), message.conversation.thread), ("611", None));
    running.stop().await;
}

#[tokio::test]
async fn a_full_queue_keeps_the_heartbeat_going_and_does_not_hold_up_shutdown() {
    let discord = FakeDiscord::start(TOKEN).await;
    let running = start(&discord).await;
    // The queue holds 16; the 17th waits in the adapter.
    for number in 0..20 {
        discord.push_message_create(FakeMessage::direct("500", "42", &format!("flood {number}")));
    }
    let beats = discord.heartbeats().len();
    discord.wait_for_heartbeats(beats + 3).await;
    assert_eq!(discord.connections().len(), 1, "heartbeats were ACKed while the queue was full");
    discord.push_message_create(FakeMessage::direct("500", "42", "last"));
    let mut running = running;
    let texts = running.next_texts(21).await;
    let expected: Vec<String> = (0..20).map(|number| format!("flood {number}")).chain(["last".to_owned()]).collect();
    assert_eq!(texts, expected);

    discord.push_message_create(FakeMessage::direct("500", "42", "queued at shutdown"));
    running.stop().await;
    discord.wait_for_client_closes(1).await;
    assert_eq!(discord.client_close_codes(), [1000]);
}

#[tokio::test]
async fn a_message_in_flight_when_the_connection_drops_comes_again_with_the_resume() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    // 16 fill the queue, the 17th waits to get in, the 18th waits behind it.
    for number in 1..=18 {
        discord.push_message_create(FakeMessage::direct("500", "42", &format!("message {number}")));
    }
    // READY is dispatch 1, so 16 messages in the queue make 17 handled dispatches.
    discord
        .wait_until("a heartbeat after 16 messages", |discord| {
            discord.heartbeats().last().is_some_and(|beat| beat.sequence == Some(17))
        })
        .await;
    discord.drop_connection();
    discord.wait_for_resume_count(1).await;
    assert_eq!(discord.resumes()[0]["seq"], 17, "the message still waiting is not counted as handled");

    discord.push_message_create(FakeMessage::direct("500", "42", "after the resume"));
    let texts = running.next_texts(19).await;
    let expected: Vec<String> =
        (1..=18).map(|number| format!("message {number}")).chain(["after the resume".to_owned()]).collect();
    assert_eq!(texts, expected, "each message exactly once, in order");
    running.stop().await;
}

#[tokio::test]
async fn a_closed_inbound_queue_ends_the_loop() {
    let discord = FakeDiscord::start(TOKEN).await;
    let mut running = start(&discord).await;
    running.receiver.close();
    discord.push_message_create(FakeMessage::direct("500", "42", "nobody listens"));
    assert_eq!(running.outcome().await, Ok(()));
    discord.wait_for_client_closes(1).await;
    assert_eq!(discord.client_close_codes(), [1000]);
}
