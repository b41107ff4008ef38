//! Telegram end to end: the real gateway against the Bot API fake from testkit. The
//! owner's messages are answered in Telegram HTML (streamed by editing), strangers get
//! the refusal, groups answer only when mentioned, commands work, redelivered updates
//! aren't answered twice, photos are saved beside the session and shown to a
//! vision-capable model as an image, a 429 is waited out, a scheduled job's reply reaches
//! the chat, and a channel with a revoked token is reported failed while the others keep
//! working.

use std::time::Duration;

use base64::Engine as _;
use jiff::Timestamp;
use serde_json::Value;
use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram, FakeUser, IncomingMessage};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, eventually, start_gateway, start_gateway_with};
use crate::harness::{Home, messages};

const TOKEN: &str = "4242:telegram-test-token";
const OWNER: i64 = 1001;

async fn telegram_home(server: &ScriptedLlm, telegram: &FakeTelegram, extra: &str) -> Home {
    let home = bus_home(server);
    home.append_config(&format!(
        "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nowners = [\"{OWNER}\"]\n\
         refusal = \"Sorry, this is a private assistant.\"\n{extra}",
        telegram.api_base()
    ));
    home
}

fn owner() -> FakeUser {
    FakeUser::new(OWNER, "Olga")
}

/// What the chat shows of the bot's messages (edits applied).
fn shown(telegram: &FakeTelegram, chat: i64) -> Vec<String> {
    telegram.chat_texts(chat)
}

