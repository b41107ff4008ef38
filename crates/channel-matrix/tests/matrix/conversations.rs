//! Receiving against a real Synapse: invitations by policy, direct and group messages,
//! mentions and replies to the bot, restarts, history, refused credentials.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use squidbot_channel_matrix::{InvitePolicy, MatrixChannel, MatrixSettings};
use squidbot_channels::{
    Channel, ChannelErrorKind, Conversation, ConversationKind, InboundSink, OutboundMessage, Sender,
};
use squidbot_types::Secret;
use tokio_util::sync::CancellationToken;

use crate::harness::{Person, RunningBot, settings};
use squidbot_testkit::synapse::Synapse;

pub async fn an_invited_bot_joins_and_hears_a_direct_message(synapse: Arc<Synapse>) {
    let bot = synapse.register("dmbot").await;
    let alice = Person::new(&synapse, synapse.register("dmalice").await);
    let state = tempfile::tempdir().unwrap();
    let mut running = RunningBot::start(settings(&synapse, &bot, state.path(), InvitePolicy::All)).await;

    let room = alice.create_room(json!({"preset": "trusted_private_chat", "is_direct": true})).await;
    alice.say(&room, "said before the bot was invited").await;
    alice.invite(&room, &bot.user_id).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;
    alice.send(&room, "m.room.message", json!({"msgtype": "m.notice", "body": "another bot's notice"})).await;
    let event_id = alice.say(&room, "hello bot").await;

    let message = running.next().await;
    assert_eq!(message.channel, "matrix");
    assert_eq!(message.platform_message_id, event_id, "history and notices aren't handed over");
    assert_eq!(message.conversation, Conversation { id: room.clone(), kind: ConversationKind::Direct, thread: None });
    assert_eq!(message.sender, Sender { id: alice.user_id().to_owned(), display_name: Some("dmalice".to_owned()) });
    assert_eq!(message.text, "hello bot");
    assert!(!message.mentions_bot);
    assert!(message.attachments.is_empty());
    running.stop().await;
}

pub async fn invitations_follow_the_invite_policy(synapse: Arc<Synapse>) {
    let bot = synapse.register("policybot").await;
    let owner = Person::new(&synapse, synapse.register("policyowner").await);
    let stranger = Person::new(&synapse, synapse.register("policystranger").await);
    let state = tempfile::tempdir().unwrap();
    let invites = InvitePolicy::From(vec![owner.user_id().to_owned()]);
    let running = RunningBot::start(settings(&synapse, &bot, state.path(), invites)).await;

    let strangers_room = stranger.create_room(json!({"invite": [bot.user_id]})).await;
    let owners_room = owner.create_room(json!({"invite": [bot.user_id]})).await;
    owner.wait_for_membership(&owners_room, &bot.user_id, "join").await;
    stranger.wait_for_membership(&strangers_room, &bot.user_id, "leave").await;
    running.stop().await;
}

pub async fn mentions_and_replies_address_the_bot_in_a_group(synapse: Arc<Synapse>) {
    let bot = synapse.register("groupbot").await;
    let alice = Person::new(&synapse, synapse.register("groupalice").await);
    let carol = Person::new(&synapse, synapse.register("groupcarol").await);
    let state = tempfile::tempdir().unwrap();
    let mut running = RunningBot::start(settings(&synapse, &bot, state.path(), InvitePolicy::All)).await;
    let room = alice.create_room(json!({"invite": [bot.user_id, carol.user_id()]})).await;
    carol.join(&room).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;

    alice.say(&room, "morning everyone").await;
    let chatter = running.next().await;
    assert_eq!(chatter.conversation.kind, ConversationKind::Group);
    assert!(!chatter.mentions_bot);
    assert_eq!(chatter.text, "morning everyone");

    // A mention "pill" as Element sends it.
    let pill = json!({
        "msgtype": "m.text",
        "body": "groupbot: what's the weather?",
        "format": "org.matrix.custom.html",
        "formatted_body": format!("<a href=\"https://matrix.to/#/{}\">groupbot</a>: what's the weather?", bot.user_id),
        "m.mentions": {"user_ids": [bot.user_id]},
    });
    alice.send(&room, "m.room.message", pill).await;
    let mentioned = running.next().await;
    assert!(mentioned.mentions_bot);
    assert_eq!(mentioned.text, "what's the weather?");

    alice.say(&room, &format!("{} are you there", bot.user_id)).await;
    let typed = running.next().await;
    assert!(typed.mentions_bot);
    assert_eq!(typed.text, "are you there");

    let conversation = chatter.conversation.clone();
    let outbound = OutboundMessage { conversation, reply_to: None, text: "I am here".to_owned(), attachments: vec![] };
    let sent = running.channel.send(&outbound).await.unwrap();
    let reply_to_bot = json!({
        "msgtype": "m.text",
        "body": format!("> <{}> I am here\n\ngood to know", bot.user_id),
        "m.relates_to": {"m.in_reply_to": {"event_id": sent.platform_message_id}},
    });
    alice.send(&room, "m.room.message", reply_to_bot).await;
    let reply = running.next().await;
    assert!(reply.mentions_bot, "a reply to the bot's message addresses it");
    assert_eq!(reply.text, "good to know", "the reply fallback is stripped");

    let carol_asked = carol.say(&room, "lunch?").await;
    assert_eq!(running.next().await.platform_message_id, carol_asked);
    let reply_to_carol = json!({
        "msgtype": "m.text",
        "body": format!("> <{}> lunch?\n\nyes please", carol.user_id()),
        "m.relates_to": {"m.in_reply_to": {"event_id": carol_asked}},
    });
    alice.send(&room, "m.room.message", reply_to_carol).await;
    let other_reply = running.next().await;
    assert!(!other_reply.mentions_bot, "a reply to someone else doesn't address the bot");
    assert_eq!(other_reply.text, "yes please");
    running.stop().await;
}

