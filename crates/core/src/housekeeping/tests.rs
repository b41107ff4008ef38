//! Unit tests of the system jobs over in-memory ports: TTL expiry, archival with and
//! without a memory extraction, pruning job runs by retention, the bulletin refresh, the
//! system job list and running them all at once.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use squidbot_types::memory::{MemoryType, NewMemory};
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};

use super::fakes::{MemoryBulletins, MemoryIndex, MemoryJobs};
use super::*;
use crate::clock::FixedClock;
use crate::jobs::{JobStatus, JobStore};
use crate::memory::MemoryStore;
use crate::memory::in_memory::InMemoryMemoryStore;
use crate::scripted::{ScriptedModel, text};
use crate::store::SessionStore;
use crate::store::index::SessionStatus;
use crate::store::memory::MemorySessionStore;
use crate::workspace::MemoryWorkspace;

/// Now, for every test: Unix second 1 800 000 000.
const NOW: i64 = 1_800_000_000;

const HOUR: i64 = 3_600;

struct Fixture {
    housekeeping: Housekeeping,
    memories: Arc<InMemoryMemoryStore>,
    index: Arc<MemoryIndex>,
    sessions: Arc<MemorySessionStore>,
    bulletins: Arc<MemoryBulletins>,
    model: Arc<ScriptedModel>,
}

/// Housekeeping that archives after a day and keeps job runs for a week, answering
/// model calls from `script`.
fn fixture(script: Vec<crate::scripted::Step>) -> Fixture {
    let clock = Arc::new(FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(NOW as u64)));
    let memories = Arc::new(InMemoryMemoryStore::default());
    let index = Arc::new(MemoryIndex::default());
    let sessions = Arc::new(MemorySessionStore::new());
    let bulletins = Arc::new(MemoryBulletins::default());
    let model = ScriptedModel::new(script);
    let housekeeping = Housekeeping {
        memories: Memories::new(memories.clone(), None, clock.clone()),
        index: index.clone(),
        sessions: sessions.clone(),
        bulletins: bulletins.clone(),
        provider: model.clone(),
        model: "fake/memory".to_owned(),
        workspace: Arc::new(MemoryWorkspace::new()),
        clock,
        archive_after: Duration::from_secs(24 * HOUR as u64),
        keep_job_runs: Duration::from_secs(7 * 24 * HOUR as u64),
        contexts: vec!["owner".to_owned()],
    };
    Fixture { housekeeping, memories, index, sessions, bulletins, model }
}

/// A session of the owner with a user message and an answer.
async fn conversation(sessions: &MemorySessionStore, key: &str, said: &str) {
    sessions
        .create(&SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: format!("id-{key}"),
            key: key.to_owned(),
            context: "owner".to_owned(),
            created: "2027-01-01T00:00:00Z".to_owned(),
        })
        .await
        .unwrap();
    let message = |id: &str, parent: Option<&str>, role: MessageRole, content: &str| SessionEntry {
        id: id.to_owned(),
        parent: parent.map(str::to_owned),
        timestamp: "2027-01-01T00:00:01Z".to_owned(),
        body: EntryBody::Message {
            role,
            content: content.to_owned(),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        },
    };
    let entries =
        [message("u1", None, MessageRole::User, said), message("a1", Some("u1"), MessageRole::Assistant, "Noted.")];
    sessions.append(key, &entries, crate::store::Durability::Synced).await.unwrap();
}

fn memory(kind: MemoryType, content: &str, expires_at: Option<i64>) -> NewMemory {
    NewMemory {
        context: "owner".to_owned(),
        kind,
        content: content.to_owned(),
        importance: 0.7,
        tags: Vec::new(),
        source: "test".to_owned(),
        expires_at,
        links: Vec::new(),
    }
}

