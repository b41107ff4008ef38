//! `ChannelAccessStore`: the senders the owner approved on the chat channels and the
//! pairing codes waiting for approval, in the shared database so the gateway and
//! `squidbot users` (another process) see the same ones.

use rusqlite::{OptionalExtension, Row, params};

use crate::database::{Database, DatabaseError};

/// Most pairing codes kept at once; past it the oldest are dropped, so a flood of
/// strangers can't grow the table.
const MAX_PAIRING_CODES: i64 = 256;

/// Codes are kept this long after expiring, to tell "expired" from "unknown".
const EXPIRED_CODES_KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// A sender the owner approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedSenderRow {
    /// The channel they write on.
    pub channel: String,
    /// Their sender id there.
    pub sender_id: String,
    /// Their display name when they asked.
    pub display_name: Option<String>,
    /// When the owner approved them (ms since the Unix epoch).
    pub approved_at_ms: i64,
}

/// A pairing code waiting for the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingCodeRow {
    /// The code (upper case).
    pub code: String,
    /// The channel the stranger wrote on.
    pub channel: String,
    /// Their sender id there.
    pub sender_id: String,
    /// Their display name.
    pub display_name: Option<String>,
    /// When the code was issued (ms since the Unix epoch).
    pub issued_at_ms: i64,
    /// When it stops being accepted (ms since the Unix epoch).
    pub expires_at_ms: i64,
}

fn code_row(row: &Row<'_>) -> rusqlite::Result<PairingCodeRow> {
    Ok(PairingCodeRow {
        code: row.get(0)?,
        channel: row.get(1)?,
        sender_id: row.get(2)?,
        display_name: row.get(3)?,
        issued_at_ms: row.get(4)?,
        expires_at_ms: row.get(5)?,
    })
}

const CODE_COLUMNS: &str = "code, channel, sender_id, display_name, issued_at_ms, expires_at_ms";

/// Approved senders and pairing codes in the shared database. Calls block.
#[derive(Debug, Clone)]
pub struct ChannelAccessStore {
    database: Database,
}

