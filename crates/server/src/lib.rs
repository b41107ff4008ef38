//! The gateway server: one port for the OpenClaw WebSocket protocol, the OpenAI-compatible
//! API, the web UI, health and metrics, served by [`run`] over a shared [`Gateway`]. Every
//! turn runs through one [`Runner`], whose event stream all of them read.

#[cfg(test)]
mod attacks;
mod auth;
mod bus;
mod channels;
mod guard;
mod health;
mod limiter;
mod metrics;
mod openai;
mod people;
mod redact;
pub mod tls;
mod ui;
mod uploads;
pub mod ws;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use squidbot_core::delegation::Delegator;
use squidbot_core::jobs::DynJobStore;
use squidbot_core::memory::{Memories, MemoryDocuments};
use squidbot_core::people::tokens::TOKEN_PREFIX;
use squidbot_core::people::{People, PeopleStoreError};
use squidbot_core::runs::Runner;
use squidbot_core::scheduler::JobControl;
use squidbot_types::config::Config;
use squidbot_types::people::Actor;
use squidbot_types::skill::SkillSummary;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use people::{Caller, Door, LoginOutcome, TokenLookup};

pub use auth::Auth;
pub use bus::AssistantRoute;
pub use channels::{ChannelLister, ChannelServices};
pub use ws::methods::MAIN_SESSION;

/// What the gateway can show and change besides running turns. Everything is optional so
/// a bare gateway (tests, benchmarks) needs only a runner.
#[derive(Default)]
pub struct Services {
    /// Long-term memory, for the memory methods and panel.
    pub memories: Option<Arc<Memories>>,
    /// memory.md documents.
    pub documents: Option<Arc<dyn MemoryDocuments>>,
    /// The context whose memory the owner's clients see.
    pub memory_context: String,
    /// Largest memory.md in characters.
    pub document_cap: usize,
    /// Configured providers, as shown by `status` and `/health`.
    pub providers: Vec<ProviderSummary>,
    /// The configuration, for `config.get` (its secrets redact themselves when it is
    /// serialized); `None` shows as `null`.
    pub config: Option<Config>,
    /// Lists the skills with their availability, for `skills.list` (re-read each call).
    pub skills: Option<SkillLister>,
    /// The agent bus: the assistant registers as its `assistant` route while the gateway
    /// runs, and trigger files of live targets are delivered every second.
    pub bus: Option<Arc<squidbot_bus::Bus>>,
    /// The scheduler's jobs, for the `cron.*` methods and the Cron panel; `None` when the
    /// scheduler is off (`scheduler.enabled = false`).
    pub jobs: Option<JobServices>,
    /// The chat channels, for `status`, `/health`, `/metrics` and `POST /webhook/<name>`.
    pub channels: Option<ChannelServices>,
    /// The people's policy: people's own gateway tokens, their scopes and sessions, the
    /// `users.*`, `approvals.*`, `usage.get` and `audit.*` methods. `None` takes the
    /// runner's agent's (when it has one); with neither every client is the owner.
    pub people: Option<Arc<People>>,
    /// The audit trail's key, for `audit.verify` (`UNAVAILABLE` without it).
    pub audit_key: Option<Vec<u8>>,
    /// When a user's gateway token was made (`None`: they have none), for `users.list`
    /// (the directory port does not say).
    pub token_issued: Option<TokenIssued>,
    /// Full-text search over the transcripts, for `sessions.search` (`UNAVAILABLE`
    /// without it).
    pub session_search: Option<Arc<dyn squidbot_core::store::search::DynSessionSearch>>,
    /// Where files sent with `chat.send` and image parts of `/v1/chat/completions` are
    /// kept (the session's files directory); without it such uploads are refused.
    pub attachments: Option<Arc<dyn squidbot_core::attachments::AttachmentStore>>,
}

/// When user `id`'s gateway token was made (ms since the Unix epoch), `None` without one.
pub type TokenIssued = Arc<dyn Fn(&str) -> Result<Option<i64>, PeopleStoreError> + Send + Sync>;

