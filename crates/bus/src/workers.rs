//! Running workers as bus agents: the identity a worker sends with (its id, its role in
//! headers, and for a background worker the binding to the agent that spawned it), and
//! [`WorkerRoutes`], which makes every running worker a target under its id (a background
//! one also under the slot alias `<role>-bg-<n>`) whose route puts messages into the
//! worker's inbox, read at its next safe point.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use squidbot_core::delegation::{
    InboxMessage, Priority as WorkerPriority, WorkerInbox, WorkerObserver, WorkerOutcome, WorkerSnapshot,
};
use squidbot_core::sync::lock;

use crate::delivery::Bus;
use crate::envelope::Priority;
use crate::message::Sender;
use crate::routes::{Ack, Delivery, Route, RouteError, RouteHandle};

/// The agent that spawns workers: the only target a background worker may message.
pub const WORKER_OWNER: &str = "assistant";

/// How `worker` sends: as itself (`(ROLE #N):` numbered per worker), bound to
/// [`WORKER_OWNER`] when it runs in the background.
pub fn worker_sender(worker: &WorkerSnapshot) -> Sender {
    let sender = Sender::agent(worker.id.clone(), worker.role.clone());
    match worker.priority {
        WorkerPriority::Background => sender.owned_by(WORKER_OWNER),
        WorkerPriority::Normal => sender,
    }
}

/// The slot alias of a background worker: `<role>-bg-<slot>`.
pub fn slot_alias(role: &str, slot: u32) -> String {
    format!("{role}-bg-{slot}")
}

/// A worker's route: messages join its inbox; an urgent one stops its current turn.
struct InboxRoute {
    inbox: WorkerInbox,
}

impl Route for InboxRoute {
    async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
        let message = InboxMessage {
            text: delivery.text.clone(),
            urgent: delivery.message.priority == Priority::Urgent,
            correlation_id: Some(delivery.message.correlation_id.clone()),
        };
        match self.inbox.deliver(message) {
            Ok(()) => Ok(Ack { detail: Some(format!("in the inbox of worker {}", self.inbox.worker_id())) }),
            Err(error) => Err(RouteError::Unavailable(error.to_string())),
        }
    }
}

/// A registered worker.
struct Registered {
    role: String,
    slot: Option<u32>,
    handle: RouteHandle,
}

/// Registers every running worker on the bus and unregisters it when it ends.
pub struct WorkerRoutes {
    bus: Arc<Bus>,
    running: Mutex<HashMap<String, Registered>>,
}

impl std::fmt::Debug for WorkerRoutes {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("WorkerRoutes").finish_non_exhaustive()
    }
}

impl WorkerRoutes {
    /// Worker routes on `bus`.
    pub fn new(bus: Arc<Bus>) -> Arc<Self> {
        Arc::new(Self { bus, running: Mutex::new(HashMap::new()) })
    }

    /// Reports every worker route alive: in-process workers are alive while registered.
    pub fn heartbeat(&self) {
        for registered in lock(&self.running).values() {
            registered.handle.heartbeat();
        }
    }
}

impl WorkerObserver for WorkerRoutes {
    fn worker_started(&self, worker: &WorkerSnapshot, inbox: &WorkerInbox) {
        let mut running = lock(&self.running);
        let slot = (worker.priority == WorkerPriority::Background).then(|| {
            let taken: Vec<u32> = running
                .values()
                .filter(|registered| registered.role == worker.role)
                .filter_map(|registered| registered.slot)
                .collect();
            (1..).find(|slot| !taken.contains(slot)).unwrap_or(1)
        });
        let aliases: Vec<String> = slot.map(|slot| slot_alias(&worker.role, slot)).into_iter().collect();
        let route = Arc::new(InboxRoute { inbox: inbox.clone() });
        match self.bus.register_agent(&worker.id, &aliases, route) {
            Ok(handle) => {
                tracing::info!(worker = %worker.id, aliases = ?aliases, "worker joined the agent bus");
                running.insert(worker.id.clone(), Registered { role: worker.role.clone(), slot, handle });
            }
            Err(error) => tracing::warn!(worker = %worker.id, %error, "can't make the worker a bus target"),
        }
    }

    fn worker_ended(&self, worker: &WorkerSnapshot, _outcome: WorkerOutcome) {
        // Dropping the handle unregisters the id and the alias; the slot is free again.
        lock(&self.running).remove(&worker.id);
    }
}

#[cfg(test)]
mod tests {
    use squidbot_core::delegation::WorkerState;

    use super::*;
    use crate::{DeliveryStatus, Health, Route, SendError, SendRequest};

    fn worker(id: &str, role: &str, priority: WorkerPriority) -> WorkerSnapshot {
        WorkerSnapshot {
            id: id.into(),
            role: role.into(),
            owner: "agent:main:main".into(),
            session_key: format!("worker:{role}:{id}"),
            task: "build it".into(),
            priority,
            state: WorkerState::Running,
            status: String::new(),
            result: None,
            correlation_id: "corr-w".into(),
            elapsed: std::time::Duration::ZERO,
        }
    }

    fn request(target: &str, body: &str, priority: Priority) -> SendRequest {
        SendRequest { target: target.into(), body: body.into(), priority, correlation_id: None, session: None }
    }

