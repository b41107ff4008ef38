//! `cron.*`: the scheduler's jobs for protocol clients and the web UI's Cron panel, scoped
//! to the owner's context (plus squidbot's housekeeping) and validated by the same core
//! rules as `squidbot cron` and the cron tools.

use jiff::Timestamp;
use serde_json::{Map, Value, json};
use squidbot_core::ids::job_id;
use squidbot_core::jobs::{
    Job, JobKind, JobRequest, JobStatus, JobStoreError, job_row, job_time, job_zone, new_user_job, resumed_next_run,
};
use squidbot_core::scheduler::RunNowError;

use super::frame::{ErrorCode, MethodError, optional_str, required_str};
use crate::JobServices;

/// Runs the `cron.*` method `method`; `jobs` is `None` when the scheduler is off.
pub(super) async fn call(
    jobs: Option<&JobServices>,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Value, MethodError> {
    let Some(jobs) = jobs else { return Err(scheduler_off(method)) };
    match method {
        "cron.list" => list(jobs).await,
        "cron.get" => owned(jobs, id_param(params)?).await.map(|job| json!({"job": row(&job)})),
        "cron.status" => status(jobs).await,
        "cron.add" => add(jobs, params).await,
        "cron.remove" => remove(jobs, params).await,
        "cron.pause" => set_status(jobs, id_param(params)?, JobStatus::Paused).await,
        "cron.resume" => set_status(jobs, id_param(params)?, JobStatus::Active).await,
        "cron.update" => update(jobs, params).await,
        "cron.run" => run(jobs, params).await,
        other => Err(MethodError::invalid(format!("unknown method `{other}`"))),
    }
}

fn scheduler_off(method: &str) -> MethodError {
    MethodError::new(
        ErrorCode::Unavailable,
        format!(
            "`{method}` needs the scheduler, which is off on this gateway (`scheduler.enabled = false`); \
             turn it on in the config and restart the gateway"
        ),
    )
    .with_details(json!({"code": "SCHEDULER_UNAVAILABLE"}))
}

/// A job as clients see it: core's row, the schedule as people read it (a heartbeat's
/// concrete slot) and OpenClaw's `enabled`.
fn row(job: &Job) -> Value {
    let mut row = job_row(job);
    row["describe"] = Value::String(job.describe_schedule());
    row["enabled"] = Value::Bool(job.status == JobStatus::Active);
    row
}

fn not_found(id: &str) -> MethodError {
    MethodError::new(ErrorCode::NotFound, format!("can't find job {id:?}; cron.list shows the ids"))
        .with_details(json!({"code": "JOB_NOT_FOUND", "id": id}))
}

/// A store failure: a missing job is the caller's mistake, anything else the server's.
fn store_error(action: &str, error: JobStoreError) -> MethodError {
    match error {
        JobStoreError::NotFound { id } => not_found(&id),
        error @ (JobStoreError::AlreadyExists { .. } | JobStoreError::Storage { .. }) => {
            tracing::warn!(%error, "a cron method failed");
            MethodError::new(ErrorCode::Internal, format!("can't {action}: {error}"))
        }
    }
}

/// `id` (OpenClaw clients may send `jobId`), trimmed.
fn id_param(params: &Map<String, Value>) -> Result<&str, MethodError> {
    let id = match optional_str(params, "id")? {
        Some(id) => Some(id),
        None => optional_str(params, "jobId")?,
    };
    id.map(str::trim)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| MethodError::invalid("`id` is required and must be a job id from cron.list"))
}

/// Wakes the running scheduler after a change, so it re-reads its next due time.
fn changed(jobs: &JobServices) {
    if let Some(control) = &jobs.control {
        control.wake();
    }
}

/// Whether the owner's clients see `job`: the owner's own jobs and squidbot's
/// housekeeping (which acts for no user, and which the owner may pause), never another
/// user's.
fn visible(jobs: &JobServices, job: &Job) -> bool {
    match job.kind {
        JobKind::System => true,
        JobKind::User | JobKind::Heartbeat => job.owner_context == jobs.owner_context,
    }
}

/// The jobs the owner sees, oldest first.
async fn owner_jobs(jobs: &JobServices) -> Result<Vec<Job>, MethodError> {
    let all = jobs.store.list_boxed().await.map_err(|error| store_error("list the jobs", error))?;
    Ok(all.into_iter().filter(|job| visible(jobs, job)).collect())
}

/// The job `id` if the owner sees it. Other users' jobs read as missing, so a client
/// can't probe their ids.
async fn owned(jobs: &JobServices, id: &str) -> Result<Job, MethodError> {
    let job = jobs.store.get_boxed(id).await.map_err(|error| store_error("read the job", error))?;
    job.filter(|job| visible(jobs, job)).ok_or_else(|| not_found(id))
}

async fn list(jobs: &JobServices) -> Result<Value, MethodError> {
    let rows: Vec<Value> = owner_jobs(jobs).await?.iter().map(row).collect();
    Ok(json!({"jobs": rows}))
}

