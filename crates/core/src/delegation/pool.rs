//! The registry of sub-agents (workers): who runs, for which session, in which state,
//! with what last status line, and how it ended. Illegal state changes are refused.
//! This registry is also what other parts address running agents through (ids, roles,
//! the owning session).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Finished workers remembered (for the status block and listings), across all sessions.
const KEEP_FINISHED: usize = 50;

/// Where a worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerState {
    /// Working on its task.
    Running,
    /// Stopped and waiting to be told something (a reminder to report its outcome).
    WaitingForInput,
    /// Finished and reported its result.
    Done,
    /// Gave up, broke, looped or ran out of time.
    Failed,
    /// Stopped by the assistant, a person or shutdown.
    Cancelled,
}

impl WorkerState {
    /// Every state, for exhaustive checks.
    pub const ALL: [WorkerState; 5] = [Self::Running, Self::WaitingForInput, Self::Done, Self::Failed, Self::Cancelled];

    /// Name as shown to models and people.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::WaitingForInput => "waiting_for_input",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// True once the worker can't change any more.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Running | Self::WaitingForInput => false,
            Self::Done | Self::Failed | Self::Cancelled => true,
        }
    }

    /// Whether a worker in this state may move to `next`.
    pub fn can_transition_to(self, next: WorkerState) -> bool {
        matches!(
            (self, next),
            (Self::Running, Self::WaitingForInput | Self::Done | Self::Failed | Self::Cancelled)
                | (Self::WaitingForInput, Self::Running | Self::Failed | Self::Cancelled)
        )
    }
}

/// What a worker says about how its task went (`set_status` with `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The task is done; the result is the answer.
    Done,
    /// The task could not be done; the result says why.
    Failed,
}

/// Whether the assistant waits for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// The delegating turn waits for the result.
    Normal,
    /// The delegating turn goes on; the result arrives later as its own message.
    Background,
}

impl Priority {
    /// Name as written in tool arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Background => "background",
        }
    }
}

/// Why the pool refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// No worker has this id (or it was forgotten long ago).
    #[error("can't find worker {id}")]
    UnknownWorker {
        /// The id asked for.
        id: String,
    },
    /// The move between these states is not allowed.
    #[error("can't move worker {id} from {} to {}", from.as_str(), to.as_str())]
    IllegalTransition {
        /// The worker.
        id: String,
        /// Its state.
        from: WorkerState,
        /// The state asked for.
        to: WorkerState,
    },
    /// The session already has as many workers running as it may.
    #[error(
        "can't start another sub-agent: this session already has {running} running (the limit is max_workers = {limit}); wait for one to finish or cancel one with cancel_worker"
    )]
    TooManyWorkers {
        /// Workers running for the session.
        running: usize,
        /// The limit.
        limit: usize,
    },
    /// The worker already ended.
    #[error("can't cancel worker {id}: it already ended ({})", state.as_str())]
    AlreadyEnded {
        /// The worker.
        id: String,
        /// How it ended.
        state: WorkerState,
    },
}

/// A worker about to start.
#[derive(Debug, Clone)]
pub struct NewWorker {
    /// Its role.
    pub role: String,
    /// The session that delegated the work (the only one it reports to).
    pub owner: String,
    /// The task, as given.
    pub task: String,
    /// Whether the owner waits.
    pub priority: Priority,
    /// Correlation id of the turn that delegated it.
    pub correlation_id: String,
    /// Stops it.
    pub cancel: CancellationToken,
}

/// A worker as seen from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSnapshot {
    /// Short id (`cancel_worker {id}`).
    pub id: String,
    /// Its role.
    pub role: String,
    /// The session that delegated the work.
    pub owner: String,
    /// Key of the worker's own session.
    pub session_key: String,
    /// The task.
    pub task: String,
    /// Whether the owner waits.
    pub priority: Priority,
    /// Where it is.
    pub state: WorkerState,
    /// Its last `set_status` line, else its last tool call.
    pub status: String,
    /// The result or failure reason, once it ended.
    pub result: Option<String>,
    /// Correlation id of the turn that delegated it.
    pub correlation_id: String,
    /// Time since it started (until it ended, for finished ones).
    pub elapsed: std::time::Duration,
}

#[derive(Debug)]
struct Entry {
    snapshot: WorkerSnapshot,
    reported: Option<(Outcome, String)>,
    activity: String,
    cancel: CancellationToken,
    started: Instant,
    ended: Option<Instant>,
}

