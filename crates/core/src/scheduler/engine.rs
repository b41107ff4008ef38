//! The scheduler's loop: the in-memory job table and next-due queue, slot claims, run
//! tasks and their outcomes, reloads when the store's revision moves, and shutdown.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use jiff::Timestamp;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::completion::{Completion, Finished};
use super::entry::{Entry, fingerprint};
use super::plan::{Plan, SkipReason, Slot};
use super::{JobExecutor, RunNowError, RunNowRequest, RunTrigger, SchedulerSettings, SchedulerStatus};
use crate::clock::Clock;
use crate::jobs::{DynJobStore, Job, JobStatus, JobStoreError, RunOutcome, RunRecord};

/// The shortest poll interval used, whatever the settings say: a zero interval would
/// spin.
const MIN_POLL: Duration = Duration::from_millis(10);

/// How far the clock may step back (NTP slew, a VM resync) before it is worth a warning.
const BACKWARD_TOLERANCE_MS: i64 = 5_000;

/// The loop's state. Only the loop writes to the store, one call at a time, which is
/// what makes counting its own writes against the revision exact.
pub(super) struct Engine {
    store: Arc<dyn DynJobStore>,
    executor: Arc<dyn JobExecutor>,
    clock: Arc<dyn Clock>,
    settings: SchedulerSettings,
    poll: Duration,
    /// Boxed: a table sized for thousands of jobs holds pointers, not entries of
    /// hundreds of bytes in its spare capacity.
    jobs: HashMap<String, Box<Entry>>,
    /// Counts reloads, to tell which entries the latest one did not see.
    generation: u64,
    /// `(due ms, id)` of every active job with a next due time.
    queue: BTreeSet<(i64, String)>,
    running: BTreeSet<String>,
    finished_sender: mpsc::UnboundedSender<Finished>,
    tracker: TaskTracker,
    /// The store revision the table was last read at, plus `own_writes` rows written
    /// since by this loop: any other difference is someone else's change.
    known_revision: Option<i64>,
    own_writes: i64,
    /// Re-read the whole table at the next poll (after an error left memory unsure).
    reload_forced: bool,
    /// Re-read it now (`wake`, start-up).
    wake_requested: bool,
    store_failing: bool,
    next_poll: Instant,
    last_now: Option<i64>,
    /// Runs whose outcome could not be stored yet; retried at each poll.
    unrecorded: Vec<(Job, RunRecord)>,
    status: watch::Sender<SchedulerStatus>,
    status_changed: bool,
}

impl Engine {
    /// The engine and the receiving end of its run outcomes, which [`Engine::run`]
    /// takes (the engine keeps a sender, so it never closes).
    pub(super) fn new(
        store: Arc<dyn DynJobStore>,
        executor: Arc<dyn JobExecutor>,
        clock: Arc<dyn Clock>,
        settings: SchedulerSettings,
        status: watch::Sender<SchedulerStatus>,
    ) -> (Self, mpsc::UnboundedReceiver<Finished>) {
        let (finished_sender, finished) = mpsc::unbounded_channel();
        let engine = Self {
            store,
            executor,
            clock,
            settings,
            poll: settings.poll.max(MIN_POLL),
            jobs: HashMap::new(),
            generation: 0,
            queue: BTreeSet::new(),
            running: BTreeSet::new(),
            finished_sender,
            tracker: TaskTracker::new(),
            known_revision: None,
            own_writes: 0,
            reload_forced: true,
            wake_requested: true,
            store_failing: false,
            next_poll: Instant::now(),
            last_now: None,
            unrecorded: Vec::new(),
            status,
            status_changed: true,
        };
        (engine, finished)
    }

