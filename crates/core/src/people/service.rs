//! The people's policy at work: who a turn acts for, whether their budget lets it run,
//! whether each tool call may run, waits for an admin or is refused, and what goes in the
//! usage ledger and the audit trail. The agent loop calls it around every model call and
//! every tool call, so none of it depends on the model behaving.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use squidbot_types::config::{ApprovalTimeout, ApprovalsConfig, Config};
use squidbot_types::message::Usage;
use squidbot_types::people::{
    ADMIN, Actor, ApprovalRequest, ApprovalStatus, AuditEvent, AuditKind, Identity, UsageRecord, User,
};
use tokio_util::sync::CancellationToken;

use super::budget::{self, BudgetState, BudgetUse};
use super::ports::{ApprovalStore, AuditLog, Directory, PeopleStoreError, UsageLedger, UsageSubject};
use super::prices::{Prices, TokenSplit};
use super::roles::{RoleBook, RolePolicy};
use super::rules::ApprovalRules;
use crate::clock::{Clock, unix_millis};
use crate::hooks::{HookBus, HookEvent, HookInput};
use crate::leaks::LeakScanner;
use crate::random::{RandomSource, SystemRandom};
use crate::sync::lock;

/// The context of the single owner (the admin `onboard` made).
pub const OWNER_CONTEXT: &str = "owner";

/// Characters of approval ids: capital letters and digits without look-alikes.
const ID_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// How often a waiting call looks for a decision made by another process (the CLI).
const POLL: Duration = Duration::from_millis(250);

/// The policy parts of the configuration.
#[derive(Debug, Clone)]
pub struct PeopleSettings {
    /// People's roles.
    pub roles: RoleBook,
    /// Approval rules.
    pub rules: ApprovalRules,
    /// How long a request waits.
    pub approval_timeout: Duration,
    /// What an unanswered request becomes.
    pub on_timeout: ApprovalTimeout,
    /// Model prices.
    pub prices: Prices,
}

impl PeopleSettings {
    /// The settings of `config`.
    pub fn from_config(config: &Config) -> PeopleSettings {
        PeopleSettings::new(&config.user_roles, &config.approvals, &config.prices)
    }

    /// Settings from the three sections.
    pub fn new(
        roles: &std::collections::BTreeMap<String, squidbot_types::config::UserRoleConfig>,
        approvals: &ApprovalsConfig,
        prices: &std::collections::BTreeMap<String, squidbot_types::config::ModelPrice>,
    ) -> PeopleSettings {
        PeopleSettings {
            roles: RoleBook::new(roles),
            rules: ApprovalRules::new(approvals),
            approval_timeout: Duration::from_secs(approvals.timeout_secs.max(1)),
            on_timeout: approvals.on_timeout,
            prices: Prices::new(prices.clone()),
        }
    }
}

impl Default for PeopleSettings {
    fn default() -> Self {
        PeopleSettings::new(&Default::default(), &ApprovalsConfig::default(), &Default::default())
    }
}

/// Tells people things outside a turn's own reply: admins about a request waiting for
/// them (on their last active channel), a person about what happened to their request.
/// Best effort; the gateway implements it over the channels.
pub trait PeopleNotifier: Send + Sync {
    /// `request` waits; `admins` may decide it.
    fn approval_requested(&self, request: &ApprovalRequest, admins: &[User]);
    /// Tells the people of `session_key` (acting as `actor`) `text`.
    fn tell(&self, actor: &Actor, session_key: &str, text: &str);
}

/// The stores [`People`] works on.
#[derive(Clone)]
pub struct PeopleStores {
    /// Users and identities.
    pub directory: Arc<dyn Directory>,
    /// The usage ledger.
    pub usage: Arc<dyn UsageLedger>,
    /// The audit trail.
    pub audit: Arc<dyn AuditLog>,
    /// Approval requests.
    pub approvals: Arc<dyn ApprovalStore>,
}

