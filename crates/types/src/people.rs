//! People: users with roles and linked identities, their usage, the approvals that wait
//! for an admin and the audit trail. Plain data; the policy is in core's `people`.
//!
//! Users' roles ("admin", "user", "child", "guest" or one of your own, `[user_roles.*]`)
//! are people's roles; they are never the agent roles of `[agents.*]`.

use serde::{Deserialize, Serialize};

/// The built-in people's role that may do everything and approves others' requests.
pub const ADMIN: &str = "admin";
/// The built-in role of a trusted member of the household or team.
pub const USER: &str = "user";
/// The built-in role of a child: little it may do without an admin.
pub const CHILD: &str = "child";
/// The built-in role of everyone the assistant does not know (strangers let in by the
/// channel policy).
pub const GUEST: &str = "guest";

/// The built-in people's roles, most trusted first.
pub const BUILT_IN_ROLES: [&str; 4] = [ADMIN, USER, CHILD, GUEST];

/// Longest user id, in bytes.
pub const MAX_USER_ID_BYTES: usize = 32;

/// A person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// Short id: lower-case letters, digits, `-` and `_`, starting with a letter or digit.
    pub id: String,
    /// How they are called.
    pub name: String,
    /// Their people's role (`[user_roles.<role>]`).
    pub role: String,
    /// Their memory context: `owner` for the admin made by `onboard`, else `user:<id>`.
    pub context: String,
    /// When they were added (ms since the Unix epoch).
    pub created_ms: i64,
    /// A disabled user is answered by nobody and their token is refused.
    pub disabled: bool,
    /// Their own budget, over the role's.
    pub budget: BudgetLimits,
}

/// Budget limits; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetLimits {
    /// Tokens (input + output + cache) per day (UTC).
    pub daily_tokens: Option<u64>,
    /// Tokens per calendar month (UTC).
    pub monthly_tokens: Option<u64>,
    /// Cost per day, in the price table's currency.
    pub daily_cost: Option<f64>,
    /// Cost per calendar month.
    pub monthly_cost: Option<f64>,
}

impl Eq for BudgetLimits {}

impl BudgetLimits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.daily_tokens.is_none()
            && self.monthly_tokens.is_none()
            && self.daily_cost.is_none()
            && self.monthly_cost.is_none()
    }
}

/// One of a person's accounts: a channel and the sender id there (`telegram:12345`,
/// `matrix:@alice:example.org`, `gateway:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    /// The channel's name (`[channels.<name>]`).
    pub channel: String,
    /// Their id there.
    pub sender_id: String,
}

impl Identity {
    /// Reads `CHANNEL:ID` (the id may contain `:`, as Matrix ids do).
    pub fn parse(text: &str) -> Option<Identity> {
        let (channel, sender_id) = text.split_once(':')?;
        (!channel.is_empty() && !sender_id.is_empty())
            .then(|| Identity { channel: channel.to_owned(), sender_id: sender_id.to_owned() })
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}:{}", self.channel, self.sender_id)
    }
}

/// Who a turn acts for: decided by the channel or the gateway connection, never by the
/// model. Its tools, budget and approvals follow from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The user, or `None` for a stranger (a guest) or a machine turn.
    pub user: Option<String>,
    /// Their display name, for approval requests.
    pub name: String,
    /// Their people's role.
    pub role: String,
    /// Their memory context (the budget and usage are counted there when `user` is none).
    pub context: String,
    /// The session they are talking in, where notes for them go (a worker's approval
    /// wait is told there, not in the worker's own session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Actor {
    /// A known user.
    pub fn of(user: &User) -> Actor {
        Actor {
            user: Some(user.id.clone()),
            name: user.name.clone(),
            role: user.role.clone(),
            context: user.context.clone(),
            session: None,
        }
    }

    /// Someone not in the users table: a guest in `context`.
    pub fn stranger(name: impl Into<String>, context: impl Into<String>) -> Actor {
        Actor { user: None, name: name.into(), role: GUEST.to_owned(), context: context.into(), session: None }
    }

    /// The same actor talking in `session`.
    pub fn in_session(mut self, session: impl Into<String>) -> Actor {
        self.session = Some(session.into());
        self
    }

    /// Whether the actor is an admin.
    pub fn is_admin(&self) -> bool {
        self.role == ADMIN
    }
}

/// One model call, accounted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
    /// The user, when known.
    pub user: Option<String>,
    /// The memory context.
    pub context: String,
    /// The session.
    pub session_key: String,
    /// The agent role that called (`assistant`, `worker`, …).
    pub agent: String,
    /// The provider's name.
    pub provider: String,
    /// The model, without the provider.
    pub model: String,
    /// Input tokens (cache reads and writes not included).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Cost from the price table; `None` when the model has no price.
    pub cost: Option<f64>,
}

impl UsageRecord {
    /// Every token of the call.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// Usage summed over a span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Model calls.
    pub calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache-read tokens.
    pub cache_read_tokens: u64,
    /// Cache-write tokens.
    pub cache_write_tokens: u64,
    /// Cost of the priced calls.
    pub cost: f64,
}

