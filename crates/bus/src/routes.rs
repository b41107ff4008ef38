//! Live routes: how a running agent receives messages (`Route`), the registry of routes
//! by target with their heartbeats and the aliases of running agents (`coder-bg-1`), the
//! agent names seen this run, and target health.
//!
//! ## Urgent messages
//!
//! A route gets the whole [`BusMessage`], priority included. A route whose agent may be in
//! the middle of a turn handles [`Priority::Urgent`](crate::Priority::Urgent) by stopping
//! that turn first (the gateway's assistant route calls `Runner::abort` on its session: the
//! turn ends at its next safe point, streamed text kept and marked interrupted) and then
//! running the urgent message as the next turn. Other priorities queue behind the
//! running turn.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use squidbot_core::BoxFuture;
use squidbot_core::sync::lock;

use crate::message::BusMessage;

/// A message handed to a route.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The message.
    pub message: BusMessage,
    /// Its envelope, `(ROLE #N): [TAG] body`: what the agent reads.
    pub text: String,
}

/// The route's runtime took the message (for the assistant: its turn started).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ack {
    /// What the runtime did with it (a run id), for the journal.
    pub detail: Option<String>,
}

/// Why a route did not take a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The agent is gone or stopping; the message goes to its trigger file and is
    /// delivered when a route is back.
    #[error("the route is unavailable: {0}")]
    Unavailable(String),
    /// The agent will never take this message; it is not retried.
    #[error("the route rejected the message: {0}")]
    Rejected(String),
}

/// How a running agent receives bus messages.
pub trait Route: Send + Sync {
    /// Hands `delivery` to the agent's runtime; returns once the runtime has it (not once
    /// the agent has answered). See the module docs for [`Priority::Urgent`](crate::Priority::Urgent).
    fn deliver<'a>(&'a self, delivery: &'a Delivery) -> impl Future<Output = Result<Ack, RouteError>> + Send + 'a;
}

/// Object-safe companion of [`Route`].
pub trait DynRoute: Send + Sync {
    /// Boxed form of [`Route::deliver`].
    fn deliver_boxed<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<Ack, RouteError>>;
}

impl<T: Route> DynRoute for T {
    fn deliver_boxed<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<Ack, RouteError>> {
        Box::pin(self.deliver(delivery))
    }
}

/// Target health, as the protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// A route is registered and was seen within the stale threshold.
    Healthy,
    /// A route is registered but has not been seen for longer than the threshold.
    Stale,
    /// The target is valid but nothing is connected to it.
    NoRoute,
    /// No such target.
    InvalidTarget,
}

impl Health {
    /// The protocol's name (`healthy`, `stale`, `no_route`, `invalid_target`).
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Stale => "stale",
            Health::NoRoute => "no_route",
            Health::InvalidTarget => "invalid_target",
        }
    }
}

/// A health answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// The name asked about.
    pub target: String,
    /// What it resolves to, `None` for an invalid target.
    pub canonical: Option<String>,
    /// The state.
    pub health: Health,
    /// Milliseconds since the route was last seen, when there is one.
    pub last_seen_ms: Option<u64>,
}

/// One registered route.
struct Registration {
    generation: u64,
    route: Arc<dyn DynRoute>,
    last_seen: SystemTime,
}

/// Routes by canonical target.
#[derive(Default)]
pub(crate) struct Routes {
    entries: Mutex<HashMap<String, Registration>>,
    /// Aliases of running agents: alias → (target, generation of its registration).
    aliases: Mutex<HashMap<String, (String, u64)>>,
    /// Agent names and aliases registered at some point of this run: still valid targets
    /// (`no_route`) once their agent ended.
    known: Mutex<HashSet<String>>,
    generations: AtomicU64,
}

impl Routes {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Registration>> {
        lock(&self.entries)
    }