/// Why a decision on a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// Not an admin.
    #[error("only admins decide approvals")]
    NotAdmin,
    /// Their own request.
    #[error("nobody decides their own request; another admin has to")]
    OwnRequest,
    /// No such request.
    #[error("no approval request {0}")]
    Unknown(String),
    /// Already decided.
    #[error("approval request {id} is already {status}")]
    Settled {
        /// The request.
        id: String,
        /// Its status.
        status: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] PeopleStoreError),
}

/// The people's policy, over its stores.
pub struct People {
    settings: PeopleSettings,
    stores: PeopleStores,
    clock: Arc<dyn Clock>,
    leaks: LeakScanner,
    notifier: RwLock<Option<Arc<dyn PeopleNotifier>>>,
    /// The configured hooks, told about approvals decided.
    hooks: RwLock<Option<Arc<HookBus>>>,
    random: Mutex<Box<dyn RandomSource>>,
    decided: tokio::sync::Notify,
}

impl std::fmt::Debug for People {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("People").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// The result of asking whether a turn may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It may.
    Admit,
    /// It may, and the person should hear this first (80 % of a budget, once).
    AdmitWithNotice(String),
    /// It may not: this says why and when it may again.
    Refuse(String),
}

impl People {
    /// The policy of `settings` over `stores`.
    pub fn new(settings: PeopleSettings, stores: PeopleStores, clock: Arc<dyn Clock>) -> People {
        People {
            settings,
            stores,
            clock,
            leaks: LeakScanner::default(),
            notifier: RwLock::new(None),
            hooks: RwLock::new(None),
            random: Mutex::new(Box::new(SystemRandom)),
            decided: tokio::sync::Notify::new(),
        }
    }

    /// Redacts audit details with this scanner (which knows the configured secrets).
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> People {
        self.leaks = leaks;
        self
    }

    /// Draws approval ids from `random` (tests).
    pub fn with_random(self, random: impl RandomSource + 'static) -> People {
        *lock(&self.random) = Box::new(random);
        self
    }

    /// Sets who tells admins and people about approvals (the gateway, once its channels run).
    pub fn set_notifier(&self, notifier: Arc<dyn PeopleNotifier>) {
        *self.notifier.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(notifier);
    }

