//! The bus with scripted routes, a manual clock, an in-memory journal and real trigger
//! files in a temporary directory.

use std::sync::Mutex;
use std::time::SystemTime;

use super::*;
use crate::journal::MemoryJournal;
use crate::routes::Route;

/// A clock the test moves by hand.
struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    fn new() -> Arc<Self> {
        Arc::new(Self(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000))))
    }

    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

/// What a scripted route does with each delivery.
#[derive(Clone, Copy)]
enum Behaviour {
    Ack,
    AckAfter(Duration),
    Unavailable,
    Reject,
}

/// Records deliveries and answers as scripted.
struct Scripted {
    behaviour: Mutex<Behaviour>,
    received: Mutex<Vec<Delivery>>,
}

impl Scripted {
    fn new(behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self { behaviour: Mutex::new(behaviour), received: Mutex::new(Vec::new()) })
    }

    fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
    }

    fn texts(&self) -> Vec<String> {
        self.received.lock().unwrap().iter().map(|delivery| delivery.text.clone()).collect()
    }
}

impl Route for Scripted {
    async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
        let behaviour = *self.behaviour.lock().unwrap();
        match behaviour {
            Behaviour::Ack => {}
            Behaviour::AckAfter(delay) => tokio::time::sleep(delay).await,
            Behaviour::Unavailable => return Err(RouteError::Unavailable("agent stopped".into())),
            Behaviour::Reject => return Err(RouteError::Rejected("not for me".into())),
        }
        self.received.lock().unwrap().push(delivery.clone());
        Ok(Ack { detail: Some(format!("run-{}", delivery.message.seq)) })
    }
}

struct Fixture {
    _directory: tempfile::TempDir,
    bus: Arc<Bus>,
    journal: Arc<MemoryJournal>,
    clock: Arc<ManualClock>,
}

impl Fixture {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let clock = ManualClock::new();
        let directory_of_targets = Directory::new(["reviewer"], [("devops", "worker")]).unwrap();
        let bus = Bus::new(
            directory_of_targets,
            TriggerFiles::new(directory.path().join("triggers")),
            journal.clone(),
            clock.clone(),
            BusSettings::default(),
        );
        Self { _directory: directory, bus, journal, clock }
    }

    fn results(&self) -> Vec<(String, String, Option<u64>)> {
        self.journal.entries().into_iter().map(|entry| (entry.to, entry.result, entry.seq)).collect()
    }

    fn pending(&self, target: &str) -> String {
        std::fs::read_to_string(self.bus.triggers().pending_file(target).unwrap()).unwrap_or_default()
    }
}

fn request(target: &str, body: &str) -> SendRequest {
    SendRequest {
        target: target.into(),
        body: body.into(),
        priority: Priority::Normal,
        correlation_id: None,
        session: None,
    }
}

#[tokio::test]
async fn a_live_route_acknowledges_and_sees_the_envelope() {
    let fixture = Fixture::new();
    let route = Scripted::new(Behaviour::Ack);
    let _handle = fixture.bus.register("assistant", route.clone()).unwrap();
    let sender = Sender::agent("worker-1", "worker");
    let mut sent = request("main", "tests pass");
    sent.priority = Priority::Fyi;
    sent.correlation_id = Some("corr-7".into());
    let result = fixture.bus.send(&sender, sent).await.unwrap();
    assert_eq!(result.status, DeliveryStatus::Verified);
    assert_eq!(result.status.as_str(), "delivered.verified");
    assert_eq!(result.message.target, "assistant");
    assert_eq!(result.detail.as_deref(), Some("run-1"));
    fixture.bus.send(&sender, request("assistant", "second")).await.unwrap();
    assert_eq!(route.texts(), ["(WORKER #1): [FYI] tests pass", "(WORKER #2): second"]);
    let entries = fixture.journal.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].correlation_id, "corr-7");
    assert_eq!((entries[0].from.as_str(), entries[0].result.as_str()), ("worker-1", "delivered.verified"));
    assert_eq!(entries[0].priority, Priority::Fyi);
    assert!(!entries[1].correlation_id.is_empty(), "a fresh correlation id when none is given");
}

