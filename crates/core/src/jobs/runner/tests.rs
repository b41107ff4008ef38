//! Unit tests of the job runner over a scripted model and in-memory stores: where a reply
//! goes, HEARTBEAT_OK silence, silent jobs, foreground runs, marking runs, auto-pause of
//! foreground runs, and system jobs without housekeeping.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use squidbot_types::ChatMessage;
use squidbot_types::session::{EntryBody, MessageRole};

use super::*;
use crate::agent::{Agent, AgentSettings};
use crate::clock::FixedClock;
use crate::events::EventHub;
use crate::housekeeping::fakes::{MemoryIndex, MemoryJobs, RecordingConsole};
use crate::provider::ProviderError;
use crate::scripted::{ScriptedModel, Step, text};
use crate::store::SessionStore;
use crate::store::memory::MemorySessionStore;
use crate::sync::lock;
use crate::tool::ToolRegistry;
use crate::workspace::MemoryWorkspace;

const MAIN: &str = "agent:main:main";

/// Milliseconds since the Unix epoch of the fixed clock.
const NOW_MS: i64 = 1_800_000_000_000;

pub(crate) struct Fixture {
    pub(crate) runner: Arc<Runner>,
    sessions: Arc<MemorySessionStore>,
    model: Arc<ScriptedModel>,
}

/// A runner whose model answers from `script`.
pub(crate) fn fixture(script: Vec<Step>) -> Fixture {
    fixture_with_hooks(script, Vec::new())
}

/// [`fixture`] whose agent runs `hooks`.
fn fixture_with_hooks(script: Vec<Step>, hooks: Vec<Arc<dyn crate::hooks::Hook>>) -> Fixture {
    let sessions = Arc::new(MemorySessionStore::new());
    let settings = AgentSettings {
        model: "fake/model".into(),
        max_turns: 4,
        max_tokens: 100,
        temperature: None,
        context_window: 10_000,
        stream: false,
        workspace: PathBuf::from("/nonexistent"),
        runtime: crate::context::RuntimeInfo::default(),
        context: "owner".into(),
    };
    let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_millis(NOW_MS as u64));
    let model = ScriptedModel::new(script);
    let agent = Agent::new(
        model.clone(),
        ToolRegistry::default(),
        sessions.clone(),
        Arc::new(MemoryWorkspace::new()),
        Arc::new(clock),
        settings,
    )
    .with_hooks(hooks);
    Fixture { runner: Runner::new(Arc::new(agent), EventHub::new()), sessions, model }
}

fn delivery(preferred_channel: Option<&str>, chat_channels: &[&str]) -> Delivery {
    Delivery {
        main_session: MAIN.to_owned(),
        preferred_channel: preferred_channel.map(str::to_owned),
        chat_channels: chat_channels.iter().map(|name| (*name).to_owned()).collect(),
    }
}

/// An active job of `kind` named `name`, sending `channel` its replies.
fn job(kind: JobKind, name: &str, channel: Option<&str>, context_mode: ContextMode) -> Job {
    Job {
        id: format!("{name}-id"),
        kind,
        name: name.to_owned(),
        schedule: "every 30m".to_owned(),
        timezone: "UTC".to_owned(),
        message: format!("Check {name}."),
        channel: channel.map(str::to_owned),
        context_mode,
        owner_context: "owner".to_owned(),
        status: JobStatus::Active,
        next_run: Some(NOW_MS + 60_000),
        last_run: None,
        last_error: None,
        consecutive_failures: 0,
        created: NOW_MS - 60_000,
        source_hash: None,
        seed: None,
        active_hours: None,
    }
}

fn at(channel: &str, session_key: &str) -> Destination {
    Destination { channel: channel.to_owned(), session_key: session_key.to_owned() }
}

