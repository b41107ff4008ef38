//! `cron.*`: the scheduler's jobs for protocol clients and the web UI's Cron panel, scoped
//! to the owner's context (plus squidbot's housekeeping) and validated by the same core
//! rules as `squidbot cron` and the cron tools.

use jiff::Timestamp;
use serde::Deserialize;
use serde::de;
use serde_json::{Map, Value, json};
use squidbot_core::ids::job_id;
use squidbot_core::jobs::{
    Job, JobKind, JobRequest, JobStatus, JobStoreError, job_row, job_time, job_zone, new_user_job, resumed_next_run,
};
use squidbot_core::scheduler::RunNowError;

use super::frame::{ErrorCode, MethodError};
use super::params::{Lenient, NonBlank};
use crate::JobServices;

/// A `cron.*` request.
#[derive(Debug)]
pub(crate) enum CronRequest {
    /// `cron.list`.
    List,
    /// `cron.get`.
    Get(JobParams),
    /// `cron.status`.
    Status,
    /// `cron.add`.
    Add(AddJobParams),
    /// `cron.remove`.
    Remove(JobParams),
    /// `cron.pause`.
    Pause(JobParams),
    /// `cron.resume`.
    Resume(JobParams),
    /// `cron.update`.
    Update(UpdateJobParams),
    /// `cron.run`.
    Run(JobParams),
}

/// Params naming one job.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobParams {
    /// The job's id, as `cron.list` shows it.
    pub(crate) id: Option<String>,
    /// OpenClaw clients' name for `id`, read when `id` is absent.
    pub(crate) job_id: Option<String>,
}

impl JobParams {
    /// The id, trimmed.
    fn id(&self) -> Result<&str, MethodError> {
        job_reference(self.id.as_deref(), self.job_id.as_deref())
    }
}

/// `cron.add` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AddJobParams {
    /// The job's name.
    pub(crate) name: NonBlank,
    /// When it runs: `daily 09:00`, `every 30m`, a cron expression, `at <time>`.
    pub(crate) schedule: NonBlank,
    /// What the assistant is told when it runs.
    pub(crate) message: NonBlank,
    /// Where the reply goes.
    pub(crate) channel: Option<String>,
    /// IANA zone; the default zone when absent or empty.
    pub(crate) tz: Option<String>,
}

/// `cron.update` params: `{id, enabled}`, or OpenClaw's `{id, patch: {enabled}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpdateJobParams {
    /// The job's id.
    pub(crate) id: Option<String>,
    /// OpenClaw clients' name for `id`.
    pub(crate) job_id: Option<String>,
    /// The changes; only `enabled` can change.
    pub(crate) patch: Option<JobPatch>,
    /// Read only without a `patch`; a value that is not a boolean is refused below as
    /// missing, naming the field.
    pub(crate) enabled: Lenient<bool>,
}

/// The changes of a `cron.update`, as sent: a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobPatch(pub(crate) Map<String, Value>);

impl<'de> Deserialize<'de> for JobPatch {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Self).map_err(|_| de::Error::custom("must be an object"))
    }
}

/// The scheduler's jobs, or why `method` can't reach them (the scheduler is off).
pub(super) fn jobs<'a>(jobs: Option<&'a JobServices>, method: &str) -> Result<&'a JobServices, MethodError> {
    jobs.ok_or_else(|| scheduler_off(method))
}

/// Whether squidbot's own housekeeping jobs are shown (they act for nobody).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Housekeeping {
    /// To the owner's clients, who may pause them.
    Shown,
    /// Not to people.
    Hidden,
}

/// The jobs one client works with: those owned by one context (the owner's, or a
/// person's own), and squidbot's housekeeping for the owner.
pub(crate) struct JobView<'a> {
    /// The scheduler's jobs.
    pub(crate) services: &'a JobServices,
    /// The context whose jobs are seen and added.
    pub(crate) context: &'a str,
    /// Whether housekeeping jobs are seen.
    pub(crate) housekeeping: Housekeeping,
}