impl Entry {
    fn snapshot(&self) -> WorkerSnapshot {
        let mut snapshot = self.snapshot.clone();
        if snapshot.status.is_empty() {
            snapshot.status.clone_from(&self.activity);
        }
        snapshot.elapsed = self.ended.unwrap_or_else(Instant::now).saturating_duration_since(self.started);
        snapshot
    }
}

#[derive(Debug, Default)]
struct Inner {
    workers: HashMap<String, Entry>,
    /// Ids in start order.
    order: Vec<String>,
    /// Ids of ended workers, oldest first.
    finished: VecDeque<String>,
    /// Ids per owner session, in start order: every assistant turn asks for its own
    /// workers, and with a hundred others running that must not visit them all.
    owners: HashMap<String, Vec<String>>,
}

impl Inner {
    /// The entries of `owner`'s workers, in start order.
    fn of_owner<'a>(&'a self, owner: &str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.owners.get(owner).into_iter().flatten().filter_map(|id| self.workers.get(id))
    }
}

/// Every worker of the process, running and recently finished.
#[derive(Debug, Default)]
pub struct WorkerPool {
    inner: Mutex<Inner>,
}

/// The session key of a worker: `worker:<role>:<id>`.
pub fn worker_session_key(role: &str, id: &str) -> String {
    format!("worker:{role}:{id}")
}

/// True for a worker's own session (its results already live in the owner's session).
pub fn is_worker_session(key: &str) -> bool {
    key.starts_with("worker:")
}

