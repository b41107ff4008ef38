//! The fake Discord's shared state: the gateway session and its dispatch log, the live
//! connection, everything recorded, and the failures queued by tests.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::{
    EditRecord, FAKE_BOT_ID, FakeFile, FakeRoute, GatewayConnection, HeartbeatRecord, ReactionRecord, SentRecord,
};

/// What the test wants a connection's task to do.
#[derive(Debug)]
pub(super) enum Control {
    /// Send this text frame.
    Send(String),
    /// Send a close frame with this code and reason, then end.
    Close(u16, String),
    /// End without a close frame.
    Drop,
}

/// A failure a test queued for the next request on a route.
#[derive(Debug, Clone, Copy)]
pub(super) enum Injected {
    RateLimited { retry_after: Duration, global: bool },
    Status(u16),
}

/// One dispatch of the session, kept for replay on RESUME.
#[derive(Debug, Clone)]
struct Dispatch {
    sequence: u64,
    frame: String,
}

#[derive(Debug)]
struct Session {
    id: String,
    sequence: u64,
    log: Vec<Dispatch>,
    /// False once invalidated without resume: a RESUME then gets INVALID_SESSION false.
    resumable: bool,
}

/// The connection dispatches go to (identified or resumed, not yet detached).
#[derive(Debug)]
struct Live {
    connection: u64,
    control: mpsc::UnboundedSender<Control>,
}

/// Everything behind the fake's lock.
#[derive(Debug, Default)]
pub(super) struct State {
    session: Option<Session>,
    sessions_started: u64,
    /// Dispatches pushed before the first session, sent right after READY.
    early: Vec<(String, Value)>,
    live: Option<Live>,
    next_connection: u64,
    not_acking: HashSet<u64>,
    pub(super) connections: Vec<GatewayConnection>,
    pub(super) identifies: Vec<Value>,
    pub(super) resumes: Vec<Value>,
    pub(super) heartbeats: Vec<HeartbeatRecord>,
    pub(super) client_close_codes: Vec<u16>,
    next_snowflake: u64,
    pub(super) sent: Vec<SentRecord>,
    pub(super) edits: Vec<EditRecord>,
    pub(super) typing: Vec<String>,
    pub(super) reactions: Vec<ReactionRecord>,
    pub(super) files: HashMap<String, FakeFile>,
    injected: Vec<(FakeRoute, Injected)>,
    pub(super) requests: HashMap<FakeRoute, usize>,
}

/// The state with its lock, change signal and settings.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) token: String,
    pub(super) heartbeat_interval: Duration,
    pub(super) base_url: String,
    pub(super) shutdown: CancellationToken,
    pub(super) changed: Notify,
    state: Mutex<State>,
}

impl Shared {
    pub(super) fn new(token: String, heartbeat_interval: Duration, base_url: String) -> Self {
        Self {
            token,
            heartbeat_interval,
            base_url,
            shutdown: CancellationToken::new(),
            changed: Notify::new(),
            state: Mutex::new(State { next_snowflake: 1_200_000_000_000_000_000, ..State::default() }),
        }
    }

    /// Runs `change` under the lock, then wakes every waiter.
    pub(super) fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let result = change(&mut self.lock());
        self.changed.notify_waiters();
        result
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The URL connections resume on (another path, so tests can tell).
    pub(super) fn resume_url(&self) -> String {
        format!("{}/resume-gateway", self.base_url.replacen("http://", "ws://", 1))
    }
}

fn dispatch_frame(event: &str, sequence: u64, data: &Value) -> String {
    json!({"op": 0, "t": event, "s": sequence, "d": data}).to_string()
}

impl State {
    pub(super) fn next_id(&mut self) -> String {
        self.next_snowflake += 1;
        self.next_snowflake.to_string()
    }

    pub(super) fn open_connection(&mut self, path: &str, query: &str) -> u64 {
        self.next_connection += 1;
        self.connections.push(GatewayConnection { path: path.to_owned(), query: query.to_owned() });
        self.next_connection
    }

    pub(super) fn close_connection(&mut self, connection: u64) {
        if self.live.as_ref().is_some_and(|live| live.connection == connection) {
            self.live = None;
        }
        self.not_acking.remove(&connection);
    }

    pub(super) fn is_acking(&self, connection: u64) -> bool {
        !self.not_acking.contains(&connection)
    }

