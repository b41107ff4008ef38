//! `BulletinCache`: the last generated memory bulletin of each context, with the
//! memory fingerprint it was generated from, so it is rebuilt only after changes.

use rusqlite::{OptionalExtension, params};
pub use squidbot_core::memory::Bulletin;
use squidbot_core::memory::{BulletinError, Bulletins};

use crate::database::{Database, DatabaseError};
use crate::session_index::action_and_reason;

/// Bulletins in the shared database, one per context. Calls block.
#[derive(Debug, Clone)]
pub struct BulletinCache {
    database: Database,
}

impl BulletinCache {
    /// A cache over `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// The bulletin of `context`, if one was stored.
    pub fn get(&self, context: &str) -> Result<Option<Bulletin>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "SELECT content, fingerprint, generated_at FROM memory_bulletins WHERE context = ?1",
                    )?
                    .query_row([context], |row| {
                        Ok(Bulletin { content: row.get(0)?, fingerprint: row.get(1)?, generated_at: row.get(2)? })
                    })
                    .optional()
            })
            .map_err(DatabaseError::query("read the memory bulletin"))
    }

    /// Stores the bulletin of `context`, replacing the previous one.
    pub fn put(&self, context: &str, bulletin: &Bulletin) -> Result<(), DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO memory_bulletins (context, content, fingerprint, generated_at) \
                         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (context) DO UPDATE SET \
                         content = excluded.content, fingerprint = excluded.fingerprint, \
                         generated_at = excluded.generated_at",
                    )?
                    .execute(params![context, bulletin.content, bulletin.fingerprint, bulletin.generated_at])
            })
            .map(drop)
            .map_err(DatabaseError::query("store the memory bulletin"))
    }
}

/// The port's error for a database error.
fn bulletin_error(error: DatabaseError) -> BulletinError {
    let (action, reason) = action_and_reason(error, "use the memory bulletin");
    BulletinError::Storage { action, reason }
}

impl Bulletins for BulletinCache {
    fn get(&self, context: &str) -> Result<Option<Bulletin>, BulletinError> {
        BulletinCache::get(self, context).map_err(bulletin_error)
    }

    fn put(&self, context: &str, bulletin: &Bulletin) -> Result<(), BulletinError> {
        BulletinCache::put(self, context, bulletin).map_err(bulletin_error)
    }
}