/// One configured LLM provider as `status` and `/health` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProviderSummary {
    /// The provider's name as used in model ids.
    pub name: String,
    /// Its wire protocol, as the router names it.
    pub kind: String,
    /// The base URL its requests go to (shown with any credentials in it redacted).
    #[serde(serialize_with = "redact::serialize_url")]
    pub api_base: String,
    /// Whether images are sent to its models.
    pub vision: bool,
}

/// What the `cron.*` methods work with.
pub struct JobServices {
    /// Where jobs are kept; the methods read and change it directly, so they work the same
    /// whether or not a scheduler runs in this process.
    pub store: Arc<dyn DynJobStore>,
    /// The running scheduler, told about every change (`wake`) and asked for `cron.run`;
    /// `None` when jobs are stored but nothing runs them here.
    pub control: Option<Arc<dyn JobControl>>,
    /// The context whose jobs the owner's clients see and add. Other users' jobs read as
    /// missing; squidbot's own system jobs are shown too, whatever their context.
    pub owner_context: String,
    /// IANA zone of jobs added without one (`scheduler.timezone`, resolved).
    pub default_zone: String,
}

/// Lists the skills (`skills.list`).
pub type SkillLister = Arc<dyn Fn() -> Vec<SkillSummary> + Send + Sync>;

/// Everything the handlers share.
pub struct Gateway {
    runner: Arc<Runner>,
    auth: Auth,
    models: Vec<String>,
    services: Services,
    started: Instant,
    metrics: metrics::Metrics,
    limiter: limiter::FailureLimiter,
    /// `[gateway]`'s allowed hosts and origins and whether `/metrics` is open.
    doors: guard::Doors,
    ws_open: AtomicUsize,
    shutdown: CancellationToken,
    connections: tokio_util::task::TaskTracker,
    /// The assistant's sub-agents, taken once from the runner's agent.
    delegation: Option<Arc<Delegator>>,
    /// The people's policy ([`Services::people`], else the agent's).
    people: Option<Arc<People>>,
}

/// Why a request was not let in.
pub(crate) enum Refusal {
    /// No or a wrong token.
    Unauthorized,
    /// Too many failures from this peer; try again after the delay.
    LockedOut(Duration),
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Gateway").field("models", &self.models).finish()
    }
}

impl Gateway {
    /// A gateway running turns with `runner`; `models` are listed by `GET /v1/models`.
    pub fn new(runner: Arc<Runner>, auth: Auth, models: Vec<String>, services: Services) -> Arc<Self> {
        let delegation = runner.delegation().cloned();
        let people = services.people.clone().or_else(|| runner.agent().people().cloned());
        let doors = guard::Doors::from_config(services.config.as_ref().map(|config| &config.gateway));
        let gateway = Arc::new(Self {
            runner,
            auth,
            models,
            services,
            started: Instant::now(),
            metrics: metrics::Metrics::default(),
            limiter: limiter::FailureLimiter::default(),
            doors,
            ws_open: AtomicUsize::new(0),
            shutdown: CancellationToken::new(),
            connections: tokio_util::task::TaskTracker::new(),
            delegation,
            people,
        });
        if let Some(delegation) = gateway.delegation() {
            delegation.observe(Arc::new(metrics::WorkerMetrics(Arc::downgrade(&gateway))));
        }
        gateway
    }

    /// The assistant's sub-agents, when it has any.
    pub fn delegation(&self) -> Option<&Arc<Delegator>> {
        self.delegation.as_ref()
    }

    /// The runner all front ends share.
    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    /// The people's policy, when people are on.
    pub(crate) fn people(&self) -> Option<&Arc<People>> {
        self.people.as_ref()
    }