/// The assistant messages of session `key`, oldest first (after the runner's posts land).
async fn assistant_messages(fixture: &Fixture, key: &str) -> Vec<String> {
    fixture.runner.drain().await;
    let Some(loaded) = fixture.sessions.load(key).await.unwrap() else { return Vec::new() };
    loaded
        .entries
        .into_iter()
        .filter_map(|entry| match entry.body {
            EntryBody::Message { role: MessageRole::Assistant, content, .. } => Some(content),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn with_nobody_known_a_reply_goes_to_the_gateways_main_session() {
    let fixture = fixture(Vec::new());
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &["telegram"]));
    let user = job(JobKind::User, "tea", None, ContextMode::Isolated);
    assert_eq!(runner.destination(&user), at(GATEWAY_CHANNEL, MAIN));
    // A chat channel nobody wrote from yet has no session to go to.
    let telegram = job(JobKind::User, "tea", Some("telegram"), ContextMode::Isolated);
    assert_eq!(runner.destination(&telegram), at(GATEWAY_CHANNEL, MAIN));
}

#[tokio::test]
async fn a_reply_follows_the_jobs_channel_then_the_preferred_one_then_the_last_active_one() {
    let fixture = fixture(Vec::new());
    fixture.runner.note_activity("telegram", "telegram:dm:42");
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &["telegram"]));

    // A job made from a chat channel goes back to where the owner writes from there.
    let from_telegram = job(JobKind::User, "plants", Some("telegram"), ContextMode::Isolated);
    assert_eq!(runner.destination(&from_telegram), at("telegram", "telegram:dm:42"));
    // Naming none: the last active channel.
    let unnamed = job(JobKind::User, "plants", None, ContextMode::Isolated);
    assert_eq!(runner.destination(&unnamed), at("telegram", "telegram:dm:42"));
    // The gateway always has its main session.
    let gateway = job(JobKind::User, "plants", Some(GATEWAY_CHANNEL), ContextMode::Isolated);
    assert_eq!(runner.destination(&gateway), at(GATEWAY_CHANNEL, MAIN));
    // A channel not running here, or one nobody wrote from: the last active one.
    let discord = job(JobKind::User, "plants", Some("discord"), ContextMode::Isolated);
    assert_eq!(runner.destination(&discord), at("telegram", "telegram:dm:42"));
    let openai = job(JobKind::User, "plants", Some("openai"), ContextMode::Isolated);
    assert_eq!(runner.destination(&openai), at("telegram", "telegram:dm:42"));

    // The preferred channel wins over the last active one for jobs naming none.
    let preferring = JobRunner::new(fixture.runner.clone(), None, delivery(Some(GATEWAY_CHANNEL), &["telegram"]));
    assert_eq!(preferring.destination(&unnamed), at(GATEWAY_CHANNEL, MAIN));
    assert_eq!(preferring.destination(&from_telegram), at("telegram", "telegram:dm:42"));

    // The web UI writes as `openclaw`: that is the gateway channel.
    fixture.runner.note_activity("openclaw", "agent:main:web");
    assert_eq!(runner.destination(&unnamed), at(GATEWAY_CHANNEL, "agent:main:web"));
    assert_eq!(channel_of("ui"), GATEWAY_CHANNEL);
}

#[tokio::test]
async fn heartbeat_ok_is_silent_and_an_alert_is_delivered_under_the_jobs_name() {
    let fixture = fixture(vec![text("HEARTBEAT_OK"), text("The disk is 95% full.")]);
    let index = Arc::new(MemoryIndex::default());
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[])).marking_runs_in(index.clone());
    let disk = job(JobKind::Heartbeat, "disk", None, ContextMode::Isolated);
    let mut watcher = fixture.runner.hub().subscribe(crate::events::Filter::Session(MAIN.to_owned()));

    runner.execute(&disk, RunTrigger::Manual).await.unwrap();
    // A delivery is published before this returns.
    assert!(watcher.try_recv().is_none(), "HEARTBEAT_OK delivers nothing");

    runner.execute(&disk, RunTrigger::Manual).await.unwrap();
    let event = watcher.try_recv().expect("the alert is published");
    let TurnEventKind::BusMessage { from, role, text, .. } = &event.kind else { panic!("{event:?}") };
    assert_eq!(
        (from.as_str(), role.as_str(), text.as_str()),
        ("scheduler", "heartbeat", "[disk] The disk is 95% full.")
    );
    assert_eq!(assistant_messages(&fixture, MAIN).await, ["[disk] The disk is 95% full."]);

    // The run's own session is marked as a job run, so housekeeping can prune it.
    let run_session = format!("job:disk-id:{NOW_MS}");
    let entry = index.entry(&run_session).expect("the run's session is indexed");
    assert_eq!((entry.job_id.as_deref(), entry.context.as_str()), (Some("disk-id"), "owner"));
}

