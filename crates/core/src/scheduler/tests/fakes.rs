//! Test doubles for the scheduler: a clock driven by tokio's paused time (plus jumps), an
//! in-memory job store with the SQLite store's revision and claim semantics, and an
//! executor that records runs and can fail or block on demand.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::BoxFuture;
use crate::clock::Clock;
use crate::jobs::{ContextMode, Job, JobKind, JobStatus, JobStore, JobStoreError, RunOutcome, RunRecord};
use crate::scheduler::{JobExecutor, JobRunError, RunTrigger};
use crate::sync::lock;

/// Milliseconds since the Unix epoch of an RFC 3339 time.
pub(super) fn ms(text: &str) -> i64 {
    text.parse::<Timestamp>().unwrap().as_millisecond()
}

/// `minutes` in milliseconds.
pub(super) fn minutes(minutes: i64) -> i64 {
    minutes * 60_000
}

/// An active user job running `schedule` in UTC, made at `created`, next due at `next_run`.
pub(super) fn job(id: &str, schedule: &str, created: i64, next_run: Option<i64>) -> Job {
    Job {
        id: id.to_owned(),
        kind: JobKind::User,
        name: format!("job {id}"),
        schedule: schedule.to_owned(),
        timezone: "UTC".to_owned(),
        message: "check the inbox".to_owned(),
        channel: None,
        context_mode: ContextMode::Isolated,
        owner_context: "owner".to_owned(),
        status: JobStatus::Active,
        next_run,
        last_run: None,
        last_error: None,
        consecutive_failures: 0,
        created,
        source_hash: None,
        seed: None,
        active_hours: None,
    }
}

/// Wall-clock time = `base` + tokio's (paused) time since creation + a settable jump.
pub(super) struct TestClock {
    base: SystemTime,
    start: Instant,
    jump_ms: AtomicI64,
}

impl TestClock {
    pub(super) fn new(base: &str) -> Arc<Self> {
        let base = SystemTime::from(base.parse::<Timestamp>().unwrap());
        Arc::new(Self { base, start: Instant::now(), jump_ms: AtomicI64::new(0) })
    }

    /// Moves the wall clock by `milliseconds` (negative: back).
    pub(super) fn jump(&self, milliseconds: i64) {
        self.jump_ms.fetch_add(milliseconds, Ordering::SeqCst);
    }

    pub(super) fn now_ms(&self) -> i64 {
        Timestamp::try_from(self.now()).unwrap().as_millisecond()
    }
}

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        let jump = self.jump_ms.load(Ordering::SeqCst);
        let shifted = self.base + self.start.elapsed();
        let offset = Duration::from_millis(jump.unsigned_abs());
        if jump >= 0 { shifted + offset } else { shifted - offset }
    }
}

/// The job table in memory. Every changed row bumps the revision by one, like the
/// SQLite triggers; `edit` plays the CLI (another process), `edit_quietly` a change the
/// scheduler has not polled yet.
#[derive(Default)]
pub(super) struct MemoryStore {
    state: Mutex<StoreState>,
}

#[derive(Default)]
struct StoreState {
    jobs: BTreeMap<String, Job>,
    revision: i64,
    failing: bool,
    lost_claims: usize,
}

impl MemoryStore {
    pub(super) fn with(jobs: impl IntoIterator<Item = Job>) -> Arc<Self> {
        let store = Self::default();
        lock(&store.state).jobs = jobs.into_iter().map(|job| (job.id.clone(), job)).collect();
        Arc::new(store)
    }

    pub(super) fn job(&self, id: &str) -> Job {
        lock(&self.state).jobs.get(id).cloned().unwrap_or_else(|| panic!("no job {id}"))
    }

    /// Changes a job as another process would: the revision moves.
    pub(super) fn edit(&self, id: &str, change: impl FnOnce(&mut Job)) {
        let mut state = lock(&self.state);
        change(state.jobs.get_mut(id).unwrap());
        state.revision += 1;
    }

    /// Changes a job without moving the revision (a change not polled yet).
    pub(super) fn edit_quietly(&self, id: &str, change: impl FnOnce(&mut Job)) {
        change(lock(&self.state).jobs.get_mut(id).unwrap());
    }

