//! Matrix end to end: the real gateway against a real Synapse started by the test. The
//! owner invites the bot to a direct room, the bot joins, answers in HTML (acknowledging
//! with a reaction), and a stranger's invitation is declined under the default
//! `auto_join = "allowed"`.

use std::time::Duration;

use serde_json::{Value, json};
use squidbot_testkit::synapse::{Account, Synapse};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, start_gateway};

/// A person's client: plain client-server API calls.
struct Person {
    account: Account,
    base: String,
    http: reqwest::Client,
}

impl Person {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request =
            self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.account.access_token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {answer}");
        answer
    }

    async fn create_room(&self, invite: &str) -> String {
        let body = json!({"preset": "trusted_private_chat", "is_direct": true, "invite": [invite]});
        let created = self.call(reqwest::Method::POST, "/_matrix/client/v3/createRoom", Some(body)).await;
        created["room_id"].as_str().unwrap().to_owned()
    }

    async fn say(&self, room: &str, text: &str, transaction: &str) {
        let path = format!("/_matrix/client/v3/rooms/{room}/send/m.room.message/{transaction}");
        self.call(reqwest::Method::PUT, &path, Some(json!({"msgtype": "m.text", "body": text}))).await;
    }

    async fn events(&self, room: &str) -> Vec<Value> {
        let path = format!("/_matrix/client/v3/rooms/{room}/messages?dir=b&limit=100");
        let answer = self.call(reqwest::Method::GET, &path, None).await;
        answer["chunk"].as_array().cloned().unwrap_or_default()
    }

    async fn membership(&self, room: &str, user: &str) -> Option<String> {
        let path = format!("/_matrix/client/v3/rooms/{room}/members");
        let answer = self.call(reqwest::Method::GET, &path, None).await;
        answer["chunk"]
            .as_array()?
            .iter()
            .find(|event| event["state_key"] == user)
            .and_then(|event| event["content"]["membership"].as_str().map(str::to_owned))
    }
}

async fn until<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(found) = probe().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The text the room shows for the bot's reply: the newest edit's content, or the body.
fn shown_reply(events: &[Value], bot: &str) -> Option<String> {
    let from_bot: Vec<&Value> =
        events.iter().filter(|event| event["sender"] == bot && event["type"] == "m.room.message").collect();
    let newest = from_bot.first()?;
    let content = &newest["content"];
    let text = content["m.new_content"]["formatted_body"].as_str().or_else(|| content["formatted_body"].as_str())?;
    Some(text.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_joins_the_owners_room_answers_in_html_and_declines_a_strangers_invite() {
    let synapse = Synapse::start().await;
    let bot = synapse.register("squidbot").await;
    let person = |account: Account| Person { account, base: synapse.base_url.clone(), http: reqwest::Client::new() };
    let owner = person(synapse.register("olga").await);
    let stranger = person(synapse.register("mallory").await);

    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.matrix]\nhomeserver = \"{}\"\nuser_id = \"{}\"\ntoken = \"{}\"\nowners = [\"{}\"]\n",
        synapse.base_url, bot.user_id, bot.access_token, owner.account.user_id
    ));
    let _gateway = start_gateway(&home).await;

    let room = owner.create_room(&bot.user_id).await;
    until("the bot to join", async || {
        (owner.membership(&room, &bot.user_id).await.as_deref() == Some("join")).then_some(())
    })
    .await;
    server.push(Reply::text("The **build** is green."));
    owner.say(&room, "How is the build?", "t1").await;
    let shown = until("the reply", async || {
        shown_reply(&owner.events(&room).await, &bot.user_id).filter(|text| text.contains("green"))
    })
    .await;
    assert_eq!(shown, "The <strong>build</strong> is green.");
    let events = owner.events(&room).await;
    assert!(
        events.iter().any(|event| event["type"] == "m.reaction" && event["sender"] == bot.user_id.as_str()),
        "acknowledged with a reaction"
    );
    let asked = server.requests().remove(0).body;
    assert!(asked.to_string().contains("How is the build?"), "{asked}");

    let other = stranger.create_room(&bot.user_id).await;
    until("the stranger's invite declined", async || {
        (stranger.membership(&other, &bot.user_id).await.as_deref() == Some("leave")).then_some(())
    })
    .await;
    assert_eq!(server.requests().len(), 1);
    server.assert_clean();
}
