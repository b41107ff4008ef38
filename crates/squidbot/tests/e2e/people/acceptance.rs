//! The acceptance tests of users and roles (issue 18) on the real gateway: people set up
//! with the CLI, Telegram through the testkit fake, Matrix through a real Synapse. One
//! person is one memory on two apps; a child's `exec` is refused by policy, a user's
//! waits for the owner's `/approve` or `/deny` on Telegram; a budget runs out in the
//! middle of a conversation; a disabled person gets no turn. Sandbox backends named in
//! `SQUIDBOT_TEST_SANDBOX_UNAVAILABLE` are skipped with a notice.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram, FakeUser};
use squidbot_testkit::synapse::{Account, Synapse};
use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{audit_rows, json_of, memory_contexts, session_context};
use crate::bus::{bus_home, eventually, start_gateway};
use crate::gateway::Running;
use crate::harness::{Home, messages, offered_tools, tool_results};

const TELEGRAM_TOKEN: &str = "4343:acceptance-telegram-token";
/// The owner's Telegram id (in `owners`: the first admin).
const OWNER: i64 = 1001;
const REFUSAL: &str = "Sorry, this is a private assistant.";

/// The first sandbox backend not declared unavailable here, or `None` with a notice.
fn sandbox_backend() -> Option<&'static str> {
    let declared = std::env::var("SQUIDBOT_TEST_SANDBOX_UNAVAILABLE").unwrap_or_default();
    let unavailable = |backend: &str| declared.split(',').any(|name| name.trim() == backend);
    let backend = ["landlock", "bubblewrap"].into_iter().find(|backend| !unavailable(backend));
    if backend.is_none() {
        eprintln!("NOT TESTED: SQUIDBOT_TEST_SANDBOX_UNAVAILABLE declares landlock and bubblewrap unavailable");
    }
    backend
}