#[tokio::test]
async fn ttl_expiry_deletes_only_the_memories_past_their_time_to_live() {
    let fixture = fixture(Vec::new());
    fixture.memories.insert(&memory(MemoryType::Todo, "call the plumber", Some(NOW - 1)), None, NOW - HOUR).unwrap();
    fixture.memories.insert(&memory(MemoryType::Todo, "renew the passport", Some(NOW + HOUR)), None, NOW).unwrap();
    fixture.memories.insert(&memory(MemoryType::Fact, "the cat is called Miso", None), None, NOW).unwrap();

    assert_eq!(fixture.housekeeping.run("ttl_expiry").await.unwrap(), "1 expired memories deleted");
    let left: Vec<String> = fixture.memories.all().into_iter().map(|memory| memory.content).collect();
    assert_eq!(left, ["renew the passport", "the cat is called Miso"]);
    assert_eq!(fixture.housekeeping.run_job("ttl_expiry").await.unwrap(), "0 expired memories deleted");
}

#[tokio::test]
async fn idle_sessions_are_archived_after_extraction_and_job_runs_without_a_model_call() {
    let extraction = r#"{"summary": "Talked about tea.", "memories": [{"type": "preference", "content": "Likes green tea", "importance": 0.8}]}"#;
    let fixture = fixture(vec![text(extraction)]);
    conversation(&fixture.sessions, "cli:idle", "I like green tea").await;
    conversation(&fixture.sessions, "cli:recent", "What time is it?").await;
    conversation(&fixture.sessions, "job:report:1", "Daily report").await;
    fixture.index.active("cli:idle", "owner", NOW - 25 * HOUR, None);
    fixture.index.active("cli:recent", "owner", NOW - HOUR, None);
    fixture.index.active("job:report:1", "owner", NOW - 30 * HOUR, Some("report"));

    assert_eq!(fixture.housekeeping.run("archive_idle").await.unwrap(), "2 idle sessions archived");

    let status = |key: &str| fixture.index.entry(key).map(|entry| (entry.status, entry.archived_at));
    assert_eq!(status("cli:idle"), Some((SessionStatus::Archived, Some(NOW))));
    assert_eq!(status("job:report:1"), Some((SessionStatus::Archived, Some(NOW))));
    assert_eq!(status("cli:recent"), Some((SessionStatus::Active, None)), "not idle long enough");
    let requests = fixture.model.requests();
    assert_eq!(requests.len(), 1, "only the conversation is mined; the job run's reply is elsewhere");
    let asked = format!("{:?}", requests[0].messages);
    assert!(asked.contains("I like green tea"), "{asked}");
    let saved = fixture.memories.all();
    assert_eq!(saved.len(), 1);
    assert_eq!(
        (saved[0].kind, saved[0].content.as_str(), saved[0].source.as_str()),
        (MemoryType::Preference, "Likes green tea", "archive")
    );
}

