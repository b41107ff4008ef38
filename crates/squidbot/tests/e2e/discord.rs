//! Discord end to end: the real gateway against the gateway-WebSocket and REST fake from
//! testkit. A DM from the owner is answered (no pings allowed, edited as it streams), a
//! guild message is answered only when it mentions the bot, and a message sent while
//! the connection was dropped is replayed on RESUME and answered once.

use squidbot_testkit::fake_discord::{FakeDiscord, FakeMessage};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, eventually, start_gateway};
use crate::harness::messages;

const TOKEN: &str = "discord-bot-token";
const OWNER: &str = "2200000000000000002";

/// What the channel shows of the bot's message (its last edit, if edited).
fn shown(discord: &FakeDiscord, message_id: &str) -> Option<String> {
    let edited = discord.edits().into_iter().rev().find(|edit| edit.message_id == message_id).map(|edit| edit.content);
    edited.or_else(|| discord.sent().into_iter().find(|sent| sent.message_id == message_id).map(|sent| sent.content))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_dms_and_mentions_are_answered_once_across_a_resume() {
    let server = ScriptedLlm::start().await;
    let discord = FakeDiscord::start(TOKEN).await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.discord]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nowners = [\"{OWNER}\"]\n",
        discord.api_base()
    ));
    let _gateway = start_gateway(&home).await;
    discord.wait_for_live().await;

    server.push(Reply::text("Yes: **3** open incidents, none critical. @everyone relax."));
    discord.push_message_create(FakeMessage::direct("3300000000000000003", OWNER, "any incidents open?"));
    discord.wait_for_sent(1).await;
    let first = discord.sent().remove(0);
    assert_eq!(first.channel_id, "3300000000000000003");
    assert_eq!(first.allowed_mentions, Some(serde_json::json!({"parse": []})), "nobody is pinged");
    eventually("the final text", || {
        shown(&discord, &first.message_id).as_deref()
            == Some("Yes: **3** open incidents, none critical. @everyone relax.")
    })
    .await;

    // Guild channel: ignored without a mention, answered with one.
    discord.push_message_create(FakeMessage::guild("4400000000000000004", "5500000000000000005", OWNER, "chatter"));
    server.push(Reply::text("On it."));
    let mention = FakeMessage::guild("4400000000000000004", "5500000000000000005", OWNER, "please check the queue")
        .mentioning_bot();
    discord.push_message_create(mention);
    discord.wait_for_sent(2).await;
    let reply = discord.sent().remove(1);
    assert_eq!(reply.channel_id, "5500000000000000005");
    let input = messages(&server.requests()[1].body).last().unwrap()["content"].as_str().unwrap().to_owned();
    assert_eq!(input.trim(), "please check the queue");

    // Dropped connection: a message sent meanwhile is replayed on RESUME, answered once.
    discord.drop_connection();
    server.push(Reply::text("Back online."));
    discord.push_message_create(FakeMessage::direct("3300000000000000003", OWNER, "still there?"));
    discord.wait_for_sent(3).await;
    assert!(discord.resume_count() >= 1, "the session was resumed");
    assert_eq!(server.requests().len(), 3, "one turn per message");
    server.assert_clean();
}