async fn health(base: &str) -> Value {
    // The details of /health are for the gateway's token; strangers learn only that it lives.
    let client = reqwest::Client::new();
    client.get(format!("{base}/health")).bearer_auth(crate::gateway::TOKEN).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_is_answered_in_telegram_html_and_strangers_and_unmentioned_groups_are_not() {
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TOKEN).await;
    let home = telegram_home(&server, &telegram, "").await;
    let gateway = start_gateway(&home).await;

    server.push(Reply::text("**Done**: the backup ran at 03:00 and `rsync` reported 0 errors."));
    telegram.push_user_message(OWNER, ChatKind::Private, &owner(), "Did the backup run?");
    let sent = telegram.wait_for_sent(1, Duration::from_secs(20)).await;
    assert_eq!(sent[0].params["chat_id"].as_i64(), Some(OWNER));
    assert_eq!(sent[0].params["parse_mode"], "HTML");
    eventually("the final text", || {
        shown(&telegram, OWNER) == ["<b>Done</b>: the backup ran at 03:00 and <code>rsync</code> reported 0 errors."]
    })
    .await;
    assert!(!telegram.chat_actions().is_empty(), "typing shown");
    let request = server.requests().remove(0);
    assert!(
        messages(&request.body).iter().any(|message| message["content"] == "Did the backup run?"),
        "{:?}",
        request.body
    );

    // A stranger: the refusal, no turn.
    let stranger = FakeUser::new(2002, "Mallory");
    telegram.push_user_message(2002, ChatKind::Private, &stranger, "hi, who are you?");
    let sent = telegram.wait_for_sent(2, Duration::from_secs(20)).await;
    assert_eq!(sent[1].params["chat_id"].as_i64(), Some(2002));
    assert_eq!(sent[1].params["text"], "Sorry, this is a private assistant.");

    // A group: not mentioned, nothing; mentioned, answered there as a reply.
    telegram.push_user_message(-500, ChatKind::Group, &owner(), "lunch at noon?");
    server.push(Reply::text("Noon works."));
    let mention = IncomingMessage::new(-500, ChatKind::Group, &owner()).text("@thebot is noon free?");
    let pushed = telegram.push(mention);
    let sent = telegram.wait_for_sent(3, Duration::from_secs(20)).await;
    assert_eq!(sent[2].params["chat_id"].as_i64(), Some(-500));
    assert_eq!(sent[2].params["reply_parameters"]["message_id"].as_i64(), Some(pushed.message_id));
    eventually("the group reply", || shown(&telegram, -500) == ["Noon works."]).await;
    let asked = server.requests().last().unwrap().body.clone();
    assert!(messages(&asked).iter().any(|message| message["content"] == "is noon free?"), "{asked}");
    assert_eq!(server.requests().len(), 2, "no turn for the stranger or the unmentioned message");
    // The group has a context of its own; the owner's direct chat is the owner's.
    assert_eq!(home.session_lines("telegram:-500")[0]["context"], "group:telegram:-500");
    assert_eq!(home.session_lines(&format!("telegram:{OWNER}"))[0]["context"], "owner");

    let health = health(&gateway.base).await;
    assert_eq!(health["components"]["channels"]["telegram"]["status"], "running", "{health}");
    assert_eq!(health["components"]["channels"]["telegram"]["denied"], 2, "{health}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_redeliveries_photos_rate_limits_and_job_replies() {
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TOKEN).await;
    let home = telegram_home(&server, &telegram, "").await;
    let _gateway = start_gateway_with(&home, &[("SQUIDBOT__PROVIDERS__LOCAL__VISION", "true")]).await;

    // A photo: saved beside the session, named in the model's input, and shown to the
    // model as an image (the provider is marked vision-capable).
    server.push(Reply::text("A cat."));
    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0];
    jpeg.resize(2048, 7);
    let photo = IncomingMessage::new(OWNER, ChatKind::Private, &owner()).text("what is this?").photo(jpeg.clone());
    let pushed = telegram.push(photo);
    telegram.wait_for_sent(1, Duration::from_secs(20)).await;
    let files = home.path().join("sessions").join(format!("telegram:{OWNER}.files"));
    let saved: Vec<_> = std::fs::read_dir(&files).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(std::fs::read(&saved[0]).unwrap(), jpeg);
    let asked = messages(&server.requests()[0].body).last().unwrap()["content"].clone();
    let text = asked[0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("what is this?") && text.contains("saved at"), "{asked}");
    assert_eq!(asked[1]["type"], "image_url", "{asked}");
    let data_url = format!("data:image/jpeg;base64,{}", base64::engine::general_purpose::STANDARD.encode(&jpeg));
    assert_eq!(asked[1]["image_url"]["url"], data_url.as_str());

    // The same update delivered again: not answered twice.
    telegram.push_duplicate(pushed.update_id);
    // A rate limit on the next send is waited out.
    telegram.rate_limit_next("sendMessage", 1);
    telegram.push_user_message(OWNER, ChatKind::Private, &owner(), "/new");
    telegram.wait_for_sent(2, Duration::from_secs(20)).await;
    assert_eq!(shown(&telegram, OWNER)[1], "Started a new conversation.");
    let limited = telegram.requests_for("sendMessage");
    let refused = limited.iter().position(|request| request.status == 429).expect("a 429 was answered");
    let retried = &limited[refused + 1];
    assert!(retried.at.duration_since(limited[refused].at) >= Duration::from_millis(950), "retry_after honoured");
    assert_eq!(server.requests().len(), 1, "the redelivered photo and /new ran no turn");

    // A job whose channel is telegram: its reply reaches the owner's chat.
    server.push(Reply::text("Stand-up in 5 minutes."));
    let due = Timestamp::from_second(Timestamp::now().as_second() + 2).unwrap();
    let schedule = format!("at {due}");
    home.run(&[
        "cron",
        "add",
        "--name",
        "standup",
        "--schedule",
        &schedule,
        "--message",
        "Remind me",
        "--channel",
        "telegram",
    ])
    .await
    .success();
    let sent = telegram.wait_for_sent(3, Duration::from_secs(30)).await;
    assert_eq!(sent[2].params["chat_id"].as_i64(), Some(OWNER));
    assert_eq!(sent[2].params["text"], "[standup] Stand-up in 5 minutes.");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_the_assistant_sends_arrives_as_a_document_with_its_reply() {
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TOKEN).await;
    let home = telegram_home(&server, &telegram, "").await;
    std::fs::create_dir_all(home.workspace().join("out")).unwrap();
    std::fs::write(home.workspace().join("out/report.pdf"), b"%PDF-1.7 quarterly numbers").unwrap();
    let _gateway = start_gateway(&home).await;

    server.push(Reply::tool_calls(vec![("send_file", serde_json::json!({"path": "out/report.pdf"}))]));
    server.push(Reply::text("Here is the report."));
    telegram.push_user_message(OWNER, ChatKind::Private, &owner(), "send me the report");
    eventually("the document", || !telegram.uploads().is_empty()).await;
    let upload = telegram.uploads().remove(0);
    assert_eq!(upload.method, "sendDocument");
    assert_eq!(upload.params["chat_id"].as_i64(), Some(OWNER));
    assert_eq!(upload.files[0].file_name.as_deref(), Some("report.pdf"));
    assert_eq!(upload.files[0].bytes, b"%PDF-1.7 quarterly numbers");
    assert_eq!(upload.params["caption"], "Here is the report.", "the short reply is the file's caption");
    assert_eq!(shown(&telegram, OWNER), ["Here is the report."]);
    let result = messages(&server.requests()[1].body).last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(result.contains("report.pdf (application/pdf, 26 bytes) goes out with your reply"), "{result}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_whose_token_is_refused_is_reported_failed_and_the_others_keep_working() {
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start("1:other-token").await;
    let home =
        telegram_home(&server, &telegram, "[channels.hook]\nkind = \"webhook\"\nsecret = \"s\"\npolicy = \"open\"\n")
            .await;
    let gateway = start_gateway(&home).await;
    let mut last = Value::Null;
    for _ in 0..100 {
        last = health(&gateway.base).await;
        if last["components"]["channels"]["telegram"]["status"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let channel = &last["components"]["channels"]["telegram"];
    assert_eq!(channel["status"], "failed", "{last}");
    assert!(channel["lastError"].as_str().unwrap().contains("401"), "{last}");
    assert!(!channel["lastError"].as_str().unwrap().contains("telegram-test-token"), "the token stays out: {last}");
    assert_eq!(last["status"], "degraded");
    assert_eq!(last["components"]["channels"]["hook"]["status"], "running", "{last}");
    let status: Value = serde_json::from_str(&home.run(&["status", "--json"]).await.success().stdout).unwrap();
    let listed: Vec<(String, String)> = status["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|channel| (channel["name"].as_str().unwrap().to_owned(), channel["status"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(listed, [("hook".to_owned(), "running".to_owned()), ("telegram".to_owned(), "failed".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_heartbeat_answer_reaches_the_chat_the_owner_last_wrote_from() {
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TOKEN).await;
    let home = telegram_home(&server, &telegram, "[scheduler.heartbeat]\nevery = \"every 3s\"\n").await;
    let _gateway = start_gateway(&home).await;
    server.push(Reply::text("Morning!"));
    telegram.push_user_message(OWNER, ChatKind::Private, &owner(), "good morning");
    eventually("the owner's answer", || shown(&telegram, OWNER) == ["Morning!"]).await;

    // The heartbeat starts after the owner wrote; it answers in plain words.
    server.push(Reply::text("The plants need water today."));
    server.push_all((0..10).map(|_| Reply::text("HEARTBEAT_OK")));
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("HEARTBEAT.md"), "- check the plants and tell me if they need water\n")
        .unwrap();
    let sent = telegram.wait_for_sent(2, Duration::from_secs(30)).await;
    assert_eq!(sent[1].params["chat_id"].as_i64(), Some(OWNER));
    eventually("the heartbeat's alert in the chat", || {
        shown(&telegram, OWNER) == ["Morning!", "[HEARTBEAT.md] The plants need water today."]
    })
    .await;
    let brief = messages(&server.requests()[1].body)[1]["content"].as_str().unwrap().to_owned();
    assert!(brief.contains("check the plants") && brief.contains("good morning"), "session context: {brief}");
    assert_eq!(messages(&server.requests()[1].body).len(), 2, "one call: the brief, then the answer");
    server.assert_clean();
}
