//! `SqliteLastActive`: where the owner last wrote, kept in the database's `meta` table
//! so job replies still find them after a restart.

use squidbot_core::jobs::{LastActive, LastActiveError, LastActiveStore};

use crate::database::{Database, DatabaseError};
use crate::session_index::action_and_reason;

/// The `meta` key of the saved place.
const LAST_ACTIVE_KEY: &str = "scheduler.last_active";

/// The saved place in the shared database, as JSON `{"origin", "session_key"}`. Calls
/// block.
#[derive(Debug, Clone)]
pub struct SqliteLastActive {
    database: Database,
}

impl SqliteLastActive {
    /// The saved place in `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }
}

fn storage_error(error: DatabaseError) -> LastActiveError {
    let (action, reason) = action_and_reason(error, "use the database");
    LastActiveError::Storage { action, reason }
}

impl LastActiveStore for SqliteLastActive {
    fn load(&self) -> Result<Option<LastActive>, LastActiveError> {
        let Some(text) = self.database.meta(LAST_ACTIVE_KEY).map_err(storage_error)? else { return Ok(None) };
        // A value this build can't read is as good as none: the next message sets it.
        Ok(serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|value| {
            let origin = value["origin"].as_str()?.to_owned();
            let session_key = value["session_key"].as_str()?.to_owned();
            Some(LastActive { origin, session_key })
        }))
    }

    fn save(&self, last: &LastActive) -> Result<(), LastActiveError> {
        let value = serde_json::json!({"origin": last.origin, "session_key": last.session_key}).to_string();
        self.database.set_meta(LAST_ACTIVE_KEY, &value).map_err(storage_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_saved_place_round_trips_and_an_unreadable_one_is_none() {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        let saved = SqliteLastActive::new(database.clone());
        assert_eq!(saved.load().unwrap(), None);
        let place = LastActive { origin: "telegram".to_owned(), session_key: "telegram:dm:42".to_owned() };
        saved.save(&place).unwrap();
        assert_eq!(saved.load().unwrap(), Some(place));
        assert_eq!(
            database.meta(LAST_ACTIVE_KEY).unwrap().as_deref(),
            Some(r#"{"origin":"telegram","session_key":"telegram:dm:42"}"#)
        );
        database.set_meta(LAST_ACTIVE_KEY, "not json").unwrap();
        assert_eq!(saved.load().unwrap(), None);
    }
}
