//! `squidbot cron list|add|remove|pause|resume|run`: scheduled jobs, straight in the
//! database so they work whether or not a gateway runs (a running gateway picks changes
//! up within a second); `run` asks the running gateway, else runs the job here.

use anyhow::{Context, Result};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;
use squidbot_core::ids::job_id;
use squidbot_core::jobs::{
    Job, JobRequest, JobStatus, JobStore, job_row, job_time, job_zone, new_user_job, resumed_next_run,
};
use squidbot_store::SqliteJobStore;

use super::gateway_client::{GatewayClient, payload};
use crate::cli::{CronAction, CronAddArgs};
use crate::wiring::{Environment, OWNER_CONTEXT};

/// Runs a cron action.
pub async fn run(environment: &Environment, action: CronAction) -> Result<()> {
    let store = SqliteJobStore::new(environment.database()?);
    match action {
        CronAction::List(flags) => list(&store, flags.json).await,
        CronAction::Add(arguments) => add(&store, arguments, &environment.job_zone()).await,
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
        CronAction::Run { id } => run_now(environment, &store, &id).await,
    }
}

/// Runs job `id` now: in the running gateway when there is one, else in this process
/// with the reply printed; the outcome is recorded like a scheduled run's.
async fn run_now(environment: &Environment, store: &SqliteJobStore, id: &str) -> Result<()> {
    let job = find(store, id).await?;
    if let Some(mut client) = GatewayClient::connect(&environment.config().gateway).await? {
        let response = client.call("cron.run", serde_json::json!({"id": id})).await;
        client.close().await;
        payload(response?, &format!("run job {id}"))?;
        println!("started job {id} ({}) in the running gateway; its reply goes where the job's replies go", job.name);
        return Ok(());
    }
    eprintln!("no gateway is running: running job {id} ({}) here", job.name);
    crate::jobs::run_here(environment, store, &job).await
}

async fn add(store: &SqliteJobStore, arguments: CronAddArgs, default_zone: &str) -> Result<()> {
    let request = JobRequest {
        name: &arguments.name,
        schedule: &arguments.schedule,
        message: &arguments.message,
        channel: arguments.channel.as_deref(),
        timezone: arguments.tz.as_deref(),
        default_zone,
        owner_context: OWNER_CONTEXT,
    };
    let job = new_user_job(&request, job_id(), Timestamp::now()).context("can't add the job")?;
    store.insert(&job).await?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&job_row(&job))?);
    } else {
        println!("added job {} ({}): next run {}", job.id, job.name, format_time(job.next_run, &job_zone(&job)));
    }
    Ok(())
}

async fn resume(store: &SqliteJobStore, id: &str) -> Result<()> {
    let job = find(store, id).await?;
    let next_run = resumed_next_run(&job, Timestamp::now()).with_context(|| format!("can't resume job {id}"))?;
    store.set_status(id, JobStatus::Active, Some(next_run)).await?;
    println!("resumed job {id} ({}): next run {}", job.name, format_time(Some(next_run), &job_zone(&job)));
    Ok(())
}

async fn find(store: &SqliteJobStore, id: &str) -> Result<Job> {
    store.get(id).await?.ok_or_else(|| squidbot_core::jobs::JobStoreError::NotFound { id: id.to_owned() }.into())
}

async fn list(store: &SqliteJobStore, json: bool) -> Result<()> {
    let jobs = store.list().await?;
    if json {
        let rows: Vec<Value> = jobs.iter().map(job_row).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if jobs.is_empty() {
        println!("no jobs yet; add one with `squidbot cron add`");
        return Ok(());
    }
    let width = jobs.iter().map(|job| job.id.len()).max().unwrap_or(2).max(2);
    println!(
        "{:<width$}  {:<20}  {:<24}  {:<18}  {:<25}  {:<25}  {:<6}  FAILURES",
        "ID", "NAME", "SCHEDULE", "TIMEZONE", "NEXT RUN", "LAST RUN", "STATUS"
    );
    for job in &jobs {
        let zone = job_zone(job);
        println!(
            "{:<width$}  {:<20}  {:<24}  {:<18}  {:<25}  {:<25}  {:<6}  {}",
            job.id,
            job.name,
            job.describe_schedule(),
            job.timezone,
            format_time(job.next_run, &zone),
            format_time(job.last_run, &zone),
            job.status,
            job.consecutive_failures
        );
    }
    Ok(())
}

fn format_time(milliseconds: Option<i64>, zone: &TimeZone) -> String {
    job_time(milliseconds, zone).unwrap_or_else(|| "-".to_owned())
}
