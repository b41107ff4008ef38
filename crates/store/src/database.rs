//! `Database`: squidbot's one SQLite connection — opened once, checked, tuned,
//! migrated and shared by every SQLite-backed store.

mod extension;
mod migrations;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};
use squidbot_core::sync::lock;

pub use migrations::SCHEMA_VERSION;

/// `PRAGMA application_id` of every squidbot database ("SQDB" in ASCII), so another
/// program's SQLite file is never mistaken for ours and ours is recognisable.
pub const APPLICATION_ID: i32 = 0x5351_4442;

/// How long a statement waits for a lock held by another process before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Page cache size in KiB (negative `cache_size` means KiB), SQLite's own default. Reads
/// go through `mmap` (below), so the cache holds only the pages write transactions touch;
/// a small bound keeps a long-running gateway's memory flat (64 MiB let the session
/// index's pages pile up: about 115 bytes per session ever opened) without slowing
/// recall (BENCHMARKS.md).
const CACHE_KIB: i64 = 2 * 1024;

/// Bytes of the file read through `mmap`: recall reads the full-text and vector
/// indexes without copying them through the page cache.
const MMAP_BYTES: i64 = 1024 * 1024 * 1024;

/// Why the database could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    /// The directory meant to hold the database could not be created.
    #[error("can't create the directory {path} for the database: {reason}")]
    CreateDirectory {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        reason: String,
    },
    /// The file exists but is not an SQLite database.
    #[error("can't open {path}: it is not a database (file is not a database)")]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The file is an SQLite database whose pages are damaged.
    #[error("can't open {path}: the database is corrupt ({detail})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the integrity check reported.
        detail: String,
    },
    /// The file is another program's SQLite database.
    #[error("can't open {path}: it is not a squidbot database (application_id {application_id:#010x})")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// Its application id (0 when none is set).
        application_id: i32,
    },
    /// The file was written by a newer squidbot whose schema this build does not know.
    #[error(
        "can't open {path}: it was written by a newer squidbot (schema version {found}, this build knows up to {SCHEMA_VERSION})"
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
    },
    /// A migration failed; the database stays at the previous version.
    #[error("can't migrate {path} with {migration}: {reason}")]
    Migrate {
        /// The file.
        path: PathBuf,
        /// The migration's file name.
        migration: &'static str,
        /// The underlying error.
        reason: String,
    },
    /// Opening or preparing the database failed for another reason.
    #[error("can't open {path}: {reason}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        reason: String,
    },
    /// A statement failed on an open database.
    #[error("can't {action}: {reason}")]
    Query {
        /// What was attempted.
        action: &'static str,
        /// The underlying error.
        reason: String,
    },
}

impl DatabaseError {
    /// Wraps an SQLite error of a statement run for `action`.
    pub(crate) fn query(action: &'static str) -> impl FnOnce(rusqlite::Error) -> DatabaseError {
        move |error| DatabaseError::Query { action, reason: error.to_string() }
    }
}

/// The shared connection. Cloning is cheap; every clone uses the same connection, one
/// statement at a time. Calls block: run them on blocking threads.
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

struct Shared {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Database").field("path", &self.shared.path).finish()
    }
}

impl Database {
    /// Opens (creating it and its directory when missing) the database at `path`,
    /// refuses files that are not squidbot databases, are damaged or come from a newer
    /// squidbot, and applies pending migrations.
    pub fn open(path: &Path) -> Result<Database, DatabaseError> {
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|error| DatabaseError::CreateDirectory {
                path: parent.to_path_buf(),
                reason: error.to_string(),
            })?;
        }
        extension::register_vector_extension().map_err(|reason| open_error(path, reason))?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut connection = Connection::open_with_flags(path, flags).map_err(|error| classify(path, &error))?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(|error| classify(path, &error))?;
        check_identity(&connection, path)?;
        configure(&connection).map_err(|error| classify(path, &error))?;
        check_integrity(&connection, path)?;
        migrations::apply(&mut connection, path)?;
        Ok(Database { shared: Arc::new(Shared { path: path.to_path_buf(), connection: Mutex::new(connection) }) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Runs `work` with exclusive use of the connection.
    pub(crate) fn with_connection<T>(&self, work: impl FnOnce(&mut Connection) -> T) -> T {
        // A panic while the lock was held can't leave the connection half-changed: an
        // open transaction is rolled back when its guard unwinds.
        let mut connection = lock(&self.shared.connection);
        work(&mut connection)
    }

    /// A value of the `meta` table (vector dimension, embedding model, …).
    pub fn meta(&self, key: &str) -> Result<Option<String>, DatabaseError> {
        self.with_connection(|connection| read_meta(connection, key))
            .map_err(DatabaseError::query("read a database setting"))
    }

    /// Sets a value of the `meta` table.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), DatabaseError> {
        self.with_connection(|connection| write_meta(connection, key, value))
            .map_err(DatabaseError::query("write a database setting"))
    }
}

