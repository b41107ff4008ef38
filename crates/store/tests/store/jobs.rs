//! The scheduler's job table on a real database file: round trip, pause and resume,
//! missing ids, due ordering, run records, the revision, slot claims and regenerated
//! jobs, through the async port.

use squidbot_core::jobs::{
    ContextMode, DynJobStore, Job, JobKind, JobStatus, JobStore, JobStoreError, RunOutcome, RunRecord,
};
use squidbot_store::{Database, SqliteJobStore};

fn store() -> (tempfile::TempDir, SqliteJobStore) {
    let directory = tempfile::tempdir().unwrap();
    let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
    (directory, SqliteJobStore::new(database))
}

fn job(id: &str, next_run: Option<i64>) -> Job {
    Job {
        id: id.to_owned(),
        kind: JobKind::User,
        name: format!("job {id}"),
        schedule: "every 5m".to_owned(),
        timezone: "UTC".to_owned(),
        message: "check the inbox".to_owned(),
        channel: None,
        context_mode: ContextMode::Isolated,
        owner_context: "owner".to_owned(),
        status: JobStatus::Active,
        next_run,
        last_run: None,
        last_error: None,
        consecutive_failures: 0,
        created: 1_000,
        source_hash: None,
        seed: None,
        active_hours: None,
    }
}

#[tokio::test]
async fn jobs_round_trip_with_every_field() {
    let (directory, store) = store();
    let heartbeat = Job {
        kind: JobKind::Heartbeat,
        channel: Some("telegram".to_owned()),
        context_mode: ContextMode::Silent,
        owner_context: "user:42".to_owned(),
        timezone: "America/New_York".to_owned(),
        schedule: "0 9 * * 1".to_owned(),
        last_run: Some(500),
        last_error: Some("the model timed out".to_owned()),
        consecutive_failures: 2,
        source_hash: Some("abc123".to_owned()),
        seed: Some(-7),
        active_hours: Some("09:00-22:00".to_owned()),
        ..job("beat0001", Some(2_000))
    };
    store.insert(&heartbeat).await.unwrap();
    store.insert(&job("user0001", None)).await.unwrap();
    assert_eq!(store.get("beat0001").await.unwrap(), Some(heartbeat.clone()));
    assert_eq!(store.get("missing").await.unwrap(), None);

    let error = store.insert(&job("beat0001", None)).await.unwrap_err();
    assert!(matches!(&error, JobStoreError::AlreadyExists { id } if id == "beat0001"), "{error}");

    // Reopening the file finds the same jobs.
    drop(store);
    let reopened = SqliteJobStore::new(Database::open(&directory.path().join("squidbot.db")).unwrap());
    let ids: Vec<String> = reopened.list().await.unwrap().into_iter().map(|job| job.id).collect();
    assert_eq!(ids, ["beat0001", "user0001"]);
}

#[tokio::test]
async fn paused_jobs_are_never_due_and_resume_with_a_new_next_run() {
    let (_directory, store) = store();
    store.insert(&job("a", Some(100))).await.unwrap();
    store.set_status("a", JobStatus::Paused, Some(100)).await.unwrap();
    assert!(store.due(1_000).await.unwrap().is_empty());
    assert_eq!(store.get("a").await.unwrap().unwrap().status, JobStatus::Paused);

    store.set_status("a", JobStatus::Active, Some(5_000)).await.unwrap();
    let resumed = store.get("a").await.unwrap().unwrap();
    assert_eq!((resumed.status, resumed.next_run), (JobStatus::Active, Some(5_000)));
    assert!(store.due(1_000).await.unwrap().is_empty());
    assert_eq!(store.due(5_000).await.unwrap().len(), 1);
}