#[tokio::test]
async fn archiving_an_unindexed_session_indexes_it_and_a_missing_one_is_an_error() {
    let fixture = fixture(vec![text(r#"{"summary": "hello", "memories": []}"#)]);
    conversation(&fixture.sessions, "cli:old", "hello").await;

    let archived = fixture.housekeeping.archive("cli:old").await.unwrap();
    assert_eq!(archived, Archived { memories: 0 });
    let entry = fixture.index.entry("cli:old").unwrap();
    assert_eq!((entry.status, entry.context.as_str(), entry.message_count), (SessionStatus::Archived, "owner", 2));

    let missing = fixture.housekeeping.archive("cli:nowhere").await.unwrap_err();
    assert!(matches!(missing, HousekeepingError::UnknownSession { .. }), "{missing:?}");
    assert_eq!(missing.to_string(), "can't find session cli:nowhere; `squidbot sessions list` shows the existing ones");
}

#[tokio::test]
async fn job_runs_older_than_the_retention_are_deleted_with_their_index_entries() {
    let fixture = fixture(Vec::new());
    for key in ["job:old:1", "worker:heartbeat:a1", "job:new:1", "cli:chat"] {
        conversation(&fixture.sessions, key, "hi").await;
    }
    fixture.index.active("job:old:1", "owner", NOW - 8 * 24 * HOUR, Some("old"));
    fixture.index.active("worker:heartbeat:a1", "owner", NOW - 10 * 24 * HOUR, Some("hb"));
    fixture.index.active("job:new:1", "owner", NOW - 6 * 24 * HOUR, Some("new"));
    fixture.index.active("cli:chat", "owner", NOW - 100 * 24 * HOUR, None);

    assert_eq!(fixture.housekeeping.run("prune_job_runs").await.unwrap(), "2 finished job runs deleted");

    let mut kept: Vec<String> = fixture.sessions.list().await.unwrap().into_iter().map(|row| row.key).collect();
    kept.sort();
    assert_eq!(kept, ["cli:chat", "job:new:1"]);
    assert!(fixture.index.entry("job:old:1").is_none() && fixture.index.entry("worker:heartbeat:a1").is_none());
    assert!(fixture.index.entry("job:new:1").is_some() && fixture.index.entry("cli:chat").is_some());
    assert_eq!(fixture.housekeeping.run("prune_job_runs").await.unwrap(), "0 finished job runs deleted");
}

#[tokio::test]
async fn the_bulletin_is_rewritten_only_after_the_memories_change() {
    let fixture = fixture(vec![text("  - You like green tea.\n"), text("- You like green tea and own a cat.")]);
    let housekeeping = &fixture.housekeeping;
    housekeeping.memories.save(memory(MemoryType::Preference, "likes green tea", None)).await.unwrap();

    assert_eq!(housekeeping.run("memory_bulletin").await.unwrap(), "1 bulletins refreshed");
    let first = fixture.bulletins.get("owner").unwrap().unwrap();
    assert_eq!((first.content.as_str(), first.generated_at), ("- You like green tea.", NOW));
    let asked = format!("{:?}", fixture.model.requests()[0].messages);
    assert!(asked.contains("- [preference 0.7] likes green tea"), "{asked}");

    assert_eq!(housekeeping.run("memory_bulletin").await.unwrap(), "0 bulletins refreshed");
    assert_eq!(fixture.model.requests().len(), 1, "unchanged memories: no model call");

    housekeeping.memories.save(memory(MemoryType::Fact, "owns a cat called Miso", None)).await.unwrap();
    assert!(housekeeping.refresh_bulletin("owner").await.unwrap());
    assert_eq!(fixture.bulletins.get("owner").unwrap().unwrap().content, "- You like green tea and own a cat.");
    assert_eq!(fixture.model.requests().len(), 2);
}

#[tokio::test]
async fn a_context_without_memories_gets_an_empty_bulletin_without_a_model_call() {
    let fixture = fixture(Vec::new());
    assert!(fixture.housekeeping.refresh_bulletin("owner").await.unwrap());
    assert_eq!(fixture.bulletins.get("owner").unwrap().unwrap().content, "");
    assert!(fixture.model.requests().is_empty());
}

#[tokio::test]
async fn an_unknown_system_job_fails_with_its_name() {
    let fixture = fixture(Vec::new());
    assert_eq!(fixture.housekeeping.run_job("defragment").await.unwrap_err(), "there is no system job \"defragment\"");
}

#[tokio::test]
async fn every_system_job_is_one_housekeeping_knows_and_runs_silently_as_the_system() {
    let now: Timestamp = "2027-01-15T12:00:00Z".parse().unwrap();
    let jobs = system_jobs(Duration::from_secs(30), now);
    let names: Vec<&str> = jobs.iter().map(|job| job.name.as_str()).collect();
    assert_eq!(names, ["ttl_expiry", "vector_backfill", "archive_idle", "prune_job_runs", "memory_bulletin"]);
    let ids: Vec<&str> = jobs.iter().map(|job| job.id.as_str()).collect();
    assert_eq!(
        ids,
        ["sys-ttl-expiry", "sys-vector-backfill", "sys-archive-idle", "sys-prune-job-runs", "sys-memory-bulletin"]
    );
    assert_eq!(jobs[4].schedule, "every 1m", "the bulletin runs at most once a minute");
    assert_eq!(system_jobs(Duration::from_secs(2 * 3_600), now)[4].schedule, "every 2h");
    for job in &jobs {
        assert_eq!((job.kind, job.owner_context.as_str()), (crate::jobs::JobKind::System, SYSTEM_CONTEXT));
        assert_eq!((job.context_mode, job.status), (crate::jobs::ContextMode::Silent, JobStatus::Active));
        assert!(job.parsed_schedule().is_ok(), "{}", job.schedule);
    }
    let fixture = fixture(Vec::new());
    for job in &jobs {
        let line = fixture.housekeeping.run_job(&job.name).await;
        assert!(line.is_ok(), "{}: {line:?}", job.name);
    }
}

#[tokio::test]
async fn installing_keeps_the_state_of_unchanged_jobs_and_schedules_new_ones_a_minute_out() {
    let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(NOW as u64));
    let earlier: Timestamp = "2027-01-01T00:00:00Z".parse().unwrap();
    let mut old = system_jobs(Duration::from_secs(3_600), earlier);
    old[0].status = JobStatus::Paused;
    old[0].consecutive_failures = 3;
    old[0].next_run = Some(123);
    let store = MemoryJobs::with(old);

    install_system_jobs(&store, Duration::from_secs(7_200), &clock).await.unwrap();

    let ttl = store.job("sys-ttl-expiry");
    assert_eq!((ttl.status, ttl.consecutive_failures, ttl.next_run), (JobStatus::Paused, 3, Some(123)));
    assert_eq!(ttl.created, earlier.as_millisecond(), "the same job lives on");
    let bulletin = store.job("sys-memory-bulletin");
    assert_eq!(bulletin.schedule, "every 2h");
    assert_eq!(bulletin.next_run, Some(NOW * 1_000 + 60_000), "a changed schedule is a new job");
    assert_eq!(store.all().len(), 5);
}

#[tokio::test]
async fn running_the_system_jobs_now_records_each_outcome_and_skips_paused_ones() {
    let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(NOW as u64));
    let mut jobs = system_jobs(Duration::from_secs(3_600), "2027-01-01T00:00:00Z".parse().unwrap());
    jobs[1].status = JobStatus::Paused;
    let store = MemoryJobs::with(jobs);
    let fixture = fixture(Vec::new());

    let lines = run_system_jobs_now(&store, &fixture.housekeeping, &clock).await.unwrap();

    assert_eq!(
        lines,
        [
            "ttl_expiry: 0 expired memories deleted",
            "vector_backfill: paused (`squidbot cron resume sys-vector-backfill`)",
            "archive_idle: 0 idle sessions archived",
            "prune_job_runs: 0 finished job runs deleted",
            "memory_bulletin: 1 bulletins refreshed",
        ]
    );
    assert_eq!(store.job("sys-ttl-expiry").last_run, Some(NOW * 1_000));
    assert_eq!(store.job("sys-vector-backfill").last_run, None);
    assert!(store.list().await.unwrap().iter().all(|job| job.consecutive_failures == 0));
}

#[tokio::test]
async fn the_system_scheduler_runs_system_jobs_and_refuses_the_others() {
    use crate::scheduler::{JobExecutor, JobRunError, RunTrigger};

    let fixture = fixture(Vec::new());
    let executor = SystemJobs(Arc::new(fixture.housekeeping));
    let jobs = system_jobs(Duration::from_secs(3_600), "2027-01-01T00:00:00Z".parse().unwrap());
    assert_eq!(executor.execute(&jobs[0], RunTrigger::Manual).await, Ok(()));
    for kind in [crate::jobs::JobKind::User, crate::jobs::JobKind::Heartbeat] {
        let conversational = crate::jobs::Job { kind, ..jobs[0].clone() };
        assert_eq!(
            executor.execute(&conversational, RunTrigger::Manual).await,
            Err(JobRunError::NotStarted("only system jobs run outside the gateway".to_owned()))
        );
    }
    let unknown = crate::jobs::Job { name: "defragment".to_owned(), ..jobs[0].clone() };
    assert_eq!(
        executor.execute(&unknown, RunTrigger::Manual).await,
        Err(JobRunError::Housekeeping("there is no system job \"defragment\"".to_owned()))
    );
}