impl WorkerPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    /// Registers a running worker unless its owner already has `limit` running.
    pub fn register(&self, worker: NewWorker, limit: usize) -> Result<WorkerSnapshot, PoolError> {
        let mut inner = self.lock();
        let running = inner.of_owner(&worker.owner).filter(|entry| !entry.snapshot.state.is_terminal()).count();
        if running >= limit {
            return Err(PoolError::TooManyWorkers { running, limit });
        }
        let mut id = crate::ids::worker_id();
        while inner.workers.contains_key(&id) {
            id = crate::ids::worker_id();
        }
        let snapshot = WorkerSnapshot {
            session_key: worker_session_key(&worker.role, &id),
            id: id.clone(),
            role: worker.role,
            owner: worker.owner,
            task: worker.task,
            priority: worker.priority,
            state: WorkerState::Running,
            status: String::new(),
            result: None,
            correlation_id: worker.correlation_id,
            elapsed: std::time::Duration::ZERO,
        };
        let entry = Entry {
            snapshot: snapshot.clone(),
            reported: None,
            activity: String::new(),
            cancel: worker.cancel,
            started: Instant::now(),
            ended: None,
        };
        inner.owners.entry(snapshot.owner.clone()).or_default().push(id.clone());
        inner.workers.insert(id.clone(), entry);
        inner.order.push(id);
        Ok(snapshot)
    }

    /// Moves a worker to `next`; returns the state it left.
    pub fn transition(&self, id: &str, next: WorkerState) -> Result<WorkerState, PoolError> {
        let mut inner = self.lock();
        let entry = inner.workers.get_mut(id).ok_or_else(|| PoolError::UnknownWorker { id: id.to_owned() })?;
        let from = entry.snapshot.state;
        if !from.can_transition_to(next) {
            return Err(PoolError::IllegalTransition { id: id.to_owned(), from, to: next });
        }
        entry.snapshot.state = next;
        if next.is_terminal() {
            entry.ended = Some(Instant::now());
            inner.finished.push_back(id.to_owned());
            while inner.finished.len() > KEEP_FINISHED {
                if let Some(old) = inner.finished.pop_front() {
                    if let Some(removed) = inner.workers.remove(&old) {
                        let owner = &removed.snapshot.owner;
                        if let Some(ids) = inner.owners.get_mut(owner) {
                            ids.retain(|kept| *kept != old);
                            if ids.is_empty() {
                                inner.owners.remove(owner);
                            }
                        }
                    }
                    inner.order.retain(|kept| *kept != old);
                }
            }
        }
        Ok(from)
    }

    /// Ends a worker in `state` with its result or failure reason.
    pub fn finish(&self, id: &str, state: WorkerState, result: &str) -> Result<(), PoolError> {
        if !state.is_terminal() {
            let from = self.snapshot(id).map_or(WorkerState::Running, |snapshot| snapshot.state);
            return Err(PoolError::IllegalTransition { id: id.to_owned(), from, to: state });
        }
        {
            let mut inner = self.lock();
            let entry = inner.workers.get_mut(id).ok_or_else(|| PoolError::UnknownWorker { id: id.to_owned() })?;
            if !entry.snapshot.state.can_transition_to(state) {
                return Err(PoolError::IllegalTransition { id: id.to_owned(), from: entry.snapshot.state, to: state });
            }
            entry.snapshot.result = Some(result.to_owned());
        }
        self.transition(id, state).map(|_| ())
    }

    /// Records a worker's own status line.
    pub fn set_status(&self, id: &str, status: &str) -> Result<(), PoolError> {
        let mut inner = self.lock();
        let entry = inner.workers.get_mut(id).ok_or_else(|| PoolError::UnknownWorker { id: id.to_owned() })?;
        entry.snapshot.status = one_line(status, 200);
        Ok(())
    }

    /// Records what a worker is doing (its latest tool call), shown when it set no status.
    pub fn note_activity(&self, id: &str, activity: &str) {
        if let Some(entry) = self.lock().workers.get_mut(id) {
            entry.activity = one_line(activity, 200);
        }
    }

    /// Records the outcome a worker reported; the last report wins.
    pub fn report(&self, id: &str, outcome: Outcome, result: &str) -> Result<(), PoolError> {
        let mut inner = self.lock();
        let entry = inner.workers.get_mut(id).ok_or_else(|| PoolError::UnknownWorker { id: id.to_owned() })?;
        entry.reported = Some((outcome, result.to_owned()));
        Ok(())
    }

    /// The outcome a worker reported, if it did.
    pub fn reported(&self, id: &str) -> Option<(Outcome, String)> {
        self.lock().workers.get(id).and_then(|entry| entry.reported.clone())
    }

    /// Asks a running worker to stop; it ends as cancelled shortly after.
    pub fn cancel(&self, id: &str) -> Result<WorkerSnapshot, PoolError> {
        let inner = self.lock();
        let entry = inner.workers.get(id).ok_or_else(|| PoolError::UnknownWorker { id: id.to_owned() })?;
        if entry.snapshot.state.is_terminal() {
            return Err(PoolError::AlreadyEnded { id: id.to_owned(), state: entry.snapshot.state });
        }
        entry.cancel.cancel();
        Ok(entry.snapshot())
    }

    /// Asks every running worker to stop.
    pub fn cancel_all(&self) {
        for entry in self.lock().workers.values().filter(|entry| !entry.snapshot.state.is_terminal()) {
            entry.cancel.cancel();
        }
    }

    /// One worker.
    pub fn snapshot(&self, id: &str) -> Option<WorkerSnapshot> {
        self.lock().workers.get(id).map(Entry::snapshot)
    }

    /// The worker whose own session is `session_key`.
    pub fn by_session(&self, session_key: &str) -> Option<WorkerSnapshot> {
        self.lock().workers.values().find(|entry| entry.snapshot.session_key == session_key).map(Entry::snapshot)
    }

    /// Every worker known, in start order.
    pub fn list(&self) -> Vec<WorkerSnapshot> {
        let inner = self.lock();
        inner.order.iter().filter_map(|id| inner.workers.get(id)).map(Entry::snapshot).collect()
    }

    /// Workers that have not ended, in start order.
    pub fn running(&self) -> Vec<WorkerSnapshot> {
        self.list().into_iter().filter(|worker| !worker.state.is_terminal()).collect()
    }

    /// Workers of one owner session, in start order.
    pub fn owned_by(&self, owner: &str) -> Vec<WorkerSnapshot> {
        self.lock().of_owner(owner).map(Entry::snapshot).collect()
    }

    /// The ended workers of `owner`, most recent last, at most `limit`.
    pub fn finished_for(&self, owner: &str, limit: usize) -> Vec<WorkerSnapshot> {
        let inner = self.lock();
        let mut mine: Vec<&Entry> = inner.of_owner(owner).filter(|entry| entry.ended.is_some()).collect();
        mine.sort_by_key(|entry| entry.ended);
        let skip = mine.len().saturating_sub(limit);
        mine.into_iter().skip(skip).map(Entry::snapshot).collect()
    }
}

