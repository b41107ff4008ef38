//! `squidbot cron list|add|remove|pause|resume`: scheduled jobs, straight in the
//! database so they work whether or not a gateway runs.

use anyhow::{Context, Result};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value, json};
use squidbot_core::ids::job_id;
use squidbot_core::jobs::{ContextMode, Job, JobKind, JobStatus, JobStore, anchor_at};
use squidbot_core::schedule::{Schedule, resolve_zone};
use squidbot_store::SqliteJobStore;

use crate::cli::{CronAction, CronAddArgs};
use crate::wiring::{Environment, OWNER_CONTEXT};

/// The zone of a job added without `--tz`: the config has no time zone setting, and a
/// fixed default keeps a job's times from shifting with the host's zone.
const DEFAULT_ZONE: &str = "UTC";

/// Runs a cron action.
pub async fn run(environment: &Environment, action: CronAction) -> Result<()> {
    let store = SqliteJobStore::new(environment.database()?);
    match action {
        CronAction::List(flags) => list(&store, flags.json).await,
        CronAction::Add(arguments) => add(&store, arguments).await,
        CronAction::Remove { id } => {
            store.remove(&id).await?;
            println!("removed job {id}");
            Ok(())
        }
        CronAction::Pause { id } => {
            let job = find(&store, &id).await?;
            store.set_status(&id, JobStatus::Paused, job.next_run).await?;
            println!("paused job {id} ({})", job.name);
            Ok(())
        }
        CronAction::Resume { id } => resume(&store, &id).await,
    }
}

async fn add(store: &SqliteJobStore, arguments: CronAddArgs) -> Result<()> {
    if arguments.name.trim().is_empty() || arguments.message.trim().is_empty() {
        anyhow::bail!("can't add the job: --name and --message must not be empty");
    }
    let timezone = arguments.tz.as_deref().unwrap_or(DEFAULT_ZONE).trim().to_owned();
    let zone = resolve_zone(&timezone).context("can't add the job")?;
    let now = Timestamp::now();
    let schedule = anchor_at(Schedule::parse(&arguments.schedule).context("can't add the job")?, now);
    let next_run = schedule.first_due(now, &zone).context("can't add the job")?;
    let job = Job {
        id: job_id(),
        kind: JobKind::User,
        name: arguments.name.trim().to_owned(),
        schedule: schedule.to_string(),
        timezone,
        message: arguments.message,
        channel: arguments.channel.filter(|channel| !channel.trim().is_empty()),
        context_mode: ContextMode::default(),
        owner_context: OWNER_CONTEXT.to_owned(),
        status: JobStatus::Active,
        next_run: Some(next_run.as_millisecond()),
        last_run: None,
        last_error: None,
        consecutive_failures: 0,
        created: now.as_millisecond(),
        source_hash: None,
        seed: None,
    };
    store.insert(&job).await?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&row(&job))?);
    } else {
        println!("added job {} ({}): next run {}", job.id, job.name, format_time(job.next_run, &zone));
    }
    Ok(())
}

async fn resume(store: &SqliteJobStore, id: &str) -> Result<()> {
    let job = find(store, id).await?;
    let zone = resolve_zone(&job.timezone).with_context(|| format!("can't resume job {id}"))?;
    let schedule = job.parsed_schedule().with_context(|| format!("can't resume job {id}"))?;
    // From now, not from the stored next run: slots that passed while paused are skipped.
    let next_run = schedule.first_due(Timestamp::now(), &zone).with_context(|| format!("can't resume job {id}"))?;
    store.set_status(id, JobStatus::Active, Some(next_run.as_millisecond())).await?;
    println!("resumed job {id} ({}): next run {}", job.name, format_time(Some(next_run.as_millisecond()), &zone));
    Ok(())
}

async fn find(store: &SqliteJobStore, id: &str) -> Result<Job> {
    store.get(id).await?.ok_or_else(|| squidbot_core::jobs::JobStoreError::NotFound { id: id.to_owned() }.into())
}

async fn list(store: &SqliteJobStore, json: bool) -> Result<()> {
    let jobs = store.list().await?;
    if json {
        let rows: Vec<Value> = jobs.iter().map(row).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if jobs.is_empty() {
        println!("no jobs yet; add one with `squidbot cron add`");
        return Ok(());
    }
    println!(
        "{:<8}  {:<20}  {:<24}  {:<18}  {:<25}  {:<25}  {:<6}  FAILURES",
        "ID", "NAME", "SCHEDULE", "TIMEZONE", "NEXT RUN", "LAST RUN", "STATUS"
    );
    for job in &jobs {
        let zone = job_zone(job);
        println!(
            "{:<8}  {:<20}  {:<24}  {:<18}  {:<25}  {:<25}  {:<6}  {}",
            job.id,
            job.name,
            job.schedule,
            job.timezone,
            format_time(job.next_run, &zone),
            format_time(job.last_run, &zone),
            job.status,
            job.consecutive_failures
        );
    }
    Ok(())
}

/// One job for `--json` output; times are RFC 3339 in the job's zone, `null` when none.
fn row(job: &Job) -> Value {
    let zone = job_zone(job);
    let time = |ms: Option<i64>| ms.and_then(|ms| rfc3339(ms, &zone));
    json!({
        "id": job.id,
        "kind": job.kind.as_str(),
        "name": job.name,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "message": job.message,
        "channel": job.channel,
        "context_mode": job.context_mode.as_str(),
        "next_run": time(job.next_run),
        "last_run": time(job.last_run),
        "last_error": job.last_error,
        "status": job.status.as_str(),
        "failures": job.consecutive_failures,
    })
}

/// The job's zone, or UTC when the stored name no longer resolves (a time zone
/// database without it): listing must still work.
fn job_zone(job: &Job) -> TimeZone {
    resolve_zone(&job.timezone).unwrap_or(TimeZone::UTC)
}

fn format_time(ms: Option<i64>, zone: &TimeZone) -> String {
    ms.and_then(|ms| rfc3339(ms, zone)).unwrap_or_else(|| "-".to_owned())
}

fn rfc3339(ms: i64, zone: &TimeZone) -> Option<String> {
    let zoned = Timestamp::from_millisecond(ms).ok()?.to_zoned(zone.clone());
    Some(zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string())
}
