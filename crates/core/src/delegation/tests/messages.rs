//! Workers as agents others talk to: observers see them start and end, messages reach a
//! running worker between its turns, an urgent one interrupts its turn, and a bus-started
//! turn's correlation id reaches the worker it delegates to.

use super::*;

/// Records what observers hear.
#[derive(Default)]
struct Watcher {
    started: Mutex<Vec<(WorkerSnapshot, WorkerInbox)>>,
    ended: Mutex<Vec<(String, WorkerOutcome)>>,
}

impl WorkerObserver for Watcher {
    fn worker_started(&self, worker: &WorkerSnapshot, inbox: &WorkerInbox) {
        self.started.lock().unwrap().push((worker.clone(), inbox.clone()));
    }

    fn worker_ended(&self, worker: &WorkerSnapshot, outcome: WorkerOutcome) {
        assert!(worker.state.is_terminal(), "{worker:?}");
        self.ended.lock().unwrap().push((worker.id.clone(), outcome));
    }
}

impl Watcher {
    fn inbox(&self) -> WorkerInbox {
        self.started.lock().unwrap()[0].1.clone()
    }

    fn ended(&self) -> Vec<(String, WorkerOutcome)> {
        self.ended.lock().unwrap().clone()
    }
}

/// The last user message of a request the worker model received.
fn last_user_text(request: &CompletionRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            ChatMessage::User { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn a_message_reaches_a_running_worker_after_its_turn_and_observers_see_it_end() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let fixture = fixture(
        vec![delegate("researcher", "background"), text("On it.")],
        vec![Step::Gated(gate.clone(), Box::new(text("still looking"))), report_done("42, as you asked")],
        Options::default(),
    );
    let watcher = Arc::new(Watcher::default());
    fixture.delegator.observe(watcher.clone());
    fixture.turn("count in the background").await;
    let worker = fixture.only_worker();
    let inbox = watcher.inbox();
    assert_eq!(inbox.worker_id(), worker.id);

    inbox
        .deliver(InboxMessage {
            text: "(ASSISTANT #1): count the red ones too".into(),
            urgent: false,
            correlation_id: None,
        })
        .unwrap();
    gate.add_permits(1);
    wait_for("the worker to end", || fixture.delegator.pool().snapshot(&worker.id).unwrap().state.is_terminal()).await;

    let requests = fixture.worker_llm.requests();
    assert_eq!(requests.len(), 2, "the message was its own turn, read before the outcome was taken");
    assert_eq!(last_user_text(&requests[1]), "(ASSISTANT #1): count the red ones too");
    let ended = fixture.delegator.pool().snapshot(&worker.id).unwrap();
    assert_eq!((ended.state, ended.result.as_deref()), (WorkerState::Done, Some("42, as you asked")));
    assert_eq!(watcher.ended(), [(worker.id.clone(), WorkerOutcome::Done)]);
    assert!(inbox.is_closed());
    assert!(matches!(
        inbox.deliver(InboxMessage { text: "late".into(), urgent: false, correlation_id: None }),
        Err(InboxError::Closed { .. })
    ));
}

#[tokio::test]
async fn an_urgent_message_interrupts_the_workers_turn_and_is_read_next() {
    let fixture = fixture(
        vec![delegate("worker", "background"), text("On it.")],
        vec![Step::Hang, report_done("stopped the deploy")],
        Options::default(),
    );
    let watcher = Arc::new(Watcher::default());
    fixture.delegator.observe(watcher.clone());
    fixture.turn("deploy in the background").await;
    let worker = fixture.only_worker();
    wait_for("the worker's first model call", || fixture.worker_llm.requests().len() == 1).await;

    let urgent = "(ASSISTANT #2): [URGENT] stop the deploy";
    watcher.inbox().deliver(InboxMessage { text: urgent.into(), urgent: true, correlation_id: None }).unwrap();
    wait_for("the worker to end", || fixture.delegator.pool().snapshot(&worker.id).unwrap().state.is_terminal()).await;

    let requests = fixture.worker_llm.requests();
    assert_eq!(last_user_text(&requests[1]), urgent);
    let ended = fixture.delegator.pool().snapshot(&worker.id).unwrap();
    assert_eq!((ended.state, ended.result.as_deref()), (WorkerState::Done, Some("stopped the deploy")));
    let entries = format!("{:?}", fixture.entries(&worker.session_key).await);
    assert!(entries.contains("interrupted: true"), "the stopped turn is recorded as interrupted: {entries}");
}

#[tokio::test(start_paused = true)]
async fn running_out_of_time_is_its_own_outcome() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("It timed out.")],
        vec![Step::Hang],
        Options { timeout: Duration::from_secs(2), ..Options::default() },
    );
    let watcher = Arc::new(Watcher::default());
    fixture.delegator.observe(watcher.clone());
    fixture.turn("do something slow").await;
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Failed);
    assert_eq!(watcher.ended(), [(worker.id, WorkerOutcome::TimedOut)]);
    assert_eq!(WorkerOutcome::TimedOut.as_str(), "timeout");
}