    /// Tells `hooks` about every approval decided (granted, denied or abandoned).
    pub fn set_hooks(&self, hooks: Arc<HookBus>) {
        *self.hooks.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hooks);
    }

    /// Tells the hooks that `request` was settled as `status`, by `by`.
    fn tell_hooks_decided(&self, request: &ApprovalRequest, status: &ApprovalStatus, by: &str) {
        let hooks = self.hooks.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let Some(hooks) = hooks.filter(|hooks| hooks.wants(HookEvent::ApprovalDecided, "")) else { return };
        let input = HookInput {
            tool: request.tool.clone(),
            user: request.actor.user.clone(),
            ..HookInput::new(HookEvent::ApprovalDecided, &request.session_key, &request.actor.context)
        }
        .with("id", request.id.clone())
        .with("status", status.name())
        .with("by", by);
        hooks.observe_later(input);
    }

    fn notifier(&self) -> Option<Arc<dyn PeopleNotifier>> {
        self.notifier.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The settings.
    pub fn settings(&self) -> &PeopleSettings {
        &self.settings
    }

    /// The stores.
    pub fn stores(&self) -> &PeopleStores {
        &self.stores
    }

    fn now_ms(&self) -> i64 {
        unix_millis(self.clock.now())
    }

    /// Who acts in `context` when the front end did not say: its user, the owner (an
    /// admin, also before any user exists) or a stranger (a guest). A disabled user is
    /// a guest.
    pub fn actor_for_context(&self, context: &str) -> Actor {
        match self.stores.directory.by_context(context) {
            Ok(Some(user)) if !user.disabled => Actor::of(&user),
            Ok(Some(user)) => Actor { role: squidbot_types::people::GUEST.into(), ..Actor::of(&user) },
            Ok(None) if context == OWNER_CONTEXT => Actor {
                user: None,
                name: "owner".into(),
                role: ADMIN.into(),
                context: OWNER_CONTEXT.into(),
                session: None,
            },
            Ok(None) => Actor::stranger(context, context),
            Err(error) => {
                tracing::warn!(%error, context, "can't look up who acts; treating them as a guest");
                Actor::stranger(context, context)
            }
        }
    }

    /// The user linked to `identity`, if any.
    pub fn user_of(&self, identity: &Identity) -> Result<Option<User>, PeopleStoreError> {
        self.stores.directory.by_identity(identity)
    }

    /// The policy of `actor`'s role.
    pub fn policy(&self, actor: &Actor) -> &RolePolicy {
        self.settings.roles.policy(&actor.role)
    }

    /// Whether `actor`'s role lets `tool` be offered to the model at all.
    pub fn offers(&self, actor: &Actor, tool: &str) -> bool {
        self.policy(actor).refuses_tool(tool).is_none()
    }

    fn subject(actor: &Actor) -> UsageSubject {
        match &actor.user {
            Some(user) => UsageSubject::User(user.clone()),
            None => UsageSubject::Context(actor.context.clone()),
        }
    }

    /// How the audit trail names `actor`.
    pub fn audit_actor(actor: &Actor) -> String {
        match &actor.user {
            Some(user) => user.clone(),
            None if actor.context == OWNER_CONTEXT => OWNER_CONTEXT.to_owned(),
            None => format!("stranger:{}", actor.context),
        }
    }

    /// Why `actor` may not have `model` (`provider/model`) answer them: their people's
    /// role's `models` list doesn't have it. Audited when refused.
    pub fn refuses_model(&self, actor: &Actor, model: &str) -> Option<String> {
        if self.policy(actor).allows_model(model) {
            return None;
        }
        self.audit(
            AuditKind::ToolCall,
            actor,
            "model",
            false,
            json!({"model": model, "refused": "not in the role's models"}),
        );
        Some(format!(
            "Sorry, the model `{model}` is not one your role ({}) may use; ask an admin to allow it.",
            actor.role
        ))
    }

    /// Whether `actor` may start a turn now, by their budget (the person's own limits
    /// over their role's). Admins are exempt unless their role says otherwise.
    pub fn admit_turn(&self, actor: &Actor) -> Admission {
        let policy = self.policy(actor);
        if !policy.budget_applies {
            return Admission::Admit;
        }
        let own = match &actor.user {
            Some(id) => self.stores.directory.user(id).ok().flatten().map(|user| user.budget).unwrap_or_default(),
            None => Default::default(),
        };
        let limits = budget::effective(&own, &policy.budget);
        if limits.is_empty() {
            return Admission::Admit;
        }
        let now = self.now_ms();
        let subject = People::subject(actor);
        let totals = |since| self.stores.usage.totals(&subject, since);
        let used = match (totals(budget::day_start_ms(now)), totals(budget::month_start_ms(now))) {
            (Ok(day), Ok(month)) => BudgetUse { day, month },
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "can't read usage; the budget is not checked for this turn");
                return Admission::Admit;
            }
        };
        match budget::evaluate(&limits, &used, now) {
            BudgetState::Fine => Admission::Admit,
            BudgetState::Warn { period, percent, period_start_ms } => {
                let key = format!("{}:{}:{period_start_ms}", People::audit_actor(actor), period.adjective());
                match self.stores.usage.first_notice(&key) {
                    Ok(true) => Admission::AdmitWithNotice(format!(
                        "Heads-up: you have used {percent} % of your {} budget.",
                        period.adjective()
                    )),
                    _ => Admission::Admit,
                }
            }
            BudgetState::Exhausted { period, what, resets_at_ms } => {
                let resets = crate::clock::rfc3339(crate::clock::from_unix_millis(resets_at_ms));
                let resets = resets.get(..16).map(|minutes| minutes.replace('T', " ")).unwrap_or(resets);
                let message = format!(
                    "Your {} budget ({what}) is used up, so I can't answer until it resets at {resets} UTC.",
                    period.adjective()
                );
                self.audit(
                    AuditKind::BudgetRefusal,
                    actor,
                    &actor.context,
                    false,
                    json!({"period": period.adjective(), "what": what, "resets_at_ms": resets_at_ms}),
                );
                Admission::Refuse(message)
            }
        }
    }

    /// Accounts one model call made for `actor`.
    pub fn record_usage(&self, actor: &Actor, session_key: &str, agent: &str, model: &str, usage: &Usage) {
        let tokens = TokenSplit::of(usage);
        let (provider, model_name) = model.split_once('/').unwrap_or(("", model));
        let record = UsageRecord {
            at_ms: self.now_ms(),
            user: actor.user.clone(),
            context: actor.context.clone(),
            session_key: session_key.to_owned(),
            agent: agent.to_owned(),
            provider: provider.to_owned(),
            model: model_name.to_owned(),
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cache_read_tokens: tokens.cache_read,
            cache_write_tokens: tokens.cache_write,
            cost: self.settings.prices.cost(model, &tokens),
        };
        if let Err(error) = self.stores.usage.record(&record) {
            tracing::warn!(%error, "can't record a model call's usage");
        }
    }

    /// Appends to the audit trail, with secrets in `detail` redacted. A failure is logged:
    /// the audit never stops the assistant.
    pub fn audit(&self, kind: AuditKind, actor: &Actor, subject: &str, ok: bool, detail: Value) {
        self.audit_as(kind, &People::audit_actor(actor), subject, ok, detail);
    }

    /// [`People::audit`] by someone named in words (`cli`, `system`, an address).
    pub fn audit_as(&self, kind: AuditKind, actor: &str, subject: &str, ok: bool, detail: Value) {
        let (detail, _) = self.leaks.redact(&detail.to_string());
        let event =
            AuditEvent { at_ms: self.now_ms(), kind, actor: actor.to_owned(), subject: subject.to_owned(), ok, detail };
        if let Err(error) = self.stores.audit.append(event) {
            tracing::error!(%error, "can't write the audit trail");
        }
    }

    /// Whether `tool` (which `changes` something or not) may run for `actor` with
    /// `arguments`: refused by their role, run at once, or held until an admin decides
    /// (`waiting` hears the note for the person first). `Err` is the refusal for the model.
    #[allow(clippy::too_many_arguments)]
    pub async fn authorize(
        &self,
        actor: &Actor,
        session_key: &str,
        tool: &str,
        changes: bool,
        arguments: &Value,
        waiting: &(dyn Fn(&str) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let refusal = self.policy(actor).refuses_tool(tool).or_else(|| self.refuses_agent(actor, tool, arguments));
        if let Some(refusal) = refusal {
            self.audit(
                AuditKind::ToolCall,
                actor,
                tool,
                false,
                json!({"arguments": arguments, "refused": refusal, "session": session_key}),
            );
            return Err(format!("Refused by policy: {refusal}. Tell the person you can't do this for them."));
        }
        let Some(rule) = self.settings.rules.rule_for(&actor.role, tool, changes, arguments) else {
            return Ok(());
        };
        let admins = self.admins();
        let others: Vec<User> =
            admins.iter().filter(|admin| actor.user.as_deref() != Some(admin.id.as_str())).cloned().collect();
        if actor.is_admin() && others.is_empty() {
            // A sole admin never waits for themself.
            return Ok(());
        }
        self.hold(actor, session_key, tool, arguments, rule, &others, waiting, cancel).await
    }

    /// Why handing work to an agent role is refused for `actor` (the role's `agents`).
    fn refuses_agent(&self, actor: &Actor, tool: &str, arguments: &Value) -> Option<String> {
        let field = match tool {
            crate::delegation::roles::DELEGATE => "agent",
            crate::delegation::roles::SPAWN => "profile",
            _ => return None,
        };
        let agent = arguments.get(field).and_then(Value::as_str)?;
        (!self.policy(actor).allows_agent(agent))
            .then(|| format!("the people's role `{}` may not hand work to the agent role `{agent}`", actor.role))
    }

    /// Tells `actor` `text` through the notifier when the turn's own events don't reach
    /// them: the call runs in a worker's session, not the one they talk in.
    pub fn tell_elsewhere(&self, actor: &Actor, session_key: &str, text: &str) {
        if let Some(session) = &actor.session
            && session != session_key
            && let Some(notifier) = self.notifier()
        {
            notifier.tell(actor, session, text);
        }
    }

    fn admins(&self) -> Vec<User> {
        match self.stores.directory.users() {
            Ok(users) => users.into_iter().filter(|user| user.role == ADMIN && !user.disabled).collect(),
            Err(error) => {
                tracing::warn!(%error, "can't read the users");
                Vec::new()
            }
        }
    }

    fn new_id(&self) -> String {
        let mut random = lock(&self.random);
        (0..6).map(|_| char::from(ID_ALPHABET[random.below(ID_ALPHABET.len() as u64) as usize])).collect()
    }

    #[allow(clippy::too_many_arguments)]
    async fn hold(
        &self,
        actor: &Actor,
        session_key: &str,
        tool: &str,
        arguments: &Value,
        rule: String,
        admins: &[User],
        waiting: &(dyn Fn(&str) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let now = self.now_ms();
        let timeout = self.settings.approval_timeout;
        let request = ApprovalRequest {
            id: self.new_id(),
            created_ms: now,
            expires_ms: now + timeout.as_millis() as i64,
            actor: actor.clone(),
            session_key: session_key.to_owned(),
            tool: tool.to_owned(),
            arguments: arguments.to_string(),
            rule,
            status: ApprovalStatus::Pending,
            decided_ms: None,
        };
        if let Err(error) = self.stores.approvals.create(&request) {
            tracing::error!(%error, "can't store an approval request");
            return Err(format!("`{tool}` needs an admin's approval, and the request could not be stored ({error})"));
        }
        let (shown_arguments, _) = self.leaks.redact(&request.arguments);
        self.audit(
            AuditKind::ApprovalRequested,
            actor,
            tool,
            true,
            json!({"id": request.id, "arguments": arguments, "rule": request.rule, "session": session_key}),
        );
        if admins.is_empty() {
            tracing::warn!(id = %request.id, "an approval waits but there is no admin to ask");
        }
        if let Some(notifier) = self.notifier() {
            notifier.approval_requested(&ApprovalRequest { arguments: shown_arguments, ..request.clone() }, admins);
        }
        waiting(&format!(
            "⏳ `{tool}` needs an admin's approval (request {}); waiting up to {} min.",
            request.id,
            timeout.as_secs().div_ceil(60)
        ));
        let settled = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            settled = tokio::time::timeout(timeout, self.wait_for(&request.id)) => Some(settled.ok()),
        };
        match settled {
            None => {
                self.settle_quietly(&request.id, &ApprovalStatus::Abandoned);
                self.tell_hooks_decided(&request, &ApprovalStatus::Abandoned, "system");
                Err("cancelled by the user while it waited for an admin".into())
            }
            Some(None) => {
                self.settle_quietly(&request.id, &ApprovalStatus::Expired);
                let approve = self.settings.on_timeout == ApprovalTimeout::Approve;
                self.audit_as(
                    AuditKind::ApprovalDecided,
                    "system",
                    tool,
                    approve,
                    json!({"id": request.id, "status": "expired", "on_timeout": if approve { "approve" } else { "deny" }}),
                );
                if approve {
                    Ok(())
                } else {
                    Err(format!(
                        "No admin answered approval request {} in time, so `{tool}` was not run. Tell the person.",
                        request.id
                    ))
                }
            }
            Some(Some(ApprovalStatus::Approved { .. })) => Ok(()),
            Some(Some(ApprovalStatus::Denied { by, reason })) => Err(format!(
                "An admin ({by}) denied running `{tool}`{}. Do not try it another way; tell the person.",
                reason.map(|reason| format!(": {reason}")).unwrap_or_default()
            )),
            Some(Some(other)) => Err(format!("approval request {} ended as {}", request.id, other.name())),
        }
    }

    fn settle_quietly(&self, id: &str, status: &ApprovalStatus) {
        if let Err(error) = self.stores.approvals.settle(id, status, self.now_ms()) {
            tracing::warn!(%error, id, "can't settle an approval request");
        }
    }

    /// Waits until request `id` is no longer pending; its final status.
    async fn wait_for(&self, id: &str) -> ApprovalStatus {
        loop {
            let notified = self.decided.notified();
            match self.stores.approvals.get(id) {
                Ok(Some(request)) if request.status != ApprovalStatus::Pending => return request.status,
                Ok(None) => return ApprovalStatus::Abandoned,
                Ok(Some(_)) => {}
                Err(error) => tracing::warn!(%error, id, "can't read an approval request"),
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// `by` approves or denies request `id`. Admins only, never their own.
    pub fn decide(
        &self,
        id: &str,
        by: &Actor,
        approve: bool,
        reason: Option<String>,
    ) -> Result<ApprovalRequest, DecideError> {
        let refuse = |error: DecideError| {
            self.audit(AuditKind::ApprovalDecided, by, id, false, json!({"id": id, "refused": error.to_string()}));
            Err(error)
        };
        if !by.is_admin() {
            return refuse(DecideError::NotAdmin);
        }
        let Some(request) = self.stores.approvals.get(id)? else { return refuse(DecideError::Unknown(id.to_owned())) };
        if by.user.is_some() && request.actor.user == by.user {
            return refuse(DecideError::OwnRequest);
        }
        let decider = People::audit_actor(by);
        let status = if approve {
            ApprovalStatus::Approved { by: decider }
        } else {
            ApprovalStatus::Denied { by: decider, reason: reason.filter(|reason| !reason.trim().is_empty()) }
        };
        if !self.stores.approvals.settle(&request.id, &status, self.now_ms())? {
            let status =
                self.stores.approvals.get(id)?.map_or("gone".to_owned(), |request| request.status.name().into());
            return refuse(DecideError::Settled { id: request.id, status });
        }
        self.decided.notify_waiters();
        self.tell_hooks_decided(&request, &status, &People::audit_actor(by));
        self.audit(
            AuditKind::ApprovalDecided,
            by,
            &request.tool,
            approve,
            json!({"id": request.id, "status": status.name(), "requested_by": People::audit_actor(&request.actor)}),
        );
        Ok(ApprovalRequest { status, decided_ms: Some(self.now_ms()), ..request })
    }

    /// Ends the requests a previous run left pending (their turns are gone) and tells
    /// their people; returns them.
    pub fn abandon_pending(&self) -> Vec<ApprovalRequest> {
        let pending = match self.stores.approvals.pending() {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(%error, "can't read pending approvals");
                return Vec::new();
            }
        };
        let notifier = self.notifier();
        for request in &pending {
            self.settle_quietly(&request.id, &ApprovalStatus::Abandoned);
            self.tell_hooks_decided(request, &ApprovalStatus::Abandoned, "system");
            self.audit_as(
                AuditKind::ApprovalDecided,
                "system",
                &request.tool,
                false,
                json!({"id": request.id, "status": "abandoned", "why": "squidbot restarted while it waited"}),
            );
            if let Some(notifier) = &notifier {
                notifier.tell(
                    &request.actor,
                    &request.session_key,
                    &format!(
                        "squidbot restarted while your request {} (`{}`) waited for an admin, so it was not run. \
                         Ask again if you still need it.",
                        request.id, request.tool
                    ),
                );
            }
        }
        pending
    }
}

#[cfg(test)]
mod tests;
