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
const MIGRATIONS: &[Migration] =
    &[Migration { number: 1, file: "0001_initial.sql", sql: include_str!("../../migrations/0001_initial.sql") }];

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
