//! The cron tools against a real SQLite job store in a temporary directory.

use std::sync::Arc;

use serde_json::{Value, json};
use squidbot_core::jobs::{DynJobStore, Job, JobKind, JobStatus};
use squidbot_core::tool::{DynTool, ToolContext, ToolError};
use squidbot_store::{Database, SqliteJobStore};
use tokio_util::sync::CancellationToken;

use super::cron_tools;

struct Fixture {
    _directory: tempfile::TempDir,
    store: Arc<dyn DynJobStore>,
    tools: Vec<Arc<dyn DynTool>>,
}

impl Fixture {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        let store: Arc<dyn DynJobStore> = Arc::new(SqliteJobStore::new(database));
        Self { _directory: directory, tools: cron_tools(store.clone(), "UTC".to_owned()), store }
    }

    async fn call(&self, name: &str, arguments: Value, context: &str) -> Result<String, ToolError> {
        let tool = self.tools.iter().find(|tool| tool.spec().name == name).unwrap();
        let context = ToolContext {
            workspace: std::env::temp_dir(),
            session_key: "cli:default".into(),
            context: context.into(),
            cancel: CancellationToken::new(),
            correlation_id: String::new(),
            actor: None,
            skills_in_use: Default::default(),
        };
        tool.call_boxed(arguments, &context).await.map(|output| output.content)
    }

    async fn add(&self, arguments: Value) -> String {
        let text = self.call("cron_add", arguments, "owner").await.unwrap();
        text.strip_prefix("added job ").unwrap().split(' ').next().unwrap().to_owned()
    }

    async fn jobs(&self) -> Vec<Job> {
        self.store.list_boxed().await.unwrap()
    }
}

fn refusal(result: Result<String, ToolError>) -> String {
    match result {
        Err(ToolError::RespondToModel(message)) => message,
        other => panic!("expected a refusal the model sees, got {other:?}"),
    }
}

#[test]
fn the_five_tools_have_the_designed_names_and_only_listing_is_read_only() {
    let fixture = Fixture::new();
    let names: Vec<String> = fixture.tools.iter().map(|tool| tool.spec().name).collect();
    assert_eq!(names, ["cron_add", "cron_list", "cron_remove", "cron_pause", "cron_resume"]);
    let read_only: Vec<String> =
        fixture.tools.iter().filter(|tool| !tool.mutates()).map(|tool| tool.spec().name).collect();
    assert_eq!(read_only, ["cron_list"]);
    let add = serde_json::to_value(fixture.tools[0].spec()).unwrap().to_string();
    for argument in ["name", "schedule", "message", "channel", "tz"] {
        assert!(add.contains(&format!("\"{argument}\"")), "{add}");
    }
    let size = crate::tool_specs_size(&fixture.tools);
    assert!(size < 1_600, "cron tool specs take {size} characters");
}

#[tokio::test]
async fn cron_add_stores_an_active_job_of_the_calling_context_due_in_its_zone() {
    let fixture = Fixture::new();
    let arguments =
        json!({"name": "PR check", "schedule": "weekly mon 09:00", "message": "check PRs", "tz": "Europe/Berlin"});
    let text = fixture.call("cron_add", arguments, "owner").await.unwrap();
    assert!(text.contains("(PR check): \"weekly mon 09:00\" in Europe/Berlin, next run "), "{text}");
    let jobs = fixture.jobs().await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!((job.kind, job.status, job.owner_context.as_str()), (JobKind::User, JobStatus::Active, "owner"));
    assert_eq!(
        (job.schedule.as_str(), job.timezone.as_str(), job.message.as_str()),
        ("weekly mon 09:00", "Europe/Berlin", "check PRs")
    );
    let row = squidbot_core::jobs::job_row(job);
    let next = row["next_run"].as_str().unwrap();
    assert!(next.contains("T09:00:00+0"), "{next}");
    assert!(text.contains(&format!("next run {next}; the gateway runs it")), "{text}");

    fixture.add(json!({"name": "poll", "schedule": "every 5m", "message": "check the inbox", "channel": " "})).await;
    let poll = fixture.jobs().await.into_iter().find(|job| job.name == "poll").unwrap();
    assert_eq!((poll.timezone.as_str(), poll.channel.clone()), ("UTC", None), "the default zone and no channel");
}