#[tokio::test]
async fn sequences_count_per_sender_and_restart_with_a_new_bus() {
    let fixture = Fixture::new();
    let _handle = fixture.bus.register("assistant", Scripted::new(Behaviour::Ack)).unwrap();
    let user = Sender::user();
    let worker = Sender::agent("worker-1", "worker");
    let mut seqs = Vec::new();
    for sender in [&user, &worker, &user, &user, &worker] {
        seqs.push(fixture.bus.send(sender, request("assistant", "x")).await.unwrap().message.seq);
    }
    assert_eq!(seqs, [1, 1, 2, 3, 2]);
    // Refusals do not use up a number.
    assert!(fixture.bus.send(&user, request("nobody", "x")).await.is_err());
    assert_eq!(fixture.bus.send(&user, request("assistant", "x")).await.unwrap().message.seq, 4);
    let restarted = Fixture::new();
    let _handle = restarted.bus.register("assistant", Scripted::new(Behaviour::Ack)).unwrap();
    assert_eq!(restarted.bus.send(&user, request("assistant", "x")).await.unwrap().message.seq, 1);
}

#[tokio::test]
async fn refusals_are_errors_and_are_journaled() {
    let fixture = Fixture::new();
    let user = Sender::user();
    let error = fixture.bus.send(&user, request("nobody", "hi")).await.unwrap_err();
    assert_eq!(error, SendError::InvalidTarget { target: "nobody".into() });
    assert_eq!(error.code(), "invalid_target");
    assert_eq!(fixture.bus.send(&user, request("assistant", "  \n")).await.unwrap_err(), SendError::EmptyMessage);
    let long = "x".repeat(MAX_BODY_BYTES + 1);
    let error = fixture.bus.send(&user, request("assistant", &long)).await.unwrap_err();
    assert_eq!(error.code(), "message_too_long");
    assert_eq!(
        fixture.results(),
        [
            ("nobody".to_owned(), "invalid_target".to_owned(), None),
            ("assistant".to_owned(), "empty_message".to_owned(), None),
            ("assistant".to_owned(), "message_too_long".to_owned(), None),
        ]
    );
    assert!(!fixture.bus.triggers().pending_file("assistant").unwrap().exists(), "refusals are not queued");
}

#[tokio::test]
async fn a_background_worker_may_message_only_its_owner() {
    let fixture = Fixture::new();
    let _handle = fixture.bus.register("assistant", Scripted::new(Behaviour::Ack)).unwrap();
    let worker = Sender::agent("worker-2", "worker").owned_by("assistant");
    let error = fixture.bus.send(&worker, request("coder", "psst")).await.unwrap_err();
    assert_eq!(
        error,
        SendError::OwnerBindingViolation {
            sender: "worker-2".into(),
            owner: "assistant".into(),
            target: "coder".into()
        }
    );
    assert_eq!(error.code(), "owner_binding_violation");
    assert_eq!(fixture.bus.send(&worker, request("user", "psst")).await.unwrap_err().code(), "owner_binding_violation");
    let ok = fixture.bus.send(&worker, request("main", "done")).await.unwrap();
    assert_eq!(ok.status, DeliveryStatus::Verified);
    assert_eq!(fixture.results()[0].1, "owner_binding_violation");
}

#[tokio::test]
async fn without_a_route_messages_wait_in_the_trigger_file_until_one_appears() {
    let fixture = Fixture::new();
    let user = Sender::user();
    let first = fixture.bus.send(&user, request("devops", "deploy when green")).await.unwrap();
    assert_eq!(first.status, DeliveryStatus::Fallback);
    assert_eq!(first.status.as_str(), "fallback.triggered");
    assert_eq!(first.message.target, "worker", "aliases resolve before the file is chosen");
    let mut urgent = request("worker", "stop the deploy");
    urgent.priority = Priority::Urgent;
    fixture.bus.send(&user, urgent).await.unwrap();
    assert_eq!(fixture.pending("worker").lines().count(), 2);

    let route = Scripted::new(Behaviour::Ack);
    let _handle = fixture.bus.register("worker", route.clone()).unwrap();
    let report = fixture.bus.ingest("worker").await.unwrap();
    assert_eq!((report.delivered, report.quarantined, report.left), (2, 0, 0));
    assert_eq!(route.texts(), ["(USER #1): deploy when green", "(USER #2): [URGENT] stop the deploy"]);
    assert!(fixture.bus.triggers().waiting_targets().unwrap().is_empty(), "delivered files are removed");
    let results: Vec<String> = fixture.journal.entries().into_iter().map(|entry| entry.result).collect();
    assert_eq!(results, ["fallback.triggered", "fallback.triggered", "delivered.verified", "delivered.verified"]);
    assert_eq!(fixture.journal.entries()[2].detail.as_deref(), Some("from the trigger file: run-1"));
    assert!(fixture.bus.ingest_live().await.iter().all(|report| report.delivered == 0), "nothing twice");
}

