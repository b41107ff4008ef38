//! `SqliteBusJournal`: the agent bus journal (`bus_messages`) in the shared database.

use rusqlite::params;
use squidbot_bus::{BusJournal, JournalEntry, JournalError, Priority};

use crate::database::{Database, DatabaseError};

/// Bus messages in the shared database. [`BusJournal::record`] runs on a blocking
/// thread; the other calls block.
#[derive(Debug, Clone)]
pub struct SqliteBusJournal {
    database: Database,
}

impl SqliteBusJournal {
    /// A journal over `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Appends `entry`.
    pub fn append(&self, entry: &JournalEntry) -> Result<(), DatabaseError> {
        let seq = entry.seq.map(|seq| i64::try_from(seq).unwrap_or(i64::MAX));
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO bus_messages \
                         (time, sender, target, seq, priority, body, correlation_id, result, detail) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )?
                    .execute(params![
                        entry.time_ms,
                        entry.from,
                        entry.to,
                        seq,
                        entry.priority.as_str(),
                        entry.body,
                        entry.correlation_id,
                        entry.result,
                        entry.detail,
                    ])
            })
            .map(drop)
            .map_err(DatabaseError::query("record a bus message"))
    }

    /// The latest `limit` entries, oldest first.
    pub fn recent(&self, limit: usize) -> Result<Vec<JournalEntry>, DatabaseError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.select("SELECT * FROM (SELECT * FROM bus_messages ORDER BY id DESC LIMIT ?1) ORDER BY id", [limit])
    }

    /// Every entry of one correlation id, oldest first.
    pub fn by_correlation(&self, correlation_id: &str) -> Result<Vec<JournalEntry>, DatabaseError> {
        self.select("SELECT * FROM bus_messages WHERE correlation_id = ?1 ORDER BY id", [correlation_id])
    }

    fn select(&self, sql: &str, parameters: impl rusqlite::Params) -> Result<Vec<JournalEntry>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(sql)?;
                let rows = statement.query_map(parameters, |row| {
                    let seq: Option<i64> = row.get("seq")?;
                    let priority: String = row.get("priority")?;
                    Ok(JournalEntry {
                        time_ms: row.get("time")?,
                        from: row.get("sender")?,
                        to: row.get("target")?,
                        seq: seq.and_then(|seq| u64::try_from(seq).ok()),
                        priority: Priority::parse(&priority).unwrap_or_default(),
                        body: row.get("body")?,
                        correlation_id: row.get("correlation_id")?,
                        result: row.get("result")?,
                        detail: row.get("detail")?,
                    })
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(DatabaseError::query("read the bus journal"))
    }
}

impl BusJournal for SqliteBusJournal {
    async fn record(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        let journal = self.clone();
        let entry = entry.clone();
        match tokio::task::spawn_blocking(move || journal.append(&entry)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(JournalError::Storage(error.to_string())),
            Err(error) => Err(JournalError::Storage(format!("the database thread failed: {error}"))),
        }
    }
}
