//! Numbered schema migrations, embedded from `migrations/*.sql` and tracked by
//! `PRAGMA user_version`.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::{APPLICATION_ID, DatabaseError};

/// One migration: its number (the schema version it produces) and SQL.
struct Migration {
    number: u32,
    file: &'static str,
    sql: &'static str,
}

/// Every migration in order. Append only: a migration that has been committed is never
/// edited, because databases that already applied it would not see the change.
const MIGRATIONS: &[Migration] = &[
    Migration { number: 1, file: "0001_initial.sql", sql: include_str!("../../migrations/0001_initial.sql") },
    Migration {
        number: 2,
        file: "0002_memory_contexts.sql",
        sql: include_str!("../../migrations/0002_memory_contexts.sql"),
    },
    Migration { number: 3, file: "0003_bus.sql", sql: include_str!("../../migrations/0003_bus.sql") },
    Migration { number: 4, file: "0004_jobs.sql", sql: include_str!("../../migrations/0004_jobs.sql") },
    Migration { number: 5, file: "0005_scheduler.sql", sql: include_str!("../../migrations/0005_scheduler.sql") },
    Migration {
        number: 6,
        file: "0006_channel_access.sql",
        sql: include_str!("../../migrations/0006_channel_access.sql"),
    },
    Migration { number: 7, file: "0007_job_runs.sql", sql: include_str!("../../migrations/0007_job_runs.sql") },
    Migration { number: 8, file: "0008_people.sql", sql: include_str!("../../migrations/0008_people.sql") },
    Migration { number: 9, file: "0009_usage_daily.sql", sql: include_str!("../../migrations/0009_usage_daily.sql") },
    Migration { number: 10, file: "0010_vault.sql", sql: include_str!("../../migrations/0010_vault.sql") },
    Migration {
        number: 11,
        file: "0011_session_search.sql",
        sql: include_str!("../../migrations/0011_session_search.sql"),
    },
];

/// Schema version this build writes (and the newest it can open).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Applies every migration above the database's version, each in its own transaction
/// together with the version bump, so a failure leaves the previous version intact.
pub(super) fn apply(connection: &mut Connection, path: &Path) -> Result<(), DatabaseError> {
    let current: u32 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|error| DatabaseError::Open { path: path.to_path_buf(), reason: error.to_string() })?;
    for migration in MIGRATIONS.iter().filter(|migration| migration.number > current) {
        let failed = |error: rusqlite::Error| DatabaseError::Migrate {
            path: path.to_path_buf(),
            migration: migration.file,
            reason: error.to_string(),
        };
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
        transaction.execute_batch(migration.sql).map_err(failed)?;
        transaction.pragma_update(None, "application_id", APPLICATION_ID).map_err(failed)?;
        transaction.pragma_update(None, "user_version", migration.number).map_err(failed)?;
        transaction.commit().map_err(failed)?;
        tracing::info!(path = %path.display(), migration = migration.file, "applied database migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_and_named_after_their_number() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            let expected = u32::try_from(index + 1).unwrap();
            assert_eq!(migration.number, expected);
            assert!(migration.file.starts_with(&format!("{expected:04}_")), "{}", migration.file);
            assert!(migration.file.ends_with(".sql"));
        }
        assert_eq!(SCHEMA_VERSION, MIGRATIONS.last().unwrap().number);
    }

    #[test]
    fn schema_two_carries_counts_and_change_counters_over() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("squidbot.db");
        let mut connection = Connection::open(&path).unwrap();
        connection.execute_batch(MIGRATIONS[0].sql).unwrap();
        connection.pragma_update(None, "user_version", 1).unwrap();
        connection
            .execute_batch(
                "INSERT INTO memories (id, context, type, content, importance, source, created_at, updated_at, normalized)
                 VALUES (1, 'a', 'fact', 'one', 0.5, 't', 0, 0, 'one'), (2, 'a', 'fact', 'two', 0.5, 't', 0, 0, 'two'),
                        (3, 'b', 'fact', 'three', 0.5, 't', 0, 0, 'three');
                 UPDATE memories SET content = 'uno', updated_at = 1 WHERE id = 1;
                 DELETE FROM memories WHERE id = 3;",
            )
            .unwrap();
        apply(&mut connection, &path).unwrap();
        let mut statement =
            connection.prepare("SELECT context, memories, changes FROM memory_contexts ORDER BY context").unwrap();
        let rows: Vec<(String, i64, i64)> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows, vec![("a".to_owned(), 2, 3), ("b".to_owned(), 0, 2)]);
        connection.execute("DELETE FROM memories WHERE id = 2", []).unwrap();
        let counts: (i64, i64) = connection
            .query_row("SELECT memories, changes FROM memory_contexts WHERE context = 'a'", [], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        assert_eq!(counts, (1, 4));
    }

    #[test]
    fn every_migration_file_is_listed() {
        let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<String> = std::fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<&str> = MIGRATIONS.iter().map(|migration| migration.file).collect();
        assert_eq!(files, listed);
    }
}
