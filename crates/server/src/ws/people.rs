//! The people's methods: `users.list`, `approvals.list|approve|deny`, `usage.get`,
//! `audit.list` and `audit.verify`, for admins (the owner's credentials count as one);
//! `usage.get` also for everyone else, about themselves only.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_core::clock::unix_millis;
use squidbot_core::duration::{BareNumber, parse_duration};
use squidbot_core::people::audit::{VerifyError, verify_log};
use squidbot_core::people::{DecideError, OWNER_CONTEXT, People, PeopleStoreError, UsageGrouping};
use squidbot_types::people::{ApprovalRequest, ApprovalStatus, AuditRow, UsageTotals, User};

use super::Connection;
use super::frame::{ErrorCode, MethodError};
use super::params::{Count, NonBlank};
use crate::Gateway;

/// Usage shown when `usage.get` names no span.
const DEFAULT_USAGE_SPAN: &str = "30d";

/// Audit rows `audit.list` answers when it names no limit, and at most.
const DEFAULT_AUDIT_ROWS: u64 = 100;
const MAX_AUDIT_ROWS: u64 = 1000;

/// Audit rows read per page while looking for the newest that match, and at most in all
/// (a filter matching nothing must not read a trail of millions of rows).
const AUDIT_PAGE: u64 = 500;
const MAX_AUDIT_SCAN: usize = 20_000;

/// A people's request.
#[derive(Debug)]
pub(crate) enum PeopleRequest {
    /// `users.list`.
    UsersList,
    /// `approvals.list`.
    ApprovalsList(ApprovalsListParams),
    /// `approvals.approve`.
    Approve(ApprovalParams),
    /// `approvals.deny`.
    Deny(DenyParams),
    /// `usage.get`.
    Usage(UsageParams),
    /// `audit.list`.
    AuditList(AuditListParams),
    /// `audit.verify`.
    AuditVerify,
}

/// `approvals.list` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ApprovalsListParams {
    /// Also the settled requests (when the store can list them; it lists only pending
    /// ones today, which the answer's `includesSettled: false` says).
    pub(crate) all: Option<bool>,
}

/// `approvals.approve` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ApprovalParams {
    /// The request's id (`7F3K2Q`; any case).
    pub(crate) id: NonBlank,
}

/// `approvals.deny` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct DenyParams {
    /// The request's id.
    pub(crate) id: NonBlank,
    /// Why, told to the person.
    pub(crate) reason: Option<String>,
}

/// `usage.get` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct UsageParams {
    /// How far back: `7d`, `24h`, … (30 days by default).
    pub(crate) since: Option<String>,
    /// `user`, `model` or `day` (`day` by default).
    pub(crate) by: Option<String>,
    /// Only this user (everyone else may name only themselves, and are shown only
    /// themselves when they name nobody).
    pub(crate) user: Option<String>,
}

/// `audit.list` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AuditListParams {
    /// Only what this user (or `owner`, `system`, `unknown`, …) did.
    pub(crate) user: Option<String>,
    /// How far back: `7d`, `24h`, … (everything by default).
    pub(crate) since: Option<String>,
    /// The newest this many rows (1 to 1000, 100 by default).
    pub(crate) limit: Option<Count>,
}

/// The people's policy, or why there is none.
pub(super) fn people(gateway: &Gateway) -> Result<&Arc<People>, MethodError> {
    gateway.people().ok_or_else(|| {
        MethodError::new(ErrorCode::Unavailable, "people are not set up on this gateway (no users, roles or audit)")
    })
}

/// Runs a people's request.
pub(super) async fn call(connection: &Connection, request: PeopleRequest) -> Result<Value, MethodError> {
    let gateway = &connection.gateway;
    let people = people(gateway)?;
    match request {
        PeopleRequest::UsersList => users(gateway, people),
        PeopleRequest::ApprovalsList(params) => approvals(people, params),
        PeopleRequest::Approve(params) => decide(connection, people, params.id.as_str(), Decision::Approve),
        PeopleRequest::Deny(params) => {
            decide(connection, people, params.id.as_str(), Decision::Deny { reason: params.reason })
        }
        PeopleRequest::Usage(params) => usage(connection, people, params),
        PeopleRequest::AuditList(params) => audit_list(gateway, people, params),
        PeopleRequest::AuditVerify => audit_verify(gateway, people).await,
    }
}

fn store_failure(error: &PeopleStoreError) -> MethodError {
    tracing::warn!(%error, "a people's method failed");
    MethodError::new(ErrorCode::Internal, error.to_string())
}

fn now_ms(gateway: &Gateway) -> i64 {
    unix_millis(gateway.runner.agent().clock().now())
}