    /// Checks the request's credentials: a person's token acts as them, the gateway's own
    /// credentials as the owner. Right credentials always pass; failures are counted per
    /// address, and failing attempts answered ever slower, then refused (see [`limiter`]).
    /// Password checks run off the async workers.
    pub(crate) async fn authorize(&self, headers: &HeaderMap, peer: IpAddr, door: Door) -> Result<Caller, Refusal> {
        if let Some(presented) = auth::bearer(headers)
            && let Some(verdict) = self.person_login(presented, peer, door).await
        {
            return verdict;
        }
        let ok = self.auth.allows_async(headers).await;
        self.verdict(peer, ok, door).await
    }

    /// Like [`Gateway::authorize`] for the credentials of a protocol `connect`; a person's
    /// token may come in either field.
    pub(crate) async fn authorize_connect(
        &self,
        peer: IpAddr,
        token: Option<&str>,
        password: Option<&str>,
    ) -> Result<Caller, Refusal> {
        let personal = [token, password].into_iter().flatten().find(|given| given.starts_with(TOKEN_PREFIX));
        if let Some(presented) = personal
            && let Some(verdict) = self.person_login(presented, peer, Door::WebSocket).await
        {
            return verdict;
        }
        let ok = match &self.auth {
            Auth::None => true,
            Auth::Token(_) => token.is_some_and(|token| self.auth.check_token(token)),
            Auth::Password(_) => match password {
                Some(password) => self.auth.check_secret_async(password.to_owned()).await,
                None => false,
            },
        };
        self.verdict(peer, ok, Door::WebSocket).await
    }

    /// The verdict on a presented person's token, `None` when it is not one (no people
    /// policy, no `sqb_` prefix) and the gateway's own credentials decide. An unknown
    /// `sqb_` token is refused unless it is the gateway's own secret.
    async fn person_login(&self, presented: &str, peer: IpAddr, door: Door) -> Option<Result<Caller, Refusal>> {
        let people = self.people.as_deref()?;
        let outcome = people::lookup(Some(people), presented);
        Some(match outcome {
            TokenLookup::NotPersonal => return None,
            TokenLookup::Person(user) => {
                people::audit_login(people, peer, door, &LoginOutcome::Person(&user));
                Ok(Caller::Person(Actor::of(&user)))
            }
            TokenLookup::Disabled(user) => {
                people::audit_login(people, peer, door, &LoginOutcome::Disabled(&user));
                Err(self.refuse(peer, door).await)
            }
            TokenLookup::Unknown => {
                if self.auth.check_secret_async(presented.to_owned()).await {
                    return Some(self.verdict(peer, true, door).await);
                }
                people::audit_login(people, peer, door, &LoginOutcome::UnknownToken);
                Err(self.refuse(peer, door).await)
            }
        })
    }

    /// The verdict on the gateway's own credentials. With people on, a WebSocket login
    /// and every failure are audited (the owner's HTTP requests are not: a scraper would
    /// fill the trail).
    async fn verdict(&self, peer: IpAddr, ok: bool, door: Door) -> Result<Caller, Refusal> {
        if let Some(people) = &self.people {
            match (ok, door) {
                (true, Door::WebSocket) => people::audit_login(people, peer, door, &LoginOutcome::Owner),
                (true, Door::Http(_)) => {}
                (false, _) => people::audit_login(people, peer, door, &LoginOutcome::WrongCredentials),
            }
        }
        if ok { Ok(Caller::Owner) } else { Err(self.refuse(peer, door).await) }
    }

    /// Counts and logs a failed attempt of `peer` (never what it presented) and answers it
    /// after the limiter's delay, or as rate limited once the address failed too often.
    async fn refuse(&self, peer: IpAddr, door: Door) -> Refusal {
        let (failures, penalty) = self.limiter.record_failure(peer, Instant::now());
        self.metrics.error("auth");
        let door = door.name();
        match penalty {
            limiter::Penalty::Delay(delay) => {
                tracing::warn!(%peer, door, failures, "refused a client with missing or wrong credentials");
                tokio::time::sleep(delay).await;
                Refusal::Unauthorized
            }
            limiter::Penalty::Refuse(wait) => {
                tracing::warn!(%peer, door, failures, "refused a client with wrong credentials: too many failures");
                Refusal::LockedOut(wait)
            }
        }
    }