#[tokio::test]
async fn a_route_that_goes_away_sends_the_message_to_the_trigger_file() {
    let fixture = Fixture::new();
    let route = Scripted::new(Behaviour::Unavailable);
    let _handle = fixture.bus.register("assistant", route.clone()).unwrap();
    let result = fixture.bus.send(&Sender::user(), request("assistant", "are you there?")).await.unwrap();
    assert_eq!(result.status, DeliveryStatus::Fallback);
    assert!(result.detail.unwrap().starts_with("agent stopped; waiting in"));
    // The route still fails: the line stays, in order, for the next pass.
    let report = fixture.bus.ingest("assistant").await.unwrap();
    assert_eq!((report.delivered, report.left), (0, 1));
    route.set(Behaviour::Ack);
    let report = fixture.bus.ingest("assistant").await.unwrap();
    assert_eq!((report.delivered, report.left), (1, 0));
    assert_eq!(route.texts(), ["(USER #1): are you there?"]);
}

#[tokio::test]
async fn a_rejecting_route_is_an_error_and_not_retried() {
    let fixture = Fixture::new();
    let _handle = fixture.bus.register("assistant", Scripted::new(Behaviour::Reject)).unwrap();
    let error = fixture.bus.send(&Sender::user(), request("assistant", "x")).await.unwrap_err();
    assert_eq!(error.code(), "rejected");
    assert_eq!(fixture.results(), [("assistant".to_owned(), "rejected".to_owned(), Some(1))]);
    assert!(fixture.pending("assistant").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_slow_acknowledgement_is_accepted_unverified_and_journaled_when_it_comes() {
    let fixture = Fixture::new();
    let route = Scripted::new(Behaviour::AckAfter(Duration::from_secs(10)));
    let _handle = fixture.bus.register("assistant", route.clone()).unwrap();
    let result = fixture.bus.send(&Sender::user(), request("assistant", "slow")).await.unwrap();
    assert_eq!(result.status, DeliveryStatus::Unverified);
    assert_eq!(result.status.as_str(), "accepted.unverified");
    fixture.bus.drain().await;
    assert_eq!(route.texts(), ["(USER #1): slow"]);
    let entries = fixture.journal.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].result, "accepted.unverified");
    assert_eq!(
        (entries[1].result.as_str(), entries[1].detail.as_deref()),
        ("delivered.verified", Some("acknowledged late: run-1"))
    );
}

#[tokio::test]
async fn health_follows_routes_and_heartbeats() {
    let fixture = Fixture::new();
    let bus = &fixture.bus;
    assert_eq!(bus.health("nobody").health, Health::InvalidTarget);
    assert_eq!(bus.health("nobody").canonical, None);
    assert_eq!(bus.health("reviewer").health, Health::NoRoute);
    assert_eq!(bus.health("main").health, Health::NoRoute);
    let handle = bus.register("main", Scripted::new(Behaviour::Ack)).unwrap();
    assert_eq!(handle.target(), "assistant");
    let report = bus.health("assistant");
    assert_eq!((report.health, report.last_seen_ms), (Health::Healthy, Some(0)));
    fixture.clock.advance(Duration::from_secs(60));
    assert_eq!(bus.health("assistant").health, Health::Healthy, "the threshold itself is still healthy");
    fixture.clock.advance(Duration::from_secs(1));
    let report = bus.health("assistant");
    assert_eq!((report.health, report.last_seen_ms), (Health::Stale, Some(61_000)));
    handle.heartbeat();
    assert_eq!(bus.health("assistant").health, Health::Healthy);
    fixture.clock.advance(Duration::from_secs(120));
    bus.send(&Sender::user(), request("assistant", "hi")).await.unwrap();
    assert_eq!(bus.health("assistant").health, Health::Healthy, "an acknowledged delivery counts as a sign of life");
    drop(handle);
    assert_eq!(bus.health("assistant").health, Health::NoRoute);
}

