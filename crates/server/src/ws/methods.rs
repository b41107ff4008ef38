//! The methods of the protocol as one typed [`Request`]: the `methods!` table below
//! declares every method once (its name, the access it needs, its params type and the
//! request it reads into), and the method list of `hello-ok`, the lookup by name, the
//! scope check and the dispatch all come from it. Each method returns its `res` payload,
//! or `None` when the final response comes later (an `agent` run answers when it ends).

use serde_json::{Map, Value, json};

use super::chat::{AbortParams, HistoryParams, RunParams};
use super::cron::{AddJobParams, CronRequest, Housekeeping, JobParams, JobView, UpdateJobParams};
use super::frame::{ErrorCode, MethodError};
use super::memory::{MemoryDeleteParams, MemoryListParams, MemoryRequest, MemorySaveParams, MemoryTextParams};
use super::params::{NoParams, ParamsError, decode};
use super::people::{ApprovalParams, ApprovalsListParams, AuditListParams, DenyParams, PeopleRequest, UsageParams};
use super::session_tree::{ExportParams, MoveParams, SearchParams, TreeParams, TreeRequest};
use super::sessions::{SessionGetParams, SessionParams};
use super::workers::{WorkerParams, WorkersListParams, WorkersRequest};
use super::{Access, Connection};
use crate::bus::{BusHealthParams, BusRequest, BusSendParams};
use crate::people::Caller;

/// The owner's main session, as OpenClaw names it.
pub const MAIN_SESSION: &str = "agent:main:main";

/// Declares the methods: each row is `Variant = "wire.name", Access, |params: Params|
/// request`. Generates [`Method`] (with its names, in this order, as advertised in
/// `hello-ok`) and the reading of a method's params into its [`Request`].
macro_rules! methods {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal, $access:ident, |$params:ident: $kind:ty| $request:expr;)*) => {
        /// A method of the protocol.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Method {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Method {
            /// Every method, in the order `hello-ok` lists them.
            #[cfg(test)]
            pub(crate) const ALL: &[Method] = &[$(Method::$variant,)*];

            /// The names `hello-ok` advertises, in the order of [`Method::ALL`].
            pub(crate) const NAMES: &[&str] = &[$($name,)*];

            /// The method's name on the wire.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Method::$variant => $name,)*
                }
            }

            /// The method named `name`, `None` for unknown names.
            pub(crate) fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(Method::$variant),)*
                    _ => None,
                }
            }

            /// What a connection needs to call the method.
            pub(crate) fn access(self) -> Access {
                match self {
                    $(Method::$variant => Access::$access,)*
                }
            }

            /// Reads `params` into the method's request.
            pub(crate) fn parse(self, params: Map<String, Value>) -> Result<Request, ParamsError> {
                match self {
                    $(Method::$variant => decode::<$kind>(params).map(|$params| $request),)*
                }
            }
        }
    };
}

