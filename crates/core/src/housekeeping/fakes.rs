//! In-memory doubles of the ports housekeeping and the job runner use, for unit tests:
//! the session index, the bulletin cache, the job table, a watched file and a console.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::jobs::{Job, JobConsole, JobKind, JobStatus, JobStore, JobStoreError, RunOutcome, RunRecord};
use crate::memory::{Bulletin, BulletinError, Bulletins};
use crate::store::index::{SessionIndex, SessionIndexEntry, SessionIndexError, SessionStatus};
use crate::sync::lock;
use crate::workspace::{FileStamp, WatchedFile, WatchedFileError};

/// A session index in a map, with the SQLite index's semantics.
#[derive(Debug, Default)]
pub(crate) struct MemoryIndex {
    entries: Mutex<BTreeMap<String, SessionIndexEntry>>,
}

impl MemoryIndex {
    /// Indexes an active session of `context` last updated at `updated_at`.
    pub(crate) fn active(&self, key: &str, context: &str, updated_at: i64, job_id: Option<&str>) {
        lock(&self.entries).insert(
            key.to_owned(),
            SessionIndexEntry {
                key: key.to_owned(),
                context: context.to_owned(),
                status: SessionStatus::Active,
                created_at: updated_at,
                updated_at,
                archived_at: None,
                message_count: 0,
                job_id: job_id.map(str::to_owned),
            },
        );
    }

    /// The entry of `key`.
    pub(crate) fn entry(&self, key: &str) -> Option<SessionIndexEntry> {
        lock(&self.entries).get(key).cloned()
    }
}

impl SessionIndex for MemoryIndex {
    fn get(&self, key: &str) -> Result<Option<SessionIndexEntry>, SessionIndexError> {
        Ok(self.entry(key))
    }

    fn idle(&self, before_unix: i64) -> Result<Vec<SessionIndexEntry>, SessionIndexError> {
        let mut idle: Vec<SessionIndexEntry> = lock(&self.entries)
            .values()
            .filter(|entry| entry.status == SessionStatus::Active && entry.updated_at < before_unix)
            .cloned()
            .collect();
        idle.sort_by(|left, right| left.updated_at.cmp(&right.updated_at).then(left.key.cmp(&right.key)));
        Ok(idle)
    }

    fn record_activity(
        &self,
        key: &str,
        context: &str,
        at_unix: i64,
        messages_added: u64,
    ) -> Result<(), SessionIndexError> {
        let mut entries = lock(&self.entries);
        let entry = entries.entry(key.to_owned()).or_insert_with(|| new_entry(key, context, at_unix));
        entry.status = SessionStatus::Active;
        entry.archived_at = None;
        entry.updated_at = entry.updated_at.max(at_unix);
        entry.message_count += messages_added;
        Ok(())
    }

    fn set_archived(&self, key: &str, at_unix: i64) -> Result<bool, SessionIndexError> {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get_mut(key) else { return Ok(false) };
        entry.status = SessionStatus::Archived;
        entry.archived_at = Some(at_unix);
        entry.updated_at = entry.updated_at.max(at_unix);
        Ok(true)
    }

    fn mark_job_run(&self, key: &str, context: &str, job_id: &str, at_unix: i64) -> Result<(), SessionIndexError> {
        let mut entries = lock(&self.entries);
        let entry = entries.entry(key.to_owned()).or_insert_with(|| new_entry(key, context, at_unix));
        entry.job_id = Some(job_id.to_owned());
        Ok(())
    }

    fn job_runs_before(&self, before_unix: i64, limit: usize) -> Result<Vec<String>, SessionIndexError> {
        let mut runs: Vec<(i64, String)> = lock(&self.entries)
            .values()
            .filter(|entry| entry.job_id.is_some() && entry.updated_at < before_unix)
            .map(|entry| (entry.updated_at, entry.key.clone()))
            .collect();
        runs.sort();
        Ok(runs.into_iter().take(limit).map(|(_, key)| key).collect())
    }

