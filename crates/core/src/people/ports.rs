//! What the people's policy needs from outside: the users and their identities, the
//! usage ledger, the audit trail and the approval requests. The store keeps them in the
//! database (so `squidbot users`, `approvals` and `audit`, other processes, see the
//! same); tests keep them in memory ([`super::memory`]).
//!
//! None of these is reachable from a tool: changing users, roles, links and budgets is
//! the store's and the CLI's business, never the model's.

use squidbot_types::people::{
    ApprovalRequest, ApprovalStatus, AuditEvent, AuditRow, Identity, UsageRecord, UsageTotals, User,
};

/// A people store failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("can't {action}: {reason}")]
pub struct PeopleStoreError {
    /// What was attempted ("read the users").
    pub action: String,
    /// What went wrong.
    pub reason: String,
}

impl PeopleStoreError {
    /// An error of `action` for `reason`.
    pub fn new(action: impl Into<String>, reason: impl std::fmt::Display) -> PeopleStoreError {
        PeopleStoreError { action: action.into(), reason: reason.to_string() }
    }
}

/// Who is who (read only).
pub trait Directory: Send + Sync {
    /// Every user, by id.
    fn users(&self) -> Result<Vec<User>, PeopleStoreError>;
    /// The user `id`.
    fn user(&self, id: &str) -> Result<Option<User>, PeopleStoreError>;
    /// The user an identity is linked to.
    fn by_identity(&self, identity: &Identity) -> Result<Option<User>, PeopleStoreError>;
    /// The user whose memory context is `context`.
    fn by_context(&self, context: &str) -> Result<Option<User>, PeopleStoreError>;
    /// The user holding the gateway token whose hash is `token_hash`.
    fn by_token_hash(&self, token_hash: &str) -> Result<Option<User>, PeopleStoreError>;
    /// A user's linked identities.
    fn identities(&self, user: &str) -> Result<Vec<Identity>, PeopleStoreError>;
}

/// Who a budget or a usage query is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageSubject {
    /// A user (every context they act in).
    User(String),
    /// A memory context with no user (a stranger, a group).
    Context(String),
}

/// Every model call, accounted.
pub trait UsageLedger: Send + Sync {
    /// Records one call.
    fn record(&self, record: &UsageRecord) -> Result<(), PeopleStoreError>;
    /// What `subject` used since `since_ms`.
    fn totals(&self, subject: &UsageSubject, since_ms: i64) -> Result<UsageTotals, PeopleStoreError>;
    /// Notes that `key` (a person and a budget period) was told; true the first time.
    fn first_notice(&self, key: &str) -> Result<bool, PeopleStoreError>;
    /// Usage since `since_ms` (of `user` only, when given), summed per `by` key, keys
    /// sorted (days as `YYYY-MM-DD` UTC; users by id, or `context:<context>` without one;
    /// models as `provider/model`).
    fn breakdown(
        &self,
        since_ms: i64,
        user: Option<&str>,
        by: UsageGrouping,
    ) -> Result<Vec<(String, UsageTotals)>, PeopleStoreError>;
}

/// How usage is summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGrouping {
    /// Per user.
    User,
    /// Per `provider/model`.
    Model,
    /// Per UTC day.
    Day,
}

impl UsageGrouping {
    /// The grouping named `user`, `model` or `day`.
    pub fn from_name(name: &str) -> Option<UsageGrouping> {
        match name {
            "user" => Some(UsageGrouping::User),
            "model" => Some(UsageGrouping::Model),
            "day" => Some(UsageGrouping::Day),
            _ => None,
        }
    }

    /// The key `record` is summed under.
    pub fn key_of(self, record: &UsageRecord) -> String {
        match self {
            UsageGrouping::User => record.user.clone().unwrap_or_else(|| format!("context:{}", record.context)),
            UsageGrouping::Model => format!("{}/{}", record.provider, record.model),
            UsageGrouping::Day => {
                let day_start = record.at_ms.div_euclid(86_400_000) * 86_400_000;
                crate::clock::rfc3339(crate::clock::from_unix_millis(day_start.max(0)))
                    .get(..10)
                    .unwrap_or_default()
                    .to_owned()
            }
        }
    }
}

/// The append-only audit trail; the store chains each row to the one before (see
/// [`super::audit`]).
pub trait AuditLog: Send + Sync {
    /// Appends `event`; returns the row as written.
    fn append(&self, event: AuditEvent) -> Result<AuditRow, PeopleStoreError>;
    /// Rows in order, from `after_seq` on (exclusive), at most `limit`.
    fn rows(&self, after_seq: u64, limit: usize) -> Result<Vec<AuditRow>, PeopleStoreError>;
    /// The head (none before the first row).
    fn head(&self) -> Result<Option<super::audit::AuditHead>, PeopleStoreError>;
}

/// Approval requests.
pub trait ApprovalStore: Send + Sync {
    /// Stores a new (pending) request.
    fn create(&self, request: &ApprovalRequest) -> Result<(), PeopleStoreError>;
    /// The request `id` (ids are matched without regard to case).
    fn get(&self, id: &str) -> Result<Option<ApprovalRequest>, PeopleStoreError>;
    /// Moves a pending request to `status`; false when it was no longer pending.
    fn settle(&self, id: &str, status: &ApprovalStatus, at_ms: i64) -> Result<bool, PeopleStoreError>;
    /// The pending requests, oldest first.
    fn pending(&self) -> Result<Vec<ApprovalRequest>, PeopleStoreError>;
}
