//! The scheduler end to end: jobs added from the CLI run inside the real gateway and their
//! replies reach the session the owner last wrote from, HEARTBEAT.md becomes heartbeat
//! jobs (an OK answer is dropped, a changed file regenerates them), failing jobs pause
//! after three failures with a notice, `cron run` works with and without a gateway, and
//! jobs missed while the gateway was down run once at start-up.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, eventually, start_gateway, user_messages};
use crate::harness::Home;
use crate::protocol::Client;

/// The jobs as `cron list --json` shows them.
async fn jobs(home: &Home) -> Vec<Value> {
    let run = home.run(&["cron", "list", "--json"]).await.success();
    serde_json::from_str::<Vec<Value>>(&run.stdout).unwrap()
}

/// The job called `name`, if listed.
async fn job(home: &Home, name: &str) -> Option<Value> {
    jobs(home).await.into_iter().find(|job| job["name"] == name)
}

/// Waits until the job called `name` satisfies `done`, up to 20 s.
async fn job_until(home: &Home, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        if let Some(job) = job(home, name).await.filter(&done) {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out waiting for job {name}: {:?}", job(home, name).await);
}

/// `at` schedule `seconds` from now.
fn at_in(seconds: i64) -> String {
    let due = Timestamp::now().as_second() + seconds;
    format!("at {}", Timestamp::from_second(due).unwrap())
}

/// A WebSocket client that has written once, so the main session is the last active one.
async fn active_client(gateway: &crate::gateway::Running, server: &ScriptedLlm) -> Client {
    server.push(Reply::text("Hello there."));
    let (mut client, _) = Client::connected(gateway, 4, &["operator.write", "operator.read"]).await;
    let sent = client.call("chat.send", json!({"message": "hi"})).await;
    let run_id = sent["payload"]["runId"].as_str().unwrap().to_owned();
    client.chat_final(&run_id).await;
    client
}

/// A client that opened the main session (its history, as the web UI does) and never writes.
async fn watching_client(gateway: &crate::gateway::Running) -> Client {
    let (mut client, _) = Client::connected(gateway, 4, &["operator.read"]).await;
    let history = client.call("chat.history", json!({})).await;
    assert_eq!(history["payload"]["sessionKey"], "agent:main:main", "{history}");
    client
}

/// The text of the next job message shown to the client.
async fn next_job_message(client: &mut Client) -> String {
    let shown = client
        .event_where(|event| {
            event["event"] == "chat"
                && event["payload"]["stopReason"] == "bus"
                && event["payload"]["bus"]["from"] == "scheduler"
        })
        .await;
    assert_eq!(shown["payload"]["sessionKey"], "agent:main:main", "{shown}");
    shown["payload"]["message"]["content"][0]["text"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_added_from_the_cli_runs_in_the_gateway_and_its_reply_reaches_the_last_active_session() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let gateway = start_gateway(&home).await;
    let mut client = active_client(&gateway, &server).await;

    server.push(Reply::text("Time to check the PRs."));
    let schedule = at_in(2);
    // Its channel is not running here (no Telegram yet): the reply goes to the last active session.
    let arguments =
        ["cron", "add", "--name", "prs", "--schedule", &schedule, "--message", "Remind me to check the PRs"];
    home.run(&[&arguments[..], &["--channel", "telegram"]].concat()).await.success();
    assert_eq!(next_job_message(&mut client).await, "[prs] Time to check the PRs.");
    let done = job_until(&home, "prs", |job| !job["last_run"].is_null()).await;
    assert_eq!((&done["failures"], &done["next_run"], &done["last_error"]), (&json!(0), &Value::Null, &Value::Null));
    assert!(
        user_messages(&server).iter().any(|text| text == "Remind me to check the PRs"),
        "{:?}",
        user_messages(&server)
    );
    eventually("the reply kept in the main session", || {
        home.session_lines("agent:main:main").iter().any(|line| line["content"] == "[prs] Time to check the PRs.")
    })
    .await;
    // The job's turn ran in a session of its own, not in the conversation.
    let main = home.session_lines("agent:main:main");
    assert!(!main.iter().any(|line| line["content"] == "Remind me to check the PRs"), "{main:?}");
    // The system jobs are in the same table.
    let listed = jobs(&home).await;
    assert!(listed.iter().any(|job| job["kind"] == "system" && job["name"] == "archive_idle"), "{listed:?}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_come_from_heartbeat_md_ok_answers_are_dropped_and_an_edit_regenerates_them() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config("[scheduler.heartbeat]\nevery = \"every 3s\"\n");
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("HEARTBEAT.md"), "# Checks\n\n- Is the disk full?\n").unwrap();
    let gateway = start_gateway(&home).await;
    let mut client = active_client(&gateway, &server).await;
    let heartbeat = job_until(&home, "HEARTBEAT.md", |job| job["kind"] == "heartbeat").await;
    assert_eq!(heartbeat["schedule"], "every 3s");

    // The heartbeat role answers through `set_status`: first nothing to report, then an alert.
    server.push_all([
        Reply::tool_call("set_status", json!({"status": "checked", "outcome": "done", "result": "HEARTBEAT_OK"})),
        Reply::tool_call(
            "set_status",
            json!({"status": "checked", "outcome": "done", "result": "The disk is 95% full."}),
        ),
    ]);
    assert_eq!(next_job_message(&mut client).await, "[HEARTBEAT.md] The disk is 95% full.");
    let asked = user_messages(&server);
    let ticks = asked.iter().filter(|text| text.contains("Is the disk full?")).count();
    assert!(ticks >= 2, "two ticks ran, the OK one silently: {asked:?}");
    assert!(asked.iter().any(|text| text.contains("HEARTBEAT_OK")), "the task explains the OK answer: {asked:?}");

    // Sections replace the checklist within a second or two; jitter picks the slot.
    std::fs::write(
        home.workspace().join("HEARTBEAT.md"),
        "## Inbox\nCadence: daily\nPrompt: Anything urgent?\n\n## Broken\nPrompt: no cadence\n",
    )
    .unwrap();
    let inbox = job_until(&home, "Inbox", |job| job["kind"] == "heartbeat").await;
    assert!(inbox["next_run"].is_string(), "{inbox}");
    eventually_async(|| async { job(&home, "HEARTBEAT.md").await.is_none() }).await;
    assert!(job(&home, "Broken").await.is_none());
    drop(gateway);
}

/// The checklist of the user, as a checklist-format HEARTBEAT.md.
const PLANTS: &str = "# Checks\n\n- check the plants and tell me if they need water\n";

/// Whether every request `server` received was the first call of a run: only the
/// system prompt and the run's brief, no earlier answer, tool result or reminder.
fn one_call_per_run(server: &ScriptedLlm) -> bool {
    server.requests().iter().all(|request| {
        let messages = crate::harness::messages(&request.body);
        messages.len() == 2 && messages[1]["role"] == "user"
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_heartbeat_answers_never_fail_cost_one_call_and_reach_the_main_session() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config("[scheduler.heartbeat]\nevery = \"every 3s\"\n");
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("HEARTBEAT.md"), PLANTS).unwrap();
    // Plain text, as the heartbeat task asks for: quiet, then the plants, then quiet again.
    server.push_all([Reply::text("HEARTBEAT_OK"), Reply::text("The plants need water today.")]);
    server.push_all((0..30).map(|_| Reply::text("HEARTBEAT_OK.")));
    let started = std::time::Instant::now();
    let gateway = start_gateway(&home).await;
    // A client that only watches: nobody has written, so nothing is known about the owner.
    let mut client = watching_client(&gateway).await;
    assert_eq!(next_job_message(&mut client).await, "[HEARTBEAT.md] The plants need water today.");

    // Every 3 s for 30 s: no run fails, nothing is paused, each run is one model call.
    while started.elapsed() < Duration::from_secs(30) {
        let heartbeat = job(&home, "HEARTBEAT.md").await.expect("the heartbeat job");
        assert_eq!((&heartbeat["status"], &heartbeat["failures"]), (&json!("active"), &json!(0)), "{heartbeat}");
        assert!(heartbeat["last_error"].is_null(), "{heartbeat}");
        assert!(one_call_per_run(&server), "a run made more than one model call: {:?}", user_messages(&server));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let runs = server.requests().len();
    assert!(runs >= 7, "every 3 s for 30 s ran {runs} times");
    assert!(one_call_per_run(&server));
    assert!(user_messages(&server).iter().all(|text| text.contains("check the plants")));
    // The alert is kept in the main session, once; the quiet runs left nothing there.
    let main = home.session_lines("agent:main:main");
    let delivered: Vec<&Value> = main.iter().filter(|line| line["type"] == "message").collect();
    assert_eq!(delivered.len(), 1, "{main:?}");
    assert_eq!(delivered[0]["content"], "[HEARTBEAT.md] The plants need water today.");
    server.assert_clean();
    drop(gateway);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_whose_provider_fails_is_paused_after_the_configured_failures() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.write_config(&config.replace("[llm]\n", "[llm]\nmax_retries = 0\n"));
    home.append_config("[scheduler]\nmax_consecutive_failures = 2\n[scheduler.heartbeat]\nevery = \"every 3s\"\n");
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("HEARTBEAT.md"), PLANTS).unwrap();
    server.push_all([Reply::server_error(500), Reply::server_error(500)]);
    let gateway = start_gateway(&home).await;
    let mut client = watching_client(&gateway).await;
    let paused = job_until(&home, "HEARTBEAT.md", |job| job["status"] == "paused").await;
    assert_eq!(paused["failures"], 2, "{paused}");
    assert!(paused["last_error"].as_str().is_some_and(|error| error.contains("500")), "{paused}");
    // The notice reaches the main session, where the owner can see it.
    let notice = next_job_message(&mut client).await;
    assert!(notice.contains("HEARTBEAT.md") && notice.contains("paused"), "{notice}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(server.requests().len(), 2, "a paused heartbeat runs no more");
    drop(gateway);
}

/// Waits until the async `done` holds, up to 20 s.
async fn eventually_async<F, Fut>(done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_pauses_after_three_failures_and_tells_the_owner() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.write_config(&config.replace("[llm]\n", "[llm]\nmax_retries = 0\n"));
    let gateway = start_gateway(&home).await;
    let mut client = active_client(&gateway, &server).await;
    let run = home
        .run(&[
            "cron",
            "add",
            "--name",
            "report",
            "--schedule",
            "daily 09:00",
            "--message",
            "Write the report",
            "--json",
        ])
        .await
        .success();
    let id = serde_json::from_str::<Value>(&run.stdout).unwrap()["id"].as_str().unwrap().to_owned();
    for attempt in 1..=3 {
        server.push(Reply::server_error(500));
        let started = home.run(&["cron", "run", &id]).await.success();
        assert!(started.stdout.contains("in the running gateway"), "{}", started.stdout);
        job_until(&home, "report", |job| job["failures"] == attempt).await;
    }
    let paused = job_until(&home, "report", |job| job["status"] == "paused").await;
    assert!(paused["last_error"].as_str().is_some_and(|error| !error.is_empty()), "{paused}");
    let notice = next_job_message(&mut client).await;
    assert!(notice.contains("report") && notice.contains("paused") && notice.contains(&id), "{notice}");

    // Resuming and a success reset the count.
    home.run(&["cron", "resume", &id]).await.success();
    server.push(Reply::text("Report written."));
    home.run(&["cron", "run", &id]).await.success();
    assert_eq!(next_job_message(&mut client).await, "[report] Report written.");
    let fine = job_until(&home, "report", |job| job["failures"] == 0).await;
    assert_eq!(fine["status"], "active");
    let refused = home.run(&["cron", "run", "nosuchjob"]).await.failure();
    assert!(refused.stderr.contains("nosuchjob"), "{}", refused.stderr);
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_gateway_cron_run_prints_the_reply_and_missed_jobs_run_once_at_start_up() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let run = home
        .run(&["cron", "add", "--name", "digest", "--schedule", "every 1h", "--message", "Send the digest", "--json"])
        .await
        .success();
    let id = serde_json::from_str::<Value>(&run.stdout).unwrap()["id"].as_str().unwrap().to_owned();
    server.push(Reply::text("Here is your digest."));
    let ran = home.run(&["cron", "run", &id]).await.success();
    assert_eq!(ran.stdout, "Here is your digest.\n");
    assert!(ran.stderr.contains("no gateway is running"), "{}", ran.stderr);
    let after = job(&home, "digest").await.unwrap();
    assert!(after["last_run"].is_string() && after["failures"] == 0, "{after}");

    // While no gateway runs: a one-shot comes due, and the hourly job misses several slots.
    home.run(&["cron", "add", "--name", "once", "--schedule", &at_in(1), "--message", "One-shot while down"])
        .await
        .success();
    let store =
        squidbot_store::SqliteJobStore::new(squidbot_store::Database::open(&home.path().join("squidbot.db")).unwrap());
    let mut stale = store.get_blocking(&id).unwrap().unwrap();
    let hours_ago = Timestamp::now().as_millisecond() - 5 * 3_600_000;
    (stale.created, stale.last_run, stale.next_run) = (hours_ago, None, Some(hours_ago + 3_600_000));
    store.remove_blocking(&id).unwrap();
    store.insert_blocking(&stale).unwrap();
    drop(store);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    server.push_all([Reply::text("Caught up: one-shot."), Reply::text("Caught up: digest.")]);
    let gateway = start_gateway(&home).await;
    job_until(&home, "once", |job| job["last_run"].is_string()).await;
    let digest = job_until(&home, "digest", |job| job["last_run"].is_string()).await;
    let next = digest["next_run"].as_str().unwrap().parse::<Timestamp>().unwrap();
    assert!(next > Timestamp::now(), "the next slot is in the future: {digest}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked = user_messages(&server);
    assert_eq!(
        asked.iter().filter(|text| *text == "Send the digest").count(),
        2,
        "once by hand, once to catch up: {asked:?}"
    );
    assert_eq!(asked.iter().filter(|text| *text == "One-shot while down").count(), 1, "{asked:?}");
    drop(gateway);
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_owner_last_wrote_survives_a_gateway_restart() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let gateway = start_gateway(&home).await;
    let client = active_client(&gateway, &server).await;
    // The tracker is written within a second of the change.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    drop(client);
    drop(gateway);

    let gateway = start_gateway(&home).await;
    server.push(Reply::text("Stand-up in five minutes."));
    home.run(&["cron", "add", "--name", "standup", "--schedule", &at_in(1), "--message", "Remind me of the stand-up"])
        .await
        .success();
    eventually("the reply in the main session though nobody wrote since the restart", || {
        home.session_lines("agent:main:main")
            .iter()
            .any(|line| line["content"] == "[standup] Stand-up in five minutes.")
    })
    .await;
    drop(gateway);
    server.assert_clean();
}

/// Session files in the home's sessions directory whose name starts with `prefix`.
fn session_files(home: &Home, prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(home.path().join("sessions")) else { return Vec::new() };
    entries
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix) && name.ends_with(".jsonl"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_job_runs_are_deleted_after_sessions_keep_job_runs_and_other_sessions_stay() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config("[sessions]\nkeep_job_runs = \"1s\"\n[scheduler.heartbeat]\nevery = \"every 3s\"\n");
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("HEARTBEAT.md"), PLANTS).unwrap();
    server.push_all([Reply::text("HEARTBEAT_OK"), Reply::text("HEARTBEAT_OK")]);
    let gateway = start_gateway(&home).await;
    // Two runs recorded (a run is recorded after it ended and marked its session).
    let first = job_until(&home, "HEARTBEAT.md", |job| job["last_run"].is_string()).await;
    job_until(&home, "HEARTBEAT.md", |job| job["last_run"].is_string() && job["last_run"] != first["last_run"]).await;
    drop(gateway);
    let heartbeat_calls = server.requests().len();
    assert_eq!(heartbeat_calls, 2);
    // A user job run here, without a gateway: a `job:` session of its own.
    server.push(Reply::text("Report written."));
    let added = home
        .run(&["cron", "add", "--name", "report", "--schedule", "daily 09:00", "--message", "Write it", "--json"])
        .await
        .success();
    let id = serde_json::from_str::<Value>(&added.stdout).unwrap()["id"].as_str().unwrap().to_owned();
    home.run(&["cron", "run", &id]).await.success();
    // A conversation of the owner's, which must stay.
    server.push(Reply::text("Hello."));
    home.run(&["agent", "-m", "hi"]).await.success();
    assert_eq!(server.requests().len(), heartbeat_calls + 2, "the script stayed in step");
    let workers = session_files(&home, "worker:heartbeat:");
    assert!(workers.len() >= 2, "{workers:?}");
    assert_eq!(session_files(&home, &format!("job:{id}:")).len(), 1);

    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let run = home.run(&["maintenance"]).await.success();
    let line = run.stdout.lines().find(|line| line.starts_with("prune_job_runs:")).expect("the prune line").to_owned();
    assert_eq!(line, format!("prune_job_runs: {} finished job runs deleted", workers.len() + 1), "{}", run.stdout);
    assert!(session_files(&home, "worker:").is_empty() && session_files(&home, "job:").is_empty());
    assert_eq!(session_files(&home, "cli:local").len(), 1, "the owner's conversation stays");
    let listed = home.run(&["sessions", "list", "--json"]).await.success().stdout;
    assert!(
        !listed.contains("worker:heartbeat:") && !listed.contains("job:") && listed.contains("cli:local"),
        "{listed}"
    );
    let again = home.run(&["maintenance"]).await.success();
    assert!(again.stdout.contains("prune_job_runs: 0 finished job runs deleted"), "{}", again.stdout);
}