methods! {
    /// `health`: the gateway's health report.
    Health = "health", Read, |_params: NoParams| Request::Health;
    /// `status`: versions, model, channels, usage and counts.
    Status = "status", Read, |_params: NoParams| Request::Status;
    /// `agent {message, sessionKey?, agentId?, idempotencyKey?}`: a turn answered twice.
    Agent = "agent", Write, |params: RunParams| Request::Agent(params);
    /// `chat.send {message, sessionKey?, agentId?, idempotencyKey?}`: a turn, acked at once.
    ChatSend = "chat.send", Write, |params: RunParams| Request::ChatSend(params);
    /// `chat.history {sessionKey?, agentId?, limit?}`.
    ChatHistory = "chat.history", Read, |params: HistoryParams| Request::ChatHistory(params);
    /// `chat.abort {sessionKey?, agentId?, runId?}`.
    ChatAbort = "chat.abort", Write, |params: AbortParams| Request::ChatAbort(params);
    /// `sessions.list`.
    SessionsList = "sessions.list", Read, |_params: NoParams| Request::SessionsList;
    /// `sessions.get {key? | sessionKey?, agentId?}`: a session's entry tree.
    SessionsGet = "sessions.get", Read, |params: SessionGetParams| Request::SessionsGet(params);
    /// `sessions.subscribe {sessionKey?, agentId?}`.
    SessionsSubscribe = "sessions.subscribe", Read, |params: SessionParams| Request::SessionsSubscribe(params);
    /// `sessions.reset {sessionKey?, agentId?}`.
    SessionsReset = "sessions.reset", Write, |params: SessionParams| Request::SessionsReset(params);
    /// `sessions.tree {key? | sessionKey?, agentId?}`: the tree's rows, active branch and leaf.
    SessionsTree = "sessions.tree", Read, |params: TreeParams| Request::SessionTree(TreeRequest::Tree(params));
    /// `sessions.fork {key? | sessionKey?, entryId, as?}`: continue from an entry (or copy up to it).
    SessionsFork = "sessions.fork", Write, |params: MoveParams| Request::SessionTree(TreeRequest::Fork(params));
    /// `sessions.switch {key? | sessionKey?, entryId}`: make the branch through an entry active.
    SessionsSwitch = "sessions.switch", Write, |params: MoveParams| Request::SessionTree(TreeRequest::Switch(params));
    /// `sessions.export {key? | sessionKey?, format, active?}`: Markdown or HTML text.
    SessionsExport = "sessions.export", Read, |params: ExportParams| Request::SessionTree(TreeRequest::Export(params));
    /// `sessions.search {query, limit?}`: full-text search of the caller's sessions.
    SessionsSearch = "sessions.search", Read, |params: SearchParams| Request::SessionTree(TreeRequest::Search(params));
    /// `cron.list`.
    CronList = "cron.list", Read, |_params: NoParams| Request::Cron(CronRequest::List);
    /// `cron.get {id | jobId}`.
    CronGet = "cron.get", Read, |params: JobParams| Request::Cron(CronRequest::Get(params));
    /// `cron.status`.
    CronStatus = "cron.status", Read, |_params: NoParams| Request::Cron(CronRequest::Status);
    /// `cron.add {name, schedule, message, channel?, tz?}`.
    CronAdd = "cron.add", Write, |params: AddJobParams| Request::Cron(CronRequest::Add(params));
    /// `cron.remove {id | jobId}`.
    CronRemove = "cron.remove", Write, |params: JobParams| Request::Cron(CronRequest::Remove(params));
    /// `cron.pause {id | jobId}`.
    CronPause = "cron.pause", Write, |params: JobParams| Request::Cron(CronRequest::Pause(params));
    /// `cron.resume {id | jobId}`.
    CronResume = "cron.resume", Write, |params: JobParams| Request::Cron(CronRequest::Resume(params));
    /// `cron.update {id | jobId, enabled | patch: {enabled}}`.
    CronUpdate = "cron.update", Write, |params: UpdateJobParams| Request::Cron(CronRequest::Update(params));
    /// `cron.run {id | jobId}`.
    CronRun = "cron.run", Write, |params: JobParams| Request::Cron(CronRequest::Run(params));
    /// `config.get`: the configuration, secrets redacted (admins only when people are on).
    ConfigGet = "config.get", Admin, |_params: NoParams| Request::ConfigGet;
    /// `models.list`.
    ModelsList = "models.list", Read, |_params: NoParams| Request::ModelsList;
    /// `agents.list`.
    AgentsList = "agents.list", Read, |_params: NoParams| Request::AgentsList;
    /// `skills.list`.
    SkillsList = "skills.list", Read, |_params: NoParams| Request::SkillsList;
    /// `memory.list {limit?, query?}`.
    MemoryList = "memory.list", Read, |params: MemoryListParams| Request::Memory(MemoryRequest::List(params));
    /// `memory.save {content, type?, importance?}`.
    MemorySave = "memory.save", Write, |params: MemorySaveParams| Request::Memory(MemoryRequest::Save(params));
    /// `memory.delete {id}`.
    MemoryDelete = "memory.delete", Write, |params: MemoryDeleteParams| Request::Memory(MemoryRequest::Delete(params));
    /// `memory.doc.get`: memory.md.
    MemoryDocGet = "memory.doc.get", Read, |_params: NoParams| Request::Memory(MemoryRequest::DocumentGet);
    /// `memory.doc.set {text}`: replaces memory.md.
    MemoryDocSet = "memory.doc.set", Write, |params: MemoryTextParams| Request::Memory(MemoryRequest::DocumentSet(params));
    /// `workers.list {sessionKey?}`.
    WorkersList = "workers.list", Read, |params: WorkersListParams| Request::Workers(WorkersRequest::List(params));
    /// `workers.cancel {id}`.
    WorkersCancel = "workers.cancel", Write, |params: WorkerParams| Request::Workers(WorkersRequest::Cancel(params));
    /// `bus.send {target, message?, priority?, from?, correlationId?, sessionKey?}`.
    BusSend = "bus.send", Write, |params: BusSendParams| Request::Bus(BusRequest::Send(params));
    /// `bus.health {target}`.
    BusHealth = "bus.health", Read, |params: BusHealthParams| Request::Bus(BusRequest::Health(params));
    /// `users.list`: the users, their roles, contexts, identities and tokens (admins).
    UsersList = "users.list", Admin, |_params: NoParams| Request::People(PeopleRequest::UsersList);
    /// `approvals.list {all?}`: the requests waiting for an admin.
    ApprovalsList = "approvals.list", Admin, |params: ApprovalsListParams| Request::People(PeopleRequest::ApprovalsList(params));
    /// `approvals.approve {id}`.
    ApprovalsApprove = "approvals.approve", Admin, |params: ApprovalParams| Request::People(PeopleRequest::Approve(params));
    /// `approvals.deny {id, reason?}`.
    ApprovalsDeny = "approvals.deny", Admin, |params: DenyParams| Request::People(PeopleRequest::Deny(params));
    /// `usage.get {since?, by?, user?}`: everyone's for admins, one's own for the rest.
    UsageGet = "usage.get", Read, |params: UsageParams| Request::People(PeopleRequest::Usage(params));
    /// `audit.list {user?, since?, limit?}`: the newest audit rows (admins).
    AuditList = "audit.list", Admin, |params: AuditListParams| Request::People(PeopleRequest::AuditList(params));
    /// `audit.verify`: checks the audit chain (admins).
    AuditVerify = "audit.verify", Admin, |_params: NoParams| Request::People(PeopleRequest::AuditVerify);
}

