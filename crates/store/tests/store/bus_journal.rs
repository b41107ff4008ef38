//! The bus journal on a real database file: rows written through the port, read back,
//! kept across reopening, and the schema upgrade that adds the table.

use squidbot_bus::{BusJournal, JournalEntry, Priority};
use squidbot_store::{Database, SCHEMA_VERSION, SqliteBusJournal};

fn entry(seq: Option<u64>, result: &str, correlation_id: &str) -> JournalEntry {
    JournalEntry {
        time_ms: 1_800_000_000_123,
        from: "user".into(),
        to: "assistant".into(),
        seq,
        priority: Priority::Urgent,
        body: "build is failing\nsecond line".into(),
        correlation_id: correlation_id.into(),
        result: result.into(),
        detail: seq.map(|seq| format!("run-{seq}")),
    }
}

#[tokio::test]
async fn entries_round_trip_and_survive_reopening() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    let journal = SqliteBusJournal::new(Database::open(&path).unwrap());
    let rows = [
        entry(Some(1), "fallback.triggered", "c1"),
        entry(Some(1), "delivered.verified", "c1"),
        entry(None, "invalid_target", "c2"),
    ];
    for row in &rows {
        journal.record(row).await.unwrap();
    }
    assert_eq!(journal.recent(10).unwrap(), rows);
    assert_eq!(journal.recent(1).unwrap(), rows[2..]);
    assert_eq!(journal.by_correlation("c1").unwrap(), rows[..2]);
    drop(journal);
    let reopened = SqliteBusJournal::new(Database::open(&path).unwrap());
    assert_eq!(reopened.recent(10).unwrap().len(), 3);
}

#[test]
fn a_schema_two_database_gains_the_journal() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    drop(Database::open(&path).unwrap());
    let connection = rusqlite::Connection::open(&path).unwrap();
    // Later migrations' tables and columns go too, so the file looks like schema 2 again.
    connection
        .execute_batch(&format!(
            "DROP TABLE job_revision; DROP TABLE jobs; DROP TABLE bus_messages; DROP TABLE approved_senders; \
                 DROP TABLE pairing_codes; DROP INDEX sessions_job_runs; ALTER TABLE sessions DROP COLUMN job_id; \
                 {} PRAGMA user_version = 2;",
            crate::DROP_PEOPLE
        ))
        .unwrap();
    drop(connection);
    let journal = SqliteBusJournal::new(Database::open(&path).unwrap());
    journal.append(&entry(Some(2), "delivered.verified", "c")).unwrap();
    assert_eq!(journal.recent(5).unwrap().len(), 1);
    let connection = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}
