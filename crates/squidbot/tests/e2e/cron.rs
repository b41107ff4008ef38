//! `squidbot cron` end to end: jobs added, listed, paused, resumed and removed in the
//! database without a gateway, bad input refused with nothing written, and the model
//! scheduling through the cron tools.

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, offered_tools, tool_results};

async fn jobs(home: &Home) -> Vec<Value> {
    let run = home.run(&["cron", "list", "--json"]).await.success();
    serde_json::from_str::<Value>(&run.stdout).expect("JSON output").as_array().expect("an array").clone()
}

fn job<'a>(jobs: &'a [Value], name: &str) -> &'a Value {
    jobs.iter().find(|job| job["name"] == name).unwrap_or_else(|| panic!("no job {name} in {jobs:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_jobs_are_added_listed_paused_resumed_and_removed() {
    let home = Home::new();
    let run = home.run(&["cron", "list"]).await.success();
    assert!(run.stdout.contains("no jobs yet"), "{}", run.stdout);

    let run = home
        .run(&[
            "cron",
            "add",
            "--name",
            "standup",
            "--schedule",
            "0 9 * * 1-5",
            "--message",
            "What is on today?",
            "--tz",
            "America/New_York",
            "--channel",
            "telegram",
        ])
        .await
        .success();
    assert!(run.stdout.starts_with("added job "), "{}", run.stdout);
    // 09:00 in New York is -04:00 or -05:00 depending on the season.
    assert!(run.stdout.contains("T09:00:00-0"), "{}", run.stdout);
    // Without --tz a job takes scheduler.timezone, which is the machine's zone (TZ here).
    home.run_with(
        &["cron", "add", "--name", "poll", "--schedule", "every 5m", "--message", "check the inbox"],
        &[("TZ", "Asia/Tokyo")],
    )
    .await
    .success();
    home.run(&["cron", "add", "--name", "once", "--schedule", "at 2999-01-01T10:00:00Z", "--message", "hello"])
        .await
        .success();

    let listed = jobs(&home).await;
    assert_eq!(listed.len(), 3, "{listed:?}");
    let standup = job(&listed, "standup");
    assert_eq!(standup["schedule"], "0 9 * * 1-5");
    assert_eq!(standup["timezone"], "America/New_York");
    assert_eq!(standup["channel"], "telegram");
    assert_eq!(standup["status"], "active");
    assert_eq!(standup["failures"], 0);
    assert_eq!(standup["last_run"], Value::Null);
    let next = standup["next_run"].as_str().unwrap();
    assert!(next.contains("T09:00:00-0"), "{next}");
    let poll = job(&listed, "poll");
    assert_eq!((&poll["schedule"], &poll["timezone"]), (&Value::from("every 5m"), &Value::from("Asia/Tokyo")));
    assert!(poll["next_run"].as_str().unwrap().ends_with("+09:00"), "{poll}");
    let once = job(&listed, "once");
    assert_eq!(once["schedule"], "at 2999-01-01T10:00:00Z");
    assert_eq!(once["next_run"], "2999-01-01T10:00:00+00:00");

    let table = home.run(&["cron", "list"]).await.success().stdout;
    assert!(table.contains("NEXT RUN") && table.contains("America/New_York"), "{table}");

    let id = standup["id"].as_str().unwrap();
    let run = home.run(&["cron", "pause", id]).await.success();
    assert!(run.stdout.contains("paused job"), "{}", run.stdout);
    assert_eq!(job(&jobs(&home).await, "standup")["status"], "paused");
    let run = home.run(&["cron", "resume", id]).await.success();
    assert!(run.stdout.contains("resumed job") && run.stdout.contains("T09:00:00-0"), "{}", run.stdout);
    let resumed = jobs(&home).await;
    assert_eq!(job(&resumed, "standup")["status"], "active");
    assert!(job(&resumed, "standup")["next_run"].as_str().unwrap().contains("T09:00:00-0"));

    home.run(&["cron", "remove", job(&resumed, "poll")["id"].as_str().unwrap()]).await.success();
    let names: Vec<Value> = jobs(&home).await.into_iter().map(|job| job["name"].clone()).collect();
    assert_eq!(names, ["standup", "once"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cron_input_fails_clearly_and_writes_nothing() {
    let home = Home::new();
    home.run(&["cron", "add", "--name", "kept", "--schedule", "daily 08:00", "--message", "m"]).await.success();
    let cases: [(&[&str], &str); 6] = [
        (&["--schedule", "61 * * * *"], "can't parse schedule \"61 * * * *\""),
        (&["--schedule", "every 0m"], "can't parse schedule"),
        (&["--schedule", "daily 09:00", "--tz", "Mars/Olympus_Mons"], "can't use time zone \"Mars/Olympus_Mons\""),
        (&["--schedule", "at 2001-01-01T09:00:00Z"], "no due time after now"),
        (&["--schedule", "at 2026-02-30T09:00"], "can't parse schedule"),
        (&["--schedule", "fortnightly"], "can't parse schedule"),
    ];
    for (extra, expected) in cases {
        let mut arguments = vec!["cron", "add", "--name", "bad", "--message", "m"];
        arguments.extend_from_slice(extra);
        let run = home.run(&arguments).await.failure();
        assert!(run.stderr.contains(expected), "{arguments:?}: {}", run.stderr);
        assert!(run.stderr.starts_with("error: can't add the job"), "{}", run.stderr);
    }
    for action in ["remove", "pause", "resume"] {
        let run = home.run(&["cron", action, "nosuchid"]).await.failure();
        assert!(run.stderr.contains("can't find job nosuchid"), "{action}: {}", run.stderr);
    }
    let listed = jobs(&home).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], "kept");
    assert_eq!(listed[0]["status"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_schedules_a_reminder_and_a_bad_schedule_comes_back_to_it() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::tool_call(
        "cron_add",
        json!({"name": "PR check", "schedule": "weekly mon 09:00", "message": "check PRs", "tz": "Europe/Berlin"}),
    ));
    server.push(Reply::text("Scheduled: every Monday at 09:00 Berlin time."));
    home.run(&["agent", "-m", "remind me every Monday at 9 to check PRs"]).await.success();
    let requests = server.requests();
    let offered = offered_tools(&requests[0].body);
    for tool in ["cron_add", "cron_list", "cron_remove", "cron_pause", "cron_resume"] {
        assert!(offered.iter().any(|name| name == tool), "{tool} not offered: {offered:?}");
    }
    let results = tool_results(&requests[1].body);
    assert!(results[0].starts_with("added job ") && results[0].contains("(PR check)"), "{results:?}");

    let listed = jobs(&home).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let reminder = job(&listed, "PR check");
    assert_eq!(
        (&reminder["schedule"], &reminder["timezone"], &reminder["message"], &reminder["status"]),
        (&json!("weekly mon 09:00"), &json!("Europe/Berlin"), &json!("check PRs"), &json!("active"))
    );
    // 09:00 in Berlin is +01:00 or +02:00 depending on the season, always on a Monday.
    let next = reminder["next_run"].as_str().expect("a next run");
    assert!(next.contains("T09:00:00+0"), "{next}");
    let date: jiff::civil::Date = next[..10].parse().expect("a date");
    assert_eq!(date.weekday(), jiff::civil::Weekday::Monday, "{next}");
    assert!(results[0].contains(&format!("next run {next}")), "{results:?}");

    server.push(Reply::tool_call("cron_add", json!({"name": "bad", "schedule": "every monday", "message": "m"})));
    server.push(Reply::text("That schedule did not work."));
    home.run(&["agent", "-m", "remind me every monday", "--session", "other"]).await.success();
    let requests = server.requests();
    let results = tool_results(&requests[3].body);
    assert!(results[0].contains("can't add the job: can't parse schedule \"every monday\""), "{results:?}");
    assert!(results[0].contains("valid schedules:"), "{results:?}");
    let names: Vec<Value> = jobs(&home).await.into_iter().map(|job| job["name"].clone()).collect();
    assert_eq!(names, ["PR check"], "the bad schedule wrote nothing");
    server.assert_clean();
}