/// Reads a `meta` value.
pub(crate) fn read_meta(connection: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    connection.prepare_cached("SELECT value FROM meta WHERE key = ?1")?.query_row([key], |row| row.get(0)).optional()
}

/// Writes a `meta` value.
pub(crate) fn write_meta(connection: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?
        .execute([key, value])?;
    Ok(())
}

fn open_error(path: &Path, reason: String) -> DatabaseError {
    DatabaseError::Open { path: path.to_path_buf(), reason }
}

/// Names the failure of an SQLite call made while opening `path`.
fn classify(path: &Path, error: &rusqlite::Error) -> DatabaseError {
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => DatabaseError::NotADatabase { path: path.to_path_buf() },
        Some(ErrorCode::DatabaseCorrupt) => {
            DatabaseError::Corrupt { path: path.to_path_buf(), detail: error.to_string() }
        }
        _ => open_error(path, error.to_string()),
    }
}

/// Refuses another program's database and one from a newer squidbot. Reading the
/// header is also what first touches the file, so a non-database fails here.
fn check_identity(connection: &Connection, path: &Path) -> Result<(), DatabaseError> {
    let read = |pragma: &str| -> Result<i64, DatabaseError> {
        connection.pragma_query_value(None, pragma, |row| row.get::<_, i64>(0)).map_err(|error| classify(path, &error))
    };
    let application_id = i32::try_from(read("application_id")?).unwrap_or(0);
    let user_version = read("user_version")?;
    if application_id != APPLICATION_ID {
        let tables: i64 = connection
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
            .map_err(|error| classify(path, &error))?;
        if application_id != 0 || tables > 0 || user_version != 0 {
            return Err(DatabaseError::Foreign { path: path.to_path_buf(), application_id });
        }
    }
    if user_version > i64::from(SCHEMA_VERSION) {
        let found = u32::try_from(user_version).unwrap_or(u32::MAX);
        return Err(DatabaseError::TooNew { path: path.to_path_buf(), found });
    }
    Ok(())
}

/// Connection settings: write-ahead log (readers never wait for the writer, a crash
/// loses at most the last uncommitted transaction), `NORMAL` sync (durable at
/// checkpoints; in WAL mode a power cut can only lose the last commits, never corrupt),
/// foreign keys, and caches sized for recall.
fn configure(connection: &Connection) -> rusqlite::Result<()> {
    let mode: String = connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(%mode, "SQLite refused write-ahead logging; using its journal mode");
    }
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    connection.pragma_update(None, "cache_size", -CACHE_KIB)?;
    connection.pragma_update(None, "temp_store", "MEMORY")?;
    // `mmap_size` answers with the size granted (or nothing when mmap is unavailable).
    let mut statement = connection.prepare(&format!("PRAGMA mmap_size = {MMAP_BYTES}"))?;
    let mut rows = statement.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}

/// Fails unless `PRAGMA quick_check` finds the file intact.
fn check_integrity(connection: &Connection, path: &Path) -> Result<(), DatabaseError> {
    let report = (|| -> rusqlite::Result<Vec<String>> {
        let mut statement = connection.prepare("PRAGMA quick_check(5)")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect()
    })()
    .map_err(|error| classify(path, &error))?;
    if report.len() == 1 && report[0] == "ok" {
        return Ok(());
    }
    Err(DatabaseError::Corrupt { path: path.to_path_buf(), detail: report.join("; ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_database_is_configured_and_marked_as_ours() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("nested/squidbot.db");
        let database = Database::open(&path).unwrap();
        database.with_connection(|connection| {
            let read = |pragma: &str| connection.pragma_query_value(None, pragma, |row| row.get::<_, i64>(0)).unwrap();
            assert_eq!(read("application_id"), i64::from(APPLICATION_ID));
            assert_eq!(read("user_version"), i64::from(SCHEMA_VERSION));
            assert_eq!(read("foreign_keys"), 1);
            assert_eq!(read("synchronous"), 1);
            assert_eq!(read("busy_timeout"), 5000);
            let mode: String = connection.pragma_query_value(None, "journal_mode", |row| row.get(0)).unwrap();
            assert_eq!(mode, "wal");
        });
    }

    #[test]
    fn meta_values_round_trip() {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        assert_eq!(database.meta("embedding_model").unwrap(), None);
        database.set_meta("embedding_model", "openai/text-embedding-3-small").unwrap();
        database.set_meta("embedding_model", "local/minilm").unwrap();
        assert_eq!(database.meta("embedding_model").unwrap().as_deref(), Some("local/minilm"));
    }

    #[test]
    fn fts5_and_vec0_are_available() {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        database.with_connection(|connection| {
            let version: String = connection.query_row("SELECT vec_version()", [], |row| row.get(0)).unwrap();
            assert!(version.starts_with('v'), "{version}");
            connection.execute_batch("CREATE VIRTUAL TABLE temp.probe USING fts5(text)").unwrap();
        });
    }
}