    fn alias_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, u64)>> {
        lock(&self.aliases)
    }

    /// Registers `route` for `target` and its `aliases`, replacing older registrations.
    pub(crate) fn insert(&self, target: &str, aliases: &[String], route: Arc<dyn DynRoute>, now: SystemTime) -> u64 {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        self.entries().insert(target.to_owned(), Registration { generation, route, last_seen: now });
        let mut map = self.alias_map();
        for alias in aliases {
            map.insert(alias.clone(), (target.to_owned(), generation));
        }
        generation
    }

    /// Remembers agent names as targets for the rest of the run.
    pub(crate) fn remember(&self, names: impl IntoIterator<Item = String>) {
        lock(&self.known).extend(names);
    }

    /// The target a running agent's alias stands for.
    pub(crate) fn alias(&self, name: &str) -> Option<String> {
        self.alias_map().get(name).map(|(target, _)| target.clone())
    }

    /// True when `name` has a route or had one earlier in this run.
    pub(crate) fn is_known(&self, name: &str) -> bool {
        self.contains(name) || lock(&self.known).contains(name)
    }

    /// The aliases of live agents and what they stand for, sorted.
    pub(crate) fn live_aliases(&self) -> Vec<(String, String)> {
        let mut aliases: Vec<(String, String)> =
            self.alias_map().iter().map(|(alias, (target, _))| (alias.clone(), target.clone())).collect();
        aliases.sort();
        aliases
    }

    /// The route of `target`.
    pub(crate) fn get(&self, target: &str) -> Option<Arc<dyn DynRoute>> {
        self.entries().get(target).map(|registration| registration.route.clone())
    }

    /// True when `target` has a route.
    pub(crate) fn contains(&self, target: &str) -> bool {
        self.entries().contains_key(target)
    }

    /// Targets with a route, sorted.
    pub(crate) fn targets(&self) -> Vec<String> {
        let mut targets: Vec<String> = self.entries().keys().cloned().collect();
        targets.sort();
        targets
    }

    /// When `target`'s route was last seen.
    pub(crate) fn last_seen(&self, target: &str) -> Option<SystemTime> {
        self.entries().get(target).map(|registration| registration.last_seen)
    }

    /// Marks `target`'s route as alive at `now` (only the registration `generation`
    /// when given).
    pub(crate) fn seen(&self, target: &str, generation: Option<u64>, now: SystemTime) {
        if let Some(registration) = self.entries().get_mut(target)
            && generation.is_none_or(|generation| generation == registration.generation)
        {
            registration.last_seen = registration.last_seen.max(now);
        }
    }

    fn remove(&self, target: &str, generation: u64) {
        {
            let mut entries = self.entries();
            if entries.get(target).is_some_and(|registration| registration.generation == generation) {
                entries.remove(target);
            }
        }
        self.alias_map().retain(|_, (_, registered)| *registered != generation);
    }
}

/// Health of a registered route last seen at `last_seen`.
pub(crate) fn route_health(last_seen: SystemTime, now: SystemTime, stale_after: Duration) -> (Health, u64) {
    let age = now.duration_since(last_seen).unwrap_or_default();
    let health = if age <= stale_after { Health::Healthy } else { Health::Stale };
    (health, age.as_millis() as u64)
}

/// Keeps a route registered; dropping it unregisters the route (unless a newer
/// registration replaced it).
pub struct RouteHandle {
    pub(crate) routes: Weak<Routes>,
    pub(crate) target: String,
    pub(crate) generation: u64,
    pub(crate) clock: Arc<dyn squidbot_core::clock::Clock>,
}

impl std::fmt::Debug for RouteHandle {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("RouteHandle").field("target", &self.target).finish()
    }
}

impl RouteHandle {
    /// The canonical target this route serves.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Reports the route alive now; a route not seen for the stale threshold is `stale`.
    pub fn heartbeat(&self) {
        if let Some(routes) = self.routes.upgrade() {
            routes.seen(&self.target, Some(self.generation), self.clock.now());
        }
    }
}

impl Drop for RouteHandle {
    fn drop(&mut self) {
        if let Some(routes) = self.routes.upgrade() {
            routes.remove(&self.target, self.generation);
        }
    }
}
