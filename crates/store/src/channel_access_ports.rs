//! The database's approved senders and pending pairing codes behind core's access ports
//! ([`ApprovedSenders`], [`PendingCodes`]), so the gateway and `squidbot users` (another
//! process) share them and restarts keep them.

use std::time::SystemTime;

use squidbot_core::access::{AccessStoreError, ApprovedSender, ApprovedSenders, PendingCodes, PendingPairing};
use squidbot_core::clock::{from_unix_millis, unix_millis};
use squidbot_types::channel::Sender;

use crate::channel_access::{ApprovedSenderRow, ChannelAccessStore, PairingCodeRow};
use crate::database::DatabaseError;

fn failed(action: &str) -> impl FnOnce(DatabaseError) -> AccessStoreError + '_ {
    move |error| AccessStoreError { action: action.to_owned(), reason: error.to_string() }
}

fn pending_of(row: PairingCodeRow) -> PendingPairing {
    PendingPairing {
        code: row.code,
        channel: row.channel,
        sender: Sender { id: row.sender_id, display_name: row.display_name },
        expires_at: from_unix_millis(row.expires_at_ms),
    }
}

/// Approved senders and pending pairing codes in SQLite, through core's access ports.
#[derive(Debug, Clone)]
pub struct SqliteChannelAccess {
    store: ChannelAccessStore,
}

impl SqliteChannelAccess {
    /// Over `store`.
    pub fn new(store: ChannelAccessStore) -> Self {
        Self { store }
    }
}

impl ApprovedSenders for SqliteChannelAccess {
    fn is_approved(&self, channel: &str, sender_id: &str) -> Result<bool, AccessStoreError> {
        self.store.is_approved(channel, sender_id).map_err(failed("read approved senders"))
    }

    fn approve(&self, sender: &ApprovedSender) -> Result<(), AccessStoreError> {
        let row = ApprovedSenderRow {
            channel: sender.channel.clone(),
            sender_id: sender.sender_id.clone(),
            display_name: sender.display_name.clone(),
            approved_at_ms: unix_millis(sender.approved_at),
        };
        self.store.approve(&row).map_err(failed("store an approved sender"))
    }

    fn revoke(&self, channel: &str, sender_id: &str) -> Result<bool, AccessStoreError> {
        self.store.revoke(channel, sender_id).map_err(failed("remove an approved sender"))
    }

    fn list(&self) -> Result<Vec<ApprovedSender>, AccessStoreError> {
        let rows = self.store.approved().map_err(failed("read approved senders"))?;
        Ok(rows
            .into_iter()
            .map(|row| ApprovedSender {
                channel: row.channel,
                sender_id: row.sender_id,
                display_name: row.display_name,
                approved_at: from_unix_millis(row.approved_at_ms),
            })
            .collect())
    }
}

impl PendingCodes for SqliteChannelAccess {
    fn has_live_code(&self, channel: &str, sender_id: &str, now: SystemTime) -> Result<bool, AccessStoreError> {
        self.store.has_live_code(channel, sender_id, unix_millis(now)).map_err(failed("read pairing codes"))
    }

    fn insert(&self, pending: &PendingPairing, now: SystemTime) -> Result<bool, AccessStoreError> {
        let row = PairingCodeRow {
            code: pending.code.clone(),
            channel: pending.channel.clone(),
            sender_id: pending.sender.id.clone(),
            display_name: pending.sender.display_name.clone(),
            issued_at_ms: unix_millis(now),
            expires_at_ms: unix_millis(pending.expires_at),
        };
        self.store.insert_code(&row, unix_millis(now)).map_err(failed("store a pairing code"))
    }

    fn take(&self, code: &str) -> Result<Option<PendingPairing>, AccessStoreError> {
        Ok(self.store.take_code(code).map_err(failed("take a pairing code"))?.map(pending_of))
    }

    fn pending(&self, now: SystemTime) -> Result<Vec<PendingPairing>, AccessStoreError> {
        Ok(self
            .store
            .live_codes(unix_millis(now))
            .map_err(failed("read pairing codes"))?
            .into_iter()
            .map(pending_of)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::database::Database;

    fn access() -> (tempfile::TempDir, SqliteChannelAccess) {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        (directory, SqliteChannelAccess::new(ChannelAccessStore::new(database)))
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
    }

    #[test]
    fn approved_senders_round_trip_through_the_port() {
        let (_directory, access) = access();
        let sender = ApprovedSender {
            channel: "matrix".to_owned(),
            sender_id: "@a:example.org".to_owned(),
            display_name: Some("A".to_owned()),
            approved_at: at(5),
        };
        assert!(!access.is_approved("matrix", "@a:example.org").unwrap());
        access.approve(&sender).unwrap();
        assert!(access.is_approved("matrix", "@a:example.org").unwrap());
        assert_eq!(access.list().unwrap(), vec![sender]);
        assert!(access.revoke("matrix", "@a:example.org").unwrap());
        assert!(!access.revoke("matrix", "@a:example.org").unwrap());
    }

    #[test]
    fn pending_codes_round_trip_through_the_port() {
        let (_directory, access) = access();
        let pending = PendingPairing {
            code: "ABCDEF".to_owned(),
            channel: "telegram".to_owned(),
            sender: Sender { id: "42".to_owned(), display_name: Some("Ann".to_owned()) },
            expires_at: at(3600),
        };
        assert!(access.insert(&pending, at(0)).unwrap());
        assert!(!access.insert(&pending, at(1)).unwrap(), "a taken code is refused");
        assert!(access.has_live_code("telegram", "42", at(10)).unwrap());
        assert!(!access.has_live_code("telegram", "42", at(3600)).unwrap());
        assert_eq!(access.pending(at(10)).unwrap(), vec![pending.clone()]);
        assert_eq!(access.take("ABCDEF").unwrap(), Some(pending));
        assert_eq!(access.take("ABCDEF").unwrap(), None);
    }
}
