//! People in the shared database behind core's people ports: users and their linked
//! identities (`SqliteDirectory`), the usage ledger (`SqliteUsage`), the audit trail
//! (`SqliteAudit`) and approval requests (`SqliteApprovals`); and the context merges and
//! purges that `squidbot users link` and `users purge` run.

mod approvals;
mod audit;
mod audit_key;
mod contexts;
mod directory;
mod usage;

use rusqlite::{Connection, TransactionBehavior};
use squidbot_core::people::PeopleStoreError;
use squidbot_types::people::MAX_USER_ID_BYTES;

use crate::database::Database;

pub use approvals::{ApprovalListing, SqliteApprovals};
pub use audit::SqliteAudit;
pub use audit_key::load_or_create_audit_key;
pub use contexts::{ContextPaths, MergeSummary, PurgeSummary, merge_context, purge_context};
pub use directory::SqliteDirectory;
pub use usage::SqliteUsage;

/// Checks a new user id: 1 to [`MAX_USER_ID_BYTES`] bytes of lower-case ASCII letters,
/// digits, `-` and `_`, starting with a letter or a digit. The error says what is wrong
/// in a sentence.
pub fn check_user_id(id: &str) -> Result<(), String> {
    let Some(first) = id.chars().next() else { return Err("a user id can't be empty".to_owned()) };
    if id.len() > MAX_USER_ID_BYTES {
        return Err(format!("the user id {id:?} is {} bytes long; the limit is {MAX_USER_ID_BYTES}", id.len()));
    }
    if let Some(bad) = id.chars().find(|&character| !is_id_character(character)) {
        return Err(format!("the user id {id:?} contains {bad:?}; use lower-case letters, digits, `-` and `_` only"));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(format!("the user id {id:?} must start with a letter or a digit"));
    }
    Ok(())
}

fn is_id_character(character: char) -> bool {
    character.is_ascii_lowercase() || character.is_ascii_digit() || character == '-' || character == '_'
}

/// Turns an SQLite error met while trying to `action` into the ports' error.
fn failed(action: &str) -> impl FnOnce(rusqlite::Error) -> PeopleStoreError + '_ {
    move |error| PeopleStoreError::new(action, error)
}

/// Runs `work` on the connection, naming `action` in an SQLite error.
fn read<T>(
    database: &Database,
    action: &str,
    work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> Result<T, PeopleStoreError> {
    database.with_connection(|connection| work(connection)).map_err(failed(action))
}

/// Runs `work` in one immediate (write-locking) transaction, committed only when it
/// succeeds.
fn write<T>(
    database: &Database,
    action: &str,
    work: impl FnOnce(&Connection) -> Result<T, PeopleStoreError>,
) -> Result<T, PeopleStoreError> {
    database.with_connection(|connection| {
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed(action))?;
        let value = work(&transaction)?;
        transaction.commit().map_err(failed(action))?;
        Ok(value)
    })
}

/// A count as stored (SQLite integers are signed; counts past `i64::MAX` saturate).
fn to_sql_count(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A stored count (a negative one, written by hand, reads as 0).
fn from_sql_count(count: i64) -> u64 {
    u64::try_from(count).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_short_lower_case_words() {
        for good in ["alice", "bob-2", "x", "0day", "a_b", &"a".repeat(MAX_USER_ID_BYTES)] {
            assert_eq!(check_user_id(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("", "empty"),
            (&"a".repeat(MAX_USER_ID_BYTES + 1) as &str, "limit is 32"),
            ("Alice", "'A'"),
            ("al ice", "' '"),
            ("-alice", "start with"),
            ("_alice", "start with"),
            ("élise", "'é'"),
            ("a:b", "':'"),
        ] {
            let error = check_user_id(bad).unwrap_err();
            assert!(error.contains(says), "{bad:?}: {error}");
        }
    }
}