    /// Runs until `shutdown`, then waits for the runs still going.
    pub(super) async fn run(
        mut self,
        mut finished: mpsc::UnboundedReceiver<Finished>,
        mut requests: mpsc::Receiver<RunNowRequest>,
        wake: Arc<Notify>,
        shutdown: CancellationToken,
    ) {
        tracing::info!(poll_ms = self.poll.as_millis(), "scheduler started");
        loop {
            self.tick().await;
            let deadline = self.next_wake();
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                Some(done) = finished.recv() => self.finish(done).await,
                Some(request) = requests.recv() => self.run_now(request).await,
                () = wake.notified() => self.wake_requested = true,
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
        // Requests still queued get `Stopped` when their reply senders drop.
        drop(requests);
        tracing::info!(running = self.running.len(), "scheduler stopping; waiting for running jobs");
        while !self.running.is_empty() {
            let Some(done) = finished.recv().await else { break };
            self.finish(done).await;
        }
        self.tracker.close();
        self.tracker.wait().await;
        self.publish_status();
        tracing::info!("scheduler stopped");
    }

    /// One pass after every wake: notice clock jumps, poll the store when it is time,
    /// dispatch what is due.
    async fn tick(&mut self) {
        let now = self.observe_clock();
        if self.wake_requested || Instant::now() >= self.next_poll {
            self.next_poll = Instant::now() + self.poll;
            self.retry_unrecorded().await;
            self.refresh(now).await;
        }
        // Reading the table may have taken a while.
        let now = self.now();
        self.dispatch_due(now).await;
        self.publish_status();
    }

    /// When to wake next: the earliest due time, or the next poll if sooner. Sleeps are
    /// computed from the clock, and never longer than a poll, so a clock jump shows.
    fn next_wake(&self) -> Instant {
        let Some((due, _)) = self.queue.first() else { return self.next_poll };
        let due_time = UNIX_EPOCH + Duration::from_millis(u64::try_from(*due).unwrap_or(0));
        let wait = due_time.duration_since(self.clock.now()).unwrap_or(Duration::ZERO);
        self.next_poll.min(Instant::now() + wait)
    }

    /// The clock's time, to the millisecond (the unit of due times).
    fn now(&self) -> Timestamp {
        let time = self.clock.now();
        let timestamp =
            Timestamp::try_from(time).unwrap_or(if time > UNIX_EPOCH { Timestamp::MAX } else { Timestamp::MIN });
        Timestamp::from_millisecond(timestamp.as_millisecond()).unwrap_or(timestamp)
    }

    fn observe_clock(&mut self) -> Timestamp {
        let now = self.now();
        let now_ms = now.as_millisecond();
        if let Some(last) = self.last_now {
            let poll_ms = i64::try_from(self.poll.as_millis()).unwrap_or(i64::MAX);
            if now_ms < last - BACKWARD_TOLERANCE_MS {
                tracing::warn!(
                    back_seconds = (last - now_ms) / 1000,
                    "the clock moved back; jobs keep their stored next runs"
                );
            } else if now_ms > last.saturating_add(poll_ms).saturating_add(BACKWARD_TOLERANCE_MS) {
                tracing::info!(
                    forward_seconds = (now_ms - last) / 1000,
                    "the clock moved forward (or the machine slept); overdue jobs run once each"
                );
            }
        }
        self.last_now = Some(now_ms);
        now
    }

    /// Reads the store's revision and, when someone else changed the table (or memory
    /// is unsure), the whole table, diffed into memory.
    async fn refresh(&mut self, now: Timestamp) {
        let forced = self.reload_forced || self.wake_requested;
        self.wake_requested = false;
        let revision = match self.store.revision_boxed().await {
            Ok(revision) => revision,
            Err(error) => return self.store_failed("read the job table's revision", &error),
        };
        let unchanged = self.known_revision.is_some_and(|known| known + self.own_writes == revision);
        if unchanged && !forced {
            self.known_revision = Some(revision);
            self.own_writes = 0;
            return self.store_recovered();
        }
        let jobs = match self.store.list_boxed().await {
            Ok(jobs) => jobs,
            Err(error) => return self.store_failed("read the job table", &error),
        };
        self.store_recovered();
        self.known_revision = Some(revision);
        self.own_writes = 0;
        self.reload_forced = false;
        let first = !self.status.borrow().loaded;
        self.apply(jobs, now).await;
        if first {
            self.status.send_modify(|status| status.loaded = true);
            tracing::info!(jobs = self.jobs.len(), queued = self.queue.len(), "scheduler loaded the job table");
        }
    }

    fn store_failed(&mut self, action: &str, error: &JobStoreError) {
        self.reload_forced = true;
        if self.store_failing {
            tracing::debug!(%error, action, "the job store still fails; retrying at the next poll");
        } else {
            self.store_failing = true;
            tracing::warn!(%error, action, "the job store failed; retrying at each poll");
        }
    }

    fn store_recovered(&mut self) {
        if std::mem::take(&mut self.store_failing) {
            tracing::info!("the job store works again");
        }
    }

    /// Makes memory match `jobs`, the whole table: changed and new jobs are (re)planned,
    /// missing ones dropped, unchanged ones left where they are in the queue.
    async fn apply(&mut self, jobs: Vec<Job>, now: Timestamp) {
        self.generation += 1;
        let only = self.settings.only;
        for job in jobs.into_iter().filter(|job| only.is_none_or(|kind| job.kind == kind)) {
            match self.jobs.get_mut(&job.id) {
                Some(entry) if entry.fingerprint == fingerprint(&job) => entry.seen = self.generation,
                Some(_) | None => self.upsert(&job, now).await,
            }
        }
        let generation = self.generation;
        let gone: Vec<String> =
            self.jobs.iter().filter(|(_, entry)| entry.seen != generation).map(|(id, _)| id.clone()).collect();
        for id in gone {
            tracing::debug!(job = %id, "job removed");
            self.forget(&id);
        }
    }

    /// Puts `job` (as stored) in memory and in the queue at its next due time. An
    /// active job whose schedule, zone or window no longer reads is paused.
    async fn upsert(&mut self, job: &Job, now: Timestamp) {
        self.forget(&job.id);
        let plan = match job.status {
            JobStatus::Paused => None,
            JobStatus::Active => match Plan::of(job) {
                Ok(plan) => Some(plan),
                Err(reason) => return self.pause_broken(job, reason).await,
            },
        };
        let entry = Entry::new(job, plan, now, self.generation);
        if let Some(slot) = entry.slot {
            self.queue.insert((slot.due, job.id.clone()));
        }
        self.status_changed = true;
        self.jobs.insert(job.id.clone(), Box::new(entry));
    }

    fn forget(&mut self, id: &str) {
        if let Some((id, entry)) = self.jobs.remove_entry(id) {
            if let Some(slot) = entry.slot {
                self.queue.remove(&(slot.due, id));
            }
            self.status_changed = true;
        }
    }

    /// Pauses a job that can't be scheduled, with the reason as its last error. When the
    /// store fails the job is left out of memory, so the next reload tries again.
    async fn pause_broken(&mut self, job: &Job, reason: String) {
        tracing::warn!(job = %job.id, name = %job.name, kind = job.kind.as_str(), error = %reason,
            "can't schedule job; pausing it");
        match self.store.pause_with_error_boxed(&job.id, &reason).await {
            Ok(()) => {
                self.own_writes += 1;
                let paused = Job { status: JobStatus::Paused, last_error: Some(reason), ..job.clone() };
                self.status_changed = true;
                self.jobs.insert(
                    job.id.clone(),
                    Box::new(Entry::new(&paused, None, Timestamp::UNIX_EPOCH, self.generation)),
                );
            }
            Err(JobStoreError::NotFound { .. }) => {}
            Err(error) => self.store_failed("pause a job that can't be scheduled", &error),
        }
    }

    /// Runs (or skips) every job due at or before `now`, each once however many of its
    /// slots passed: its next slot is the first after `now`.
    async fn dispatch_due(&mut self, now: Timestamp) {
        // Taken out first: a job requeued at or before `now` (an edit racing the claim)
        // waits for the next pass instead of spinning here.
        let mut due = Vec::new();
        while let Some((at, _)) = self.queue.first()
            && *at <= now.as_millisecond()
            && let Some((_, id)) = self.queue.pop_first()
        {
            due.push(id);
        }
        for id in due {
            self.dispatch(&id, now).await;
        }
    }

    async fn dispatch(&mut self, id: &str, now: Timestamp) {
        let running = self.running.contains(id);
        let Some(entry) = self.jobs.get_mut(id) else { return };
        let (Some(slot), Some(plan)) = (entry.slot.take(), entry.plan.as_ref()) else { return };
        let next = plan.next_after(now);
        let skip = if running { Some(SkipReason::StillRunning) } else { plan.outside_active_hours(now) };
        // The job itself is read only for a run: memory holds no prompt.
        let job = match skip {
            Some(_) => None,
            None => match self.store.get_boxed(id).await {
                Ok(Some(job)) => Some(job),
                Ok(None) => return self.forget(id),
                Err(error) => {
                    // The forced reload at the next poll brings it back, still due.
                    self.forget(id);
                    return self.store_failed("read a due job", &error);
                }
            },
        };
        match self.store.claim_boxed(id, slot.expected, next).await {
            Ok(true) => self.own_writes += 1,
            Ok(false) => {
                tracing::debug!(job = %id, slot = slot.due, "slot taken elsewhere (another scheduler or an edit)");
                return self.refetch(id, now).await;
            }
            Err(error) => {
                self.forget(id);
                return self.store_failed("claim a job's slot", &error);
            }
        }
        let Some(entry) = self.jobs.get_mut(id) else { return };
        entry.next_run = next;
        entry.slot = next.map(|due| Slot { due, expected: Some(due) });
        if let Some(due) = next {
            self.queue.insert((due, id.to_owned()));
        }
        self.status_changed = true;
        match (job, skip) {
            (Some(job), _) => self.start(Job { next_run: next, ..job }, RunTrigger::Scheduled { slot: slot.due }, now),
            (None, Some(reason)) => {
                tracing::info!(job = %id, name = %entry.name, kind = entry.kind.as_str(), slot = slot.due,
                    "skipped: {reason}");
            }
            (None, None) => {}
        }
    }

    /// Re-reads one job after its claim failed: someone else changed it.
    async fn refetch(&mut self, id: &str, now: Timestamp) {
        match self.store.get_boxed(id).await {
            Ok(Some(job)) => self.upsert(&job, now).await,
            Ok(None) => self.forget(id),
            Err(error) => {
                self.forget(id);
                self.store_failed("read a job", &error);
            }
        }
    }

    /// Starts a run of `job` as its own task; its outcome comes back to the loop.
    fn start(&mut self, job: Job, trigger: RunTrigger, now: Timestamp) {
        tracing::info!(job = %job.id, name = %job.name, kind = job.kind.as_str(), ?trigger, "running job");
        self.running.insert(job.id.clone());
        self.status_changed = true;
        let completion = Completion::new(self.finished_sender.clone(), job, trigger, now.as_millisecond());
        let executor = Arc::clone(&self.executor);
        self.tracker.spawn(async move {
            if let Some(job) = completion.job() {
                let result = executor.execute(job, trigger).await;
                completion.report(result);
            }
        });
    }

    async fn finish(&mut self, done: Finished) {
        let Finished { job, trigger, started, result } = done;
        self.running.remove(&job.id);
        self.status_changed = true;
        let elapsed_ms = self.now().as_millisecond() - started;
        let outcome = match result {
            Ok(()) => {
                tracing::info!(job = %job.id, name = %job.name, kind = job.kind.as_str(), ?trigger, elapsed_ms,
                    "job run succeeded");
                RunOutcome::Succeeded
            }
            Err(error) => {
                tracing::warn!(job = %job.id, name = %job.name, kind = job.kind.as_str(), ?trigger, elapsed_ms,
                    %error, "job run failed");
                RunOutcome::Failed { reason: error.to_string() }
            }
        };
        self.record(job, RunRecord { at: started, outcome }).await;
    }

    /// Stores a run's outcome and pauses the job when it failed too often in a row.
    async fn record(&mut self, job: Job, run: RunRecord) {
        let failures = match self.store.record_run_boxed(&job.id, &run).await {
            Ok(failures) => failures,
            Err(JobStoreError::NotFound { .. }) => {
                return tracing::debug!(job = %job.id, "job removed while it ran; outcome not stored");
            }
            Err(error) => {
                self.store_failed("record a job run", &error);
                return self.unrecorded.push((job, run));
            }
        };
        self.own_writes += 1;
        let RunOutcome::Failed { reason } = run.outcome else { return };
        let active = self.jobs.get(&job.id).is_some_and(|entry| entry.status == JobStatus::Active);
        if self.settings.pauses_after(failures) && active {
            let job = Job { last_run: Some(run.at), last_error: Some(reason), consecutive_failures: failures, ..job };
            self.auto_pause(job).await;
        }
    }

    async fn retry_unrecorded(&mut self) {
        for (job, run) in std::mem::take(&mut self.unrecorded) {
            self.record(job, run).await;
        }
    }

    /// Pauses a job that failed too often in a row and tells its owner.
    async fn auto_pause(&mut self, job: Job) {
        let Some(entry) = self.jobs.get(&job.id) else { return };
        match self.store.set_status_boxed(&job.id, JobStatus::Paused, entry.next_run).await {
            Ok(()) => self.own_writes += 1,
            Err(JobStoreError::NotFound { .. }) => return self.forget(&job.id),
            Err(error) => {
                // The next reload sees it active with its failure count, and the next
                // failure tries again.
                self.forget(&job.id);
                return self.store_failed("pause a failing job", &error);
            }
        }
        let Some(entry) = self.jobs.get_mut(&job.id) else { return };
        entry.status = JobStatus::Paused;
        entry.plan = None;
        if let Some(slot) = entry.slot.take() {
            self.queue.remove(&(slot.due, job.id.clone()));
        }
        self.status_changed = true;
        let job = Job { status: JobStatus::Paused, next_run: entry.next_run, ..job };
        let (failures, error) = (job.consecutive_failures, job.last_error.clone().unwrap_or_default());
        tracing::warn!(job = %job.id, name = %job.name, kind = job.kind.as_str(), failures, error = %error,
            "paused job after repeated failures");
        let notice = super::pause_notice(&job, failures, &error);
        let executor = Arc::clone(&self.executor);
        self.tracker.spawn(async move { executor.notify_owner(&job, &notice).await });
    }

    /// Starts a run of the job asked for now, whatever its schedule or status; its next
    /// due time stays as it is.
    async fn run_now(&mut self, request: RunNowRequest) {
        let RunNowRequest { id, reply } = request;
        let answer = self.start_now(&id).await;
        if reply.send(answer).is_err() {
            tracing::debug!(job = %id, "run-now asker went away");
        }
    }

    async fn start_now(&mut self, id: &str) -> Result<(), RunNowError> {
        if self.running.contains(id) {
            return Err(RunNowError::AlreadyRunning { id: id.to_owned() });
        }
        let now = self.now();
        // Read afresh: it may have been added or edited a moment ago.
        let job = match self.store.get_boxed(id).await {
            Ok(Some(job)) if self.settings.only.is_none_or(|kind| job.kind == kind) => job,
            Ok(_) => {
                self.forget(id);
                return Err(RunNowError::NotFound { id: id.to_owned() });
            }
            Err(error) => {
                // Without the stored job there is nothing to run; the caller may retry.
                tracing::warn!(job = %id, %error, "can't read the job to run it now");
                return Err(RunNowError::NotFound { id: id.to_owned() });
            }
        };
        if self.jobs.get(id).is_none_or(|entry| entry.fingerprint != fingerprint(&job)) {
            self.upsert(&job, now).await;
        }
        self.start(job, RunTrigger::Manual, now);
        Ok(())
    }

    fn publish_status(&mut self) {
        if !std::mem::take(&mut self.status_changed) {
            return;
        }
        let active = self.jobs.values().filter(|entry| entry.status == JobStatus::Active).count();
        let snapshot = SchedulerStatus {
            loaded: self.status.borrow().loaded,
            jobs: self.jobs.len(),
            active,
            running: self.running.iter().cloned().collect(),
            next_run: self.queue.first().map(|(due, _)| *due),
        };
        self.status.send_if_modified(|status| {
            let changed = *status != snapshot;
            *status = snapshot;
            changed
        });
    }
}