impl UsageTotals {
    /// Every token.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// Adds one record.
    pub fn add(&mut self, record: &UsageRecord) {
        self.calls += 1;
        self.input_tokens += record.input_tokens;
        self.output_tokens += record.output_tokens;
        self.cache_read_tokens += record.cache_read_tokens;
        self.cache_write_tokens += record.cache_write_tokens;
        self.cost += record.cost.unwrap_or(0.0);
    }
}

/// Where an approval request is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum ApprovalStatus {
    /// Waiting for an admin.
    Pending,
    /// An admin approved it.
    Approved {
        /// The admin's user id.
        by: String,
    },
    /// An admin denied it.
    Denied {
        /// The admin's user id.
        by: String,
        /// What they said, if anything.
        reason: Option<String>,
    },
    /// Nobody answered in time.
    Expired,
    /// The turn that waited is gone (the gateway restarted).
    Abandoned,
}

impl ApprovalStatus {
    /// The status's name (`pending`, `approved`, …).
    pub fn name(&self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved { .. } => "approved",
            ApprovalStatus::Denied { .. } => "denied",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Abandoned => "abandoned",
        }
    }
}

/// A tool call waiting for an admin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Short id people type (`/approve 7F3K2Q`).
    pub id: String,
    /// When asked (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it expires.
    pub expires_ms: i64,
    /// Who asks.
    pub actor: Actor,
    /// The session the turn runs in.
    pub session_key: String,
    /// The tool.
    pub tool: String,
    /// Its arguments exactly as they will run (JSON).
    pub arguments: String,
    /// Why it waits (the rule, in words).
    pub rule: String,
    /// Where it is.
    pub status: ApprovalStatus,
    /// When it was decided.
    pub decided_ms: Option<i64>,
}

/// What happened, for the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// A tool ran (or was refused).
    ToolCall,
    /// An approval was asked for.
    ApprovalRequested,
    /// An approval was decided (or expired).
    ApprovalDecided,
    /// Someone logged in to the gateway (or failed to).
    Login,
    /// A user was added, changed, linked, disabled or purged.
    UserChange,
    /// A people's role changed.
    RoleChange,
    /// squidbot changed its configuration.
    ConfigChange,
    /// A skill was installed.
    SkillInstall,
    /// A turn was refused for its budget.
    BudgetRefusal,
}

impl AuditKind {
    /// Every kind.
    pub const ALL: [AuditKind; 9] = [
        AuditKind::ToolCall,
        AuditKind::ApprovalRequested,
        AuditKind::ApprovalDecided,
        AuditKind::Login,
        AuditKind::UserChange,
        AuditKind::RoleChange,
        AuditKind::ConfigChange,
        AuditKind::SkillInstall,
        AuditKind::BudgetRefusal,
    ];

    /// The kind's name as stored.
    pub fn name(self) -> &'static str {
        match self {
            AuditKind::ToolCall => "tool_call",
            AuditKind::ApprovalRequested => "approval_requested",
            AuditKind::ApprovalDecided => "approval_decided",
            AuditKind::Login => "login",
            AuditKind::UserChange => "user_change",
            AuditKind::RoleChange => "role_change",
            AuditKind::ConfigChange => "config_change",
            AuditKind::SkillInstall => "skill_install",
            AuditKind::BudgetRefusal => "budget_refusal",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<AuditKind> {
        AuditKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// One thing to put in the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
    /// What.
    pub kind: AuditKind,
    /// Who did it: a user id, `stranger:<context>`, `cli`, `system`.
    pub actor: String,
    /// What it was done to: a tool name, a user id, an address.
    pub subject: String,
    /// Whether it went through (false: refused, failed, denied).
    pub ok: bool,
    /// The details, as JSON (secrets redacted).
    pub detail: String,
}

/// An audit row as stored: the event, its place in the chain and its keyed hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    /// 1, 2, 3, … in order of writing.
    pub seq: u64,
    /// The event.
    #[serde(flatten)]
    pub event: AuditEvent,
    /// The previous row's hash (hex; 64 zeros for the first).
    pub prev_hash: String,
    /// This row's keyed hash over `prev_hash` and the event (hex).
    pub hash: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_read_channel_and_id() {
        let identity = Identity::parse("matrix:@alice:example.org").unwrap();
        assert_eq!(identity.channel, "matrix");
        assert_eq!(identity.sender_id, "@alice:example.org");
        assert_eq!(identity.to_string(), "matrix:@alice:example.org");
        assert!(Identity::parse("telegram").is_none());
        assert!(Identity::parse(":12").is_none());
        assert!(Identity::parse("telegram:").is_none());
    }

    #[test]
    fn audit_kinds_round_trip() {
        for kind in AuditKind::ALL {
            assert_eq!(AuditKind::from_name(kind.name()), Some(kind));
        }
    }
}