    pub(crate) fn gauges(&self) -> metrics::Gauges {
        metrics::Gauges {
            open_sessions: self.runner.open_sessions(),
            active_runs: self.runner.active_runs().len(),
            ws_connections: self.ws_open.load(Ordering::Relaxed),
            channels: channels::views(self),
            uptime: self.started.elapsed(),
            workers_running: self.delegation().map_or(0, |delegation| delegation.pool().running().len()),
            bus_results: self.services.bus.as_ref().map(|bus| bus.result_counts()).unwrap_or_default(),
            people: None,
        }
    }

    /// The people's usage per user and the approvals waiting, read at scrape time.
    pub(crate) fn people_gauges(&self) -> Option<metrics::PeopleGauges> {
        let stores = self.people.as_ref()?.stores();
        let usage_by_user = stores
            .usage
            .breakdown(0, None, squidbot_core::people::UsageGrouping::User)
            .inspect_err(|error| tracing::warn!(%error, "can't read the usage ledger for /metrics"))
            .unwrap_or_default();
        let approvals_pending = stores
            .approvals
            .pending()
            .inspect_err(|error| tracing::warn!(%error, "can't read the pending approvals for /metrics"))
            .map(|pending| pending.len())
            .unwrap_or_default();
        Some(metrics::PeopleGauges { usage_by_user, approvals_pending })
    }
}

/// The HTTP and WebSocket routes.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/", get(ws::root))
        .route("/ui/{name}", get(ui::asset))
        .route("/health", get(health::health))
        .route("/healthz", get(health::health))
        .route("/metrics", get(health::metrics))
        .route("/v1/models", get(openai::models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/webhook/{name}", post(channels::webhook))
        .layer(axum::middleware::from_fn_with_state(gateway.clone(), guard::check))
        .with_state(gateway)
}

/// Serves until `shutdown` is cancelled, then stops accepting, lets running turns finish
/// and closes WebSocket clients.
pub async fn run(listener: TcpListener, gateway: Arc<Gateway>, shutdown: CancellationToken) -> std::io::Result<()> {
    serve(guard::NoDelay(listener), gateway, shutdown).await
}

/// Like [`run`], serving HTTPS and WSS with `tls`, whose files are read again when they
/// change.
pub async fn run_tls(
    listener: TcpListener,
    tls: tls::Tls,
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve(tls::TlsListener::start(guard::NoDelay(listener), tls)?, gateway, shutdown).await
}

async fn serve<L>(listener: L, gateway: Arc<Gateway>, shutdown: CancellationToken) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
    for<'a> guard::Addresses: axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>,
{
    let mut events = gateway.runner.hub().subscribe(squidbot_core::events::Filter::All);
    let metered = gateway.clone();
    let metrics_task = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            metered.metrics.record(&event);
        }
    });
    let bus_task = bus::start(&gateway, shutdown.clone());
    let stopping = gateway.clone();
    let served =
        axum::serve(listener, router(gateway.clone()).into_make_service_with_connect_info::<guard::Addresses>())
            .with_graceful_shutdown(async move {
                shutdown.cancelled().await;
                // New turns are refused from here; running ones finish before clients close.
                stopping.runner.drain().await;
                stopping.shutdown.cancel();
            })
            .await;
    gateway.runner.drain().await;
    gateway.shutdown.cancel();
    // WebSocket connections outlive the HTTP server's own tracking: let them say goodbye.
    gateway.connections.close();
    if tokio::time::timeout(Duration::from_secs(5), gateway.connections.wait()).await.is_err() {
        tracing::warn!("some WebSocket clients did not close in time");
    }
    metrics_task.abort();
    if let Some(task) = bus_task
        && let Err(error) = task.await
    {
        tracing::warn!(%error, "the bus loop failed");
    }
    served
}
