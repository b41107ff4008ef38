//! `SqliteAudit`: the audit trail in the shared database (core's `AuditLog` port):
//! rows in `audit_log`, the keyed head in `audit_head`, both written together, and
//! retention that re-seals the head so the kept rows still verify.

use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Row, params};
use squidbot_core::people::audit::{AuditHead, Verifier, VerifyError, head_after, next_row, sealed, verify_log};
use squidbot_core::people::{AuditLog, PeopleStoreError};
use squidbot_types::people::{AuditEvent, AuditKind, AuditRow};

use super::{failed, from_sql_count, read, to_sql_count, write};
use crate::database::Database;

const ROW_COLUMNS: &str = "seq, at_ms, kind, actor, subject, ok, detail, prev_hash, hash";

fn row_from_sql(row: &Row<'_>) -> rusqlite::Result<AuditRow> {
    let kind: String = row.get(2)?;
    // An unknown kind is an error, never a skipped row: the check must see every row.
    let kind = AuditKind::from_name(&kind).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(2, Type::Text, format!("unknown audit kind {kind:?}").into())
    })?;
    Ok(AuditRow {
        seq: from_sql_count(row.get(0)?),
        event: AuditEvent {
            at_ms: row.get(1)?,
            kind,
            actor: row.get(3)?,
            subject: row.get(4)?,
            ok: row.get(5)?,
            detail: row.get(6)?,
        },
        prev_hash: row.get(7)?,
        hash: row.get(8)?,
    })
}

fn read_head(connection: &Connection) -> rusqlite::Result<Option<AuditHead>> {
    connection
        .prepare_cached("SELECT first_seq, first_prev, last_seq, last_hash, mac FROM audit_head WHERE id = 1")?
        .query_row([], |row| {
            Ok(AuditHead {
                first_seq: from_sql_count(row.get(0)?),
                first_prev: row.get(1)?,
                last_seq: from_sql_count(row.get(2)?),
                last_hash: row.get(3)?,
                mac: row.get(4)?,
            })
        })
        .optional()
}

fn write_head(connection: &Connection, head: &AuditHead) -> rusqlite::Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO audit_head (id, first_seq, first_prev, last_seq, last_hash, mac) \
             VALUES (1, ?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE SET first_seq = excluded.first_seq, \
             first_prev = excluded.first_prev, last_seq = excluded.last_seq, last_hash = excluded.last_hash, \
             mac = excluded.mac",
        )?
        .execute(params![
            to_sql_count(head.first_seq),
            head.first_prev,
            to_sql_count(head.last_seq),
            head.last_hash,
            head.mac
        ])
        .map(drop)
}

/// The audit trail in the shared database, chained with a key kept outside it. Calls
/// block. Cheap to clone.
#[derive(Clone)]
pub struct SqliteAudit {
    database: Database,
    key: Vec<u8>,
}

impl std::fmt::Debug for SqliteAudit {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        formatter.debug_struct("SqliteAudit").field("database", &self.database).finish_non_exhaustive()
    }
}

impl SqliteAudit {
    /// The trail in `database`, chained with `key` (see [`super::load_or_create_audit_key`]).
    pub fn new(database: Database, key: &[u8]) -> Self {
        Self { database, key: key.to_vec() }
    }

    /// Checks the whole trail with this key; how many rows passed.
    pub fn verify(&self) -> Result<u64, VerifyError> {
        verify_log(&self.key, self)
    }

    /// The head as stored, refused when it was changed without the key or is missing
    /// while rows exist: writing on such a head would seal the change.
    fn trusted_head(&self, connection: &Connection, action: &str) -> Result<Option<AuditHead>, PeopleStoreError> {
        let head = read_head(connection).map_err(failed(action))?;
        if let Err(broken) = Verifier::new(&self.key, head.as_ref()) {
            return Err(PeopleStoreError::new(action, format!("{broken}; check it with `squidbot audit verify`")));
        }
        if head.is_none() {
            let rows = connection
                .prepare_cached("SELECT 1 FROM audit_log LIMIT 1")
                .and_then(|mut statement| statement.exists([]))
                .map_err(failed(action))?;
            if rows {
                return Err(PeopleStoreError::new(
                    action,
                    "the audit head is missing while rows exist; check it with `squidbot audit verify`",
                ));
            }
        }
        Ok(head)
    }