/// Names advertised in `hello-ok`.
pub const NAMES: &[&str] = Method::NAMES;

/// A request with its params read, as [`Method::parse`] makes it; the families with a
/// module of their own nest their requests. The methods are documented on [`Method`].
#[derive(Debug)]
pub(crate) enum Request {
    /// `health`.
    Health,
    /// `status`.
    Status,
    /// `agent`.
    Agent(RunParams),
    /// `chat.send`.
    ChatSend(RunParams),
    /// `chat.history`.
    ChatHistory(HistoryParams),
    /// `chat.abort`.
    ChatAbort(AbortParams),
    /// `sessions.list`.
    SessionsList,
    /// `sessions.get`.
    SessionsGet(SessionGetParams),
    /// `sessions.subscribe`.
    SessionsSubscribe(SessionParams),
    /// `sessions.reset`.
    SessionsReset(SessionParams),
    /// `sessions.tree`, `.fork`, `.switch`, `.export`, `.search`.
    SessionTree(TreeRequest),
    /// `cron.*`.
    Cron(CronRequest),
    /// `config.get`.
    ConfigGet,
    /// `models.list`.
    ModelsList,
    /// `agents.list`.
    AgentsList,
    /// `skills.list`.
    SkillsList,
    /// `memory.*`.
    Memory(MemoryRequest),
    /// `workers.*`.
    Workers(WorkersRequest),
    /// `bus.*`.
    Bus(BusRequest),
    /// `users.*`, `approvals.*`, `usage.get`, `audit.*`.
    People(PeopleRequest),
}

