//! The gateway server: one port for the OpenAI-compatible API and health, served by
//! `run(listener, shutdown)` over a shared [`Gateway`].

mod auth;
mod health;
mod limiter;
mod metrics;
mod openai;
mod sessions;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use squidbot_core::agent::Agent;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use auth::Auth;

/// Everything the handlers share.
pub struct Gateway {
    agent: Arc<Agent>,
    auth: Auth,
    models: Vec<String>,
    sessions: sessions::Sessions,
    started: Instant,
    metrics: metrics::Metrics,
    limiter: limiter::FailureLimiter,
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
    /// A gateway answering with `agent`; `models` are listed by `GET /v1/models`.
    pub fn new(agent: Arc<Agent>, auth: Auth, models: Vec<String>) -> Arc<Self> {
        Arc::new(Self {
            sessions: sessions::Sessions::new(agent.clone()),
            agent,
            auth,
            models,
            started: Instant::now(),
            metrics: metrics::Metrics::default(),
            limiter: limiter::FailureLimiter::default(),
        })
    }

    /// Checks the request's credentials, counting failures per peer and refusing a peer
    /// that failed too often in the current window.
    pub(crate) fn authorize(&self, headers: &HeaderMap, peer: IpAddr) -> Result<(), Refusal> {
        let now = Instant::now();
        if let Some(wait) = self.limiter.blocked_for(peer, now) {
            return Err(Refusal::LockedOut(wait));
        }
        if self.auth.allows(headers) {
            return Ok(());
        }
        self.limiter.record_failure(peer, now);
        tracing::warn!(%peer, "refused a request with a missing or wrong token");
        Err(Refusal::Unauthorized)
    }
}

/// The HTTP routes.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/metrics", get(health::metrics))
        .route("/v1/models", get(openai::models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .with_state(gateway)
}

/// Serves until `shutdown` is cancelled, then stops accepting and lets running requests
/// finish.
pub async fn run(listener: TcpListener, gateway: Arc<Gateway>, shutdown: CancellationToken) -> std::io::Result<()> {
    axum::serve(listener, router(gateway).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
