//! Scheduler benchmark: the core `Scheduler` over the real `SqliteJobStore` on a
//! temporary file holding 10,000 jobs (every/daily/weekly/cron/at in five zones).
//! Reports the CPU the process uses while the scheduler idles, the delay between a due
//! time and the executor being called, how fast a change made through another
//! connection (the CLI) is picked up, and the memory of the loaded job table.
//!
//! `cargo bench -p squidbot-store --bench scheduler`; `SQUIDBOT_BENCH_JOBS`,
//! `SQUIDBOT_BENCH_IDLE_SECONDS` and `SQUIDBOT_BENCH_DUE_JOBS` shrink the run.

use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use jiff::Timestamp;
use squidbot_core::BoxFuture;
use squidbot_core::clock::SystemClock;
use squidbot_core::jobs::{DynJobStore, Job, JobKind, JobRequest, JobStore, new_user_job};
use squidbot_core::scheduler::{JobExecutor, JobRunError, RunTrigger, Scheduler, SchedulerHandle, SchedulerSettings};
use squidbot_core::sync::lock;
use squidbot_store::{Database, SqliteJobStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

type Outcome<T> = Result<T, Box<dyn Error>>;

const ZONES: [&str; 5] = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"];

/// Jobs per `replace_generated` transaction while filling the table.
const FILL_BATCH: usize = 1_000;

/// Gap between the due times of the latency jobs.
const DUE_SPACING: Duration = Duration::from_millis(15);

fn count_from_environment(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// The `index`th job's schedule: a realistic mix of the five kinds.
fn schedule(index: usize) -> String {
    let minute = index % 60;
    let hour = 6 + index % 16;
    match index % 5 {
        0 => format!("every {}m", 60 + index % 540),
        1 => format!("daily {hour:02}:{minute:02}"),
        2 => format!("weekly {} {hour:02}:{minute:02}", ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][index % 7]),
        3 => format!("{minute} {hour} * * 1-5"),
        _ => format!("at 2027-{:02}-{:02}T{hour:02}:{minute:02}:00Z", 1 + index % 12, 1 + index % 28),
    }
}

/// `count` user jobs of owner context `context`, none due within the next hour.
fn jobs(count: usize, context: &str, offset: usize) -> Outcome<Vec<Job>> {
    let later = Timestamp::now() + jiff::SignedDuration::from_hours(1);
    (offset..offset + count)
        .map(|index| {
            let name = format!("job {index}");
            let schedule = schedule(index);
            let message = format!("Check the status of project {index} and tell me what changed since yesterday.");
            let request = JobRequest {
                name: &name,
                schedule: &schedule,
                message: &message,
                channel: None,
                timezone: Some(ZONES[index % ZONES.len()]),
                default_zone: "UTC",
                owner_context: context,
            };
            Ok(new_user_job(&request, format!("b{index:07}"), later)?)
        })
        .collect()
}

/// Records when each job's run started.
#[derive(Default)]
struct StampingExecutor {
    started: Mutex<HashMap<String, SystemTime>>,
    runs: AtomicUsize,
    ran: Notify,
}

impl JobExecutor for StampingExecutor {
    fn execute<'a>(&'a self, job: &'a Job, _trigger: RunTrigger) -> BoxFuture<'a, Result<(), JobRunError>> {
        let now = SystemTime::now();
        lock(&self.started).insert(job.id.clone(), now);
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.ran.notify_one();
        Box::pin(async { Ok(()) })
    }

    fn notify_owner<'a>(&'a self, _job: &'a Job, _notice: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> Outcome<i64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|line| line.starts_with(field)).ok_or(format!("no {field} in /proc/self/status"))?;
    Ok(line.split_whitespace().nth(1).ok_or("malformed status line")?.parse()?)
}

/// CPU time of the whole process: user + system ticks from `/proc/self/stat` (10 ms
/// resolution) and nanoseconds on CPU summed over every thread's `schedstat`.
fn cpu_time() -> Outcome<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let after_name = stat.rsplit_once(')').ok_or("malformed stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = fields.get(11).ok_or("no utime")?.parse::<u64>()? + fields.get(12).ok_or("no stime")?.parse::<u64>()?;
    let mut nanoseconds = 0;
    for task in std::fs::read_dir("/proc/self/task")? {
        let schedstat = std::fs::read_to_string(task?.path().join("schedstat"))?;
        nanoseconds += schedstat.split_whitespace().next().ok_or("malformed schedstat")?.parse::<u64>()?;
    }
    Ok((ticks, nanoseconds))
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

fn milliseconds(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

async fn wait_for_jobs(handle: &SchedulerHandle, count: usize, limit: Duration) -> Outcome<Duration> {
    let start = Instant::now();
    while !(handle.status().loaded && handle.status().jobs == count) {
        if start.elapsed() > limit {
            return Err(format!("the scheduler holds {} jobs, not {count}", handle.status().jobs).into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(start.elapsed())
}

fn main() -> Outcome<()> {
    let total = count_from_environment("SQUIDBOT_BENCH_JOBS", 10_000);
    let idle_seconds = count_from_environment("SQUIDBOT_BENCH_IDLE_SECONDS", 10);
    let due_jobs = count_from_environment("SQUIDBOT_BENCH_DUE_JOBS", 200);
    // Two workers, as on the 2-core machines squidbot targets.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(bench(total, idle_seconds, due_jobs))
}

async fn bench(total: usize, idle_seconds: usize, due_jobs: usize) -> Outcome<()> {
    let directory = tempfile::tempdir()?;
    let path = directory.path().join("squidbot.db");
    let store = SqliteJobStore::new(Database::open(&path)?);
    let fill = Instant::now();
    for batch in 0..total.div_ceil(FILL_BATCH) {
        let count = FILL_BATCH.min(total - batch * FILL_BATCH);
        let context = format!("bench:{batch}");
        store.replace_generated(JobKind::User, &context, &jobs(count, &context, batch * FILL_BATCH)?).await?;
    }
    let fill = fill.elapsed();

    let rss_before = status_kib("VmRSS:")?;
    let anonymous_before = status_kib("RssAnon:")?;
    let executor = Arc::new(StampingExecutor::default());
    let port: Arc<dyn DynJobStore> = Arc::new(store.clone());
    let scheduler = Scheduler::new(port, executor.clone(), Arc::new(SystemClock), SchedulerSettings::default());
    let handle = scheduler.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(scheduler.run(shutdown.clone()));
    let load = wait_for_jobs(&handle, total, Duration::from_secs(60)).await?;
    let rss_delta = status_kib("VmRSS:")? - rss_before;
    let anonymous_delta = status_kib("RssAnon:")? - anonymous_before;

    // (a) idle: nothing due for an hour; the loop only polls the revision.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ticks_before, nanoseconds_before) = cpu_time()?;
    let idle_start = Instant::now();
    tokio::time::sleep(Duration::from_secs(u64::try_from(idle_seconds)?)).await;
    let idle_wall = idle_start.elapsed();
    let (ticks_after, nanoseconds_after) = cpu_time()?;
    let idle_cpu_ticks_ms = (ticks_after - ticks_before) * 10;
    let idle_cpu = Duration::from_nanos(nanoseconds_after - nanoseconds_before);

    // (b) latency: jobs due at known instants, added through a second connection as
    // `squidbot cron add` would, so the pickup path (revision, reload) is the real one.
    let cli = SqliteJobStore::new(Database::open(&path)?);
    let first_due = Timestamp::now() + jiff::SignedDuration::from_millis(1_500);
    let mut due_times = HashMap::new();
    let mut latency_jobs = jobs(due_jobs, "bench:latency", total)?;
    for (index, job) in latency_jobs.iter_mut().enumerate() {
        let due = first_due + DUE_SPACING * u32::try_from(index)?;
        job.schedule = format!("at {due}");
        job.next_run = Some(due.as_millisecond());
        due_times.insert(job.id.clone(), SystemTime::from(Timestamp::from_millisecond(due.as_millisecond())?));
    }
    cli.replace_generated(JobKind::User, "bench:latency", &latency_jobs).await?;
    let pickup = wait_for_jobs(&handle, total + due_jobs, Duration::from_secs(10)).await?;
    let limit = Instant::now() + Duration::from_secs(30);
    while executor.runs.load(Ordering::SeqCst) < due_jobs && Instant::now() < limit {
        tokio::time::timeout(Duration::from_millis(100), executor.ran.notified()).await.ok();
    }
    let started = lock(&executor.started).clone();
    let mut latencies: Vec<Duration> = due_times
        .iter()
        .filter_map(|(id, due)| started.get(id).map(|at| at.duration_since(*due).unwrap_or_default()))
        .collect();
    latencies.sort();
    let duplicates = executor.runs.load(Ordering::SeqCst).saturating_sub(started.len());
    let early = due_times.iter().filter(|(id, due)| started.get(*id).is_some_and(|at| at < *due)).count();

    shutdown.cancel();
    task.await?;
    println!("scheduler benchmark: {total} jobs in SQLite (filled in {:.1} s)", fill.as_secs_f64());
    println!("| measure | value |");
    println!("| --- | --- |");
    println!("| load {total} jobs into the scheduler | {:.0} ms |", milliseconds(load));
    println!(
        "| idle CPU over {:.1} s (all threads, schedstat) | {:.2} ms ({:.4} %) |",
        idle_wall.as_secs_f64(),
        milliseconds(idle_cpu),
        idle_cpu.as_secs_f64() / idle_wall.as_secs_f64() * 100.0
    );
    println!("| idle CPU, utime+stime (10 ms ticks) | {idle_cpu_ticks_ms} ms |");
    println!("| pickup of {due_jobs} jobs added by another connection | {:.0} ms |", milliseconds(pickup));
    println!(
        "| dispatch latency p50 / p99 / max ({} of {due_jobs} ran; {early} early, {duplicates} twice) | {:.2} / {:.2} / {:.2} ms |",
        latencies.len(),
        milliseconds(percentile(&latencies, 0.5)),
        milliseconds(percentile(&latencies, 0.99)),
        milliseconds(latencies.last().copied().unwrap_or_default())
    );
    println!("| job table memory: VmRSS delta | {:.1} MB |", rss_delta as f64 / 1024.0);
    println!("| job table memory: RssAnon delta (heap only) | {:.1} MB |", anonymous_delta as f64 / 1024.0);
    Ok(())
}