/// Why a request was refused before its method ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    /// No method has this name.
    #[error("unknown method `{0}`")]
    UnknownMethod(String),
    /// The connection was not granted what the method needs: `operator.write`, or
    /// `operator.admin` as an admin.
    #[error("`{}` needs the {} scope{}", .0.name(), scope_name(*.1), if *.1 == Access::Admin { " (as an admin)" } else { "" })]
    MissingScope(Method, Access),
    /// The params don't fit the method.
    #[error(transparent)]
    Params(#[from] ParamsError),
}

impl From<RequestError> for MethodError {
    fn from(error: RequestError) -> Self {
        match &error {
            RequestError::UnknownMethod(method) => MethodError::invalid(error.to_string())
                .with_details(json!({"code": "UNKNOWN_METHOD", "method": method})),
            RequestError::MissingScope(_, needed) => MethodError::new(ErrorCode::Forbidden, error.to_string())
                .with_details(json!({"code": "MISSING_SCOPE", "scope": scope_name(*needed)})),
            RequestError::Params(error) => MethodError::from(error.clone()),
        }
    }
}

/// The scope that gives `access`.
fn scope_name(access: Access) -> &'static str {
    match access {
        Access::Read => crate::people::READ_SCOPE,
        Access::Write => crate::people::WRITE_SCOPE,
        Access::Admin => crate::people::ADMIN_SCOPE,
    }
}

/// What `method` needs, `None` for unknown methods.
#[cfg(test)]
pub(super) fn access(method: &str) -> Option<Access> {
    Method::from_name(method).map(Method::access)
}

/// Reads the request `method` with `params` for a connection with `granted` access: the
/// method must exist and be allowed, the feature it belongs to must be on (a client learns
/// that first, whatever it sent), and its params must fit. Without people every client is
/// the owner and an admin method needs no more than reading, as `config.get` always did
/// (and still does for the owner's own token, `owner`).
pub(super) fn read(
    gateway: &crate::Gateway,
    method: &str,
    granted: Access,
    owner: bool,
    params: Map<String, Value>,
) -> Result<(Method, Request), MethodError> {
    let method = Method::from_name(method).ok_or_else(|| RequestError::UnknownMethod(method.to_owned()))?;
    let needed = match method.access() {
        Access::Admin if gateway.people().is_none() => Access::Read,
        // The owner's own token reads the configuration as it always could; people need
        // an admin's scope.
        Access::Admin if owner && method == Method::ConfigGet => Access::Read,
        needed => needed,
    };
    if granted < needed {
        return Err(RequestError::MissingScope(method, needed).into());
    }
    if let Some(error) = unavailable(gateway, method) {
        return Err(error);
    }
    Ok((method, method.parse(params).map_err(RequestError::from)?))
}

/// Why `method` can't run on this gateway: the feature it belongs to is off.
fn unavailable(gateway: &crate::Gateway, method: Method) -> Option<MethodError> {
    let services = &gateway.services;
    match method {
        Method::CronList
        | Method::CronGet
        | Method::CronStatus
        | Method::CronAdd
        | Method::CronRemove
        | Method::CronPause
        | Method::CronResume
        | Method::CronUpdate
        | Method::CronRun => super::cron::jobs(services.jobs.as_ref(), method.name()).err(),
        Method::MemoryList | Method::MemorySave | Method::MemoryDelete => super::memory::memories(gateway).err(),
        Method::MemoryDocGet | Method::MemoryDocSet => super::memory::documents(gateway).err(),
        Method::WorkersList | Method::WorkersCancel => super::workers::delegation(gateway).err(),
        Method::BusSend | Method::BusHealth => crate::bus::bus(gateway).err(),
        Method::SessionsSearch => super::session_tree::search_available(gateway).err(),
        Method::UsersList
        | Method::ApprovalsList
        | Method::ApprovalsApprove
        | Method::ApprovalsDeny
        | Method::UsageGet
        | Method::AuditList
        | Method::AuditVerify => super::people::people(gateway).err(),
        Method::Health
        | Method::Status
        | Method::Agent
        | Method::ChatSend
        | Method::ChatHistory
        | Method::ChatAbort
        | Method::SessionsList
        | Method::SessionsGet
        | Method::SessionsSubscribe
        | Method::SessionsReset
        | Method::SessionsTree
        | Method::SessionsFork
        | Method::SessionsSwitch
        | Method::SessionsExport
        | Method::ConfigGet
        | Method::ModelsList
        | Method::AgentsList
        | Method::SkillsList => None,
    }
}