    /// Adds a job as another process would.
    pub(super) fn add(&self, job: Job) {
        let mut state = lock(&self.state);
        state.jobs.insert(job.id.clone(), job);
        state.revision += 1;
    }

    /// Makes every call fail (a locked or broken database) or work again.
    pub(super) fn set_failing(&self, failing: bool) {
        lock(&self.state).failing = failing;
    }

    /// Claims that found the slot taken.
    pub(super) fn lost_claims(&self) -> usize {
        lock(&self.state).lost_claims
    }

    fn with_state<T>(
        &self,
        work: impl FnOnce(&mut StoreState) -> Result<T, JobStoreError>,
    ) -> Result<T, JobStoreError> {
        let mut state = lock(&self.state);
        if state.failing {
            return Err(JobStoreError::Storage {
                action: "use the job table",
                reason: "database is locked".to_owned(),
            });
        }
        work(&mut state)
    }
}

fn not_found(id: &str) -> JobStoreError {
    JobStoreError::NotFound { id: id.to_owned() }
}

impl JobStore for MemoryStore {
    async fn insert(&self, job: &Job) -> Result<(), JobStoreError> {
        self.with_state(|state| {
            if state.jobs.contains_key(&job.id) {
                return Err(JobStoreError::AlreadyExists { id: job.id.clone() });
            }
            state.jobs.insert(job.id.clone(), job.clone());
            state.revision += 1;
            Ok(())
        })
    }

    async fn list(&self) -> Result<Vec<Job>, JobStoreError> {
        self.with_state(|state| {
            let mut jobs: Vec<Job> = state.jobs.values().cloned().collect();
            jobs.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
            Ok(jobs)
        })
    }

    async fn get(&self, id: &str) -> Result<Option<Job>, JobStoreError> {
        self.with_state(|state| Ok(state.jobs.get(id).cloned()))
    }

    async fn remove(&self, id: &str) -> Result<(), JobStoreError> {
        self.with_state(|state| {
            state.jobs.remove(id).ok_or_else(|| not_found(id))?;
            state.revision += 1;
            Ok(())
        })
    }

    async fn set_status(&self, id: &str, status: JobStatus, next_run: Option<i64>) -> Result<(), JobStoreError> {
        self.with_state(|state| {
            let job = state.jobs.get_mut(id).ok_or_else(|| not_found(id))?;
            (job.status, job.next_run) = (status, next_run);
            state.revision += 1;
            Ok(())
        })
    }

    async fn due(&self, now: i64) -> Result<Vec<Job>, JobStoreError> {
        self.with_state(|state| {
            let due = state.jobs.values().filter(|job| job.status == JobStatus::Active && job.next_run <= Some(now));
            Ok(due.filter(|job| job.next_run.is_some()).cloned().collect())
        })
    }

    async fn record_run(&self, id: &str, run: &RunRecord) -> Result<u32, JobStoreError> {
        self.with_state(|state| {
            let job = state.jobs.get_mut(id).ok_or_else(|| not_found(id))?;
            job.last_run = Some(run.at);
            match &run.outcome {
                RunOutcome::Succeeded => (job.last_error, job.consecutive_failures) = (None, 0),
                RunOutcome::Failed { reason } => {
                    (job.last_error, job.consecutive_failures) = (Some(reason.clone()), job.consecutive_failures + 1);
                }
            }
            let failures = job.consecutive_failures;
            state.revision += 1;
            Ok(failures)
        })
    }

    async fn revision(&self) -> Result<i64, JobStoreError> {
        self.with_state(|state| Ok(state.revision))
    }

