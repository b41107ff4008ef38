//! The session index, bulletin cache and system job ledger on a real database file.

use squidbot_store::{
    Activity, ActivityUpdate, Bulletin, BulletinCache, Database, JobLedger, JobRun, SessionStatus, SqliteSessionIndex,
};

fn database() -> (tempfile::TempDir, Database) {
    let directory = tempfile::tempdir().unwrap();
    let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
    (directory, database)
}

#[test]
fn archived_sessions_resume_on_activity() {
    let (_directory, database) = database();
    let index = SqliteSessionIndex::new(database);
    assert_eq!(index.get("telegram:1").unwrap(), None);

    let started = index.record_activity("telegram:1", "user:1", 100, 2).unwrap();
    assert_eq!(started.activity, Activity::Started);
    assert_eq!(started.entry.status, SessionStatus::Active);
    assert_eq!((started.entry.created_at, started.entry.updated_at, started.entry.message_count), (100, 100, 2));

    let continued = index.record_activity("telegram:1", "user:1", 150, 3).unwrap();
    assert_eq!(continued.activity, Activity::Continued);
    assert_eq!((continued.entry.updated_at, continued.entry.message_count), (150, 5));

    index.record_activity("cli:local", "local", 120, 1).unwrap();
    let idle: Vec<String> = index.idle(140).unwrap().into_iter().map(|entry| entry.key).collect();
    assert_eq!(idle, vec!["cli:local".to_owned()]);

    assert!(index.set_archived("cli:local", 200).unwrap());
    assert!(!index.set_archived("missing", 200).unwrap());
    let archived = index.get("cli:local").unwrap().unwrap();
    assert_eq!((archived.status, archived.archived_at, archived.updated_at), (SessionStatus::Archived, Some(200), 200));
    assert!(index.idle(1_000).unwrap().iter().all(|entry| entry.key != "cli:local"), "archived sessions are not idle");

    let resumed = index.record_activity("cli:local", "local", 300, 2).unwrap();
    assert_eq!(resumed.activity, Activity::Resumed);
    assert_eq!(resumed.entry.status, SessionStatus::Active);
    assert_eq!((resumed.entry.archived_at, resumed.entry.message_count, resumed.entry.created_at), (None, 3, 120));

    let listed: Vec<String> = index.list().unwrap().into_iter().map(|entry| entry.key).collect();
    assert_eq!(listed, vec!["cli:local".to_owned(), "telegram:1".to_owned()]);
}

#[test]
fn activities_are_recorded_in_one_batch() {
    let (_directory, database) = database();
    let index = SqliteSessionIndex::new(database);
    index.record_activity("cli:archived", "local", 50, 1).unwrap();
    assert!(index.set_archived("cli:archived", 60).unwrap());
    let update = |key: &str, context: Option<&str>, at_unix: i64, messages_added: u64| ActivityUpdate {
        key: key.to_owned(),
        context: context.map(str::to_owned),
        at_unix,
        messages_added,
    };
    let recorded = index
        .record_activities(&[
            update("telegram:1", Some("user:1"), 100, 0),
            // Without a context: taken from the entry the update before made.
            update("telegram:1", None, 110, 2),
            update("cli:archived", None, 120, 1),
            update("cli:unknown", None, 130, 1),
        ])
        .unwrap();
    assert_eq!(recorded, vec![true, true, true, false]);
    let telegram = index.get("telegram:1").unwrap().unwrap();
    assert_eq!(
        (telegram.context.as_str(), telegram.created_at, telegram.updated_at, telegram.message_count),
        ("user:1", 100, 110, 2)
    );
    let resumed = index.get("cli:archived").unwrap().unwrap();
    assert_eq!((resumed.status, resumed.archived_at, resumed.message_count), (SessionStatus::Active, None, 2));
    assert_eq!(index.get("cli:unknown").unwrap(), None);
    assert_eq!(index.record_activities(&[]).unwrap(), Vec::<bool>::new());
}

#[test]
fn bulletins_round_trip_and_are_replaced() {
    let (_directory, database) = database();
    let cache = BulletinCache::new(database);
    assert_eq!(cache.get("user:1").unwrap(), None);
    let first = Bulletin { content: "- likes tea".into(), fingerprint: "3-100-3".into(), generated_at: 100 };
    cache.put("user:1", &first).unwrap();
    assert_eq!(cache.get("user:1").unwrap(), Some(first));
    let second = Bulletin { content: "- likes coffee".into(), fingerprint: "4-200-5".into(), generated_at: 200 };
    cache.put("user:1", &second).unwrap();
    assert_eq!(cache.get("user:1").unwrap(), Some(second));
    assert_eq!(cache.get("user:2").unwrap(), None);
}

#[test]
fn the_job_ledger_remembers_the_last_run_and_its_error() {
    let (_directory, database) = database();
    let ledger = JobLedger::new(database);
    assert_eq!(ledger.last_run("memory_expiry").unwrap(), None);
    ledger.record("memory_expiry", 100, Err("disk full")).unwrap();
    assert_eq!(ledger.last("memory_expiry").unwrap(), Some(JobRun { at: 100, error: Some("disk full".into()) }));
    ledger.record("memory_expiry", 200, Ok(())).unwrap();
    assert_eq!(ledger.last_run("memory_expiry").unwrap(), Some(200));
    assert_eq!(ledger.last("memory_expiry").unwrap().unwrap().error, None);
    assert_eq!(ledger.last_run("session_archive").unwrap(), None);
}