#[tokio::test]
async fn hooks_hear_of_every_job_run_and_how_it_ended() {
    use crate::hooks::{HookEvent, HookVerdict, fake::FixedHooks};
    let hooks = Arc::new(FixedHooks::new(HookVerdict::Allow));
    let fixture = fixture_with_hooks(vec![text("Backups are fine.")], vec![hooks.clone()]);
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[]));
    runner.execute(&job(JobKind::User, "backups", None, ContextMode::Silent), RunTrigger::Manual).await.unwrap();
    let runs = || -> Vec<crate::hooks::HookInput> {
        hooks.observed.lock().unwrap().iter().filter(|input| input.event == HookEvent::JobRun).cloned().collect()
    };
    for _ in 0..100 {
        if !runs().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let runs = runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].detail["job"].as_str(), runs[0].detail["name"].as_str()),
        (Some("backups-id"), Some("backups"))
    );
    assert_eq!((runs[0].detail["trigger"].as_str(), runs[0].detail["ok"].as_bool()), (Some("manual"), Some(true)));
    assert_eq!(runs[0].context, "owner");
}

#[tokio::test]
async fn silent_jobs_and_empty_replies_deliver_nothing() {
    let fixture = fixture(vec![text("Backups are fine."), text("   ")]);
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[]));
    runner.execute(&job(JobKind::User, "backups", None, ContextMode::Silent), RunTrigger::Manual).await.unwrap();
    runner.execute(&job(JobKind::User, "quiet", None, ContextMode::Isolated), RunTrigger::Manual).await.unwrap();
    assert!(assistant_messages(&fixture, MAIN).await.is_empty());
}

#[tokio::test]
async fn a_session_job_sees_the_recent_conversation_of_where_its_reply_goes() {
    let fixture = fixture(vec![text("Water the fern."), text("Done: the fern.")]);
    let chat = fixture.runner.start(RunRequest {
        session_key: "telegram:dm:42".to_owned(),
        input: "I bought a fern".to_owned(),
        images: Vec::new(),
        origin: "telegram".to_owned(),
        run_id: None,
        correlation_id: None,
        actor: None,
    });
    let mut chat = chat.unwrap();
    while let Some(event) = chat.events.recv().await {
        if event.kind.is_terminal() {
            break;
        }
    }
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &["telegram"]));
    let plants = job(JobKind::User, "plants", None, ContextMode::Session);
    runner.execute(&plants, RunTrigger::Manual).await.unwrap();
    let requests = fixture.model.requests();
    let Some(ChatMessage::User { content, .. }) = requests[1].messages.last() else { panic!("{requests:?}") };
    assert_eq!(
        content,
        "Check plants.\n\n(Scheduled job \"plants\". Recent conversation with the user:\n\
         user: I bought a fern\nassistant: Water the fern.)"
    );
    assert_eq!(assistant_messages(&fixture, "telegram:dm:42").await, ["Water the fern.", "[plants] Done: the fern."]);
}

#[tokio::test]
async fn a_foreground_run_shows_the_reply_and_notices_instead_of_delivering() {
    let fixture = fixture(vec![text("Three PRs wait for review."), text("HEARTBEAT_OK")]);
    let console = Arc::new(RecordingConsole::default());
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[])).printing_to(console.clone());
    let reviews = job(JobKind::User, "reviews", None, ContextMode::Silent);

    runner.execute(&reviews, RunTrigger::Manual).await.unwrap();
    runner.execute(&reviews, RunTrigger::Manual).await.unwrap();
    runner.notify_owner(&reviews, "your job was paused").await;

    assert_eq!(*lock(&console.replies), ["Three PRs wait for review."]);
    assert_eq!(
        *lock(&console.notices),
        ["the job answered HEARTBEAT_OK: nothing to report (a scheduled run delivers nothing)", "your job was paused",]
    );
    assert!(assistant_messages(&fixture, MAIN).await.is_empty());
}

#[tokio::test]
async fn an_owner_notice_goes_where_the_jobs_replies_go() {
    let fixture = fixture(Vec::new());
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[]));
    runner.notify_owner(&job(JobKind::User, "tea", None, ContextMode::Isolated), "paused").await;
    runner.notify_owner(&job(JobKind::System, "ttl_expiry", None, ContextMode::Silent), "not for the owner").await;
    assert_eq!(assistant_messages(&fixture, MAIN).await, ["paused"]);
}