/// A gateway home with a Telegram channel (the fake, owner [`OWNER`]), the assistant in
/// direct mode, `backend` as the sandbox and info logs.
fn acceptance_home(server: &ScriptedLlm, telegram: &FakeTelegram, backend: &str, extra: &str) -> Home {
    let home = bus_home(server);
    home.append_config(&format!(
        "[channels.telegram]\ntoken = \"{TELEGRAM_TOKEN}\"\napi_base = \"{}\"\nowners = [\"{OWNER}\"]\n\
         refusal = \"{REFUSAL}\"\n\n[agents.assistant]\nmode = \"direct\"\n\n[sandbox]\nbackend = \"{backend}\"\n\n\
         [logging]\nlevel = \"info\"\n\n{extra}",
        telegram.api_base()
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    home
}

/// Everything the gateway writes to stderr (its log), collected as it comes.
fn collect_log(gateway: &mut Running) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = gateway.child.stderr.take().expect("the gateway's stderr is piped");
    let collected = Arc::clone(&log);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut log = collected.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    log
}

/// What the bot's messages in `chat` show now (Telegram HTML, edits applied).
fn chat(telegram: &FakeTelegram, chat: i64) -> Vec<String> {
    telegram.chat_texts(chat)
}

/// Waits until a message of the bot in `chat` satisfies `matches`; that message.
async fn shown_in(telegram: &FakeTelegram, chat_id: i64, what: &str, matches: impl Fn(&str) -> bool) -> String {
    let mut found = None;
    eventually(what, || {
        found = chat(telegram, chat_id).into_iter().find(|text| matches(text));
        found.is_some()
    })
    .await;
    found.unwrap()
}

/// The approval request id in a waiting note: `… (request ABC123) …`.
fn request_id(note: &str) -> String {
    let start = note.find("(request ").unwrap_or_else(|| panic!("no request id in {note:?}")) + "(request ".len();
    let id: String = note[start..].chars().take_while(char::is_ascii_alphanumeric).collect();
    assert_eq!(id.len(), 6, "{note}");
    id
}

/// The `message` entries of a session file as (role, content).
fn session_messages(home: &Home, key: &str) -> Vec<(String, String)> {
    home.session_lines(key)
        .iter()
        .filter(|line| line["type"] == "message")
        .map(|line| {
            (
                line["role"].as_str().unwrap_or_default().to_owned(),
                line["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A Matrix person's client: plain client-server API calls against Synapse.
struct MatrixPerson {
    account: Account,
    base: String,
    http: reqwest::Client,
}

impl MatrixPerson {
    fn new(account: Account, synapse: &Synapse) -> MatrixPerson {
        MatrixPerson { account, base: synapse.base_url.clone(), http: reqwest::Client::new() }
    }

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

    /// Creates a direct room with `bot` invited and waits until the bot has joined.
    async fn direct_room_with(&self, bot: &str) -> String {
        let body = json!({"preset": "trusted_private_chat", "is_direct": true, "invite": [bot]});
        let created = self.call(reqwest::Method::POST, "/_matrix/client/v3/createRoom", Some(body)).await;
        let room = created["room_id"].as_str().unwrap().to_owned();
        for _ in 0..300 {
            if self.membership(&room, bot).await.as_deref() == Some("join") {
                return room;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the bot did not join the room of {}", self.account.user_id);
    }

    async fn membership(&self, room: &str, user: &str) -> Option<String> {
        let answer = self.call(reqwest::Method::GET, &format!("/_matrix/client/v3/rooms/{room}/members"), None).await;
        answer["chunk"]
            .as_array()?
            .iter()
            .find(|event| event["state_key"] == user)
            .and_then(|event| event["content"]["membership"].as_str().map(str::to_owned))
    }

    async fn say(&self, room: &str, text: &str, transaction: &str) {
        let path = format!("/_matrix/client/v3/rooms/{room}/send/m.room.message/{transaction}");
        self.call(reqwest::Method::PUT, &path, Some(json!({"msgtype": "m.text", "body": text}))).await;
    }

    /// Waits until the bot's newest message in `room` (its newest edit applied) contains `expected`.
    async fn wait_for_reply(&self, room: &str, bot: &str, expected: &str) {
        let path = format!("/_matrix/client/v3/rooms/{room}/messages?dir=b&limit=100");
        let mut last = None;
        for _ in 0..300 {
            let answer = self.call(reqwest::Method::GET, &path, None).await;
            let events = answer["chunk"].as_array().cloned().unwrap_or_default();
            let newest = events.iter().find(|event| event["sender"] == bot && event["type"] == "m.room.message");
            last = newest.map(|event| {
                let content = &event["content"];
                content["m.new_content"]["body"]
                    .as_str()
                    .or_else(|| content["body"].as_str())
                    .unwrap_or_default()
                    .to_owned()
            });
            if last.as_deref().is_some_and(|text| text.contains(expected)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no reply containing {expected:?} in {room}; the newest: {last:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_on_two_apps_each_have_one_memory_of_their_own() {
    let Some(backend) = sandbox_backend() else { return };
    let synapse = Synapse::start().await;
    let bot = synapse.register("squidbot").await;
    let alice_matrix = MatrixPerson::new(synapse.register("alice").await, &synapse);
    let bob_matrix = MatrixPerson::new(synapse.register("bob").await, &synapse);
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TELEGRAM_TOKEN).await;
    let matrix = format!(
        "[channels.matrix]\nhomeserver = \"{}\"\nuser_id = \"{}\"\ntoken = \"{}\"\n",
        synapse.base_url, bot.user_id, bot.access_token
    );
    let home = acceptance_home(&server, &telegram, backend, &matrix);
    let alice_id = alice_matrix.account.user_id.clone();
    let bob_id = bob_matrix.account.user_id.clone();
    for (user, telegram_id, matrix_id) in [("alice", "2001", &alice_id), ("bob", "2002", &bob_id)] {
        home.run(&["users", "add", user, "--role", "user"]).await.success();
        home.run(&["users", "link", user, &format!("telegram:{telegram_id}")]).await.success();
        home.run(&["users", "link", user, &format!("matrix:{matrix_id}")]).await.success();
    }
    let _gateway = start_gateway(&home).await;

    // Alice tells the assistant a fact on Telegram; it saves it.
    const FACT: &str = "Alice's bike lock code is 7319";
    server.push(Reply::tool_call("memory_save", json!({"content": FACT, "type": "fact"})));
    server.push(Reply::text("Noted, I'll remember your bike lock code."));
    telegram.push_user_message(2001, ChatKind::Private, &FakeUser::new(2001, "Alice"), "my bike lock code is 7319");
    shown_in(&telegram, 2001, "alice's answer on Telegram", |text| text.contains("Noted")).await;
    let saved = tool_results(&server.requests()[1].body);
    assert!(saved[0].contains("saved memory"), "{saved:?}");
    assert_eq!(memory_contexts(&home, FACT), ["user:alice"], "saved in alice's context");

    // Alice asks on Matrix: her recall finds it.
    let alice_room = alice_matrix.direct_room_with(&bot.user_id).await;
    server.push(Reply::tool_call("memory_recall", json!({"query": "bike lock code"})));
    server.push(Reply::text("Your bike lock code is 7319."));
    alice_matrix.say(&alice_room, "what is my bike lock code?", "alice-1").await;
    alice_matrix.wait_for_reply(&alice_room, &bot.user_id, "7319").await;
    let requests = server.requests();
    assert!(
        messages(&requests[2].body).iter().any(|message| message["content"] == "what is my bike lock code?"),
        "{}",
        requests[2].body
    );
    let recalled = tool_results(&requests[3].body);
    assert!(recalled.last().unwrap().contains("7319"), "alice's recall finds her fact: {recalled:?}");

    // Bob asks the same on Matrix: his recall does not.
    let bob_room = bob_matrix.direct_room_with(&bot.user_id).await;
    server.push(Reply::tool_call("memory_recall", json!({"query": "bike lock code"})));
    server.push(Reply::text("I don't know a bike lock code of yours."));
    bob_matrix.say(&bob_room, "what is my bike lock code?", "bob-1").await;
    bob_matrix.wait_for_reply(&bob_room, &bot.user_id, "don't know").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let recalled = tool_results(&requests[5].body);
    assert_eq!(recalled.len(), 1, "{recalled:?}");
    assert!(recalled[0].contains("no memories match"), "bob's recall ran and found nothing: {recalled:?}");
    assert!(!recalled[0].contains("7319"), "bob's recall must not see alice's memory: {recalled:?}");
    assert!(!requests[4].body.to_string().contains("7319"), "nothing of alice's reaches bob's turn");

    // Alice's two conversations are two sessions in one context; bob's is his own.
    assert_eq!(session_context(&home, "telegram:2001").await.as_deref(), Some("user:alice"));
    assert_eq!(session_context(&home, &format!("matrix:{alice_id}")).await.as_deref(), Some("user:alice"));
    assert_eq!(session_context(&home, &format!("matrix:{bob_id}")).await.as_deref(), Some("user:bob"));
    assert_eq!(home.session_lines("telegram:2001")[0]["context"], "user:alice");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_exec_is_refused_a_users_waits_for_the_owners_approve_and_a_denial_reaches_the_model() {
    let Some(backend) = sandbox_backend() else { return };
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TELEGRAM_TOKEN).await;
    let home = acceptance_home(&server, &telegram, backend, "");
    home.run(&["users", "add", "kim", "--role", "child"]).await.success();
    home.run(&["users", "add", "bob", "--role", "user"]).await.success();
    home.run(&["users", "link", "kim", "telegram:3001"]).await.success();
    home.run(&["users", "link", "bob", "telegram:3002"]).await.success();
    let mut gateway = start_gateway(&home).await;
    let log = collect_log(&mut gateway);
    let (kim, bob, owner) = (FakeUser::new(3001, "Kim"), FakeUser::new(3002, "Bob"), FakeUser::new(OWNER, "Olga"));
    let kims_file = home.path().join("users").join("kim").join("workspace").join("kim.txt");
    let approved = home.path().join("users").join("bob").join("workspace").join("approved.txt");

    // Kim, a child: `exec` is not offered, and a call of it anyway is refused by policy.
    server.push(Reply::tool_call("exec", json!({"command": "echo kim > kim.txt"})));
    server.push(Reply::text("I'm not allowed to run commands for you."));
    telegram.push_user_message(3001, ChatKind::Private, &kim, "run echo kim for me");
    shown_in(&telegram, 3001, "kim's answer", |text| text.contains("not allowed")).await;
    let requests = server.requests();
    let offered = offered_tools(&requests[0].body);
    assert!(!offered.contains(&"exec".to_owned()), "exec is not offered to a child: {offered:?}");
    assert!(offered.contains(&"read_file".to_owned()), "{offered:?}");
    let refused = tool_results(&requests[1].body);
    assert!(refused[0].starts_with("Refused by policy: "), "{refused:?}");
    assert!(!kims_file.exists(), "the refused command did not run");

    // Bob, a user: `exec` waits; the owner gets the request on Telegram and approves it.
    let command = "echo ran >> approved.txt && cat approved.txt";
    server.push(Reply::tool_call("exec", json!({"command": command})));
    server.push(Reply::text("Done, the command ran."));
    telegram.push_user_message(3002, ChatKind::Private, &bob, "please log that it ran");
    let note = shown_in(&telegram, 3002, "bob's waiting note", |text| text.starts_with("⏳")).await;
    assert!(note.contains("exec") && note.contains("needs an admin's approval"), "{note}");
    let id = request_id(&note);
    let asked = shown_in(&telegram, OWNER, "the owner's approval request", |text| text.contains(&id)).await;
    assert!(asked.starts_with("🔐 ") && asked.contains("asks to run exec") && asked.contains("echo ran"), "{asked}");
    assert!(asked.contains(&format!("/approve {id}")), "{asked}");
    assert!(!approved.exists(), "nothing runs before the decision");
    assert_eq!(server.requests().len(), 3, "the turn waits");

    telegram.push_user_message(OWNER, ChatKind::Private, &owner, &format!("/approve {id}"));
    shown_in(&telegram, 3002, "bob's final reply", |text| text.contains("Done, the command ran.")).await;
    shown_in(&telegram, OWNER, "the owner's confirmation", |text| {
        text.starts_with(&format!("approved {id}: exec for"))
    })
    .await;
    assert_eq!(std::fs::read_to_string(&approved).unwrap(), "ran\n", "the command ran exactly once");
    let output = tool_results(&server.requests()[3].body);
    assert!(output.last().unwrap().contains("ran"), "the model gets the command's output: {output:?}");

    // Bob asks again; the owner denies with a reason, which reaches the model.
    server.push(Reply::tool_call("exec", json!({"command": command})));
    server.push(Reply::text("The admin said no: too risky."));
    telegram.push_user_message(3002, ChatKind::Private, &bob, "log it once more");
    let second =
        shown_in(&telegram, 3002, "bob's second waiting note", |text| text.starts_with("⏳") && !text.contains(&id))
            .await;
    let second_id = request_id(&second);
    shown_in(&telegram, OWNER, "the second approval request", |text| text.contains(&second_id)).await;
    telegram.push_user_message(OWNER, ChatKind::Private, &owner, &format!("/deny {second_id} too risky"));
    shown_in(&telegram, 3002, "bob's reply after the denial", |text| text.contains("The admin said no")).await;
    shown_in(&telegram, OWNER, "the owner's denial confirmation", |text| {
        text.starts_with(&format!("denied {second_id}"))
    })
    .await;
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let refusal = tool_results(&requests[5].body);
    let refusal = refusal.last().unwrap();
    assert!(refusal.contains("denied") && refusal.contains("too risky"), "{refusal}");
    assert_eq!(std::fs::read_to_string(&approved).unwrap(), "ran\n", "the denied command did not run");

    // A disabled person gets no turn; the gateway logs the refusal.
    home.run(&["users", "disable", "kim"]).await.success();
    telegram.push_user_message(3001, ChatKind::Private, &kim, "hello again");
    shown_in(&telegram, 3001, "kim's refusal", |text| text == REFUSAL).await;
    eventually("the refusal in the gateway's log", || {
        let log = log.lock().unwrap();
        log.lines().any(|line| line.contains("message refused") && line.contains("disabled user"))
    })
    .await;
    assert_eq!(server.requests().len(), 6, "no model request for a disabled person");

    // The audit trail holds the requests, the decisions and the calls, and its chain holds.
    let rows = audit_rows(&home, &[]).await;
    let of = |kind: &str| -> Vec<&Value> { rows.iter().filter(|row| row["kind"] == kind).collect() };
    let requested = of("approval_requested");
    assert_eq!(requested.len(), 2, "{rows:?}");
    assert!(requested.iter().all(|row| row["actor"] == "bob" && row["subject"] == "exec"), "{requested:?}");
    assert_eq!(requested[0]["detail"]["id"], id.as_str());
    let decided: Vec<(bool, &str)> = of("approval_decided")
        .iter()
        .map(|row| (row["ok"].as_bool().unwrap(), row["detail"]["id"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(decided, [(true, id.as_str()), (false, second_id.as_str())], "{rows:?}");
    assert!(of("approval_decided").iter().all(|row| row["actor"] == "owner"));
    let calls: Vec<(&str, &str, bool)> = of("tool_call")
        .iter()
        .map(|row| (row["actor"].as_str().unwrap(), row["subject"].as_str().unwrap(), row["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(calls, [("kim", "exec", false), ("bob", "exec", true)], "{rows:?}");
    home.run(&["audit", "verify"]).await.success();
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_runs_out_mid_conversation_and_the_refusal_is_kept() {
    let Some(backend) = sandbox_backend() else { return };
    const BUDGET: u64 = 12_000;
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TELEGRAM_TOKEN).await;
    let home =
        acceptance_home(&server, &telegram, backend, &format!("[user_roles.user]\nbudget_daily_tokens = {BUDGET}\n"));
    home.run(&["users", "add", "bob", "--role", "user"]).await.success();
    home.run(&["users", "link", "bob", "telegram:4002"]).await.success();
    // Notes of about 12,000 tokens (the scripted model counts a token per 4 characters):
    // reading them takes bob past his budget whatever the system prompt weighs.
    let workspace = home.path().join("users").join("bob").join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let line = format!("{}\n", "notes on the garden, the bees and the plum tree ".repeat(2));
    std::fs::write(workspace.join("notes.txt"), line.repeat(480)).unwrap();
    let _gateway = start_gateway(&home).await;
    let (bob, owner) = (FakeUser::new(4002, "Bob"), FakeUser::new(OWNER, "Olga"));

    server.push(Reply::text("Hello Bob."));
    telegram.push_user_message(4002, ChatKind::Private, &bob, "hi");
    shown_in(&telegram, 4002, "bob's first answer", |text| text.contains("Hello Bob.")).await;
    let first = json_of(&home, &["usage", "--user", "bob", "--json"]).await;
    let after_first = first["total"]["total_tokens"].as_u64().unwrap();
    assert!(after_first > 0 && after_first < BUDGET, "the first turn stays under the budget: {first}");

    server.push(Reply::tool_call("read_file", json!({"path": "notes.txt"})));
    server.push(Reply::text("Your notes are about the garden."));
    telegram.push_user_message(4002, ChatKind::Private, &bob, "read my notes");
    shown_in(&telegram, 4002, "bob's second answer", |text| text.contains("Your notes are about the garden.")).await;
    assert_eq!(server.requests().len(), 3);
    let notes = tool_results(&server.requests()[2].body);
    assert!(notes[0].contains("plum tree"), "the notes were read: {}", &notes[0][..200.min(notes[0].len())]);

    // The third message: refused without a model request, saying when the budget resets.
    const REFUSED: &str = "and what should I plant next?";
    telegram.push_user_message(4002, ChatKind::Private, &bob, REFUSED);
    let refusal = shown_in(&telegram, 4002, "the budget refusal", |text| text.starts_with("Your daily budget")).await;
    assert!(
        refusal.starts_with("Your daily budget (tokens) is used up, so I can't answer until it resets at ")
            && refusal.ends_with(" UTC."),
        "{refusal}"
    );
    assert_eq!(server.requests().len(), 3, "no model request for the refused turn");

    // The owner, an admin, is exempt and still answered.
    server.push(Reply::text("Hello Olga."));
    telegram.push_user_message(OWNER, ChatKind::Private, &owner, "hello");
    shown_in(&telegram, OWNER, "the owner's answer", |text| text.contains("Hello Olga.")).await;
    assert_eq!(server.requests().len(), 4);

    let usage = json_of(&home, &["usage", "--user", "bob", "--json"]).await;
    assert_eq!(usage["total"]["calls"], 3, "{usage}");
    let tokens = usage["total"]["total_tokens"].as_u64().unwrap();
    assert!(tokens >= BUDGET, "bob's tokens are past his budget: {usage}");
    // Output tokens are what the scripted model reported for its three answers (a token
    // per 4 characters of text, tool name and arguments, rounded up).
    let reported = |characters: usize| characters.div_ceil(4) as u64;
    let read_call = "read_file".len() + json!({"path": "notes.txt"}).to_string().len();
    let expected_output =
        reported("Hello Bob.".len()) + reported(read_call) + reported("Your notes are about the garden.".len());
    assert_eq!(usage["total"]["output_tokens"].as_u64(), Some(expected_output), "{usage}");

    let refusals: Vec<Value> =
        audit_rows(&home, &[]).await.into_iter().filter(|row| row["kind"] == "budget_refusal").collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0]["actor"], "bob");
    assert_eq!(refusals[0]["ok"], false);
    assert_eq!(refusals[0]["detail"]["period"], "daily");
    assert_eq!(refusals[0]["detail"]["what"], "tokens");
    home.run(&["audit", "verify"]).await.success();

    // Nothing is lost: the refused message and the refusal are in bob's session.
    let kept = session_messages(&home, "telegram:4002");
    let tail: Vec<(&str, &str)> =
        kept.iter().rev().take(2).rev().map(|(role, text)| (role.as_str(), text.as_str())).collect();
    assert_eq!(tail[0], ("user", REFUSED), "{kept:?}");
    assert_eq!(tail[1].0, "assistant");
    assert!(tail[1].1.starts_with("Your daily budget (tokens) is used up"), "{kept:?}");
    assert_eq!(home.session_lines("telegram:4002")[0]["context"], "user:bob");
    server.assert_clean();
}