    pub(super) fn stop_acking(&mut self) -> bool {
        match &self.live {
            Some(live) => self.not_acking.insert(live.connection),
            None => false,
        }
    }

    pub(super) fn identify_count(&self) -> usize {
        self.identifies.len()
    }

    pub(super) fn is_live(&self) -> bool {
        self.live.is_some()
    }

    pub(super) fn live_sequence(&self) -> Option<u64> {
        self.session.as_ref().map(|session| session.sequence)
    }

    /// Starts a session for `connection`: READY, then whatever was pushed before.
    pub(super) fn identify(&mut self, connection: u64, control: &mpsc::UnboundedSender<Control>, resume_url: String) {
        self.sessions_started += 1;
        let session_id = format!("fake-session-{}", self.sessions_started);
        self.session = Some(Session { id: session_id.clone(), sequence: 0, log: Vec::new(), resumable: true });
        self.live = Some(Live { connection, control: control.clone() });
        let ready = json!({
            "v": 10,
            "user": {"id": FAKE_BOT_ID, "username": "squidbot", "global_name": null, "bot": true, "discriminator": "0"},
            "guilds": [],
            "session_id": session_id,
            "resume_gateway_url": resume_url,
            "application": {"id": FAKE_BOT_ID, "flags": 0},
        });
        self.dispatch("READY", ready);
        for (event, data) in std::mem::take(&mut self.early) {
            self.dispatch(&event, data);
        }
    }

    /// Resumes the session on `connection` when `session_id` and `sequence` fit:
    /// replays what came after `sequence`, then RESUMED. Otherwise INVALID_SESSION false.
    pub(super) fn resume(
        &mut self,
        connection: u64,
        control: &mpsc::UnboundedSender<Control>,
        session_id: &str,
        sequence: Option<u64>,
    ) -> bool {
        let replay = match &self.session {
            Some(session)
                if session.resumable
                    && session.id == session_id
                    && sequence.is_some_and(|sequence| sequence <= session.sequence) =>
            {
                let after = sequence.unwrap_or(0);
                session.log.iter().filter(|dispatch| dispatch.sequence > after).cloned().collect::<Vec<_>>()
            }
            _ => {
                send(control, Control::Send(json!({"op": 9, "d": false, "s": null, "t": null}).to_string()));
                return false;
            }
        };
        for dispatch in replay {
            send(control, Control::Send(dispatch.frame));
        }
        self.live = Some(Live { connection, control: control.clone() });
        self.dispatch("RESUMED", json!({}));
        true
    }

    /// Adds a dispatch to the session and sends it to the live connection, if any;
    /// before the first session it waits for READY.
    pub(super) fn dispatch(&mut self, event: &str, data: Value) {
        let Some(session) = &mut self.session else {
            self.early.push((event.to_owned(), data));
            return;
        };
        session.sequence += 1;
        let frame = dispatch_frame(event, session.sequence, &data);
        session.log.push(Dispatch { sequence: session.sequence, frame: frame.clone() });
        if let Some(live) = &self.live {
            send(&live.control, Control::Send(frame));
        }
    }

    /// Sends a control to the live connection and, when `detach`, stops dispatching to it.
    pub(super) fn control_live(&mut self, control: Control, detach: bool) -> bool {
        let Some(live) = &self.live else {
            return false;
        };
        send(&live.control, control);
        if detach {
            self.live = None;
        }
        true
    }

    pub(super) fn forbid_resume(&mut self) {
        if let Some(session) = &mut self.session {
            session.resumable = false;
        }
    }

    pub(super) fn record_heartbeat(&mut self, connection: u64, sequence: Option<u64>) {
        self.heartbeats.push(HeartbeatRecord { connection, sequence, at: Instant::now() });
    }

    pub(super) fn inject(&mut self, route: FakeRoute, injected: Injected) {
        self.injected.push((route, injected));
    }

    /// Counts a request on `route` and takes the failure queued for it, if any.
    pub(super) fn take_injected(&mut self, route: FakeRoute) -> Option<Injected> {
        *self.requests.entry(route).or_default() += 1;
        let index = self.injected.iter().position(|(queued, _)| *queued == route)?;
        Some(self.injected.remove(index).1)
    }
}

/// Hands a control to a connection task; a finished task just doesn't need it.
fn send(control: &mpsc::UnboundedSender<Control>, message: Control) {
    if control.send(message).is_err() {
        // The connection has ended; its successor gets the events by replay.
    }
}
