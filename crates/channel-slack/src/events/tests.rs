//! Unit tests of frame reading and event interpretation.

use serde_json::json;

use super::*;

fn identity() -> Identity {
    Identity { user_id: "U0BOT".to_owned(), bot_id: "B0BOT".to_owned() }
}

fn callback(event: Value) -> Value {
    json!({"type": "event_callback", "event_id": "Ev1", "event": event})
}

fn deliver(event: Value) -> ReceivedMessage {
    match interpret(&callback(event), &identity()) {
        Ok(Interpretation::Deliver(message)) => message,
        other => panic!("expected a delivery, got {other:?}"),
    }
}

fn ignored(event: Value) -> String {
    match interpret(&callback(event), &identity()) {
        Ok(Interpretation::Ignore(reason)) => reason,
        other => panic!("expected the event to be ignored, got {other:?}"),
    }
}

#[test]
fn frames_are_told_apart_and_every_envelope_is_found() {
    assert_eq!(read_frame(r#"{"type":"hello","num_connections":1}"#), Ok(Frame::Hello));
    assert_eq!(
        read_frame(r#"{"type":"disconnect","reason":"refresh_requested"}"#),
        Ok(Frame::Disconnect { reason: "refresh_requested".to_owned() })
    );
    let envelope = read_frame(r#"{"envelope_id":"e1","type":"slash_commands","payload":{},"retry_attempt":2}"#);
    assert_eq!(
        envelope,
        Ok(Frame::Envelope {
            envelope_id: "e1".to_owned(),
            kind: "slash_commands".to_owned(),
            payload: json!({}),
            retry_attempt: 2
        })
    );
    assert_eq!(read_frame(r#"{"type":"brand_new"}"#), Ok(Frame::Unknown { kind: "brand_new".to_owned() }));
    assert!(read_frame("not json").is_err());
    assert!(read_frame("[1,2]").is_err());
    assert!(read_frame("{}").is_err());
}

#[test]
fn a_direct_message_is_direct_and_addressed_to_the_bot() {
    let message = deliver(json!({
        "type": "message", "channel": "D1", "channel_type": "im", "user": "U1",
        "text": "hello &amp; welcome", "ts": "1700000000.000100",
        "user_profile": {"display_name": "", "real_name": "Ada Lovelace"}
    }));
    assert_eq!(message.platform_message_id, "D1:1700000000.000100");
    assert_eq!(
        message.conversation,
        Conversation { id: "D1".to_owned(), kind: ConversationKind::Direct, thread: None }
    );
    assert_eq!(message.sender, Sender { id: "U1".to_owned(), display_name: Some("Ada Lovelace".to_owned()) });
    assert_eq!(message.text, "hello & welcome");
    assert!(message.mentions_bot);
    assert_eq!(message.kind, EventKind::Message);
}

#[test]
fn channel_messages_mention_the_bot_only_when_they_do() {
    let plain = deliver(
        json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1", "text": "lunch?", "ts": "1.1"}),
    );
    assert_eq!(plain.conversation.kind, ConversationKind::Group);
    assert!(!plain.mentions_bot);
    let mention = deliver(json!({
        "type": "message", "channel": "C1", "channel_type": "channel", "user": "U1",
        "text": "<@U0BOT> lunch?", "ts": "1.2", "thread_ts": "1.0"
    }));
    assert!(mention.mentions_bot);
    assert_eq!(mention.text, "lunch?");
    assert_eq!(mention.conversation.thread.as_deref(), Some("1.0"));
    let app_mention =
        deliver(json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@U0BOT> lunch?", "ts": "1.2"}));
    assert_eq!(app_mention.kind, EventKind::AppMention);
    assert_eq!(app_mention.platform_message_id, mention.platform_message_id);
    assert_eq!(app_mention.conversation.kind, ConversationKind::Group);
}

#[test]
fn a_reply_in_the_bots_thread_counts_as_addressed_to_it() {
    let reply = deliver(json!({
        "type": "message", "channel": "C1", "channel_type": "channel", "user": "U1", "text": "and then?",
        "ts": "2.0", "thread_ts": "1.0", "parent_user_id": "U0BOT"
    }));
    assert!(reply.mentions_bot);
}

#[test]
fn bots_edits_and_unknown_events_are_ignored() {
    let base = |extra: Value| {
        let mut event = json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1", "text": "x", "ts": "1.1"});
        if let (Some(event), Some(extra)) = (event.as_object_mut(), extra.as_object()) {
            event.extend(extra.clone());
        }
        event
    };
    assert!(ignored(base(json!({"user": "U0BOT"}))).contains("own message"));
    assert!(ignored(base(json!({"bot_id": "B9"}))).contains("bot"));
    assert!(ignored(base(json!({"subtype": "message_changed"}))).contains("message_changed"));
    assert!(ignored(base(json!({"subtype": "channel_join"}))).contains("channel_join"));
    assert!(ignored(json!({"type": "reaction_added", "user": "U1"})).contains("reaction_added"));
    let shared = deliver(base(json!({"subtype": "file_share", "files": [{"id": "F1", "name": "a.txt", "size": 3}]})));
    assert_eq!(shared.files.len(), 1);
    assert_eq!(shared.files.first().map(SlackFile::display_name), Some("a.txt"));
    assert!(matches!(
        interpret(&callback(base(json!({"subtype": "thread_broadcast"}))), &identity()),
        Ok(Interpretation::Deliver(_))
    ));
}

#[test]
fn malformed_events_are_errors_not_panics() {
    assert!(interpret(&json!({"event": {"type": "message", "files": "nope"}}), &identity()).is_err());
    assert!(interpret(&json!({"no_event": true}), &identity()).is_err());
    assert!(interpret(&callback(json!({"type": "message", "channel": "C1", "ts": "1.1"})), &identity()).is_err());
}

#[test]
fn the_second_half_of_a_mention_pair_is_dropped_but_retries_pass() {
    let mut recent = RecentDeliveries::default();
    assert!(recent.admit("C1:1.1", EventKind::Message));
    assert!(!recent.admit("C1:1.1", EventKind::AppMention));
    assert!(recent.admit("C1:1.1", EventKind::Message), "a redelivered event keeps its id and passes");
    assert!(recent.admit("C1:1.2", EventKind::AppMention));
    assert!(!recent.admit("C1:1.2", EventKind::Message));
}

#[test]
fn old_deliveries_are_forgotten() {
    let mut recent = RecentDeliveries::default();
    for number in 0..=REMEMBERED_DELIVERIES {
        assert!(recent.admit(&format!("C1:{number}"), EventKind::Message));
    }
    assert!(recent.admit("C1:0", EventKind::AppMention), "the oldest id was forgotten");
    assert!(!recent.admit(&format!("C1:{REMEMBERED_DELIVERIES}"), EventKind::AppMention));
}