/// The start of the span `since` names (`None`: `default`, itself `None` for everything).
fn since_ms(gateway: &Gateway, since: Option<&str>, default: Option<&str>) -> Result<i64, MethodError> {
    let Some(span) = since.filter(|span| !span.trim().is_empty()).or(default) else { return Ok(0) };
    let span = parse_duration(span, BareNumber::Refused)
        .map_err(|error| MethodError::invalid(format!("`since` must be a span such as 7d or 24h: {error}")))?;
    let span = i64::try_from(span.min(Duration::from_secs(100 * 365 * 86_400)).as_millis()).unwrap_or(i64::MAX);
    Ok(now_ms(gateway).saturating_sub(span).max(0))
}

fn user_json(gateway: &Gateway, people: &People, user: &User) -> Result<Value, MethodError> {
    let identities = people.stores().directory.identities(&user.id).map_err(|error| store_failure(&error))?;
    let token = match &gateway.services.token_issued {
        Some(issued) => match issued(&user.id).map_err(|error| store_failure(&error))? {
            Some(created) => json!({"set": true, "createdMs": created}),
            None => json!({"set": false}),
        },
        None => Value::Null,
    };
    Ok(json!({
        "id": user.id, "name": user.name, "role": user.role, "context": user.context, "disabled": user.disabled,
        "createdMs": user.created_ms, "budget": user.budget,
        "identities": identities.iter().map(ToString::to_string).collect::<Vec<_>>(), "token": token,
    }))
}

/// `users.list`: every user with their role, context, identities and whether they hold
/// a gateway token (never its hash).
fn users(gateway: &Gateway, people: &People) -> Result<Value, MethodError> {
    let users = people.stores().directory.users().map_err(|error| store_failure(&error))?;
    let rows = users.iter().map(|user| user_json(gateway, people, user)).collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"users": rows}))
}

fn approval_json(request: &ApprovalRequest) -> Value {
    let (by, reason) = match &request.status {
        ApprovalStatus::Approved { by } => (Some(by.as_str()), None),
        ApprovalStatus::Denied { by, reason } => (Some(by.as_str()), reason.as_deref()),
        ApprovalStatus::Pending | ApprovalStatus::Expired | ApprovalStatus::Abandoned => (None, None),
    };
    json!({
        "id": request.id, "status": request.status.name(), "by": by, "reason": reason,
        "createdMs": request.created_ms, "expiresMs": request.expires_ms, "decidedMs": request.decided_ms,
        "tool": request.tool, "arguments": request.arguments, "rule": request.rule, "sessionKey": request.session_key,
        "actor": {
            "user": request.actor.user, "name": request.actor.name, "role": request.actor.role,
            "context": request.actor.context,
        },
    })
}

/// `approvals.list`: the pending requests, oldest first. The store lists no settled ones,
/// so `all` changes nothing yet; `includesSettled` says so.
fn approvals(people: &People, params: ApprovalsListParams) -> Result<Value, MethodError> {
    let pending = people.stores().approvals.pending().map_err(|error| store_failure(&error))?;
    let mut answer =
        json!({"approvals": pending.iter().map(approval_json).collect::<Vec<_>>(), "includesSettled": false});
    if params.all.unwrap_or(false) {
        answer["note"] = json!(
            "this gateway's approval store lists pending requests only; `squidbot approvals list --all` shows the settled ones"
        );
    }
    Ok(answer)
}

/// What an admin decides.
enum Decision {
    Approve,
    Deny { reason: Option<String> },
}

/// `approvals.approve` and `approvals.deny`, as the connection's admin (the owner's
/// credentials decide as the owner).
fn decide(connection: &Connection, people: &People, id: &str, decision: Decision) -> Result<Value, MethodError> {
    let by = match connection.caller.person() {
        Some(actor) => actor.clone(),
        None => people.actor_for_context(OWNER_CONTEXT),
    };
    let (approve, reason) = match decision {
        Decision::Approve => (true, None),
        Decision::Deny { reason } => (false, reason),
    };
    match people.decide(id.trim(), &by, approve, reason) {
        Ok(request) => Ok(json!({"ok": true, "approval": approval_json(&request)})),
        Err(error @ (DecideError::NotAdmin | DecideError::OwnRequest)) => {
            Err(MethodError::new(ErrorCode::Forbidden, format!("can't decide request {id}: {error}")))
        }
        Err(error @ DecideError::Unknown(_)) => Err(MethodError::new(ErrorCode::NotFound, error.to_string())),
        Err(error @ DecideError::Settled { .. }) => Err(MethodError::new(ErrorCode::Conflict, error.to_string())),
        Err(DecideError::Store(error)) => Err(store_failure(&error)),
    }
}

fn totals_json(totals: &UsageTotals) -> Value {
    json!({
        "calls": totals.calls, "inputTokens": totals.input_tokens, "outputTokens": totals.output_tokens,
        "cacheReadTokens": totals.cache_read_tokens, "cacheWriteTokens": totals.cache_write_tokens,
        "tokens": totals.tokens(), "cost": totals.cost,
    })
}