    fn remove(&self, key: &str) -> Result<bool, SessionIndexError> {
        Ok(lock(&self.entries).remove(key).is_some())
    }
}

/// Bulletins in a map.
#[derive(Debug, Default)]
pub(crate) struct MemoryBulletins {
    bulletins: Mutex<BTreeMap<String, Bulletin>>,
}

impl Bulletins for MemoryBulletins {
    fn get(&self, context: &str) -> Result<Option<Bulletin>, BulletinError> {
        Ok(lock(&self.bulletins).get(context).cloned())
    }

    fn put(&self, context: &str, bulletin: &Bulletin) -> Result<(), BulletinError> {
        lock(&self.bulletins).insert(context.to_owned(), bulletin.clone());
        Ok(())
    }
}

/// A job table in a map, in insertion order of ids.
#[derive(Debug, Default)]
pub(crate) struct MemoryJobs {
    jobs: Mutex<Vec<Job>>,
    revision: Mutex<i64>,
}

impl MemoryJobs {
    /// A table of `jobs`.
    pub(crate) fn with(jobs: impl IntoIterator<Item = Job>) -> Self {
        Self { jobs: Mutex::new(jobs.into_iter().collect()), revision: Mutex::new(0) }
    }

    /// Every job, as stored.
    pub(crate) fn all(&self) -> Vec<Job> {
        lock(&self.jobs).clone()
    }

    /// The job `id`; panics when there is none.
    pub(crate) fn job(&self, id: &str) -> Job {
        self.all().into_iter().find(|job| job.id == id).unwrap_or_else(|| panic!("no job {id}"))
    }

    /// How many times the table was written.
    pub(crate) fn writes(&self) -> i64 {
        *lock(&self.revision)
    }

    fn changed(&self) {
        *lock(&self.revision) += 1;
    }

    fn with_job<T>(&self, id: &str, change: impl FnOnce(&mut Job) -> T) -> Result<T, JobStoreError> {
        let mut jobs = lock(&self.jobs);
        let job = jobs.iter_mut().find(|job| job.id == id).ok_or_else(|| JobStoreError::NotFound { id: id.into() })?;
        let result = change(job);
        drop(jobs);
        self.changed();
        Ok(result)
    }
}

impl JobStore for MemoryJobs {
    async fn insert<'a>(&'a self, job: &'a Job) -> Result<(), JobStoreError> {
        let mut jobs = lock(&self.jobs);
        if jobs.iter().any(|old| old.id == job.id) {
            return Err(JobStoreError::AlreadyExists { id: job.id.clone() });
        }
        jobs.push(job.clone());
        drop(jobs);
        self.changed();
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Job>, JobStoreError> {
        Ok(self.all())
    }