impl<'a> JobView<'a> {
    /// What the owner's clients see.
    pub(crate) fn owner(services: &'a JobServices) -> Self {
        JobView { services, context: &services.owner_context, housekeeping: Housekeeping::Shown }
    }
}

impl CronRequest {
    /// Whether the request changes a job (or runs one).
    pub(crate) fn changes(&self) -> bool {
        match self {
            CronRequest::List | CronRequest::Get(_) | CronRequest::Status => false,
            CronRequest::Add(_)
            | CronRequest::Remove(_)
            | CronRequest::Pause(_)
            | CronRequest::Resume(_)
            | CronRequest::Update(_)
            | CronRequest::Run(_) => true,
        }
    }
}

/// Runs the `cron.*` method `method` with its params as sent; `jobs` is `None` when the
/// scheduler is off, which is reported whatever the params.
#[cfg(test)]
pub(super) async fn call(
    jobs: Option<&JobServices>,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Value, MethodError> {
    let jobs = self::jobs(jobs, method)?;
    let jobs = &JobView::owner(jobs);
    let method = super::methods::Method::from_name(method)
        .ok_or_else(|| super::methods::RequestError::UnknownMethod(method.to_owned()))?;
    let request = method.parse(params.clone()).map_err(super::methods::RequestError::from)?;
    let super::methods::Request::Cron(request) = request else {
        return Err(MethodError::invalid(format!("`{}` is not a cron method", method.name())));
    };
    run(jobs, request).await
}

/// Runs a `cron.*` request.
pub(super) async fn run(jobs: &JobView<'_>, request: CronRequest) -> Result<Value, MethodError> {
    match request {
        CronRequest::List => list(jobs).await,
        CronRequest::Get(params) => owned(jobs, params.id()?).await.map(|job| json!({"job": row(&job)})),
        CronRequest::Status => status(jobs).await,
        CronRequest::Add(params) => add(jobs, params).await,
        CronRequest::Remove(params) => remove(jobs, params.id()?).await,
        CronRequest::Pause(params) => set_status(jobs, params.id()?, JobStatus::Paused).await,
        CronRequest::Resume(params) => set_status(jobs, params.id()?, JobStatus::Active).await,
        CronRequest::Update(params) => update(jobs, params).await,
        CronRequest::Run(params) => run_now(jobs, params.id()?).await,
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
fn job_reference<'a>(id: Option<&'a str>, job_id: Option<&'a str>) -> Result<&'a str, MethodError> {
    id.or(job_id)
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| MethodError::invalid("`id` is required and must be a job id from cron.list"))
}

/// Wakes the running scheduler after a change, so it re-reads its next due time.
fn changed(jobs: &JobView<'_>) {
    if let Some(control) = &jobs.services.control {
        control.wake();
    }
}

/// Whether the client sees `job`: the jobs of its context, and for the owner's clients
/// squidbot's housekeeping (which acts for no user, and which the owner may pause); never
/// another user's.
fn visible(jobs: &JobView<'_>, job: &Job) -> bool {
    match job.kind {
        JobKind::System => jobs.housekeeping == Housekeeping::Shown,
        JobKind::User | JobKind::Heartbeat => job.owner_context == jobs.context,
    }
}

/// The jobs the owner sees, oldest first.
async fn owner_jobs(jobs: &JobView<'_>) -> Result<Vec<Job>, MethodError> {
    let all = jobs.services.store.list_boxed().await.map_err(|error| store_error("list the jobs", error))?;
    Ok(all.into_iter().filter(|job| visible(jobs, job)).collect())
}

/// The job `id` if the owner sees it. Other users' jobs read as missing, so a client
/// can't probe their ids.
async fn owned(jobs: &JobView<'_>, id: &str) -> Result<Job, MethodError> {
    let job = jobs.services.store.get_boxed(id).await.map_err(|error| store_error("read the job", error))?;
    job.filter(|job| visible(jobs, job)).ok_or_else(|| not_found(id))
}

async fn list(jobs: &JobView<'_>) -> Result<Value, MethodError> {
    let rows: Vec<Value> = owner_jobs(jobs).await?.iter().map(row).collect();
    Ok(json!({"jobs": rows}))
}

async fn status(jobs: &JobView<'_>) -> Result<Value, MethodError> {
    let owned = owner_jobs(jobs).await?;
    let active: Vec<&Job> = owned.iter().filter(|job| job.status == JobStatus::Active).collect();
    let next = active
        .iter()
        .filter_map(|job| job.next_run.map(|next_run| (next_run, *job)))
        .min_by_key(|(next_run, _)| *next_run)
        .and_then(|(next_run, job)| job_time(Some(next_run), &job_zone(job)));
    Ok(json!({
        "enabled": jobs.services.control.is_some(),
        "jobs": owned.len(),
        "active": active.len(),
        "paused": owned.len() - active.len(),
        "nextRun": next,
        "timezone": jobs.services.default_zone,
    }))
}

async fn add(jobs: &JobView<'_>, params: AddJobParams) -> Result<Value, MethodError> {
    let request = JobRequest {
        name: params.name.as_str(),
        schedule: params.schedule.as_str(),
        message: params.message.as_str(),
        channel: params.channel.as_deref(),
        // A form's empty zone field means "the default", not a zone named "".
        timezone: params.tz.as_deref().filter(|zone| !zone.trim().is_empty()),
        default_zone: &jobs.services.default_zone,
        owner_context: jobs.context,
    };
    let job = new_user_job(&request, job_id(), Timestamp::now())
        .map_err(|error| MethodError::invalid(format!("can't add the job: {error}")))?;
    jobs.services.store.insert_boxed(&job).await.map_err(|error| store_error("add the job", error))?;
    changed(jobs);
    Ok(json!({"job": row(&job)}))
}

async fn remove(jobs: &JobView<'_>, id: &str) -> Result<Value, MethodError> {
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
    jobs.services.store.remove_boxed(id).await.map_err(|error| store_error(&format!("remove job {id}"), error))?;
    changed(jobs);
    Ok(json!({"ok": true, "id": id}))
}

/// Pauses or resumes the job `id`; every kind may be paused and resumed.
async fn set_status(jobs: &JobView<'_>, id: &str, status: JobStatus) -> Result<Value, MethodError> {
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
    jobs.services
        .store
        .set_status_boxed(id, status, next_run)
        .await
        .map_err(|error| store_error(&format!("set job {id} {status}"), error))?;
    changed(jobs);
    job.status = status;
    job.next_run = next_run;
    Ok(json!({"ok": true, "job": row(&job)}))
}

/// `cron.update {id, enabled}` (or OpenClaw's `{id, patch: {enabled}}`): pause or resume.
async fn update(jobs: &JobView<'_>, params: UpdateJobParams) -> Result<Value, MethodError> {
    let id = job_reference(params.id.as_deref(), params.job_id.as_deref())?;
    let enabled = match &params.patch {
        None => params.enabled.0,
        Some(JobPatch(patch)) => {
            let others: Vec<&str> = patch.keys().map(String::as_str).filter(|key| *key != "enabled").collect();
            if !others.is_empty() {
                return Err(MethodError::invalid(format!(
                    "can't change {} of job {id}: only `enabled` can be changed; remove the job and add it again \
                     to change the rest",
                    others.join(", ")
                )));
            }
            patch.get("enabled").and_then(Value::as_bool)
        }
    };
    let status = match enabled {
        Some(true) => JobStatus::Active,
        Some(false) => JobStatus::Paused,
        None => return Err(MethodError::invalid("`enabled` is required and must be true or false")),
    };
    set_status(jobs, id, status).await
}

async fn run_now(jobs: &JobView<'_>, id: &str) -> Result<Value, MethodError> {
    let job = owned(jobs, id).await?;
    let Some(control) = &jobs.services.control else {
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