#[tokio::test]
async fn unknown_ids_are_a_clear_error() {
    let (_directory, store) = store();
    store.insert(&job("kept", Some(1))).await.unwrap();
    let error = store.remove("nope").await.unwrap_err();
    assert!(matches!(&error, JobStoreError::NotFound { id } if id == "nope"), "{error}");
    assert_eq!(error.to_string(), "can't find job nope");
    let error = store.set_status("nope", JobStatus::Paused, None).await.unwrap_err();
    assert!(matches!(error, JobStoreError::NotFound { .. }), "{error}");
    let run = RunRecord { at: 1, outcome: RunOutcome::Succeeded };
    assert!(matches!(store.record_run("nope", &run).await, Err(JobStoreError::NotFound { .. })));
    assert_eq!(store.list().await.unwrap().len(), 1);
    store.remove("kept").await.unwrap();
    assert!(store.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn due_jobs_come_earliest_first_and_runs_count_failures() {
    let (_directory, store) = store();
    // Through the object-safe companion, as the runtime will hold it.
    let store: Box<dyn DynJobStore> = Box::new(store);
    for (id, next_run) in [("late", Some(300)), ("early", Some(100)), ("future", Some(900)), ("done", None)] {
        store.insert_boxed(&job(id, next_run)).await.unwrap();
    }
    store.insert_boxed(&Job { status: JobStatus::Paused, ..job("paused", Some(50)) }).await.unwrap();
    let due: Vec<String> = store.due_boxed(300).await.unwrap().into_iter().map(|job| job.id).collect();
    assert_eq!(due, ["early", "late"]);

    // The scheduler claims the slot (sets the next run) before the run; recording the
    // run leaves the next run alone.
    assert!(store.claim_boxed("early", Some(100), Some(400)).await.unwrap());
    let failed = RunRecord { at: 100, outcome: RunOutcome::Failed { reason: "boom".to_owned() } };
    assert_eq!(store.record_run_boxed("early", &failed).await.unwrap(), 1);
    assert_eq!(store.record_run_boxed("early", &failed).await.unwrap(), 2);
    let early = store.get_boxed("early").await.unwrap().unwrap();
    assert_eq!((early.last_run, early.last_error.as_deref(), early.next_run), (Some(100), Some("boom"), Some(400)));

    assert!(store.claim_boxed("early", Some(400), None).await.unwrap());
    let succeeded = RunRecord { at: 400, outcome: RunOutcome::Succeeded };
    assert_eq!(store.record_run_boxed("early", &succeeded).await.unwrap(), 0);
    let early = store.get_boxed("early").await.unwrap().unwrap();
    assert_eq!((early.last_error, early.next_run, early.consecutive_failures), (None, None, 0));
    let due: Vec<String> = store.due_boxed(1_000).await.unwrap().into_iter().map(|job| job.id).collect();
    assert_eq!(due, ["late", "future"]);
}

#[tokio::test]
async fn a_schema_three_database_gains_the_job_table() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    drop(Database::open(&path).unwrap());
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute_batch(&format!(
            "DROP TABLE jobs; DROP TABLE job_revision; DROP TABLE approved_senders; DROP TABLE pairing_codes; \
                 DROP INDEX sessions_job_runs; ALTER TABLE sessions DROP COLUMN job_id; {} PRAGMA user_version = 3;",
            crate::DROP_PEOPLE
        ))
        .unwrap();
    drop(connection);
    let store = SqliteJobStore::new(Database::open(&path).unwrap());
    store.insert(&job("after", Some(1))).await.unwrap();
    assert_eq!(store.list().await.unwrap().len(), 1);
    let connection = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, squidbot_store::SCHEMA_VERSION);
    assert_eq!(version, 11);
    assert_eq!(store.revision().await.unwrap(), 1);
}

