//! In-memory stores of users, usage, audit rows and approvals, for tests and for a
//! squidbot run without a database.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use squidbot_types::people::{
    ApprovalRequest, ApprovalStatus, AuditEvent, AuditRow, Identity, UsageRecord, UsageTotals, User,
};

use super::audit::{AuditHead, head_after, next_row};
use super::ports::{ApprovalStore, AuditLog, Directory, PeopleStoreError, UsageGrouping, UsageLedger, UsageSubject};
use crate::sync::lock;

/// Users, identities and tokens in memory.
#[derive(Debug, Default)]
pub struct MemoryDirectory {
    users: Mutex<BTreeMap<String, User>>,
    links: Mutex<BTreeMap<Identity, String>>,
    tokens: Mutex<BTreeMap<String, String>>,
}

impl MemoryDirectory {
    /// Adds or replaces a user.
    pub fn put(&self, user: User) {
        lock(&self.users).insert(user.id.clone(), user);
    }

    /// Links an identity to a user.
    pub fn link(&self, identity: Identity, user: &str) {
        lock(&self.links).insert(identity, user.to_owned());
    }

    /// Gives a user a token hash.
    pub fn set_token_hash(&self, user: &str, hash: &str) {
        lock(&self.tokens).insert(hash.to_owned(), user.to_owned());
    }
}

impl Directory for MemoryDirectory {
    fn users(&self) -> Result<Vec<User>, PeopleStoreError> {
        Ok(lock(&self.users).values().cloned().collect())
    }

    fn user(&self, id: &str) -> Result<Option<User>, PeopleStoreError> {
        Ok(lock(&self.users).get(id).cloned())
    }

    fn by_identity(&self, identity: &Identity) -> Result<Option<User>, PeopleStoreError> {
        let id = lock(&self.links).get(identity).cloned();
        Ok(id.and_then(|id| lock(&self.users).get(&id).cloned()))
    }

    fn by_context(&self, context: &str) -> Result<Option<User>, PeopleStoreError> {
        Ok(lock(&self.users).values().find(|user| user.context == context).cloned())
    }

    fn by_token_hash(&self, token_hash: &str) -> Result<Option<User>, PeopleStoreError> {
        let id = lock(&self.tokens).get(token_hash).cloned();
        Ok(id.and_then(|id| lock(&self.users).get(&id).cloned()))
    }

    fn identities(&self, user: &str) -> Result<Vec<Identity>, PeopleStoreError> {
        Ok(lock(&self.links).iter().filter(|(_, owner)| *owner == user).map(|(identity, _)| identity.clone()).collect())
    }
}

/// Usage records in memory.
#[derive(Debug, Default)]
pub struct MemoryUsage {
    records: Mutex<Vec<UsageRecord>>,
    notices: Mutex<BTreeSet<String>>,
}

impl MemoryUsage {
    /// Every record so far.
    pub fn records(&self) -> Vec<UsageRecord> {
        lock(&self.records).clone()
    }
}

impl UsageLedger for MemoryUsage {
    fn record(&self, record: &UsageRecord) -> Result<(), PeopleStoreError> {
        lock(&self.records).push(record.clone());
        Ok(())
    }

    fn totals(&self, subject: &UsageSubject, since_ms: i64) -> Result<UsageTotals, PeopleStoreError> {
        let mut totals = UsageTotals::default();
        for record in lock(&self.records).iter().filter(|record| record.at_ms >= since_ms) {
            let counts = match subject {
                UsageSubject::User(user) => record.user.as_deref() == Some(user.as_str()),
                UsageSubject::Context(context) => record.user.is_none() && &record.context == context,
            };
            if counts {
                totals.add(record);
            }
        }
        Ok(totals)
    }

    fn first_notice(&self, key: &str) -> Result<bool, PeopleStoreError> {
        Ok(lock(&self.notices).insert(key.to_owned()))
    }

    fn breakdown(
        &self,
        since_ms: i64,
        user: Option<&str>,
        by: UsageGrouping,
    ) -> Result<Vec<(String, UsageTotals)>, PeopleStoreError> {
        let mut sums: BTreeMap<String, UsageTotals> = BTreeMap::new();
        for record in lock(&self.records).iter() {
            if record.at_ms >= since_ms && user.is_none_or(|user| record.user.as_deref() == Some(user)) {
                sums.entry(by.key_of(record)).or_default().add(record);
            }
        }
        Ok(sums.into_iter().collect())
    }
}

/// An audit trail in memory, chained with a key like the database's.
#[derive(Debug)]
pub struct MemoryAudit {
    key: Vec<u8>,
    state: Mutex<(Vec<AuditRow>, Option<AuditHead>)>,
}

impl MemoryAudit {
    /// An empty trail keyed with `key`.
    pub fn new(key: &[u8]) -> MemoryAudit {
        MemoryAudit { key: key.to_vec(), state: Mutex::new((Vec::new(), None)) }
    }

    /// The rows and the head.
    pub fn snapshot(&self) -> (Vec<AuditRow>, Option<AuditHead>) {
        lock(&self.state).clone()
    }
}

impl AuditLog for MemoryAudit {
    fn append(&self, event: AuditEvent) -> Result<AuditRow, PeopleStoreError> {
        let mut state = lock(&self.state);
        let row = next_row(&self.key, state.1.as_ref(), event);
        state.1 = Some(head_after(&self.key, state.1.as_ref(), &row));
        state.0.push(row.clone());
        Ok(row)
    }

    fn rows(&self, after_seq: u64, limit: usize) -> Result<Vec<AuditRow>, PeopleStoreError> {
        Ok(lock(&self.state).0.iter().filter(|row| row.seq > after_seq).take(limit).cloned().collect())
    }

    fn head(&self) -> Result<Option<AuditHead>, PeopleStoreError> {
        Ok(lock(&self.state).1.clone())
    }
}

/// Approval requests in memory.
#[derive(Debug, Default)]
pub struct MemoryApprovals {
    requests: Mutex<BTreeMap<String, ApprovalRequest>>,
}

impl ApprovalStore for MemoryApprovals {
    fn create(&self, request: &ApprovalRequest) -> Result<(), PeopleStoreError> {
        lock(&self.requests).insert(request.id.to_uppercase(), request.clone());
        Ok(())
    }

    fn get(&self, id: &str) -> Result<Option<ApprovalRequest>, PeopleStoreError> {
        Ok(lock(&self.requests).get(&id.to_uppercase()).cloned())
    }

    fn settle(&self, id: &str, status: &ApprovalStatus, at_ms: i64) -> Result<bool, PeopleStoreError> {
        let mut requests = lock(&self.requests);
        match requests.get_mut(&id.to_uppercase()) {
            Some(request) if request.status == ApprovalStatus::Pending => {
                request.status = status.clone();
                request.decided_ms = Some(at_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn pending(&self) -> Result<Vec<ApprovalRequest>, PeopleStoreError> {
        let mut pending: Vec<ApprovalRequest> = lock(&self.requests)
            .values()
            .filter(|request| request.status == ApprovalStatus::Pending)
            .cloned()
            .collect();
        pending.sort_by_key(|request| request.created_ms);
        Ok(pending)
    }
}