    /// Deletes the rows written before `at_ms` (retention) and re-seals the head so the
    /// rows kept still verify; how many went. When none is left the head keeps the last
    /// row's number and hash, so the next row still follows it.
    pub fn prune_before(&self, at_ms: i64) -> Result<usize, PeopleStoreError> {
        let action = "prune the audit trail";
        write(&self.database, action, |connection| {
            let Some(head) = self.trusted_head(connection, action)? else { return Ok(0) };
            // The chain is kept whole from the first row at or after `at_ms` on (a row
            // written by a clock that stepped back stays with its neighbours).
            let first_kept: Option<(i64, String)> = connection
                .prepare_cached(
                    "SELECT seq, prev_hash FROM audit_log WHERE seq = \
                     (SELECT min(seq) FROM audit_log WHERE at_ms >= ?1)",
                )
                .and_then(|mut statement| statement.query_row([at_ms], |row| Ok((row.get(0)?, row.get(1)?))).optional())
                .map_err(failed(action))?;
            let (deleted, new_head) = match first_kept {
                Some((seq, prev_hash)) => {
                    let deleted = connection
                        .prepare_cached("DELETE FROM audit_log WHERE seq < ?1")
                        .and_then(|mut statement| statement.execute([seq]))
                        .map_err(failed(action))?;
                    let head = sealed(&self.key, from_sql_count(seq), prev_hash, head.last_seq, head.last_hash.clone());
                    (deleted, head)
                }
                None => {
                    let deleted = connection
                        .prepare_cached("DELETE FROM audit_log")
                        .and_then(|mut statement| statement.execute([]))
                        .map_err(failed(action))?;
                    let head = sealed(
                        &self.key,
                        head.last_seq + 1,
                        head.last_hash.clone(),
                        head.last_seq,
                        head.last_hash.clone(),
                    );
                    (deleted, head)
                }
            };
            if deleted > 0 {
                write_head(connection, &new_head).map_err(failed(action))?;
            }
            Ok(deleted)
        })
    }
}

impl AuditLog for SqliteAudit {
    fn append(&self, event: AuditEvent) -> Result<AuditRow, PeopleStoreError> {
        let action = "write the audit trail";
        // One immediate transaction: two processes appending can't both take the same
        // place in the chain, and the row never lands without its head.
        write(&self.database, action, |connection| {
            let head = self.trusted_head(connection, action)?;
            let row = next_row(&self.key, head.as_ref(), event);
            connection
                .prepare_cached(&format!(
                    "INSERT INTO audit_log ({ROW_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ))
                .and_then(|mut statement| {
                    statement.execute(params![
                        to_sql_count(row.seq),
                        row.event.at_ms,
                        row.event.kind.name(),
                        row.event.actor,
                        row.event.subject,
                        row.event.ok,
                        row.event.detail,
                        row.prev_hash,
                        row.hash,
                    ])
                })
                .map_err(failed(action))?;
            write_head(connection, &head_after(&self.key, head.as_ref(), &row)).map_err(failed(action))?;
            Ok(row)
        })
    }

    fn rows(&self, after_seq: u64, limit: usize) -> Result<Vec<AuditRow>, PeopleStoreError> {
        read(&self.database, "read the audit trail", |connection| {
            let mut statement = connection
                .prepare_cached(&format!("SELECT {ROW_COLUMNS} FROM audit_log WHERE seq > ?1 ORDER BY seq LIMIT ?2"))?;
            let rows = statement
                .query_map(params![to_sql_count(after_seq), i64::try_from(limit).unwrap_or(i64::MAX)], row_from_sql)?;
            rows.collect()
        })
    }

    fn head(&self) -> Result<Option<AuditHead>, PeopleStoreError> {
        read(&self.database, "read the audit head", read_head)
    }
}