impl ChannelAccessStore {
    /// The store over `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Whether `sender_id` on `channel` was approved.
    pub fn is_approved(&self, channel: &str, sender_id: &str) -> Result<bool, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached("SELECT 1 FROM approved_senders WHERE channel = ?1 AND sender_id = ?2")?
                    .query_row(params![channel, sender_id], |_| Ok(()))
                    .optional()
            })
            .map(|found| found.is_some())
            .map_err(DatabaseError::query("read approved senders"))
    }

    /// Records an approval, replacing an earlier one of the same sender.
    pub fn approve(&self, sender: &ApprovedSenderRow) -> Result<(), DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO approved_senders (channel, sender_id, display_name, approved_at_ms) \
                         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (channel, sender_id) DO UPDATE SET \
                         display_name = excluded.display_name, approved_at_ms = excluded.approved_at_ms",
                    )?
                    .execute(params![sender.channel, sender.sender_id, sender.display_name, sender.approved_at_ms])
            })
            .map(drop)
            .map_err(DatabaseError::query("store an approved sender"))
    }

    /// Withdraws an approval; false when the sender was not approved.
    pub fn revoke(&self, channel: &str, sender_id: &str) -> Result<bool, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached("DELETE FROM approved_senders WHERE channel = ?1 AND sender_id = ?2")?
                    .execute(params![channel, sender_id])
            })
            .map(|deleted| deleted > 0)
            .map_err(DatabaseError::query("remove an approved sender"))
    }

    /// Every approved sender, by channel and id.
    pub fn approved(&self) -> Result<Vec<ApprovedSenderRow>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(
                    "SELECT channel, sender_id, display_name, approved_at_ms FROM approved_senders \
                     ORDER BY channel, sender_id",
                )?;
                let rows = statement.query_map([], |row| {
                    Ok(ApprovedSenderRow {
                        channel: row.get(0)?,
                        sender_id: row.get(1)?,
                        display_name: row.get(2)?,
                        approved_at_ms: row.get(3)?,
                    })
                })?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .map_err(DatabaseError::query("read approved senders"))
    }

    /// Whether `sender_id` on `channel` holds a code that is still live at `now_ms`.
    pub fn has_live_code(&self, channel: &str, sender_id: &str, now_ms: i64) -> Result<bool, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "SELECT 1 FROM pairing_codes WHERE channel = ?1 AND sender_id = ?2 AND expires_at_ms > ?3",
                    )?
                    .query_row(params![channel, sender_id, now_ms], |_| Ok(()))
                    .optional()
            })
            .map(|found| found.is_some())
            .map_err(DatabaseError::query("read pairing codes"))
    }

    /// Stores a new code; false when the code is taken. In the same transaction forgets
    /// codes expired more than a day ago and the oldest past the table's bound.
    pub fn insert_code(&self, code: &PairingCodeRow, now_ms: i64) -> Result<bool, DatabaseError> {
        self.database
            .with_connection(|connection| {
                let transaction = connection.transaction()?;
                transaction.execute(
                    "DELETE FROM pairing_codes WHERE expires_at_ms <= ?1",
                    [now_ms.saturating_sub(EXPIRED_CODES_KEPT_MS)],
                )?;
                let inserted = transaction.execute(
                    "INSERT INTO pairing_codes (code, channel, sender_id, display_name, issued_at_ms, expires_at_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (code) DO NOTHING",
                    params![
                        code.code,
                        code.channel,
                        code.sender_id,
                        code.display_name,
                        code.issued_at_ms,
                        code.expires_at_ms
                    ],
                )?;
                transaction.execute(
                    "DELETE FROM pairing_codes WHERE code IN (SELECT code FROM pairing_codes \
                     ORDER BY issued_at_ms DESC, rowid DESC LIMIT -1 OFFSET ?1)",
                    [MAX_PAIRING_CODES],
                )?;
                transaction.commit()?;
                Ok(inserted > 0)
            })
            .map_err(DatabaseError::query("store a pairing code"))
    }

    /// Removes `code` (exact, upper case) and returns it: a code is used once.
    pub fn take_code(&self, code: &str) -> Result<Option<PairingCodeRow>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(&format!("DELETE FROM pairing_codes WHERE code = ?1 RETURNING {CODE_COLUMNS}"))?
                    .query_row([code], code_row)
                    .optional()
            })
            .map_err(DatabaseError::query("take a pairing code"))
    }

    /// The codes still live at `now_ms`, oldest first.
    pub fn live_codes(&self, now_ms: i64) -> Result<Vec<PairingCodeRow>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(&format!(
                    "SELECT {CODE_COLUMNS} FROM pairing_codes WHERE expires_at_ms > ?1 ORDER BY issued_at_ms, rowid"
                ))?;
                let rows = statement.query_map([now_ms], code_row)?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .map_err(DatabaseError::query("read pairing codes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, ChannelAccessStore) {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        (directory, ChannelAccessStore::new(database))
    }

    fn code(code: &str, sender: &str, issued_at_ms: i64) -> PairingCodeRow {
        PairingCodeRow {
            code: code.to_owned(),
            channel: "telegram".to_owned(),
            sender_id: sender.to_owned(),
            display_name: Some(format!("{sender} name")),
            issued_at_ms,
            expires_at_ms: issued_at_ms + 3_600_000,
        }
    }

    #[test]
    fn approvals_are_stored_listed_and_revoked() {
        let (_directory, store) = store();
        let sender = ApprovedSenderRow {
            channel: "matrix".to_owned(),
            sender_id: "@a:example.org".to_owned(),
            display_name: None,
            approved_at_ms: 5,
        };
        assert!(!store.is_approved("matrix", "@a:example.org").unwrap());
        store.approve(&sender).unwrap();
        store.approve(&sender).unwrap();
        assert!(store.is_approved("matrix", "@a:example.org").unwrap());
        assert!(!store.is_approved("telegram", "@a:example.org").unwrap());
        assert_eq!(store.approved().unwrap(), vec![sender]);
        assert!(store.revoke("matrix", "@a:example.org").unwrap());
        assert!(!store.revoke("matrix", "@a:example.org").unwrap());
    }

    #[test]
    fn a_code_is_taken_once_and_a_taken_code_is_refused() {
        let (_directory, store) = store();
        assert!(store.insert_code(&code("ABCDEF", "42", 1_000), 1_000).unwrap());
        assert!(!store.insert_code(&code("ABCDEF", "43", 1_000), 1_000).unwrap());
        assert!(store.has_live_code("telegram", "42", 2_000).unwrap());
        assert!(!store.has_live_code("telegram", "42", 1_000 + 3_600_000).unwrap());
        assert_eq!(store.live_codes(2_000).unwrap(), vec![code("ABCDEF", "42", 1_000)]);
        assert_eq!(store.take_code("ABCDEF").unwrap(), Some(code("ABCDEF", "42", 1_000)));
        assert_eq!(store.take_code("ABCDEF").unwrap(), None);
    }

    #[test]
    fn codes_are_bounded_and_long_expired_ones_forgotten() {
        let (_directory, store) = store();
        for number in 0..300 {
            store.insert_code(&code(&format!("C{number:05}"), &number.to_string(), number), number).unwrap();
        }
        let live = store.live_codes(0).unwrap();
        assert_eq!(live.len(), 256);
        assert_eq!(live.first().map(|row| row.code.as_str()), Some("C00044"));
        let two_days = 2 * 24 * 3_600_000;
        store.insert_code(&code("LATER1", "x", two_days), two_days).unwrap();
        assert_eq!(store.live_codes(0).unwrap().len(), 1);
    }
}