#[tokio::test]
async fn a_row_with_an_unknown_status_is_an_error_not_a_panic() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    let store = SqliteJobStore::new(Database::open(&path).unwrap());
    store.insert(&job("edited", Some(1))).await.unwrap();
    let connection = rusqlite::Connection::open(&path).unwrap();
    // The CHECK constraint stops this through SQL; a row from a newer build is the real case.
    connection.execute_batch("PRAGMA ignore_check_constraints = ON; UPDATE jobs SET status = 'snoozed';").unwrap();
    drop(connection);
    let error = store.list().await.unwrap_err();
    assert!(error.to_string().contains("job edited has an unknown status \"snoozed\""), "{error}");
}

#[tokio::test]
async fn the_revision_counts_every_change_made_through_any_connection() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    let store = SqliteJobStore::new(Database::open(&path).unwrap());
    // A second handle on the same file, as the CLI holds while the gateway runs.
    let other = SqliteJobStore::new(Database::open(&path).unwrap());
    let start = store.revision().await.unwrap();
    assert_eq!(start, 0);

    other.insert(&job("a", Some(100))).await.unwrap();
    other.insert(&job("b", Some(100))).await.unwrap();
    assert_eq!(store.revision().await.unwrap(), 2);
    other.set_status("a", JobStatus::Paused, Some(100)).await.unwrap();
    assert_eq!(store.revision().await.unwrap(), 3);
    let run = RunRecord { at: 5, outcome: RunOutcome::Succeeded };
    store.record_run("b", &run).await.unwrap();
    assert_eq!(other.revision().await.unwrap(), 4);
    other.remove("a").await.unwrap();
    assert_eq!(store.revision().await.unwrap(), 5);

    // Statements that change no row leave it alone.
    assert!(!store.claim("b", Some(999), Some(1_000)).await.unwrap());
    assert!(other.remove("a").await.is_err());
    assert!(store.insert(&job("b", None)).await.is_err());
    assert_eq!(store.revision().await.unwrap(), 5);

    // Raw SQL, as a hand edit would do it, counts too.
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection.execute("UPDATE jobs SET name = 'renamed'", []).unwrap();
    drop(connection);
    assert_eq!(store.revision().await.unwrap(), 6);
}

#[tokio::test]
async fn a_claim_succeeds_once_per_slot_and_only_on_active_jobs() {
    let (_directory, store) = store();
    let store: Box<dyn DynJobStore> = Box::new(store);
    store.insert_boxed(&job("a", Some(100))).await.unwrap();
    store.insert_boxed(&job("once", None)).await.unwrap();

    // Two schedulers race for the slot at 100: one wins.
    assert!(store.claim_boxed("a", Some(100), Some(400)).await.unwrap());
    assert!(!store.claim_boxed("a", Some(100), Some(400)).await.unwrap());
    assert_eq!(store.get_boxed("a").await.unwrap().unwrap().next_run, Some(400));

    // A NULL next run compares as a value; a done one-shot stays NULL.
    assert!(store.claim_boxed("once", None, Some(50)).await.unwrap());
    assert!(store.claim_boxed("once", Some(50), None).await.unwrap());
    assert_eq!(store.get_boxed("once").await.unwrap().unwrap().next_run, None);

    // Paused by the CLI in between: the slot is not claimed and the pause stands.
    store.set_status_boxed("a", JobStatus::Paused, Some(400)).await.unwrap();
    assert!(!store.claim_boxed("a", Some(400), Some(700)).await.unwrap());
    let paused = store.get_boxed("a").await.unwrap().unwrap();
    assert_eq!((paused.status, paused.next_run), (JobStatus::Paused, Some(400)));
    assert!(!store.claim_boxed("missing", None, Some(1)).await.unwrap());
}

#[tokio::test]
async fn pausing_with_an_error_keeps_the_next_run_for_display() {
    let (_directory, store) = store();
    store.insert(&job("broken", Some(100))).await.unwrap();
    store.pause_with_error("broken", "can't use time zone \"Mars/Base\"").await.unwrap();
    let broken = store.get("broken").await.unwrap().unwrap();
    assert_eq!(broken.status, JobStatus::Paused);
    assert_eq!(broken.next_run, Some(100));
    assert_eq!(broken.last_error.as_deref(), Some("can't use time zone \"Mars/Base\""));
    assert_eq!(broken.consecutive_failures, 0);
    let error = store.pause_with_error("nope", "x").await.unwrap_err();
    assert!(matches!(error, JobStoreError::NotFound { .. }), "{error}");
}