#[tokio::test]
async fn running_agents_are_targets_and_stay_valid_without_a_route_once_gone() {
    let fixture = Fixture::new();
    let bus = &fixture.bus;
    assert_eq!(bus.resolve("worker-7"), None);
    let route = Scripted::new(Behaviour::Ack);
    let handle = bus.register("Worker-7", route.clone()).unwrap();
    assert_eq!(bus.resolve("worker-7").as_deref(), Some("worker-7"));
    assert_eq!(bus.live_targets(), ["worker-7"]);
    let result = bus.send(&Sender::role("assistant"), request("worker-7", "status?")).await.unwrap();
    assert_eq!(result.status, DeliveryStatus::Verified);
    assert_eq!(route.texts(), ["(ASSISTANT #1): status?"]);
    drop(handle);
    assert_eq!(
        bus.health("worker-7").health,
        Health::NoRoute,
        "the protocol's no_route: a valid name, nothing connected"
    );
    let later = bus.send(&Sender::role("assistant"), request("worker-7", "still there?")).await.unwrap_err();
    assert_eq!(later.code(), "no_route", "an ended agent's messages are not queued: {later}");
    assert!(bus.triggers().waiting_targets().unwrap().is_empty());
    assert_eq!(fixture.journal.entries().last().unwrap().result, "no_route", "the refusal is journaled");
    assert_eq!(bus.health("worker-8").health, Health::InvalidTarget);
    assert!(bus.register("../x", Scripted::new(Behaviour::Ack)).is_err());
}

#[tokio::test]
async fn a_newer_registration_survives_the_older_handle() {
    let fixture = Fixture::new();
    let old = Scripted::new(Behaviour::Ack);
    let new = Scripted::new(Behaviour::Ack);
    let old_handle = fixture.bus.register("assistant", old.clone()).unwrap();
    let _new_handle = fixture.bus.register("assistant", new.clone()).unwrap();
    drop(old_handle);
    assert_eq!(fixture.bus.health("assistant").health, Health::Healthy);
    fixture.bus.send(&Sender::user(), request("assistant", "x")).await.unwrap();
    assert!(old.texts().is_empty());
    assert_eq!(new.texts().len(), 1);
}

#[tokio::test]
async fn trigger_lines_that_are_bad_for_the_bus_are_quarantined_and_the_rest_delivered() {
    let fixture = Fixture::new();
    let path = fixture.bus.triggers().pending_file("assistant").unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        concat!(
            "{\"from\":\"user\",\"body\":\"by hand\"}\n",
            "{\"from\":\"../root\",\"body\":\"bad sender\"}\n",
            "{\"from\":\"user\",\"body\":\"   \"}\n",
            "garbage\n",
            "{\"id\":\"m-9\",\"from\":\"coder\",\"seq\":9,\"priority\":\"task\",\"body\":\"refactor\"}\n",
            "{\"id\":\"m-9\",\"from\":\"coder\",\"seq\":9,\"priority\":\"task\",\"body\":\"refactor\"}\n",
        ),
    )
    .unwrap();
    let route = Scripted::new(Behaviour::Ack);
    let _handle = fixture.bus.register("assistant", route.clone()).unwrap();
    let report = fixture.bus.ingest_live().await.remove(0);
    assert_eq!((report.delivered, report.quarantined, report.duplicates, report.left), (2, 3, 1, 0));
    assert_eq!(route.texts(), ["(USER #1): by hand", "(CODER #9): [TASK] refactor"]);
    let bad = std::fs::read_to_string(fixture.bus.triggers().quarantine_file("assistant").unwrap()).unwrap();
    assert_eq!(bad.lines().count(), 3);
    assert!(bad.contains("../root") && bad.contains("garbage"));
    assert!(!path.exists());
}