pub async fn a_restart_resumes_without_losing_or_repeating(synapse: Arc<Synapse>) {
    let bot = synapse.register("restartbot").await;
    let alice = Person::new(&synapse, synapse.register("restartalice").await);
    let state = tempfile::tempdir().unwrap();
    let bot_settings = settings(&synapse, &bot, state.path(), InvitePolicy::All);
    let mut running = RunningBot::start(bot_settings.clone()).await;
    let room = alice.create_room(json!({"invite": [bot.user_id]})).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;
    let before = alice.say(&room, "before the restart").await;
    assert_eq!(running.next().await.platform_message_id, before);
    running.stop().await;

    let while_down = alice.say(&room, "while the bot was down").await;
    let mut restarted = RunningBot::start(bot_settings).await;
    let resumed = restarted.next().await;
    assert_eq!(
        (resumed.platform_message_id.as_str(), resumed.text.as_str()),
        (while_down.as_str(), "while the bot was down")
    );
    let after = alice.say(&room, "after the restart").await;
    assert_eq!(restarted.next().await.platform_message_id, after, "nothing older is handed over again");
    restarted.stop().await;
}

pub async fn the_first_start_does_not_answer_history(synapse: Arc<Synapse>) {
    let bot = synapse.register("historybot").await;
    let alice = Person::new(&synapse, synapse.register("historyalice").await);
    let joined_state = tempfile::tempdir().unwrap();
    let running = RunningBot::start(settings(&synapse, &bot, joined_state.path(), InvitePolicy::All)).await;
    let room = alice.create_room(json!({"invite": [bot.user_id]})).await;
    alice.wait_for_membership(&room, &bot.user_id, "join").await;
    running.stop().await;

    alice.say(&room, "old news").await;
    // A newly set up bot: new state, and a new device (Synapse answers a repeated
    // first sync of one device from a two-minute cache).
    let new_device = synapse.log_in(&bot).await;
    let fresh_state = tempfile::tempdir().unwrap();
    let mut fresh = RunningBot::start(settings(&synapse, &new_device, fresh_state.path(), InvitePolicy::All)).await;
    let news = alice.say(&room, "fresh news").await;
    assert_eq!(fresh.next().await.platform_message_id, news);
    fresh.stop().await;
}

pub async fn refused_credentials_are_fatal_and_passwords_log_in(synapse: Arc<Synapse>) {
    let bot = synapse.register("loginbot").await;
    let state = tempfile::tempdir().unwrap();
    let token_settings = settings(&synapse, &bot, state.path(), InvitePolicy::All);
    let wrong_token =
        MatrixSettings { access_token: Some(Secret::new("syt_not_a_real_token")), ..token_settings.clone() };
    let error = run_until_it_ends(wrong_token).await;
    assert_eq!(error.0, ChannelErrorKind::Fatal);
    assert!(error.1.contains("M_UNKNOWN_TOKEN"), "{}", error.1);

    let password_settings = MatrixSettings { access_token: None, ..token_settings };
    let wrong_password =
        MatrixSettings { password: Some(Secret::new("not the password")), ..password_settings.clone() };
    assert_eq!(run_until_it_ends(wrong_password).await.0, ChannelErrorKind::Fatal);

    let right_password = MatrixSettings {
        password: Some(Secret::new(bot.password.clone())),
        device_id: Some("SQUIDBOT".to_owned()),
        ..password_settings
    };
    let running = RunningBot::start(right_password).await;
    running.stop().await;
}

async fn run_until_it_ends(settings: MatrixSettings) -> (ChannelErrorKind, String) {
    let channel = MatrixChannel::new(settings).unwrap();
    let (sink, _received) = InboundSink::bounded(1);
    let ended = tokio::time::timeout(Duration::from_secs(10), channel.run(sink, CancellationToken::new()))
        .await
        .expect("the loop should end on refused credentials");
    let error = ended.unwrap_err();
    (error.kind, error.message)
}