async fn status(jobs: &JobServices) -> Result<Value, MethodError> {
    let owned = owner_jobs(jobs).await?;
    let active: Vec<&Job> = owned.iter().filter(|job| job.status == JobStatus::Active).collect();
    let next = active
        .iter()
        .filter_map(|job| job.next_run.map(|next_run| (next_run, *job)))
        .min_by_key(|(next_run, _)| *next_run)
        .and_then(|(next_run, job)| job_time(Some(next_run), &job_zone(job)));
    Ok(json!({
        "enabled": jobs.control.is_some(),
        "jobs": owned.len(),
        "active": active.len(),
        "paused": owned.len() - active.len(),
        "nextRun": next,
        "timezone": jobs.default_zone,
    }))
}

async fn add(jobs: &JobServices, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let request = JobRequest {
        name: required_str(params, "name")?,
        schedule: required_str(params, "schedule")?,
        message: required_str(params, "message")?,
        channel: optional_str(params, "channel")?,
        // A form's empty zone field means "the default", not a zone named "".
        timezone: optional_str(params, "tz")?.filter(|zone| !zone.trim().is_empty()),
        default_zone: &jobs.default_zone,
        owner_context: &jobs.owner_context,
    };
    let job = new_user_job(&request, job_id(), Timestamp::now())
        .map_err(|error| MethodError::invalid(format!("can't add the job: {error}")))?;
    jobs.store.insert_boxed(&job).await.map_err(|error| store_error("add the job", error))?;
    changed(jobs);
    Ok(json!({"job": row(&job)}))
}

async fn remove(jobs: &JobServices, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let id = id_param(params)?;
    let job = owned(jobs, id).await?;
    let refusal = match job.kind {
        JobKind::User => None,
        JobKind::Heartbeat => Some(format!(
            "can't remove job {id}: it comes from HEARTBEAT.md; edit that file to drop it, or pause the job"
        )),
        JobKind::System => {
            Some(format!("can't remove job {id}: it is squidbot's own housekeeping; pause it to stop it running"))
        }
    };
    if let Some(message) = refusal {
        return Err(MethodError::invalid(message)
            .with_details(json!({"code": "JOB_NOT_REMOVABLE", "id": id, "kind": job.kind.as_str()})));
    }
    jobs.store.remove_boxed(id).await.map_err(|error| store_error(&format!("remove job {id}"), error))?;
    changed(jobs);
    Ok(json!({"ok": true, "id": id}))
}

/// Pauses or resumes the job `id`; every kind may be paused and resumed.
async fn set_status(jobs: &JobServices, id: &str, status: JobStatus) -> Result<Value, MethodError> {
    let mut job = owned(jobs, id).await?;
    let next_run = match status {
        // The next run stays stored so listings still show where the job stood.
        JobStatus::Paused => job.next_run,
        // Counted from now: slots missed while paused are skipped, not fired in a burst.
        JobStatus::Active => Some(
            resumed_next_run(&job, Timestamp::now())
                .map_err(|error| MethodError::invalid(format!("can't resume job {id}: {error}")))?,
        ),
    };
    jobs.store
        .set_status_boxed(id, status, next_run)
        .await
        .map_err(|error| store_error(&format!("set job {id} {status}"), error))?;
    changed(jobs);
    job.status = status;
    job.next_run = next_run;
    Ok(json!({"ok": true, "job": row(&job)}))
}

/// `cron.update {id, enabled}` (or OpenClaw's `{id, patch: {enabled}}`): pause or resume.
async fn update(jobs: &JobServices, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let id = id_param(params)?;
    let enabled = match params.get("patch") {
        None | Some(Value::Null) => params.get("enabled"),
        Some(Value::Object(patch)) => {
            let others: Vec<&str> = patch.keys().map(String::as_str).filter(|key| *key != "enabled").collect();
            if !others.is_empty() {
                return Err(MethodError::invalid(format!(
                    "can't change {} of job {id}: only `enabled` can be changed; remove the job and add it again \
                     to change the rest",
                    others.join(", ")
                )));
            }
            patch.get("enabled")
        }
        Some(_) => return Err(MethodError::invalid("`patch` must be an object")),
    };
    let status = match enabled {
        Some(Value::Bool(true)) => JobStatus::Active,
        Some(Value::Bool(false)) => JobStatus::Paused,
        _ => return Err(MethodError::invalid("`enabled` is required and must be true or false")),
    };
    set_status(jobs, id, status).await
}

async fn run(jobs: &JobServices, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let id = id_param(params)?;
    let job = owned(jobs, id).await?;
    let Some(control) = &jobs.control else {
        return Err(MethodError::new(
            ErrorCode::Unavailable,
            format!("can't run job {id} now: no scheduler runs in this gateway (`scheduler.enabled = false`)"),
        )
        .with_details(json!({"code": "SCHEDULER_UNAVAILABLE"})));
    };
    match control.run_now(&job.id).await {
        Ok(()) => Ok(json!({"ok": true, "id": job.id, "started": true})),
        Err(RunNowError::NotFound { id }) => Err(not_found(&id)),
        Err(RunNowError::AlreadyRunning { id }) => Err(MethodError::new(
            ErrorCode::Conflict,
            format!("can't run job {id} now: its previous run is still going; runs never overlap"),
        )
        .with_details(json!({"code": "JOB_RUNNING", "id": id}))),
        Err(RunNowError::Stopped) => Err(MethodError::new(
            ErrorCode::Unavailable,
            format!("can't run job {id} now: the scheduler has stopped (the gateway is shutting down)"),
        )),
    }
}

#[cfg(test)]
mod tests;
