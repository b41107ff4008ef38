//! The `cron.*` methods against an in-memory job store and a recording scheduler control.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use serde_json::{Map, Value, json};
use squidbot_core::BoxFuture;
use squidbot_core::jobs::{Job, JobKind, JobRequest, JobStatus, JobStore, JobStoreError, RunRecord, new_user_job};
use squidbot_core::scheduler::{JobControl, RunNowError};

use super::{Housekeeping, JobView, call, run};
use crate::JobServices;
use crate::ws::frame::{ErrorCode, MethodError};

const OWNER: &str = "owner";

/// Where the binary keeps squidbot's own housekeeping jobs.
const SYSTEM: &str = "system";

/// Jobs in a vector; `failing` makes every call a storage error.
#[derive(Default)]
struct MemoryJobs {
    jobs: Mutex<Vec<Job>>,
    failing: Mutex<bool>,
    revision: AtomicUsize,
}

impl MemoryJobs {
    fn check(&self, action: &'static str) -> Result<(), JobStoreError> {
        if *self.failing.lock().unwrap() {
            return Err(JobStoreError::Storage { action, reason: "disk I/O error".into() });
        }
        Ok(())
    }

    fn snapshot(&self) -> Vec<Job> {
        self.jobs.lock().unwrap().clone()
    }

    fn job(&self, id: &str) -> Job {
        self.snapshot().into_iter().find(|job| job.id == id).unwrap()
    }

    /// Locks the jobs for a change, counting it in the revision.
    fn changing(&self) -> std::sync::MutexGuard<'_, Vec<Job>> {
        self.revision.fetch_add(1, Ordering::SeqCst);
        self.jobs.lock().unwrap()
    }

    fn with_job<T>(&self, id: &str, change: impl FnOnce(&mut Job) -> T) -> Result<T, JobStoreError> {
        let mut jobs = self.changing();
        let job = jobs.iter_mut().find(|job| job.id == id).ok_or(JobStoreError::NotFound { id: id.into() })?;
        Ok(change(job))
    }
}

impl JobStore for MemoryJobs {
    async fn insert(&self, job: &Job) -> Result<(), JobStoreError> {
        self.check("add a job")?;
        let mut jobs = self.changing();
        if jobs.iter().any(|stored| stored.id == job.id) {
            return Err(JobStoreError::AlreadyExists { id: job.id.clone() });
        }
        jobs.push(job.clone());
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Job>, JobStoreError> {
        self.check("list jobs")?;
        Ok(self.snapshot())
    }

    async fn get(&self, id: &str) -> Result<Option<Job>, JobStoreError> {
        self.check("read a job")?;
        Ok(self.snapshot().into_iter().find(|job| job.id == id))
    }

    async fn remove(&self, id: &str) -> Result<(), JobStoreError> {
        self.check("remove a job")?;
        let mut jobs = self.changing();
        let before = jobs.len();
        jobs.retain(|job| job.id != id);
        if jobs.len() == before {
            return Err(JobStoreError::NotFound { id: id.into() });
        }
        Ok(())
    }

    async fn set_status(&self, id: &str, status: JobStatus, next_run: Option<i64>) -> Result<(), JobStoreError> {
        self.check("set a job's status")?;
        self.with_job(id, |job| {
            job.status = status;
            job.next_run = next_run;
        })
    }

    async fn due(&self, now: i64) -> Result<Vec<Job>, JobStoreError> {
        let mut due: Vec<Job> = self
            .snapshot()
            .into_iter()
            .filter(|job| job.status == JobStatus::Active && job.next_run.is_some_and(|next| next <= now))
            .collect();
        due.sort_by_key(|job| job.next_run);
        Ok(due)
    }

    async fn record_run(&self, id: &str, run: &RunRecord) -> Result<u32, JobStoreError> {
        self.with_job(id, |job| {
            job.last_run = Some(run.at);
            job.consecutive_failures
        })
    }

    async fn revision(&self) -> Result<i64, JobStoreError> {
        Ok(self.revision.load(Ordering::SeqCst) as i64)
    }

    async fn claim(
        &self,
        id: &str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> Result<bool, JobStoreError> {
        self.with_job(id, |job| {
            let claimed = job.status == JobStatus::Active && job.next_run == expected_next_run;
            if claimed {
                job.next_run = next_run;
            }
            claimed
        })
    }

    async fn pause_with_error(&self, id: &str, reason: &str) -> Result<(), JobStoreError> {
        self.with_job(id, |job| {
            job.status = JobStatus::Paused;
            job.last_error = Some(reason.to_owned());
        })
    }

    async fn replace_generated(&self, kind: JobKind, owner_context: &str, jobs: &[Job]) -> Result<(), JobStoreError> {
        let mut stored = self.changing();
        stored.retain(|job| job.kind != kind || job.owner_context != owner_context);
        stored.extend(jobs.iter().cloned());
        Ok(())
    }
}

/// Counts wakes and run requests; `run_now` answers with `refusal` when set.
#[derive(Default)]
struct RecordingControl {
    wakes: AtomicUsize,
    runs: Mutex<Vec<String>>,
    refusal: Mutex<Option<RunNowError>>,
}

impl JobControl for RecordingControl {
    fn wake(&self) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }

    fn run_now<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), RunNowError>> {
        Box::pin(async move {
            self.runs.lock().unwrap().push(id.to_owned());
            match self.refusal.lock().unwrap().clone() {
                Some(error) => Err(error),
                None => Ok(()),
            }
        })
    }
}