/// Runs the request; `None` when the response is sent later.
pub(super) async fn call(
    connection: &mut Connection,
    id: &str,
    method: Method,
    request: Request,
) -> Option<Result<Value, MethodError>> {
    let gateway = connection.gateway.clone();
    let result = match request {
        Request::Health => Ok(crate::health::report(&gateway).await),
        Request::Status => Ok(status(connection).await),
        Request::Agent(params) => return super::chat::agent(connection, id, params).await,
        Request::ChatSend(params) => super::chat::send(connection, params).await,
        Request::ChatAbort(params) => super::chat::abort(connection, params).await,
        Request::ChatHistory(params) => super::chat::history(connection, params).await,
        Request::SessionsList => super::sessions::list(connection).await,
        Request::SessionsGet(params) => super::sessions::get(connection, params).await,
        Request::SessionsSubscribe(params) => super::sessions::subscribe(connection, params).await,
        Request::SessionsReset(params) => super::sessions::reset(connection, params).await,
        Request::SessionTree(request) => super::session_tree::call(connection, request).await,
        Request::Cron(request) => match super::cron::jobs(gateway.services.jobs.as_ref(), method.name()) {
            Ok(jobs) => cron(&gateway, &connection.caller, jobs, request).await,
            Err(error) => Err(error),
        },
        Request::ConfigGet => {
            let mut config = serde_json::to_value(&gateway.services.config).unwrap_or_else(|error| {
                tracing::warn!(%error, "can't serialize the configuration for config.get; answering null");
                Value::Null
            });
            crate::redact::urls_in(&mut config);
            crate::redact::mcp_environment_in(&mut config);
            Ok(json!({"config": config}))
        }
        Request::ModelsList => {
            Ok(json!({"models": gateway.models.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()}))
        }
        Request::AgentsList => {
            Ok(json!({"defaultId": "main", "agents": [{"id": "main", "name": "squidbot", "default": true}]}))
        }
        Request::SkillsList => {
            let skills = gateway.services.skills.as_ref().map(|list| list()).unwrap_or_default();
            Ok(json!({"skills": skills}))
        }
        Request::Memory(request) => super::memory::call(&gateway, &connection.caller, request).await,
        Request::Bus(request) => match connection.caller.person() {
            // The bus's `assistant` runs turns as the owner: not a door for people.
            Some(actor) if !actor.is_admin() => {
                Err(MethodError::new(ErrorCode::Forbidden, format!("`{}` is for admins only", method.name())))
            }
            _ => crate::bus::call(&gateway, request).await,
        },
        Request::People(request) => super::people::call(connection, request).await,
        Request::Workers(request) => super::workers::call(&gateway, &connection.caller, request).await,
    };
    Some(result)
}

/// Runs a `cron.*` request: the owner's clients see the owner's jobs and housekeeping, a
/// person's only the jobs of their context, changed only when their role may.
async fn cron(
    gateway: &crate::Gateway,
    caller: &Caller,
    jobs: &crate::JobServices,
    request: CronRequest,
) -> Result<Value, MethodError> {
    let Some(actor) = caller.person() else { return super::cron::run(&JobView::owner(jobs), request).await };
    if request.changes()
        && let Some(people) = gateway.people()
        && !people.policy(actor).schedule
    {
        return Err(MethodError::new(
            ErrorCode::Forbidden,
            format!("your role ({}) may not change scheduled jobs", actor.role),
        ));
    }
    let view = JobView { services: jobs, context: &actor.context, housekeeping: Housekeeping::Hidden };
    super::cron::run(&view, request).await
}