/// `usage.get {since?, by?, user?}`: usage summed per day, user or model. Admins (the
/// owner's credentials too) see anyone's; everyone else only their own.
fn usage(connection: &Connection, people: &People, params: UsageParams) -> Result<Value, MethodError> {
    let gateway = &connection.gateway;
    let by_name = params.by.as_deref().filter(|by| !by.trim().is_empty()).unwrap_or("day");
    let by = UsageGrouping::from_name(by_name)
        .ok_or_else(|| MethodError::invalid(format!("`by` must be user, model or day, not {by_name:?}")))?;
    let asked = params.user.filter(|user| !user.trim().is_empty());
    let user = match (connection.caller.is_admin(), connection.caller.person()) {
        (true, _) | (false, None) => asked,
        (false, Some(actor)) => {
            let own = actor.user.clone();
            if asked.is_some() && asked != own {
                return Err(MethodError::new(ErrorCode::Forbidden, "you may only see your own usage")
                    .with_details(json!({"code": "NOT_ADMIN"})));
            }
            // A person always has a user id; one without can't be told apart from everyone.
            Some(own.ok_or_else(|| MethodError::new(ErrorCode::Forbidden, "you may only see your own usage"))?)
        }
    };
    let since = since_ms(gateway, params.since.as_deref(), Some(DEFAULT_USAGE_SPAN))?;
    let rows = people.stores().usage.breakdown(since, user.as_deref(), by).map_err(|error| store_failure(&error))?;
    let mut total = UsageTotals::default();
    for (_, totals) in &rows {
        total.calls += totals.calls;
        total.input_tokens += totals.input_tokens;
        total.output_tokens += totals.output_tokens;
        total.cache_read_tokens += totals.cache_read_tokens;
        total.cache_write_tokens += totals.cache_write_tokens;
        total.cost += totals.cost;
    }
    let rows: Vec<Value> = rows
        .iter()
        .map(|(key, totals)| {
            let mut row = totals_json(totals);
            row["key"] = Value::String(key.clone());
            row
        })
        .collect();
    Ok(json!({"by": by_name, "sinceMs": since, "user": user, "rows": rows, "total": totals_json(&total)}))
}

fn audit_json(row: &AuditRow) -> Value {
    let detail = serde_json::from_str::<Value>(&row.event.detail).unwrap_or_else(|_| json!(row.event.detail));
    json!({
        "seq": row.seq, "atMs": row.event.at_ms, "kind": row.event.kind.name(), "actor": row.event.actor,
        "subject": row.event.subject, "ok": row.event.ok, "detail": detail,
    })
}

/// `audit.list {user?, since?, limit?}`: the newest rows that match, newest first.
fn audit_list(gateway: &Gateway, people: &People, params: AuditListParams) -> Result<Value, MethodError> {
    let limit = params.limit.map_or(DEFAULT_AUDIT_ROWS, |limit| limit.0).clamp(1, MAX_AUDIT_ROWS) as usize;
    let since = since_ms(gateway, params.since.as_deref(), None)?;
    let user = params.user.filter(|user| !user.trim().is_empty());
    let log = &people.stores().audit;
    let Some(head) = log.head().map_err(|error| store_failure(&error))? else {
        return Ok(json!({"rows": [], "lastSeq": 0}));
    };
    let floor = head.first_seq.saturating_sub(1);
    let mut upper = head.last_seq;
    let mut found: Vec<Value> = Vec::new();
    let mut scanned = 0;
    'pages: while upper > floor && found.len() < limit && scanned < MAX_AUDIT_SCAN {
        let after = upper.saturating_sub(AUDIT_PAGE).max(floor);
        let page = log.rows(after, (upper - after) as usize).map_err(|error| store_failure(&error))?;
        scanned += page.len();
        for row in page.iter().rev() {
            if row.event.at_ms < since {
                break 'pages;
            }
            if user.as_deref().is_none_or(|user| row.event.actor == user) {
                found.push(audit_json(row));
                if found.len() == limit {
                    break 'pages;
                }
            }
        }
        upper = after;
    }
    Ok(json!({"rows": found, "lastSeq": head.last_seq}))
}

/// `audit.verify`: checks the whole chain with the audit key, off the async workers.
async fn audit_verify(gateway: &Gateway, people: &People) -> Result<Value, MethodError> {
    let Some(key) = gateway.services.audit_key.clone() else {
        return Err(MethodError::new(
            ErrorCode::Unavailable,
            "can't verify the audit trail here: this gateway was not given its key",
        ));
    };
    let log = people.stores().audit.clone();
    let checked = tokio::task::spawn_blocking(move || verify_log(&key, log.as_ref()))
        .await
        .map_err(|error| MethodError::internal(format!("can't verify the audit trail: {error}")))?;
    match checked {
        Ok(rows) => Ok(json!({"ok": true, "rows": rows})),
        Err(VerifyError::Broken(problem)) => Ok(json!({"ok": false, "problem": problem.to_string()})),
        Err(VerifyError::Store(error)) => Err(store_failure(&error)),
    }
}