struct Fixture {
    store: Arc<MemoryJobs>,
    control: Arc<RecordingControl>,
    services: JobServices,
}

impl Fixture {
    fn new() -> Self {
        let store = Arc::new(MemoryJobs::default());
        let control = Arc::new(RecordingControl::default());
        let services = JobServices {
            store: store.clone(),
            control: Some(control.clone()),
            owner_context: OWNER.into(),
            default_zone: "Europe/Berlin".into(),
        };
        Self { store, control, services }
    }

    /// The same store with no scheduler running.
    fn without_control(self) -> Self {
        Self { services: JobServices { control: None, ..self.services }, ..self }
    }

    /// Stores a job of `kind` for `context` with schedule `schedule`, and returns its id.
    fn stored(&self, name: &str, kind: JobKind, context: &str, schedule: &str) -> String {
        let request = JobRequest {
            name,
            schedule,
            message: "do the thing",
            channel: None,
            timezone: Some("UTC"),
            default_zone: "UTC",
            owner_context: context,
        };
        let mut job = new_user_job(&request, format!("{name}-id"), Timestamp::now()).unwrap();
        job.kind = kind;
        let id = job.id.clone();
        self.store.jobs.lock().unwrap().push(job);
        id
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, MethodError> {
        let Value::Object(params) = params else { panic!("params must be an object") };
        call(Some(&self.services), method, &params).await
    }

    /// Calls `method` as a person whose context is `context` sees the jobs.
    async fn call_as(&self, context: &str, method: &str, params: Value) -> Result<Value, MethodError> {
        let Value::Object(params) = params else { panic!("params must be an object") };
        let method = crate::ws::methods::Method::from_name(method).unwrap();
        let crate::ws::methods::Request::Cron(request) = method.parse(params).unwrap() else { panic!("not cron") };
        let view = JobView { services: &self.services, context, housekeeping: Housekeeping::Hidden };
        run(&view, request).await
    }

    fn wakes(&self) -> usize {
        self.control.wakes.load(Ordering::SeqCst)
    }
}

fn refused(result: Result<Value, MethodError>, code: ErrorCode) -> MethodError {
    match result {
        Err(error) if error.code == code => error,
        other => panic!("expected a {code:?} error, got {other:?}"),
    }
}

fn ids(listing: &Value) -> Vec<&str> {
    listing["jobs"].as_array().unwrap().iter().map(|job| job["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn cron_list_shows_the_owners_jobs_and_housekeeping_and_hides_other_users_jobs() {
    let fixture = Fixture::new();
    fixture.stored("report", JobKind::User, OWNER, "daily 09:00");
    let pulse = fixture.stored("pulse", JobKind::Heartbeat, OWNER, "every 30m");
    fixture.stored("vacuum", JobKind::System, SYSTEM, "weekly sun 03:00");
    fixture.stored("theirs", JobKind::User, "telegram:42", "daily 10:00");
    fixture.stored("their-pulse", JobKind::Heartbeat, "telegram:42", "every 30m");
    // Heartbeat jobs store a bare cadence and the seed of its jittered slot.
    fixture
        .store
        .with_job(&pulse, |job| {
            job.schedule = "daily".into();
            job.seed = Some(42);
        })
        .unwrap();

    let listing = fixture.call("cron.list", json!({})).await.unwrap();
    assert_eq!(ids(&listing), ["report-id", "pulse-id", "vacuum-id"]);
    let kinds: Vec<&str> =
        listing["jobs"].as_array().unwrap().iter().map(|job| job["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "heartbeat", "system"]);
    let report = &listing["jobs"][0];
    assert_eq!((report["name"].as_str(), report["schedule"].as_str()), (Some("report"), Some("daily 09:00")));
    assert_eq!((report["status"].as_str(), report["enabled"].as_bool()), (Some("active"), Some(true)));
    assert!(report["next_run"].as_str().is_some_and(|next| next.ends_with("T09:00:00+00:00")), "{report}");
    assert_eq!((report["last_run"].clone(), report["failures"].as_u64()), (Value::Null, Some(0)));
    assert_eq!(report["describe"], "daily 09:00");
    let heartbeat = &listing["jobs"][1];
    assert_eq!(heartbeat["schedule"], "daily");
    assert!(heartbeat["describe"].as_str().unwrap().starts_with("daily at "), "the slot is shown: {heartbeat}");
    assert_eq!(fixture.wakes(), 0, "reading wakes nobody");
}

#[tokio::test]
async fn cron_get_answers_the_row_and_not_found_for_unknown_or_foreign_ids() {
    let fixture = Fixture::new();
    let id = fixture.stored("report", JobKind::User, OWNER, "daily 09:00");
    let foreign = fixture.stored("theirs", JobKind::User, "telegram:42", "daily 10:00");

    let got = fixture.call("cron.get", json!({"id": id})).await.unwrap();
    assert_eq!(got["job"]["id"], id);
    let got = fixture.call("cron.get", json!({"jobId": format!(" {id} ")})).await.unwrap();
    assert_eq!(got["job"]["name"], "report", "OpenClaw's `jobId` works and ids are trimmed");

    for unknown in ["nope", foreign.as_str()] {
        let error = refused(fixture.call("cron.get", json!({"id": unknown})).await, ErrorCode::NotFound);
        assert_eq!(error.message, format!("can't find job {unknown:?}; cron.list shows the ids"));
        assert_eq!(error.details, Some(json!({"code": "JOB_NOT_FOUND", "id": unknown})));
    }
    for params in [json!({}), json!({"id": " "}), json!({"id": 7})] {
        let error = refused(fixture.call("cron.get", params.clone()).await, ErrorCode::InvalidRequest);
        assert!(error.message.contains("`id`"), "{params}: {}", error.message);
    }
}

#[tokio::test]
async fn cron_add_stores_a_user_job_of_the_owner_in_the_default_zone_and_wakes_the_scheduler() {
    let fixture = Fixture::new();
    let params = json!({"name": " PR check ", "schedule": "weekly mon 09:00", "message": "check PRs", "tz": ""});
    let added = fixture.call("cron.add", params).await.unwrap();
    let row = &added["job"];
    assert_eq!((row["name"].as_str(), row["kind"].as_str()), (Some("PR check"), Some("user")));
    assert_eq!((row["timezone"].as_str(), row["status"].as_str()), (Some("Europe/Berlin"), Some("active")));
    let next = row["next_run"].as_str().unwrap();
    assert!(next.contains("T09:00:00+0"), "next run at 09:00 Berlin time: {next}");
    let stored = fixture.store.job(row["id"].as_str().unwrap());
    assert_eq!((stored.kind, stored.owner_context.as_str(), stored.channel), (JobKind::User, OWNER, None));
    assert_eq!(fixture.wakes(), 1);

    let params = json!({"name": "ping", "schedule": "every 5m", "message": "ping", "tz": "UTC", "channel": "cli"});
    let added = fixture.call("cron.add", params).await.unwrap();
    assert_eq!((added["job"]["timezone"].as_str(), added["job"]["channel"].as_str()), (Some("UTC"), Some("cli")));
    assert_eq!(fixture.store.snapshot().len(), 2);
}

#[tokio::test]
async fn cron_add_refuses_bad_input_with_the_reason_and_writes_nothing() {
    let fixture = Fixture::new();
    let add = |schedule: &str, tz: &str| json!({"name": "n", "schedule": schedule, "message": "m", "tz": tz});

    let error = refused(fixture.call("cron.add", add("fortnightly", "UTC")).await, ErrorCode::InvalidRequest);
    assert!(error.message.starts_with("can't add the job: can't parse schedule \"fortnightly\""), "{}", error.message);
    let error = refused(fixture.call("cron.add", add("61 * * * *", "UTC")).await, ErrorCode::InvalidRequest);
    assert!(error.message.contains("minute 61 is out of range"), "{}", error.message);
    let error = refused(fixture.call("cron.add", add("daily 09:00", "Mars/Base")).await, ErrorCode::InvalidRequest);
    assert!(error.message.contains("can't use time zone \"Mars/Base\""), "{}", error.message);
    let error =
        refused(fixture.call("cron.add", add("at 2001-01-01T09:00:00Z", "UTC")).await, ErrorCode::InvalidRequest);
    assert!(error.message.contains("no due time after now"), "{}", error.message);
    for missing in ["name", "schedule", "message"] {
        let mut params = add("daily 09:00", "UTC");
        params.as_object_mut().unwrap().remove(missing);
        let error = refused(fixture.call("cron.add", params).await, ErrorCode::InvalidRequest);
        assert!(error.message.starts_with(&format!("`{missing}` is required")), "{}", error.message);
    }
    let error = refused(
        fixture.call("cron.add", json!({"name": "n", "schedule": "daily 09:00", "message": "m", "tz": 1})).await,
        ErrorCode::InvalidRequest,
    );
    assert_eq!(error.message, "`tz` must be a string");
    assert!(fixture.store.snapshot().is_empty());
    assert_eq!(fixture.wakes(), 0);
}

#[tokio::test]
async fn pause_keeps_the_next_run_and_resume_recomputes_it_from_now() {
    let fixture = Fixture::new();
    let id = fixture.stored("report", JobKind::User, OWNER, "every 5m");
    let stale = Timestamp::now().as_millisecond() - 3_600_000;
    fixture.store.with_job(&id, |job| job.next_run = Some(stale)).unwrap();

    let paused = fixture.call("cron.pause", json!({"id": id})).await.unwrap();
    assert_eq!((paused["ok"].as_bool(), paused["job"]["status"].as_str()), (Some(true), Some("paused")));
    assert_eq!(paused["job"]["enabled"], false);
    let stored = fixture.store.job(&id);
    assert_eq!((stored.status, stored.next_run), (JobStatus::Paused, Some(stale)));
    assert_eq!(fixture.wakes(), 1);

    let before = Timestamp::now().as_millisecond();
    let resumed = fixture.call("cron.resume", json!({"id": id})).await.unwrap();
    assert_eq!(resumed["job"]["status"], "active");
    let stored = fixture.store.job(&id);
    let next = stored.next_run.unwrap();
    assert_eq!(stored.status, JobStatus::Active);
    assert!(next > before && next <= before + 5 * 60_000 + 1_000, "next run {next} is within 5 minutes of now");
    assert_eq!(fixture.wakes(), 2);

    let error = refused(fixture.call("cron.pause", json!({"id": "nope"})).await, ErrorCode::NotFound);
    assert!(error.message.contains("\"nope\""), "{}", error.message);
    refused(fixture.call("cron.resume", json!({})).await, ErrorCode::InvalidRequest);
    assert_eq!(fixture.wakes(), 2, "failed calls wake nobody");
}

#[tokio::test]
async fn cron_update_enabled_pauses_and_resumes_and_refuses_other_changes() {
    let fixture = Fixture::new();
    let id = fixture.stored("report", JobKind::User, OWNER, "daily 09:00");

    let updated = fixture.call("cron.update", json!({"id": id, "enabled": false})).await.unwrap();
    assert_eq!(updated["job"]["status"], "paused");
    let updated = fixture.call("cron.update", json!({"id": id, "patch": {"enabled": true}})).await.unwrap();
    assert_eq!(updated["job"]["status"], "active");
    assert_eq!(fixture.store.job(&id).status, JobStatus::Active);

    let error =
        refused(fixture.call("cron.update", json!({"id": id, "enabled": "no"})).await, ErrorCode::InvalidRequest);
    assert_eq!(error.message, "`enabled` is required and must be true or false");
    refused(fixture.call("cron.update", json!({"id": id})).await, ErrorCode::InvalidRequest);
    let error = refused(
        fixture.call("cron.update", json!({"id": id, "patch": {"enabled": false, "name": "x"}})).await,
        ErrorCode::InvalidRequest,
    );
    assert!(error.message.starts_with(&format!("can't change name of job {id}")), "{}", error.message);
    refused(fixture.call("cron.update", json!({"id": id, "patch": 1})).await, ErrorCode::InvalidRequest);
    assert_eq!(fixture.store.job(&id).status, JobStatus::Active);
}

#[tokio::test]
async fn cron_remove_deletes_a_user_job_but_not_a_foreign_or_unknown_one() {
    let fixture = Fixture::new();
    let id = fixture.stored("report", JobKind::User, OWNER, "daily 09:00");
    let foreign = fixture.stored("theirs", JobKind::User, "telegram:42", "daily 10:00");

    let removed = fixture.call("cron.remove", json!({"id": id})).await.unwrap();
    assert_eq!(removed, json!({"ok": true, "id": id}));
    assert_eq!(fixture.wakes(), 1);
    refused(fixture.call("cron.remove", json!({"id": id})).await, ErrorCode::NotFound);
    refused(fixture.call("cron.remove", json!({"id": foreign})).await, ErrorCode::NotFound);
    let left: Vec<String> = fixture.store.snapshot().into_iter().map(|job| job.id).collect();
    assert_eq!(left, [foreign]);
}

#[tokio::test]
async fn heartbeat_and_system_jobs_can_be_paused_and_resumed_but_not_removed() {
    let fixture = Fixture::new();
    let pulse = fixture.stored("pulse", JobKind::Heartbeat, OWNER, "every 30m");
    let vacuum = fixture.stored("vacuum", JobKind::System, SYSTEM, "weekly sun 03:00");

    let error = refused(fixture.call("cron.remove", json!({"id": pulse})).await, ErrorCode::InvalidRequest);
    assert!(error.message.contains("HEARTBEAT.md"), "{}", error.message);
    assert_eq!(error.details.as_ref().unwrap()["kind"], "heartbeat");
    let error = refused(fixture.call("cron.remove", json!({"id": vacuum})).await, ErrorCode::InvalidRequest);
    assert!(error.message.contains("squidbot's own housekeeping"), "{}", error.message);
    assert_eq!(fixture.store.snapshot().len(), 2);

    for id in [&pulse, &vacuum] {
        let paused = fixture.call("cron.pause", json!({"id": id})).await.unwrap();
        assert_eq!(paused["job"]["status"], "paused");
        let resumed = fixture.call("cron.resume", json!({"id": id})).await.unwrap();
        assert_eq!(resumed["job"]["status"], "active");
    }
    assert_eq!(fixture.wakes(), 4);
}

#[tokio::test]
async fn cron_run_starts_the_owners_job_through_the_scheduler() {
    let fixture = Fixture::new();
    let id = fixture.stored("report", JobKind::User, OWNER, "daily 09:00");
    let foreign = fixture.stored("theirs", JobKind::User, "telegram:42", "daily 10:00");

    let started = fixture.call("cron.run", json!({"id": id})).await.unwrap();
    assert_eq!(started, json!({"ok": true, "id": id, "started": true}));
    refused(fixture.call("cron.run", json!({"id": foreign})).await, ErrorCode::NotFound);
    assert_eq!(*fixture.control.runs.lock().unwrap(), [id.as_str()], "a foreign job never reaches the scheduler");

    *fixture.control.refusal.lock().unwrap() = Some(RunNowError::AlreadyRunning { id: id.clone() });
    let error = refused(fixture.call("cron.run", json!({"id": id})).await, ErrorCode::Conflict);
    assert!(error.message.contains("still going"), "{}", error.message);
    assert_eq!(error.details.as_ref().unwrap()["code"], "JOB_RUNNING");

    *fixture.control.refusal.lock().unwrap() = Some(RunNowError::NotFound { id: id.clone() });
    refused(fixture.call("cron.run", json!({"id": id})).await, ErrorCode::NotFound);
    *fixture.control.refusal.lock().unwrap() = Some(RunNowError::Stopped);
    refused(fixture.call("cron.run", json!({"id": id})).await, ErrorCode::Unavailable);
    refused(fixture.call("cron.run", json!({})).await, ErrorCode::InvalidRequest);

    let fixture = fixture.without_control();
    let error = refused(fixture.call("cron.run", json!({"id": id})).await, ErrorCode::Unavailable);
    assert!(error.message.contains("scheduler.enabled = false"), "{}", error.message);
}

#[tokio::test]
async fn cron_status_counts_the_owners_jobs_and_names_the_earliest_next_run() {
    let fixture = Fixture::new();
    let empty = fixture.call("cron.status", json!({})).await.unwrap();
    assert_eq!(
        empty,
        json!({"enabled": true, "jobs": 0, "active": 0, "paused": 0, "nextRun": null, "timezone": "Europe/Berlin"})
    );

    let soon = fixture.stored("soon", JobKind::User, OWNER, "every 5m");
    let later = fixture.stored("later", JobKind::Heartbeat, OWNER, "every 30m");
    let paused = fixture.stored("paused", JobKind::User, OWNER, "every 1m");
    fixture.stored("theirs", JobKind::User, "telegram:42", "every 1m");
    fixture.store.with_job(&soon, |job| job.next_run = Some(1_900_000_000_000)).unwrap();
    fixture.store.with_job(&later, |job| job.next_run = Some(1_900_000_600_000)).unwrap();
    fixture
        .store
        .with_job(&paused, |job| {
            job.status = JobStatus::Paused;
            job.next_run = Some(1_800_000_000_000);
        })
        .unwrap();

    let status = fixture.call("cron.status", json!({})).await.unwrap();
    assert_eq!(
        (status["jobs"].as_u64(), status["active"].as_u64(), status["paused"].as_u64()),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(status["nextRun"], "2030-03-17T17:46:40+00:00", "the earliest active job's, not the paused one's");
    let off = fixture.without_control().call("cron.status", json!({})).await.unwrap();
    assert_eq!(off["enabled"], false);
}

#[tokio::test]
async fn store_failures_are_internal_errors_that_say_what_failed() {
    let fixture = Fixture::new();
    let id = fixture.stored("report", JobKind::User, OWNER, "daily 09:00");
    *fixture.store.failing.lock().unwrap() = true;
    let error = refused(fixture.call("cron.list", json!({})).await, ErrorCode::Internal);
    assert_eq!(error.message, "can't list the jobs: can't list jobs: disk I/O error");
    refused(fixture.call("cron.pause", json!({"id": id})).await, ErrorCode::Internal);
    let add = json!({"name": "n", "schedule": "daily 09:00", "message": "m"});
    refused(fixture.call("cron.add", add).await, ErrorCode::Internal);
    assert_eq!(fixture.wakes(), 0);
}

#[tokio::test]
async fn without_the_scheduler_every_cron_method_is_unavailable_and_names_the_setting() {
    let names: Vec<&str> =
        super::super::methods::NAMES.iter().copied().filter(|name| name.starts_with("cron.")).collect();
    assert_eq!(
        names,
        [
            "cron.list",
            "cron.get",
            "cron.status",
            "cron.add",
            "cron.remove",
            "cron.pause",
            "cron.resume",
            "cron.update",
            "cron.run"
        ]
    );
    for name in names {
        let error = refused(call(None, name, &Map::new()).await, ErrorCode::Unavailable);
        assert!(error.message.contains("scheduler.enabled = false"), "{name}: {}", error.message);
        assert_eq!(error.details, Some(json!({"code": "SCHEDULER_UNAVAILABLE"})));
    }
}

#[test]
fn reading_cron_methods_need_read_access_and_changing_ones_write_access() {
    use super::super::Access;
    use super::super::methods::access;
    for name in ["cron.list", "cron.get", "cron.status"] {
        assert_eq!(access(name), Some(Access::Read), "{name}");
    }
    for name in ["cron.add", "cron.remove", "cron.pause", "cron.resume", "cron.update", "cron.run"] {
        assert_eq!(access(name), Some(Access::Write), "{name}");
    }
}

#[tokio::test]
async fn a_person_sees_and_changes_only_the_jobs_of_their_context_and_adds_theirs_there() {
    let fixture = Fixture::new();
    let owners = fixture.stored("report", JobKind::User, OWNER, "daily 09:00");
    let housekeeping = fixture.stored("vacuum", JobKind::System, SYSTEM, "weekly sun 03:00");
    let carols = fixture.stored("carols", JobKind::User, "user:carol", "daily 10:00");
    let bobs = fixture.stored("bobs", JobKind::User, "user:bob", "daily 11:00");

    let listing = fixture.call_as("user:bob", "cron.list", json!({})).await.unwrap();
    assert_eq!(ids(&listing), [bobs.as_str()]);
    let status = fixture.call_as("user:bob", "cron.status", json!({})).await.unwrap();
    assert_eq!(status["jobs"], 1);
    // Hostile: bob names the owner's, carol's and squidbot's own jobs.
    for id in [&owners, &carols, &housekeeping] {
        for method in ["cron.get", "cron.pause", "cron.remove", "cron.run"] {
            let error = refused(fixture.call_as("user:bob", method, json!({"id": id})).await, ErrorCode::NotFound);
            assert!(error.message.contains(id.as_str()), "{method} {id}: {error:?}");
        }
    }
    assert!(fixture.store.snapshot().iter().all(|job| job.status == JobStatus::Active));
    assert!(fixture.control.runs.lock().unwrap().is_empty());

    let added = fixture
        .call_as(
            "user:bob",
            "cron.add",
            json!({"name": "water", "schedule": "daily 08:00", "message": "water the plants"}),
        )
        .await
        .unwrap();
    let id = added["job"]["id"].as_str().unwrap();
    assert_eq!(fixture.store.job(id).owner_context, "user:bob");
    // The owner's clients don't see it: it is bob's.
    let owners_listing = fixture.call("cron.list", json!({})).await.unwrap();
    assert!(!ids(&owners_listing).contains(&id), "{owners_listing}");
}