/// `text` on one line, at most `limit` bytes.
pub(crate) fn one_line(text: &str, limit: usize) -> String {
    let single = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if single.len() <= limit {
        return single;
    }
    format!("{}…", &single[..crate::text::floor_char_boundary(&single, limit)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(owner: &str) -> NewWorker {
        NewWorker {
            role: "researcher".into(),
            owner: owner.into(),
            task: "look".into(),
            priority: Priority::Background,
            correlation_id: "c1".into(),
            cancel: CancellationToken::new(),
        }
    }

    #[test]
    fn every_transition_is_checked_against_the_state_machine() {
        use WorkerState::{Cancelled, Done, Failed, Running, WaitingForInput};
        let legal = [
            (Running, WaitingForInput),
            (Running, Done),
            (Running, Failed),
            (Running, Cancelled),
            (WaitingForInput, Running),
            (WaitingForInput, Failed),
            (WaitingForInput, Cancelled),
        ];
        for from in WorkerState::ALL {
            for to in WorkerState::ALL {
                let expected = legal.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), expected, "{} -> {}", from.as_str(), to.as_str());
            }
        }
        for state in WorkerState::ALL {
            assert_eq!(state.is_terminal(), matches!(state, Done | Failed | Cancelled));
        }
    }

    /// Puts a fresh worker into `state` along a legal path.
    fn worker_in(pool: &WorkerPool, state: WorkerState) -> String {
        let id = pool.register(worker("s"), 100).unwrap().id;
        match state {
            WorkerState::Running => {}
            WorkerState::WaitingForInput => {
                pool.transition(&id, WorkerState::WaitingForInput).unwrap();
            }
            terminal => pool.finish(&id, terminal, "end").unwrap(),
        }
        id
    }

    #[test]
    fn the_pool_refuses_every_illegal_transition_and_keeps_the_state() {
        let pool = WorkerPool::new();
        for from in WorkerState::ALL {
            for to in WorkerState::ALL {
                let id = worker_in(&pool, from);
                let result = pool.transition(&id, to);
                if from.can_transition_to(to) {
                    assert_eq!(result, Ok(from));
                    assert_eq!(pool.snapshot(&id).unwrap().state, to);
                } else {
                    assert_eq!(result, Err(PoolError::IllegalTransition { id: id.clone(), from, to }));
                    assert_eq!(pool.snapshot(&id).unwrap().state, from, "unchanged after a refused move");
                }
            }
        }
        assert!(matches!(pool.transition("nope", WorkerState::Done), Err(PoolError::UnknownWorker { .. })));
        let running = worker_in(&pool, WorkerState::Running);
        assert!(matches!(pool.finish(&running, WorkerState::Running, "x"), Err(PoolError::IllegalTransition { .. })));
    }

    #[test]
    fn the_limit_counts_running_workers_of_the_same_owner() {
        let pool = WorkerPool::new();
        let first = pool.register(worker("a"), 2).unwrap();
        pool.register(worker("a"), 2).unwrap();
        assert_eq!(pool.register(worker("a"), 2), Err(PoolError::TooManyWorkers { running: 2, limit: 2 }));
        pool.register(worker("b"), 2).unwrap();
        pool.finish(&first.id, WorkerState::Done, "ok").unwrap();
        let third = pool.register(worker("a"), 2).unwrap();
        assert_eq!(third.session_key, format!("worker:researcher:{}", third.id));
        assert_eq!(pool.owned_by("a").len(), 3);
        assert_eq!(pool.finished_for("a", 5).len(), 1);
    }

    #[test]
    fn cancel_reaches_the_token_and_refuses_ended_workers() {
        let pool = WorkerPool::new();
        let new = worker("a");
        let token = new.cancel.clone();
        let id = pool.register(new, 4).unwrap().id;
        pool.set_status(&id, "reading\nthe docs").unwrap();
        assert_eq!(pool.cancel(&id).unwrap().status, "reading the docs");
        assert!(token.is_cancelled());
        pool.finish(&id, WorkerState::Cancelled, "cancelled").unwrap();
        assert_eq!(pool.cancel(&id), Err(PoolError::AlreadyEnded { id: id.clone(), state: WorkerState::Cancelled }));
        assert!(matches!(pool.cancel("zzz"), Err(PoolError::UnknownWorker { .. })));
    }

    #[test]
    fn old_finished_workers_are_forgotten() {
        let pool = WorkerPool::new();
        for _ in 0..KEEP_FINISHED + 5 {
            let id = pool.register(worker("a"), 1).unwrap().id;
            pool.finish(&id, WorkerState::Done, "ok").unwrap();
        }
        assert_eq!(pool.list().len(), KEEP_FINISHED);
    }
}