#[tokio::test]
async fn a_foreground_run_records_its_outcome_and_pauses_after_too_many_failures() {
    let failure = || Step::Fail(ProviderError::Auth { provider: "fake".to_owned(), message: "bad key".to_owned() });
    let fixture = fixture(vec![text("ok"), failure(), failure()]);
    let console = Arc::new(RecordingConsole::default());
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[])).printing_to(console.clone());
    let report = job(JobKind::User, "report", None, ContextMode::Isolated);
    let store = MemoryJobs::with([report.clone()]);
    let settings = SchedulerSettings { max_consecutive_failures: 2, ..SchedulerSettings::default() };

    runner.run_once(&report, &store, &settings).await.unwrap();
    assert_eq!(store.job("report-id").last_run, Some(NOW_MS));

    let first = runner.run_once(&report, &store, &settings).await.unwrap_err();
    assert!(matches!(first, ManualRunError::Failed { failures: 1, .. }), "{first:?}");
    assert!(first.to_string().starts_with("job report-id failed: ") && first.to_string().ends_with("(1 in a row)"));
    assert_eq!(store.job("report-id").status, JobStatus::Active);

    let second = runner.run_once(&report, &store, &settings).await.unwrap_err();
    let ManualRunError::Paused { notice } = second else { panic!("expected a pause, got {second:?}") };
    assert!(notice.contains("failed 2 times in a row and is now paused"), "{notice}");
    let paused = store.job("report-id");
    assert_eq!((paused.status, paused.next_run), (JobStatus::Paused, Some(NOW_MS + 60_000)));
}

#[tokio::test]
async fn a_system_job_fails_where_there_is_no_housekeeping() {
    let fixture = fixture(Vec::new());
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &[]));
    let ttl = job(JobKind::System, "ttl_expiry", None, ContextMode::Silent);
    assert_eq!(
        runner.execute(&ttl, RunTrigger::Manual).await,
        Err(JobRunError::NotStarted("housekeeping is not available in this process".to_owned()))
    );
}

#[tokio::test]
async fn someone_elses_job_runs_in_their_context_and_answers_only_them() {
    let fixture = fixture(vec![text("first reply")]);
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &["telegram"]));
    fixture.runner.note_activity("telegram", "telegram:dm:owner");
    let mut bobs = job(JobKind::User, "bob-plants", Some("telegram"), ContextMode::Isolated);
    bobs.owner_context = "user:bob".to_owned();
    // Bob hasn't written since the start: the reply stays in the run's session (his).
    assert_eq!(runner.destination(&bobs), at("", ""));
    runner.execute(&bobs, RunTrigger::Manual).await.unwrap();
    let run_session = format!("job:bob-plants-id:{NOW_MS}");
    fixture.runner.drain().await;
    let loaded = fixture.sessions.load(&run_session).await.unwrap().expect("the run's session");
    assert_eq!(loaded.header.context, "user:bob", "the run acts in bob's context, not the owner's");
    assert!(assistant_messages(&fixture, "telegram:dm:owner").await.is_empty(), "nothing reached the owner");

    // Once bob wrote from Telegram, his job's replies go to his conversation there.
    let fixture = self::fixture(vec![text("hello"), text("watered")]);
    let runner = JobRunner::new(fixture.runner.clone(), None, delivery(None, &["telegram"]));
    fixture.runner.note_activity("telegram", "telegram:dm:owner");
    fixture.runner.session_in("telegram:bob", "user:bob").await.unwrap();
    let handle = fixture
        .runner
        .start(crate::runs::RunRequest {
            session_key: "telegram:bob".into(),
            input: "hi".into(),
            images: Vec::new(),
            origin: "telegram".into(),
            run_id: None,
            correlation_id: None,
            actor: None,
        })
        .unwrap();
    let mut events = handle.events;
    while let Some(event) = events.recv().await {
        if matches!(event.kind, TurnEventKind::Finished { .. }) {
            break;
        }
    }
    assert_eq!(runner.destination(&bobs), at("telegram", "telegram:bob"));
    runner.execute(&bobs, RunTrigger::Manual).await.unwrap();
    assert_eq!(assistant_messages(&fixture, "telegram:bob").await, ["hello", "[bob-plants] watered"]);
    assert!(assistant_messages(&fixture, "telegram:dm:owner").await.is_empty());
}
