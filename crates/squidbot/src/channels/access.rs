//! Approved senders and pending pairing codes kept in the database, so the gateway and
//! `squidbot users approve` (another process) share them and restarts keep them.

use std::time::SystemTime;

use squidbot_channels::{AccessStoreError, ApprovedSender, ApprovedSenders, PendingCodes, PendingPairing, Sender};
use squidbot_core::clock::{from_unix_millis, unix_millis};
use squidbot_store::{ApprovedSenderRow, ChannelAccessStore, DatabaseError, PairingCodeRow};

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

/// The database's approved senders and pairing codes behind the channels' ports.
#[derive(Debug, Clone)]
pub struct DatabaseAccess {
    store: ChannelAccessStore,
}

impl DatabaseAccess {
    /// Over `store`.
    pub fn new(store: ChannelAccessStore) -> Self {
        Self { store }
    }
}

impl ApprovedSenders for DatabaseAccess {
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

impl PendingCodes for DatabaseAccess {
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