    async fn claim(
        &self,
        id: &str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> Result<bool, JobStoreError> {
        self.with_state(|state| {
            match state.jobs.get_mut(id) {
                Some(job) if job.status == JobStatus::Active && job.next_run == expected_next_run => {
                    job.next_run = next_run;
                    state.revision += 1;
                    return Ok(true);
                }
                Some(_) | None => state.lost_claims += 1,
            }
            Ok(false)
        })
    }

    async fn pause_with_error(&self, id: &str, reason: &str) -> Result<(), JobStoreError> {
        self.with_state(|state| {
            let job = state.jobs.get_mut(id).ok_or_else(|| not_found(id))?;
            (job.status, job.last_error) = (JobStatus::Paused, Some(reason.to_owned()));
            state.revision += 1;
            Ok(())
        })
    }

    async fn replace_generated(&self, kind: JobKind, owner_context: &str, jobs: &[Job]) -> Result<(), JobStoreError> {
        self.with_state(|state| {
            let before = state.jobs.len();
            state.jobs.retain(|_, job| job.kind != kind || job.owner_context != owner_context);
            let removed = before - state.jobs.len();
            for job in jobs {
                state.jobs.insert(job.id.clone(), job.clone());
            }
            state.revision += i64::try_from(removed + jobs.len()).unwrap();
            Ok(())
        })
    }
}

/// One call of [`JobExecutor::execute`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) id: String,
    pub(super) trigger: RunTrigger,
    /// The test clock when the run started (ms).
    pub(super) at: i64,
    /// The prompt it ran with.
    pub(super) message: String,
}

/// Records runs and notices; fails the jobs in `failing`, and holds runs of jobs with a
/// gate until a permit is added.
pub(super) struct RecordingExecutor {
    clock: Arc<TestClock>,
    runs: Mutex<Vec<Run>>,
    failing: Mutex<HashSet<String>>,
    panicking: Mutex<HashSet<String>>,
    gates: Mutex<HashMap<String, Arc<Semaphore>>>,
    notices: Mutex<Vec<(String, String)>>,
}

impl RecordingExecutor {
    pub(super) fn new(clock: Arc<TestClock>) -> Arc<Self> {
        Arc::new(Self {
            clock,
            runs: Mutex::default(),
            failing: Mutex::default(),
            panicking: Mutex::default(),
            gates: Mutex::default(),
            notices: Mutex::default(),
        })
    }

    pub(super) fn runs(&self) -> Vec<Run> {
        lock(&self.runs).clone()
    }

    /// Start times (ms) of the runs of `id`.
    pub(super) fn run_times(&self, id: &str) -> Vec<i64> {
        lock(&self.runs).iter().filter(|run| run.id == id).map(|run| run.at).collect()
    }

    pub(super) fn notices(&self) -> Vec<(String, String)> {
        lock(&self.notices).clone()
    }

    pub(super) fn fail(&self, id: &str, failing: bool) {
        let mut set = lock(&self.failing);
        if failing {
            set.insert(id.to_owned())
        } else {
            set.remove(id)
        };
    }

    pub(super) fn panic_on(&self, id: &str) {
        lock(&self.panicking).insert(id.to_owned());
    }

    /// Runs of `id` from now on wait until [`RecordingExecutor::release`].
    pub(super) fn block(&self, id: &str) {
        lock(&self.gates).insert(id.to_owned(), Arc::new(Semaphore::new(0)));
    }

    /// Lets one waiting (or the next) run of `id` finish.
    pub(super) fn release(&self, id: &str) {
        if let Some(gate) = lock(&self.gates).get(id) {
            gate.add_permits(1);
        }
    }
}

impl JobExecutor for RecordingExecutor {
    fn execute<'a>(&'a self, job: &'a Job, trigger: RunTrigger) -> BoxFuture<'a, Result<(), JobRunError>> {
        Box::pin(async move {
            let run = Run { id: job.id.clone(), trigger, at: self.clock.now_ms(), message: job.message.clone() };
            lock(&self.runs).push(run);
            let gate = lock(&self.gates).get(&job.id).cloned();
            if let Some(gate) = gate {
                gate.acquire().await.unwrap().forget();
            }
            if lock(&self.panicking).contains(&job.id) {
                panic!("the executor broke on {}", job.id);
            }
            if lock(&self.failing).contains(&job.id) {
                Err(JobRunError::Turn("the model timed out".to_owned()))
            } else {
                Ok(())
            }
        })
    }

    fn notify_owner<'a>(&'a self, job: &'a Job, notice: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move { lock(&self.notices).push((job.id.clone(), notice.to_owned())) })
    }
}