    async fn get<'a>(&'a self, id: &'a str) -> Result<Option<Job>, JobStoreError> {
        Ok(self.all().into_iter().find(|job| job.id == id))
    }

    async fn remove<'a>(&'a self, id: &'a str) -> Result<(), JobStoreError> {
        let mut jobs = lock(&self.jobs);
        let before = jobs.len();
        jobs.retain(|job| job.id != id);
        if jobs.len() == before {
            return Err(JobStoreError::NotFound { id: id.into() });
        }
        drop(jobs);
        self.changed();
        Ok(())
    }

    async fn set_status<'a>(
        &'a self,
        id: &'a str,
        status: JobStatus,
        next_run: Option<i64>,
    ) -> Result<(), JobStoreError> {
        self.with_job(id, |job| {
            job.status = status;
            job.next_run = next_run;
        })
    }

    async fn due(&self, now: i64) -> Result<Vec<Job>, JobStoreError> {
        Ok(self
            .all()
            .into_iter()
            .filter(|job| job.status == JobStatus::Active && job.next_run.is_some_and(|next| next <= now))
            .collect())
    }

    async fn record_run<'a>(&'a self, id: &'a str, run: &'a RunRecord) -> Result<u32, JobStoreError> {
        self.with_job(id, |job| {
            job.last_run = Some(run.at);
            match &run.outcome {
                RunOutcome::Succeeded => {
                    job.last_error = None;
                    job.consecutive_failures = 0;
                }
                RunOutcome::Failed { reason } => {
                    job.last_error = Some(reason.clone());
                    job.consecutive_failures += 1;
                }
            }
            job.consecutive_failures
        })
    }

    async fn revision(&self) -> Result<i64, JobStoreError> {
        Ok(self.writes())
    }

    async fn claim<'a>(
        &'a self,
        id: &'a str,
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

    async fn pause_with_error<'a>(&'a self, id: &'a str, reason: &'a str) -> Result<(), JobStoreError> {
        self.with_job(id, |job| {
            job.status = JobStatus::Paused;
            job.last_error = Some(reason.to_owned());
        })
    }

    async fn replace_generated<'a>(
        &'a self,
        kind: JobKind,
        owner_context: &'a str,
        jobs: &'a [Job],
    ) -> Result<(), JobStoreError> {
        let mut stored = lock(&self.jobs);
        stored.retain(|job| !(job.kind == kind && job.owner_context == owner_context));
        stored.extend_from_slice(jobs);
        drop(stored);
        self.changed();
        Ok(())
    }
}

/// A file whose content and stamp the test sets; every read is counted.
#[derive(Debug, Default)]
pub(crate) struct FakeFile {
    content: Mutex<Option<(Vec<u8>, FileStamp)>>,
    reads: Mutex<usize>,
}

impl FakeFile {
    /// Writes `content`, stamped `version` seconds after the epoch.
    pub(crate) fn write(&self, content: &[u8], version: u64) {
        let stamp =
            FileStamp { modified: SystemTime::UNIX_EPOCH + Duration::from_secs(version), length: content.len() as u64 };
        *lock(&self.content) = Some((content.to_vec(), stamp));
    }

    /// Deletes the file.
    pub(crate) fn delete(&self) {
        *lock(&self.content) = None;
    }

    /// How many times the content was read.
    pub(crate) fn reads(&self) -> usize {
        *lock(&self.reads)
    }
}

impl WatchedFile for FakeFile {
    fn stamp(&self) -> Result<Option<FileStamp>, WatchedFileError> {
        Ok(lock(&self.content).as_ref().map(|(_, stamp)| *stamp))
    }

    fn read(&self) -> Result<Vec<u8>, WatchedFileError> {
        *lock(&self.reads) += 1;
        lock(&self.content).as_ref().map(|(content, _)| content.clone()).ok_or_else(|| WatchedFileError::Unreadable {
            location: self.location(),
            reason: "No such file".to_owned(),
        })
    }

    fn location(&self) -> String {
        "workspace/HEARTBEAT.md".to_owned()
    }
}

/// A console that keeps what it was shown.
#[derive(Debug, Default)]
pub(crate) struct RecordingConsole {
    /// Replies shown, in order.
    pub(crate) replies: Mutex<Vec<String>>,
    /// Notices shown, in order.
    pub(crate) notices: Mutex<Vec<String>>,
}

impl JobConsole for RecordingConsole {
    fn reply(&self, text: &str) {
        lock(&self.replies).push(text.to_owned());
    }

    fn notice(&self, text: &str) {
        lock(&self.notices).push(text.to_owned());
    }
}

/// A session `key` of `context` first indexed at `at_unix`, active and empty.
fn new_entry(key: &str, context: &str, at_unix: i64) -> SessionIndexEntry {
    SessionIndexEntry {
        key: key.to_owned(),
        context: context.to_owned(),
        status: SessionStatus::Active,
        created_at: at_unix,
        updated_at: at_unix,
        archived_at: None,
        message_count: 0,
        job_id: None,
    }
}