    /// Records what the assistant gets.
    #[derive(Default)]
    struct Assistant(Mutex<Vec<String>>);

    impl Route for Assistant {
        async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
            self.0.lock().unwrap().push(delivery.text.clone());
            Ok(Ack::default())
        }
    }

    #[tokio::test]
    async fn running_workers_are_targets_with_slot_aliases_and_send_as_themselves() {
        let directory = tempfile::tempdir().unwrap();
        let (bus, journal) = Bus::in_memory(directory.path());
        let assistant = Arc::new(Assistant::default());
        let _route = bus.register("assistant", assistant.clone()).unwrap();
        let routes = WorkerRoutes::new(bus.clone());
        let first = worker("c0ffee01", "coder", WorkerPriority::Background);
        let second = worker("c0ffee02", "coder", WorkerPriority::Background);
        let waited = worker("c0ffee03", "coder", WorkerPriority::Normal);
        let inboxes: Vec<WorkerInbox> =
            [&first, &second, &waited].iter().map(|worker| WorkerInbox::new(worker.id.clone())).collect();
        routes.worker_started(&first, &inboxes[0]);
        routes.worker_started(&second, &inboxes[1]);
        routes.worker_started(&waited, &inboxes[2]);
        assert_eq!(bus.resolve("coder-bg-1").as_deref(), Some("c0ffee01"));
        assert_eq!(bus.resolve("CODER-BG-2").as_deref(), Some("c0ffee02"));
        assert_eq!(bus.resolve("coder-bg-3"), None, "a waited-for worker has no slot");
        assert_eq!(bus.health("c0ffee03").health, Health::Healthy);
        routes.heartbeat();

        // Others reach a worker's inbox; urgent is marked.
        let sent = bus.send(&Sender::role("assistant"), request("coder-bg-1", "stop", Priority::Urgent)).await.unwrap();
        assert_eq!(sent.status, DeliveryStatus::Verified);
        assert_eq!(sent.message.target, "c0ffee01");
        assert_eq!(inboxes[0].pending(), 1);

        // A background worker sends as itself, numbered from 1, and only to its owner.
        let sender = worker_sender(&first);
        for expected in 1..=2 {
            let result = bus.send(&sender, request("main", "done", Priority::Fyi)).await.unwrap();
            assert_eq!(result.message.envelope(), format!("(CODER #{expected}): [FYI] done"));
        }
        let refused = bus.send(&sender, request("c0ffee02", "hi", Priority::Normal)).await.unwrap_err();
        assert!(matches!(refused, SendError::OwnerBindingViolation { .. }), "{refused:?}");
        assert_eq!(worker_sender(&second).id, "c0ffee02");
        assert_eq!(worker_sender(&waited).owner, None, "a waited-for worker is not bound");
        let second_sender = worker_sender(&second);
        let first_of_second = bus.send(&second_sender, request("assistant", "hi", Priority::Normal)).await.unwrap();
        assert_eq!(first_of_second.message.seq, 1, "each worker counts on its own");
        assert_eq!(assistant.0.lock().unwrap().len(), 3);

        // An ended worker is a target without a route; its slot is free again.
        inboxes[0].deliver(InboxMessage { text: String::new(), urgent: false, correlation_id: None }).unwrap();
        routes.worker_ended(&first, WorkerOutcome::Done);
        assert_eq!(bus.health("c0ffee01").health, Health::NoRoute);
        assert_eq!(bus.health("coder-bg-1").health, Health::NoRoute);
        let later = bus.send(&Sender::role("assistant"), request("coder-bg-1", "still there?", Priority::Normal)).await;
        assert!(matches!(later, Err(SendError::NoRoute { ref target, .. }) if target == "coder-bg-1"), "{later:?}");
        assert!(bus.triggers().waiting_targets().unwrap().is_empty(), "nothing queued for an ended worker");
        let third = worker("c0ffee04", "coder", WorkerPriority::Background);
        routes.worker_started(&third, &WorkerInbox::new("c0ffee04"));
        assert_eq!(bus.resolve("coder-bg-1").as_deref(), Some("c0ffee04"));
        assert_eq!(
            bus.live_aliases(),
            [("coder-bg-1".into(), "c0ffee04".into()), ("coder-bg-2".into(), "c0ffee02".into())]
        );

        let counts = bus.result_counts();
        assert!(counts.contains(&("delivered.verified".to_owned(), 4)), "{counts:?}");
        assert!(counts.contains(&("owner_binding_violation".to_owned(), 1)), "{counts:?}");
        assert!(counts.contains(&("no_route".to_owned(), 1)), "{counts:?}");
        let journaled = journal.entries();
        assert!(journaled.iter().any(|entry| entry.from == "c0ffee01" && entry.result == "owner_binding_violation"));
    }

    #[tokio::test]
    async fn a_worker_alias_may_not_hide_a_role() {
        let directory = tempfile::tempdir().unwrap();
        let (bus, _journal) = Bus::in_memory(directory.path());
        let error = bus.register_agent("w1", &["coder".to_owned()], Arc::new(Assistant::default())).unwrap_err();
        assert!(error.to_string().contains("a role has that name"), "{error}");
    }
}