#[tokio::test]
async fn bad_requests_come_back_to_the_model_and_write_nothing() {
    let fixture = Fixture::new();
    let add = |schedule: &str, tz: Option<&str>| json!({"name": "bad", "schedule": schedule, "message": "m", "tz": tz});
    let message = refusal(fixture.call("cron_add", add("fortnightly", None), "owner").await);
    assert!(message.starts_with("can't add the job: can't parse schedule \"fortnightly\""), "{message}");
    assert!(message.contains("valid schedules:") && message.contains("weekly mon 09:00"), "{message}");
    let message = refusal(fixture.call("cron_add", add("61 * * * *", None), "owner").await);
    assert!(message.contains("minute 61 is out of range") && message.contains("valid schedules:"), "{message}");
    let message = refusal(fixture.call("cron_add", add("daily 09:00", Some("Mars/Olympus_Mons")), "owner").await);
    assert!(message.starts_with("can't add the job: can't use time zone \"Mars/Olympus_Mons\""), "{message}");
    let message = refusal(fixture.call("cron_add", add("at 2001-01-01T09:00:00Z", None), "owner").await);
    assert!(message.contains("it has no due time after now"), "{message}");
    let blank = json!({"name": " ", "schedule": "daily 09:00", "message": "m"});
    let message = refusal(fixture.call("cron_add", blank, "owner").await);
    assert_eq!(message, "can't add the job: the name must not be empty");
    let message = refusal(fixture.call("cron_add", json!({"name": "x"}), "owner").await);
    assert!(message.starts_with("invalid arguments"), "{message}");
    assert!(fixture.jobs().await.is_empty());
}

#[tokio::test]
async fn jobs_are_listed_paused_resumed_and_removed_by_id() {
    let fixture = Fixture::new();
    assert_eq!(fixture.call("cron_list", Value::Null, "owner").await.unwrap(), "no jobs yet; add one with cron_add");
    let id = fixture
        .add(json!({"name": "standup", "schedule": "0 9 * * 1-5", "message": "m", "tz": "America/New_York"}))
        .await;
    fixture.add(json!({"name": "tea", "schedule": "daily 16:00", "message": "m"})).await;

    let listed: Value = serde_json::from_str(&fixture.call("cron_list", json!({}), "owner").await.unwrap()).unwrap();
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], id.as_str());
    assert_eq!((&rows[0]["status"], &rows[0]["failures"]), (&json!("active"), &json!(0)));
    assert!(rows[0]["next_run"].as_str().unwrap().contains("T09:00:00-0"), "{rows:?}");

    let text = fixture.call("cron_pause", json!({"id": id}), "owner").await.unwrap();
    assert_eq!(text, format!("paused job {id} (standup)"));
    let paused = fixture.store.get_boxed(&id).await.unwrap().unwrap();
    assert_eq!(paused.status, JobStatus::Paused);
    assert!(paused.next_run.is_some(), "pausing keeps the next run for display");

    let text = fixture.call("cron_resume", json!({"id": format!(" {id} ")}), "owner").await.unwrap();
    assert!(
        text.starts_with(&format!("resumed job {id} (standup): next run ")) && text.contains("T09:00:00-0"),
        "{text}"
    );
    assert_eq!(fixture.store.get_boxed(&id).await.unwrap().unwrap().status, JobStatus::Active);

    assert_eq!(
        fixture.call("cron_remove", json!({"id": id}), "owner").await.unwrap(),
        format!("removed job {id} (standup)")
    );
    let names: Vec<String> = fixture.jobs().await.into_iter().map(|job| job.name).collect();
    assert_eq!(names, ["tea"]);
}

#[tokio::test]
async fn unknown_ids_and_other_contexts_jobs_read_as_missing() {
    let fixture = Fixture::new();
    let id = fixture.add(json!({"name": "mine", "schedule": "daily 09:00", "message": "m"})).await;
    for tool in ["cron_remove", "cron_pause", "cron_resume"] {
        let message = refusal(fixture.call(tool, json!({"id": "nosuchid"}), "owner").await);
        let verb = tool.trim_start_matches("cron_");
        assert_eq!(
            message,
            format!("can't {verb} job nosuchid: there is no job \"nosuchid\"; use cron_list to find ids")
        );
        let message = refusal(fixture.call(tool, json!({"id": id}), "group:1").await);
        assert!(message.contains("there is no job"), "{tool}: {message}");
    }
    assert_eq!(fixture.call("cron_list", json!({}), "group:1").await.unwrap(), "no jobs yet; add one with cron_add");
    let job = fixture.store.get_boxed(&id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Active, "another context changed nothing");
}

#[tokio::test]
async fn heartbeat_and_system_jobs_are_not_the_models_to_change() {
    let fixture = Fixture::new();
    let id = fixture.add(json!({"name": "check", "schedule": "daily 09:00", "message": "m"})).await;
    let mut job = fixture.store.get_boxed(&id).await.unwrap().unwrap();
    for (kind, expected) in [(JobKind::Heartbeat, "HEARTBEAT.md"), (JobKind::System, "housekeeping")] {
        job.id = format!("{}x", kind.as_str());
        job.kind = kind;
        fixture.store.insert_boxed(&job).await.unwrap();
        let message = refusal(fixture.call("cron_remove", json!({"id": job.id}), "owner").await);
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(fixture.jobs().await.len(), 3);
}