#[tokio::test]
async fn a_message_to_a_worker_carries_its_correlation_id_into_the_turn_that_reads_it() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let fixture = fixture(
        vec![delegate("worker", "background"), text("On it.")],
        vec![
            Step::Gated(gate.clone(), Box::new(text("still looking"))),
            call("probe", serde_json::json!({})),
            report_done("checked"),
        ],
        Options::default(),
    );
    let watcher = Arc::new(Watcher::default());
    fixture.delegator.observe(watcher.clone());
    fixture.turn("check in the background").await;
    let worker = fixture.only_worker();
    let message = InboxMessage {
        text: "(ASSISTANT #4): check the logs too".into(),
        urgent: false,
        correlation_id: Some("later-corr-9".into()),
    };
    watcher.inbox().deliver(message).unwrap();
    gate.add_permits(1);
    wait_for("the worker to end", || fixture.delegator.pool().snapshot(&worker.id).unwrap().state.is_terminal()).await;
    let probed: Vec<String> =
        fixture.probe.seen.lock().unwrap().iter().map(|context| context.correlation_id.clone()).collect();
    assert_ne!(worker.correlation_id, "later-corr-9");
    assert_eq!(probed, ["later-corr-9"], "the turn that read the message carries the message's id");
}

#[tokio::test]
async fn a_bus_started_turn_carries_its_correlation_id_into_events_and_workers() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("Done.")],
        vec![call("probe", serde_json::json!({})), report_done("ok")],
        Options::default(),
    );
    let runner = Runner::new(fixture.assistant.clone(), EventHub::new());
    let request = RunRequest {
        session_key: "cli:local".into(),
        input: "(CODER #1): please check".into(),
        images: Vec::new(),
        origin: "bus".into(),
        run_id: None,
        correlation_id: Some("bus-corr-7".into()),
        actor: None,
    };
    let mut handle = runner.start(request).unwrap();
    let mut seen = Vec::new();
    while let Some(event) = handle.events.recv().await {
        let terminal = event.kind.is_terminal();
        seen.push(event.correlation_id.clone());
        if terminal {
            break;
        }
    }
    assert!(seen.len() > 2 && seen.iter().all(|id| id == "bus-corr-7"), "{seen:?}");
    assert_eq!(fixture.only_worker().correlation_id, "bus-corr-7");
    let probed = fixture.probe.seen.lock().unwrap().clone();
    assert_eq!(probed[0].correlation_id, "bus-corr-7", "the worker's tool calls carry it too");

    // An inbound user message gets a fresh one.
    fixture.assistant_llm.steps.lock().unwrap().push_back(text("Hi."));
    let request = RunRequest {
        session_key: "cli:local".into(),
        input: "hello".into(),
        images: Vec::new(),
        origin: "test".into(),
        run_id: None,
        correlation_id: None,
        actor: None,
    };
    let mut handle = runner.start(request).unwrap();
    let first = handle.events.recv().await.unwrap();
    assert!(!first.correlation_id.is_empty() && first.correlation_id != "bus-corr-7");
    runner.drain().await;
}
