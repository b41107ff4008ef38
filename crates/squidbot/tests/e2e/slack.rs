//! Slack end to end: the real gateway against the Socket Mode and Web API fake from
//! testkit. A direct message from the owner is answered in mrkdwn (acknowledged with a
//! reaction, edited as it streams); a mention in a channel, which Slack sends twice, is
//! answered once in the thread it came from; an envelope redelivered after a lost ack
//! runs no second turn; a dropped socket is reconnected and nothing is lost.

use std::time::Duration;

use squidbot_testkit::fake_slack::{BOT_USER_ID, FakeSlack};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, eventually, start_gateway};
use crate::harness::messages;

const APP_TOKEN: &str = "xapp-1-test";
const BOT_TOKEN: &str = "xoxb-test";
const OWNER: &str = "U0OWNER";

/// What the channel shows of the bot's message `ts` (its last edit, if edited).
fn shown(slack: &FakeSlack, ts: &str) -> Option<String> {
    let edited = slack.updates().into_iter().rev().find(|update| update.ts == ts).map(|update| update.text);
    edited.or_else(|| slack.posted().into_iter().find(|posted| posted.ts == ts).map(|posted| posted.text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_messages_are_answered_once_in_their_thread_through_reconnects_and_redeliveries() {
    let server = ScriptedLlm::start().await;
    let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.slack]\ntoken = \"{BOT_TOKEN}\"\napp_token = \"{APP_TOKEN}\"\napi_base = \"{}\"\nowners = [\"{OWNER}\"]\n",
        slack.api_base()
    ));
    let _gateway = start_gateway(&home).await;
    assert!(slack.wait_for_sockets(1).await, "the adapter connected");

    server.push(Reply::text("The deploy **finished** at 14:02; see <https://ci.example/run/7>."));
    let asked = slack.push_message("D0DM", "im", OWNER, "How did the deploy go?", None, Vec::new());
    let posted = slack.wait_for_posted(1).await;
    assert_eq!(posted[0].channel, "D0DM");
    eventually("the final mrkdwn", || {
        shown(&slack, &posted[0].ts).as_deref()
            == Some("The deploy *finished* at 14:02; see <https://ci.example/run/7>.")
    })
    .await;
    assert!(slack.reactions().iter().any(|reaction| reaction.timestamp == asked && reaction.name == "eyes"));

    // A mention in a channel thread: Slack sends `message` and `app_mention`; one turn,
    // the reply in the thread.
    server.push(Reply::text("Rolling back now."));
    let root = slack.push_message("C0OPS", "channel", OWNER, "deploy thread", None, Vec::new());
    slack.push_mention("C0OPS", OWNER, &format!("<@{BOT_USER_ID}> roll it back please"), Some(&root));
    let posted = slack.wait_for_posted(2).await;
    assert_eq!((posted[1].channel.as_str(), posted[1].thread_ts.as_deref()), ("C0OPS", Some(root.as_str())));
    eventually("the thread reply", || shown(&slack, &posted[1].ts).as_deref() == Some("Rolling back now.")).await;
    let input = messages(&server.requests()[1].body).last().unwrap()["content"].clone();
    assert_eq!(input, "roll it back please");

    // A lost ack: Slack redelivers the envelope; no second turn. Then a dropped socket.
    slack.set_redelivery_after(Duration::from_millis(300));
    slack.lose_next_acks(1);
    server.push(Reply::text("Noted."));
    slack.push_message("D0DM", "im", OWNER, "note: rollback done", None, Vec::new());
    slack.wait_for_posted(3).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    slack.drop_connection();
    assert!(slack.wait_for_sockets(2).await, "reconnected after the drop");
    server.push(Reply::text("Still here."));
    slack.push_message("D0DM", "im", OWNER, "are you there?", None, Vec::new());
    let posted = slack.wait_for_posted(4).await;
    eventually("the answer after the reconnect", || shown(&slack, &posted[3].ts).as_deref() == Some("Still here."))
        .await;
    assert_eq!(server.requests().len(), 4, "one turn per message, none for the redelivery");
    assert_eq!(slack.posted().len(), 4);
    server.assert_clean();
}