#[tokio::test]
async fn replacing_generated_jobs_touches_only_that_kind_and_context() {
    let (_directory, store) = store();
    let beat = |id: &str, context: &str| Job {
        kind: JobKind::Heartbeat,
        owner_context: context.to_owned(),
        schedule: "daily".to_owned(),
        seed: Some(7),
        source_hash: Some("old".to_owned()),
        ..job(id, Some(100))
    };
    store.insert(&job("user0001", Some(100))).await.unwrap();
    store.insert(&beat("beat-own-1", "owner")).await.unwrap();
    store.insert(&beat("beat-own-2", "owner")).await.unwrap();
    store.insert(&beat("beat-other", "user:42")).await.unwrap();
    store.insert(&Job { kind: JobKind::System, ..job("system01", Some(100)) }).await.unwrap();

    let fresh = Job { source_hash: Some("new".to_owned()), ..beat("beat-own-3", "owner") };
    store.replace_generated(JobKind::Heartbeat, "owner", std::slice::from_ref(&fresh)).await.unwrap();
    let ids: Vec<String> = store.list().await.unwrap().into_iter().map(|job| job.id).collect();
    assert_eq!(ids, ["beat-other", "beat-own-3", "system01", "user0001"]);
    assert_eq!(store.get("beat-own-3").await.unwrap(), Some(fresh.clone()));

    // An id taken by another job fails the whole replacement: nothing changes.
    let clash = [beat("beat-own-4", "owner"), beat("user0001", "owner")];
    let error = store.replace_generated(JobKind::Heartbeat, "owner", &clash).await.unwrap_err();
    assert!(matches!(&error, JobStoreError::AlreadyExists { id } if id == "user0001"), "{error}");
    let ids: Vec<String> = store.list().await.unwrap().into_iter().map(|job| job.id).collect();
    assert_eq!(ids, ["beat-other", "beat-own-3", "system01", "user0001"]);

    // An empty list removes them (HEARTBEAT.md emptied).
    store.replace_generated(JobKind::Heartbeat, "owner", &[]).await.unwrap();
    let ids: Vec<String> = store.list().await.unwrap().into_iter().map(|job| job.id).collect();
    assert_eq!(ids, ["beat-other", "system01", "user0001"]);
}

#[tokio::test]
async fn a_schema_four_database_keeps_its_jobs_and_gains_the_revision() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    SqliteJobStore::new(Database::open(&path).unwrap()).insert(&job("kept", Some(100))).await.unwrap();
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute_batch(&format!(
            "DROP TRIGGER jobs_revision_after_insert; DROP TRIGGER jobs_revision_after_update;
                 DROP TRIGGER jobs_revision_after_delete; DROP TABLE job_revision; DROP INDEX jobs_generated;
                 ALTER TABLE jobs DROP COLUMN active_hours; DROP TABLE approved_senders; DROP TABLE pairing_codes;
                 DROP INDEX sessions_job_runs; ALTER TABLE sessions DROP COLUMN job_id; {}
                 PRAGMA user_version = 4;",
            crate::DROP_PEOPLE
        ))
        .unwrap();
    drop(connection);
    let store = SqliteJobStore::new(Database::open(&path).unwrap());
    assert_eq!(store.get("kept").await.unwrap(), Some(job("kept", Some(100))));
    assert_eq!(store.revision().await.unwrap(), 0);
    store.set_status("kept", JobStatus::Paused, Some(100)).await.unwrap();
    assert_eq!(store.revision().await.unwrap(), 1);
}