/// `status`. A person's shows their own memory, workers and usage (from the ledger).
async fn status(connection: &Connection) -> Value {
    let gateway = &connection.gateway;
    let gauges = gateway.gauges();
    let person = connection.caller.person();
    let context = person.map_or(gateway.services.memory_context.as_str(), |actor| actor.context.as_str());
    let memory = match &gateway.services.memories {
        Some(memories) => {
            let count = memories.stats(context).await.map(|stats| stats.memories).unwrap_or(0);
            json!({"mode": memories.mode().describe(), "count": count})
        }
        None => json!({"mode": "disabled", "count": 0}),
    };
    let (usage, mine) = match person {
        None => {
            let (turns, input, output) = gateway.metrics.usage_totals();
            (json!({"turns": turns, "inputTokens": input, "outputTokens": output}), None)
        }
        Some(actor) => {
            let mine = crate::people::session_keys_in(&gateway.runner, &actor.context)
                .await
                .inspect_err(|error| tracing::warn!(%error, "can't list a person's sessions for status"))
                .unwrap_or_default();
            (own_usage(gateway, actor), Some(mine))
        }
    };
    let mut status = json!({
        "runtimeVersion": env!("CARGO_PKG_VERSION"),
        "version": env!("CARGO_PKG_VERSION"),
        "uptimeMs": gauges.uptime.as_millis() as u64,
        "model": gateway.runner.agent().settings().model,
        "providers": providers_json(gateway),
        "channels": crate::channels::views(gateway).iter().map(crate::channels::channel_json).collect::<Vec<_>>(),
        "channelSummary": crate::channels::views(gateway)
            .iter()
            .map(|channel| format!("{} ({}): {}", channel.name, channel.kind, channel.state.describe()))
            .collect::<Vec<_>>(),
        "usage": usage,
        "sessionsOpen": gauges.open_sessions,
        "workers": super::workers::summary(gateway, mine.as_ref()),
        "activeRuns": gauges.active_runs,
        "wsConnections": gauges.ws_connections,
        "memory": memory,
        "heartbeat": {"defaultAgentId": "main", "agents": []},
        "sessions": {"count": gauges.open_sessions, "defaults": {"model": gateway.runner.agent().settings().model}},
    });
    if let Some(actor) = person {
        status["user"] = person_json(actor);
    }
    crate::redact::urls_in(&mut status);
    status
}

/// The configured providers with their last model call (`lastCall: null` before one).
fn providers_json(gateway: &crate::Gateway) -> Vec<Value> {
    gateway
        .services
        .providers
        .iter()
        .map(|provider| {
            let mut shown = serde_json::to_value(provider).unwrap_or_else(|_| json!({"name": provider.name}));
            shown["lastCall"] = match gateway.metrics.last_call(&provider.name) {
                Some(call) => json!({"ok": call.ok, "at": call.at_ms}),
                None => Value::Null,
            };
            shown
        })
        .collect()
}

/// A person as `hello-ok` and `status` show them.
pub(super) fn person_json(actor: &squidbot_types::people::Actor) -> Value {
    json!({"id": actor.user, "name": actor.name, "role": actor.role, "context": actor.context})
}

/// A person's own model calls and tokens, from the usage ledger.
fn own_usage(gateway: &crate::Gateway, actor: &squidbot_types::people::Actor) -> Value {
    let (Some(people), Some(user)) = (gateway.people(), actor.user.as_ref()) else { return json!({}) };
    let subject = squidbot_core::people::UsageSubject::User(user.clone());
    match people.stores().usage.totals(&subject, 0) {
        Ok(totals) => json!({
            "modelCalls": totals.calls, "inputTokens": totals.input_tokens, "outputTokens": totals.output_tokens,
            "cost": totals.cost,
        }),
        Err(error) => {
            tracing::warn!(%error, "can't read a person's usage for status");
            json!({})
        }
    }
}

#[cfg(test)]
mod tests;
