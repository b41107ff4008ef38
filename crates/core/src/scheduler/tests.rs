//! The scheduler engine on tokio's paused clock: due times, catch-up, overlap, active
//! hours, auto-pause, manual runs, changes made elsewhere, lost claims, bad rows, store
//! failures, clock jumps, DST and shutdown.

mod fakes;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{JobControl, RunNowError, RunTrigger, Scheduler, SchedulerHandle, SchedulerSettings};
use crate::jobs::{DynJobStore, Job, JobKind, JobStatus, JobStore};
use crate::schedule::Cadence;
use fakes::{MemoryStore, RecordingExecutor, TestClock, job, minutes, ms};

/// A Monday morning: 08:00 UTC, 09:00 in Berlin.
const BASE: &str = "2026-03-02T08:00:00Z";

struct Harness {
    store: Arc<MemoryStore>,
    executor: Arc<RecordingExecutor>,
    clock: Arc<TestClock>,
    handle: SchedulerHandle,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Harness {
    fn start(jobs: impl IntoIterator<Item = Job>) -> Self {
        Self::start_at(BASE, jobs, Duration::from_millis(500))
    }

    fn start_at(base: &str, jobs: impl IntoIterator<Item = Job>, poll: Duration) -> Self {
        let clock = TestClock::new(base);
        Self::start_on(MemoryStore::with(jobs), clock, poll)
    }

    fn start_on(store: Arc<MemoryStore>, clock: Arc<TestClock>, poll: Duration) -> Self {
        Self::start_with(store, clock, SchedulerSettings { max_consecutive_failures: 3, poll, only: None })
    }

    fn start_with(store: Arc<MemoryStore>, clock: Arc<TestClock>, settings: SchedulerSettings) -> Self {
        let executor = RecordingExecutor::new(Arc::clone(&clock));
        let port: Arc<dyn DynJobStore> = store.clone();
        let scheduler = Scheduler::new(port, executor.clone(), clock.clone(), settings);
        let handle = scheduler.handle();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(scheduler.run(shutdown.clone()));
        Self { store, executor, clock, handle, shutdown, task }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

/// Lets (paused) time pass.
async fn advance(milliseconds: i64) {
    tokio::time::sleep(Duration::from_millis(u64::try_from(milliseconds).unwrap())).await;
}

fn scheduled(slot: i64) -> RunTrigger {
    RunTrigger::Scheduled { slot }
}

#[tokio::test(start_paused = true)]
async fn a_due_job_runs_at_its_due_instant_and_is_requeued_at_its_next_slot() {
    let base = ms(BASE);
    let harness = Harness::start([job("tick", "every 1m", base - 30_000, Some(base + 30_000))]);
    advance(100_000).await;
    let runs = harness.executor.runs();
    assert_eq!(runs.iter().map(|run| run.at).collect::<Vec<_>>(), [base + 30_000, base + 90_000]);
    assert_eq!(runs[1].trigger, scheduled(base + 90_000));
    let stored = harness.store.job("tick");
    assert_eq!((stored.next_run, stored.last_run), (Some(base + 150_000), Some(base + 90_000)));
    let status = harness.handle.status();
    assert!(status.loaded);
    assert_eq!((status.jobs, status.active, status.running.len()), (1, 1, 0));
    assert_eq!(status.next_run, Some(base + 150_000));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_recurring_job_missed_for_days_runs_once_at_start_then_on_schedule() {
    let base = ms(BASE);
    let missed = ms("2026-02-21T09:00:00Z");
    let daily = Job {
        last_run: Some(ms("2026-02-20T09:00:00Z")),
        ..job("daily", "daily 09:00", ms("2026-02-01T00:00:00Z"), Some(missed))
    };
    let harness = Harness::start([daily]);
    advance(1_000).await;
    assert_eq!(harness.executor.runs().len(), 1, "one catch-up run for nine missed days");
    assert_eq!(harness.executor.runs()[0].at, base);
    assert_eq!(harness.executor.runs()[0].trigger, scheduled(missed));
    assert_eq!(harness.store.job("daily").next_run, Some(ms("2026-03-02T09:00:00Z")));
    advance(minutes(120)).await;
    assert_eq!(harness.executor.run_times("daily"), [base, ms("2026-03-02T09:00:00Z")]);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_one_shot_missed_while_down_runs_once_at_start_and_stays_listed() {
    let base = ms(BASE);
    let due = ms("2026-03-01T12:00:00Z");
    let harness = Harness::start([job("once", "at 2026-03-01T12:00:00Z", due - minutes(60), Some(due))]);
    advance(minutes(60)).await;
    assert_eq!(harness.executor.runs().len(), 1);
    assert_eq!((harness.executor.runs()[0].at, harness.executor.runs()[0].trigger), (base, scheduled(due)));
    let stored = harness.store.job("once");
    assert_eq!((stored.status, stored.next_run, stored.last_run), (JobStatus::Active, None, Some(base)));
    assert_eq!(harness.handle.status().next_run, None);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_one_shot_with_sub_millisecond_digits_runs_once() {
    // Its due time is stored in whole milliseconds, before the instant it names: the
    // run must not find "the next slot" later in that same millisecond and run again.
    let base = ms(BASE);
    let harness = Harness::start([job("precise", "at 2026-03-02T08:00:30.500250Z", base, Some(base + 30_500))]);
    advance(minutes(1)).await;
    assert_eq!(harness.executor.run_times("precise"), [base + 30_500]);
    assert_eq!(harness.store.job("precise").next_run, None);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_past_due_one_shot_added_while_running_runs_within_a_poll() {
    let base = ms(BASE);
    let harness = Harness::start([]);
    advance(10_000).await;
    let added_at = harness.clock.now_ms();
    harness.store.add(job("late", "at 2026-03-02T08:00:05Z", base, Some(base + 5_000)));
    advance(1_000).await;
    let times = harness.executor.run_times("late");
    assert_eq!(times.len(), 1);
    assert!(times[0] - added_at <= 500, "ran {} ms after it was added", times[0] - added_at);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn changes_made_by_another_process_are_picked_up_within_one_poll() {
    let base = ms(BASE);
    let harness = Harness::start([job("tick", "every 1m", base, Some(base + minutes(1)))]);
    advance(minutes(1) + 1_000).await;
    assert_eq!(harness.executor.runs().len(), 1);

    // `squidbot cron pause` from the CLI.
    harness.store.edit("tick", |job| job.status = JobStatus::Paused);
    advance(minutes(3)).await;
    assert_eq!(harness.executor.runs().len(), 1);
    assert_eq!(harness.handle.status().active, 0);

    // `squidbot cron resume`, due 200 ms after the edit: it is seen within a poll.
    let resumed_at = harness.clock.now_ms();
    harness.store.edit("tick", |job| (job.status, job.next_run) = (JobStatus::Active, Some(resumed_at + 200)));
    advance(1_000).await;
    let times = harness.executor.run_times("tick");
    assert_eq!(times.len(), 2);
    assert!(times[1] >= resumed_at + 200 && times[1] <= resumed_at + 500, "{}", times[1] - resumed_at);

    // `squidbot cron add` of a job due in a minute, and `cron remove` of the first.
    let now = harness.clock.now_ms();
    harness.store.add(job("new", "every 1h", now, Some(now + minutes(1))));
    harness.store.remove("tick").await.unwrap();
    advance(minutes(2)).await;
    assert_eq!(harness.executor.run_times("new"), [now + minutes(1)]);
    assert_eq!(harness.executor.run_times("tick").len(), 2);
    assert_eq!(harness.handle.status().jobs, 1);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_run_uses_the_job_as_stored_when_it_runs() {
    let base = ms(BASE);
    let harness = Harness::start([job("edited", "every 1h", base, Some(base + minutes(60)))]);
    advance(1_000).await;
    // Edited a moment before its slot, too late for a poll to have seen it.
    harness.store.edit_quietly("edited", |job| job.message = "check the calendar".to_owned());
    advance(minutes(60)).await;
    let runs = harness.executor.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].message, "check the calendar");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_slot_due_while_the_previous_run_goes_is_skipped_not_stacked() {
    let base = ms(BASE);
    let harness = Harness::start([job("slow", "every 1m", base, Some(base + minutes(1)))]);
    harness.executor.block("slow");
    advance(minutes(1) + 1_000).await;
    assert_eq!(harness.handle.status().running, ["slow"]);
    advance(minutes(1)).await;
    assert_eq!(harness.executor.runs().len(), 1, "the slot at 2 minutes is skipped");
    assert_eq!(harness.store.job("slow").next_run, Some(base + minutes(3)));
    harness.executor.release("slow");
    advance(1_000).await;
    assert_eq!(harness.store.job("slow").last_run, Some(base + minutes(1)));
    assert!(harness.handle.status().running.is_empty());
    harness.executor.release("slow");
    advance(minutes(1)).await;
    assert_eq!(harness.executor.run_times("slow"), [base + minutes(1), base + minutes(3)]);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn slots_outside_active_hours_are_skipped_without_failing() {
    let base = ms(BASE);
    let hourly = Job {
        timezone: "Europe/Berlin".to_owned(),
        active_hours: Some("09:00-12:00".to_owned()),
        ..job("window", "0 * * * *", base, Some(base + minutes(60)))
    };
    let harness = Harness::start_at(BASE, [hourly], Duration::from_secs(60));
    advance(minutes(5 * 60) + 1_000).await;
    // 10:00 and 11:00 in Berlin run; 12:00, 13:00 and 14:00 fall outside.
    assert_eq!(harness.executor.run_times("window"), [base + minutes(60), base + minutes(120)]);
    let stored = harness.store.job("window");
    assert_eq!((stored.status, stored.consecutive_failures, stored.last_error), (JobStatus::Active, 0, None));
    assert_eq!(stored.next_run, Some(base + minutes(6 * 60)));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn three_failures_in_a_row_pause_the_job_and_tell_the_owner_once() {
    let base = ms(BASE);
    let harness = Harness::start([job("flaky", "every 1m", base, Some(base + minutes(1)))]);
    harness.executor.fail("flaky", true);
    advance(minutes(3) + 1_000).await;
    assert_eq!(harness.executor.runs().len(), 3);
    let stored = harness.store.job("flaky");
    assert_eq!((stored.status, stored.consecutive_failures), (JobStatus::Paused, 3));
    assert_eq!(stored.last_error.as_deref(), Some("the model timed out"));
    let notices = harness.executor.notices();
    assert_eq!(notices.len(), 1);
    let (id, notice) = &notices[0];
    assert_eq!(id, "flaky");
    for part in ["\"job flaky\"", "(flaky)", "3 times", "the model timed out", "squidbot cron resume flaky"] {
        assert!(notice.contains(part), "{part:?} missing from {notice}");
    }
    advance(minutes(10)).await;
    assert_eq!((harness.executor.runs().len(), harness.executor.notices().len()), (3, 1));
    assert_eq!(harness.handle.status().active, 0);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_success_between_failures_resets_the_count() {
    let base = ms(BASE);
    let harness = Harness::start([job("flaky", "every 1m", base, Some(base + minutes(1)))]);
    harness.executor.fail("flaky", true);
    advance(minutes(2) + 1_000).await;
    harness.executor.fail("flaky", false);
    advance(minutes(1)).await;
    assert_eq!(harness.store.job("flaky").consecutive_failures, 0);
    harness.executor.fail("flaky", true);
    advance(minutes(2)).await;
    let stored = harness.store.job("flaky");
    assert_eq!((stored.status, stored.consecutive_failures), (JobStatus::Active, 2));
    assert!(harness.executor.notices().is_empty());
    advance(minutes(1)).await;
    assert_eq!(harness.store.job("flaky").status, JobStatus::Paused);
    assert_eq!(harness.executor.runs().len(), 6);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn run_now_runs_any_job_once_and_refuses_running_or_missing_ones() {
    let base = ms(BASE);
    let paused = Job { status: JobStatus::Paused, ..job("paused", "every 1h", base, Some(base + minutes(60))) };
    let harness = Harness::start([paused, job("slow", "every 1h", base, Some(base + minutes(60)))]);
    let error = harness.handle.run_now("nope").await.unwrap_err();
    assert_eq!(error, RunNowError::NotFound { id: "nope".to_owned() });

    harness.handle.run_now("paused").await.unwrap();
    advance(1_000).await;
    assert_eq!(harness.executor.runs()[0].trigger, RunTrigger::Manual);
    let stored = harness.store.job("paused");
    assert_eq!(
        (stored.status, stored.next_run, stored.last_run),
        (JobStatus::Paused, Some(base + minutes(60)), Some(base))
    );

    harness.executor.block("slow");
    harness.handle.run_now("slow").await.unwrap();
    let error = harness.handle.run_now("slow").await.unwrap_err();
    assert_eq!(error, RunNowError::AlreadyRunning { id: "slow".to_owned() });
    harness.executor.release("slow");
    advance(1_000).await;
    assert_eq!(harness.store.job("slow").next_run, Some(base + minutes(60)), "a manual run keeps the schedule");
    assert_eq!(harness.executor.run_times("slow").len(), 1);

    // A job added a moment ago by the CLI, not polled yet, runs too.
    harness.store.add(job("fresh", "every 1h", base, Some(base + minutes(60))));
    harness.handle.run_now("fresh").await.unwrap();
    let handle = harness.handle.clone();
    harness.stop().await;
    assert_eq!(handle.run_now("slow").await.unwrap_err(), RunNowError::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_lost_claim_means_no_run_and_the_stored_slot_wins() {
    let base = ms(BASE);
    let harness = Harness::start([job("hourly", "every 1h", base, Some(base + minutes(60)))]);
    advance(1_000).await;
    // Another scheduler (or an edit not polled yet) moved the slot.
    harness.store.edit_quietly("hourly", |job| job.next_run = Some(base + minutes(120)));
    advance(minutes(60)).await;
    assert!(harness.executor.runs().is_empty());
    assert_eq!(harness.store.lost_claims(), 1);
    advance(minutes(60)).await;
    assert_eq!(harness.executor.run_times("hourly"), [base + minutes(120)]);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn two_schedulers_on_one_store_run_each_slot_once() {
    let base = ms(BASE);
    let store = MemoryStore::with([job("shared", "every 1m", base, Some(base + minutes(1)))]);
    let clock = TestClock::new(BASE);
    let gateway = Harness::start_on(store.clone(), clock.clone(), Duration::from_millis(500));
    let agent = Harness::start_on(store.clone(), clock, Duration::from_millis(700));
    advance(minutes(10) + 1_000).await;
    let mut slots: Vec<RunTrigger> =
        gateway.executor.runs().into_iter().chain(agent.executor.runs()).map(|run| run.trigger).collect();
    slots.sort_by_key(|trigger| match trigger {
        RunTrigger::Scheduled { slot } => *slot,
        RunTrigger::Manual => 0,
    });
    let expected: Vec<RunTrigger> = (1..=10).map(|minute| scheduled(base + minutes(minute))).collect();
    // Each slot ran once: the loser of a race lost the claim, or saw the winner's claim
    // through the revision when it polled at the same instant.
    assert_eq!(slots, expected);
    gateway.stop().await;
    agent.stop().await;
}

#[tokio::test(start_paused = true)]
async fn jobs_that_no_longer_read_are_paused_with_the_error_and_the_rest_run() {
    let base = ms(BASE);
    let next = Some(base + minutes(1));
    let harness = Harness::start([
        job("schedule", "every banana", base, next),
        Job { timezone: "Mars/Base".to_owned(), ..job("zone", "every 1m", base, next) },
        Job { active_hours: Some("late".to_owned()), ..job("window", "every 1m", base, next) },
        job("good", "every 1m", base, next),
    ]);
    advance(minutes(1) + 1_000).await;
    assert_eq!(harness.executor.run_times("good"), [base + minutes(1)]);
    assert_eq!(harness.executor.runs().len(), 1);
    for (id, error) in [("schedule", "can't parse schedule"), ("zone", "Mars/Base"), ("window", "active hours")] {
        let stored = harness.store.job(id);
        assert_eq!(stored.status, JobStatus::Paused, "{id}");
        assert!(stored.last_error.as_deref().unwrap_or_default().contains(error), "{id}: {:?}", stored.last_error);
    }
    // Broken later by a hand edit: paused within a poll, the loop goes on.
    harness.store.edit("good", |job| job.schedule = "every banana".to_owned());
    advance(1_000).await;
    assert_eq!(harness.store.job("good").status, JobStatus::Paused);
    assert_eq!(harness.handle.status().active, 0);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn store_errors_are_retried_at_the_next_poll() {
    let base = ms(BASE);
    let harness = Harness::start([job("hourly", "every 1h", base, Some(base + 1_000))]);
    harness.store.set_failing(true);
    advance(5_000).await;
    assert!(harness.executor.runs().is_empty(), "nothing runs without the table");
    harness.store.set_failing(false);
    advance(1_000).await;
    assert_eq!(harness.executor.runs().len(), 1, "the overdue slot runs once the store is back");

    // The store fails while a run ends: the outcome is stored once it is back.
    harness.executor.block("hourly");
    harness.executor.fail("hourly", true);
    advance(minutes(60)).await;
    assert_eq!(harness.executor.runs().len(), 2);
    harness.store.set_failing(true);
    harness.executor.release("hourly");
    advance(3_000).await;
    harness.store.set_failing(false);
    advance(1_000).await;
    let stored = harness.store.job("hourly");
    assert_eq!((stored.consecutive_failures, stored.last_run), (1, Some(base + minutes(60))));
    assert_eq!(harness.executor.runs().len(), 2);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_forward_clock_jump_runs_each_overdue_job_once() {
    let base = ms(BASE);
    let harness = Harness::start([
        job("minutely", "every 1m", base, Some(base + minutes(1))),
        job("daily", "daily 09:00", base, Some(ms("2026-03-02T09:00:00Z"))),
    ]);
    advance(1_000).await;
    harness.clock.jump(3 * 24 * minutes(60));
    advance(1_000).await;
    assert_eq!(harness.executor.run_times("minutely").len(), 1);
    assert_eq!(harness.executor.run_times("daily").len(), 1);
    assert_eq!(harness.executor.runs()[0].trigger, scheduled(base + minutes(1)));
    let after = harness.clock.now_ms();
    assert_eq!(harness.store.job("daily").next_run, Some(ms("2026-03-05T09:00:00Z")));
    assert!(harness.store.job("minutely").next_run.unwrap() - after <= minutes(1));
    advance(minutes(2)).await;
    assert_eq!(harness.executor.run_times("minutely").len(), 3, "then every minute again");
    assert_eq!(harness.executor.run_times("daily").len(), 1);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_backward_clock_jump_keeps_the_stored_next_runs() {
    let base = ms(BASE);
    let harness = Harness::start([job("hourly", "every 1h", base, Some(base + minutes(60)))]);
    advance(1_000).await;
    harness.clock.jump(-24 * minutes(60));
    advance(minutes(120)).await;
    assert!(harness.executor.runs().is_empty(), "the clock reads yesterday: nothing is due");
    assert_eq!(harness.store.job("hourly").next_run, Some(base + minutes(60)));
    harness.clock.jump(24 * minutes(60));
    advance(1_000).await;
    assert_eq!(harness.executor.runs().len(), 1);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_daily_job_in_the_spring_forward_gap_runs_once_that_day() {
    let start = "2026-03-28T12:00:00Z";
    let created = ms(start);
    let first = ms("2026-03-29T00:00:00Z");
    let berlin = Job { timezone: "Europe/Berlin".to_owned(), ..job("dst", "daily 02:30", created, None) };
    let harness = Harness::start_at(start, [berlin], Duration::from_secs(600));
    advance(minutes(48 * 60)).await;
    let times = harness.executor.run_times("dst");
    let on_the_day = times.iter().filter(|at| (first..first + minutes(24 * 60)).contains(*at)).count();
    assert_eq!(on_the_day, 1, "{times:?}");
    assert_eq!(times.len(), 2, "{times:?}");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_heartbeat_stored_without_a_next_run_runs_at_its_seeded_slot() {
    let base = ms(BASE);
    let beat = Job { kind: JobKind::Heartbeat, seed: Some(5), ..job("beat", "hourly", base, None) };
    let expected = beat.parsed_schedule().unwrap().next_after(BASE.parse().unwrap(), &jiff::tz::TimeZone::UTC);
    assert_eq!(beat.parsed_schedule().unwrap(), crate::schedule::Schedule::Cadence(Cadence::Hourly.choose_slot(5)));
    let harness = Harness::start([beat]);
    advance(minutes(60) + 1_000).await;
    assert_eq!(harness.executor.run_times("beat"), [expected.unwrap().as_millisecond()]);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_executor_panic_is_a_failed_run_not_a_stuck_job() {
    let base = ms(BASE);
    let harness = Harness::start([job("boom", "every 1m", base, Some(base + minutes(1)))]);
    harness.executor.panic_on("boom");
    advance(minutes(1) + 1_000).await;
    let stored = harness.store.job("boom");
    assert_eq!(stored.consecutive_failures, 1);
    assert!(stored.last_error.unwrap().contains("panicked"));
    assert!(harness.handle.status().running.is_empty());
    advance(minutes(1)).await;
    assert_eq!(harness.executor.runs().len(), 2, "still scheduled");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_running_jobs_and_records_them() {
    let base = ms(BASE);
    let harness = Harness::start([job("slow", "every 1m", base, Some(base + minutes(1)))]);
    harness.executor.block("slow");
    advance(minutes(1) + 1_000).await;
    harness.shutdown.cancel();
    advance(5_000).await;
    assert!(!harness.task.is_finished(), "the run is still going");
    harness.executor.release("slow");
    harness.task.await.unwrap();
    assert_eq!(harness.store.job("slow").last_run, Some(base + minutes(1)));
    assert_eq!(harness.executor.runs().len(), 1, "nothing dispatched after shutdown");
}

#[tokio::test(start_paused = true)]
async fn a_scheduler_for_one_kind_leaves_the_other_jobs_alone() {
    let base = ms(BASE);
    let mut housekeeping = job("sys", "every 1m", base - 30_000, Some(base + 10_000));
    housekeeping.kind = JobKind::System;
    let reminder = job("user", "every 1m", base - 30_000, Some(base + 10_000));
    let settings = SchedulerSettings { only: Some(JobKind::System), ..SchedulerSettings::default() };
    let harness = Harness::start_with(MemoryStore::with([housekeeping, reminder]), TestClock::new(BASE), settings);
    advance(20_000).await;
    assert_eq!(harness.executor.run_times("sys"), [base + 10_000]);
    assert!(harness.executor.run_times("user").is_empty());
    assert_eq!(harness.store.job("user").next_run, Some(base + 10_000), "not claimed either");
    assert_eq!(harness.handle.run_now("user").await, Err(RunNowError::NotFound { id: "user".into() }));
    harness.stop().await;
}
