//! `SqliteApprovals`: the tool calls waiting for an admin, and how they ended, in the
//! shared database (core's `ApprovalStore` port), so an admin's `squidbot approvals`
//! (another process) settles what the gateway waits on.

use rusqlite::types::Type;
use rusqlite::{Row, params};
use squidbot_core::people::{ApprovalStore, PeopleStoreError};
use squidbot_types::people::{ApprovalRequest, ApprovalStatus};

use super::{failed, read, write};
use crate::database::Database;

const COLUMNS: &str = "id, created_ms, expires_ms, actor_json, session_key, tool, arguments, rule, status, \
     decided_by, reason, decided_ms";

/// Which requests [`SqliteApprovals::list`] shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalListing {
    /// Only those still waiting.
    Pending,
    /// Those waiting and those settled.
    All,
}

fn conversion_error(column: usize, reason: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, reason.into())
}

fn request_from_row(row: &Row<'_>) -> rusqlite::Result<ApprovalRequest> {
    let actor: String = row.get(3)?;
    let actor = serde_json::from_str(&actor)
        .map_err(|error| conversion_error(3, format!("the actor is not readable: {error}")))?;
    let status: String = row.get(8)?;
    let decided_by: Option<String> = row.get(9)?;
    let reason: Option<String> = row.get(10)?;
    let decider = |status: &str| {
        decided_by.clone().ok_or_else(|| conversion_error(9, format!("an {status} request names no admin")))
    };
    let status = match status.as_str() {
        "pending" => ApprovalStatus::Pending,
        "approved" => ApprovalStatus::Approved { by: decider("approved")? },
        "denied" => ApprovalStatus::Denied { by: decider("denied")?, reason },
        "expired" => ApprovalStatus::Expired,
        "abandoned" => ApprovalStatus::Abandoned,
        other => return Err(conversion_error(8, format!("unknown approval status {other:?}"))),
    };
    Ok(ApprovalRequest {
        id: row.get(0)?,
        created_ms: row.get(1)?,
        expires_ms: row.get(2)?,
        actor,
        session_key: row.get(4)?,
        tool: row.get(5)?,
        arguments: row.get(6)?,
        rule: row.get(7)?,
        status,
        decided_ms: row.get(11)?,
    })
}

/// The admin and reason columns of `status`.
fn decision_of(status: &ApprovalStatus) -> (Option<&str>, Option<&str>) {
    match status {
        ApprovalStatus::Approved { by } => (Some(by), None),
        ApprovalStatus::Denied { by, reason } => (Some(by), reason.as_deref()),
        ApprovalStatus::Pending | ApprovalStatus::Expired | ApprovalStatus::Abandoned => (None, None),
    }
}

/// Approval requests in the shared database. Calls block. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SqliteApprovals {
    database: Database,
}

impl SqliteApprovals {
    /// The requests in `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// The newest `limit` requests (only the waiting ones with
    /// [`ApprovalListing::Pending`]), newest first.
    pub fn list(&self, limit: usize, listing: ApprovalListing) -> Result<Vec<ApprovalRequest>, PeopleStoreError> {
        let only_pending = match listing {
            ApprovalListing::Pending => true,
            ApprovalListing::All => false,
        };
        read(&self.database, "read the approval requests", |connection| {
            let mut statement = connection.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE (?1 = 0 OR status = 'pending') \
                 ORDER BY created_ms DESC, id LIMIT ?2"
            ))?;
            let requests = statement
                .query_map(params![only_pending, i64::try_from(limit).unwrap_or(i64::MAX)], request_from_row)?;
            requests.collect()
        })
    }

    /// Deletes the settled requests asked before `at_ms` (retention; the audit trail
    /// keeps what was decided); how many went.
    pub fn delete_settled_before(&self, at_ms: i64) -> Result<usize, PeopleStoreError> {
        read(&self.database, "delete old approval requests", |connection| {
            connection
                .prepare_cached("DELETE FROM approvals WHERE status <> 'pending' AND created_ms < ?1")?
                .execute([at_ms])
        })
    }
}

impl ApprovalStore for SqliteApprovals {
    fn create(&self, request: &ApprovalRequest) -> Result<(), PeopleStoreError> {
        let id = request.id.to_uppercase();
        let action = format!("store the approval request {id}");
        let actor = serde_json::to_string(&request.actor).map_err(|error| PeopleStoreError::new(&action, error))?;
        let (decided_by, reason) = decision_of(&request.status);
        write(&self.database, &action, |connection| {
            let taken = connection
                .prepare_cached("SELECT 1 FROM approvals WHERE id = ?1")
                .and_then(|mut statement| statement.exists([&id]))
                .map_err(failed(&action))?;
            if taken {
                // Never replaced: the request there may still be waiting for someone.
                return Err(PeopleStoreError::new(&action, "another request has that id"));
            }
            connection
                .prepare_cached(&format!(
                    "INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
                ))
                .and_then(|mut statement| {
                    statement.execute(params![
                        id,
                        request.created_ms,
                        request.expires_ms,
                        actor,
                        request.session_key,
                        request.tool,
                        request.arguments,
                        request.rule,
                        request.status.name(),
                        decided_by,
                        reason,
                        request.decided_ms,
                    ])
                })
                .map_err(failed(&action))?;
            Ok(())
        })
    }

    fn get(&self, id: &str) -> Result<Option<ApprovalRequest>, PeopleStoreError> {
        let id = id.to_uppercase();
        read(&self.database, &format!("read the approval request {id}"), |connection| {
            let mut statement = connection.prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"))?;
            let mut rows = statement.query_map([&id], request_from_row)?;
            rows.next().transpose()
        })
    }

    fn settle(&self, id: &str, status: &ApprovalStatus, at_ms: i64) -> Result<bool, PeopleStoreError> {
        let id = id.to_uppercase();
        let (decided_by, reason) = decision_of(status);
        // One statement: of two admins deciding at once, exactly one moves it.
        read(&self.database, &format!("settle the approval request {id}"), |connection| {
            connection
                .prepare_cached(
                    "UPDATE approvals SET status = ?2, decided_by = ?3, reason = ?4, decided_ms = ?5 \
                     WHERE id = ?1 AND status = 'pending'",
                )?
                .execute(params![id, status.name(), decided_by, reason, at_ms])
        })
        .map(|changed| changed > 0)
    }

    fn pending(&self) -> Result<Vec<ApprovalRequest>, PeopleStoreError> {
        read(&self.database, "read the pending approval requests", |connection| {
            let mut statement = connection.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE status = 'pending' ORDER BY created_ms, id"
            ))?;
            let requests = statement.query_map([], request_from_row)?;
            requests.collect()
        })
    }
}
