//! The scheduler's job table on a real database file: round trip, pause and resume,
//! missing ids, due ordering and run records, through the async port.

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
    let run = RunRecord { at: 1, outcome: RunOutcome::Succeeded, next_run: None };
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

    let failed = RunRecord { at: 100, outcome: RunOutcome::Failed { reason: "boom".to_owned() }, next_run: Some(400) };
    assert_eq!(store.record_run_boxed("early", &failed).await.unwrap(), 1);
    assert_eq!(store.record_run_boxed("early", &failed).await.unwrap(), 2);
    let early = store.get_boxed("early").await.unwrap().unwrap();
    assert_eq!((early.last_run, early.last_error.as_deref(), early.next_run), (Some(100), Some("boom"), Some(400)));

    let succeeded = RunRecord { at: 400, outcome: RunOutcome::Succeeded, next_run: None };
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
    connection.execute_batch("DROP TABLE jobs; PRAGMA user_version = 3;").unwrap();
    drop(connection);
    let store = SqliteJobStore::new(Database::open(&path).unwrap());
    store.insert(&job("after", Some(1))).await.unwrap();
    assert_eq!(store.list().await.unwrap().len(), 1);
    let connection = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, squidbot_store::SCHEMA_VERSION);
    assert_eq!(version, 4);
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
