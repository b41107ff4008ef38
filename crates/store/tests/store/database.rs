//! Opening database files: fresh, reopened, and every kind of file that must be refused.

use std::fs;
use std::path::Path;

use rusqlite::Connection;
use squidbot_store::{APPLICATION_ID, Database, DatabaseError, SCHEMA_VERSION};

fn pragma(path: &Path, name: &str) -> i64 {
    let connection = Connection::open(path).unwrap();
    connection.pragma_query_value(None, name, |row| row.get(0)).unwrap()
}

fn open_error(path: &Path) -> DatabaseError {
    let error = Database::open(path).unwrap_err();
    let message = error.to_string();
    assert!(message.starts_with(&format!("can't open {}", path.display())), "{message}");
    error
}

#[test]
fn a_fresh_file_is_migrated_and_reopening_changes_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("data/squidbot.db");
    let database = Database::open(&path).unwrap();
    database.set_meta("embedding_model", "test/model").unwrap();
    drop(database);
    assert_eq!(pragma(&path, "user_version"), i64::from(SCHEMA_VERSION));
    assert_eq!(pragma(&path, "application_id"), i64::from(APPLICATION_ID));
    let tables = |path: &Path| -> Vec<String> {
        let connection = Connection::open(path).unwrap();
        let mut statement = connection.prepare("SELECT name FROM sqlite_schema ORDER BY name").unwrap();
        statement.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    };
    let before = tables(&path);
    for name in ["memories", "memories_fts", "memory_links", "sessions", "memory_bulletins", "system_jobs", "meta"] {
        assert!(before.iter().any(|table| table == name), "{name} missing from {before:?}");
    }
    let reopened = Database::open(&path).unwrap();
    assert_eq!(reopened.meta("embedding_model").unwrap().as_deref(), Some("test/model"));
    drop(reopened);
    assert_eq!(tables(&path), before);
    assert_eq!(pragma(&path, "user_version"), i64::from(SCHEMA_VERSION));
}

#[test]
fn a_text_file_is_not_a_database() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("notes.db");
    fs::write(&path, "these are my notes, not a database\n".repeat(200)).unwrap();
    let error = open_error(&path);
    assert!(matches!(error, DatabaseError::NotADatabase { .. }), "{error}");
    assert!(error.to_string().contains("not a database"), "{error}");
    assert!(fs::read_to_string(&path).unwrap().starts_with("these are my notes"), "the file is untouched");
}

#[test]
fn random_bytes_are_not_a_database() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("random.db");
    let mut state: u64 = 0x1234_5678_9abc_def1;
    let bytes: Vec<u8> = (0..16_384)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    fs::write(&path, &bytes).unwrap();
    let error = open_error(&path);
    assert!(matches!(error, DatabaseError::NotADatabase { .. }), "{error}");
}

#[test]
fn another_programs_database_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("other.db");
    let connection = Connection::open(&path).unwrap();
    connection.execute_batch("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');").unwrap();
    drop(connection);
    let error = open_error(&path);
    assert!(matches!(error, DatabaseError::Foreign { application_id: 0, .. }), "{error}");
    assert!(error.to_string().contains("it is not a squidbot database (application_id"), "{error}");

    let marked = directory.path().join("marked.db");
    let connection = Connection::open(&marked).unwrap();
    connection.pragma_update(None, "application_id", 0x0102_0304).unwrap();
    drop(connection);
    let error = open_error(&marked);
    assert!(matches!(error, DatabaseError::Foreign { application_id: 0x0102_0304, .. }), "{error}");
    assert_eq!(pragma(&path, "application_id"), 0, "refused files are left as they were");
}

#[test]
fn a_database_from_a_newer_squidbot_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    drop(Database::open(&path).unwrap());
    let connection = Connection::open(&path).unwrap();
    connection.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    drop(connection);
    let error = open_error(&path);
    assert!(matches!(error, DatabaseError::TooNew { found, .. } if found == SCHEMA_VERSION + 1), "{error}");
    assert!(error.to_string().contains("newer squidbot"), "{error}");
}

#[test]
fn a_damaged_database_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    let connection = Connection::open(&path).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE filler (id INTEGER PRIMARY KEY, text TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO filler SELECT i, printf('%.200c', 'x') FROM n;",
        )
        .unwrap();
    let page_size: i64 = connection.pragma_query_value(None, "page_size", |row| row.get(0)).unwrap();
    drop(connection);
    // Mark it as ours so the identity checks pass and the damage is what is found.
    let connection = Connection::open(&path).unwrap();
    connection.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
    drop(connection);
    let mut bytes = fs::read(&path).unwrap();
    let page = usize::try_from(page_size).unwrap();
    for byte in &mut bytes[page * 3..page * 6] {
        *byte = 0xA5;
    }
    fs::write(&path, &bytes).unwrap();
    let error = open_error(&path);
    assert!(matches!(error, DatabaseError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("corrupt"), "{error}");
}
