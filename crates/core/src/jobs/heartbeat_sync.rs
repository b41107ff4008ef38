//! Keeping the heartbeat jobs of a context in step with its HEARTBEAT.md: regenerated
//! when the file's content changes, removed with the file, left alone when it can't be
//! used; the people's and groups' files watched alike (`contexts`).

mod contexts;

use std::sync::Arc;

use jiff::Timestamp;
use squidbot_types::config::HeartbeatConfig;

use super::{ContextMode, DynJobStore, Job, JobKind, JobStoreError};
use crate::clock::Clock;
use crate::heartbeat::{HeartbeatDefaults, MAX_FILE_BYTES, content_hash, heartbeat_jobs};
use crate::workspace::{FileStamp, WatchedFile, WatchedFileError};

pub use contexts::ContextHeartbeatSyncs;

/// Why a look at HEARTBEAT.md could not bring its jobs in step.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatSyncError {
    /// The file could not be looked at or read.
    #[error(transparent)]
    File(#[from] WatchedFileError),
    /// The job table could not be read or written.
    #[error(transparent)]
    Store(#[from] JobStoreError),
}

/// The `[scheduler.heartbeat]` settings a file does not state itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSettings {
    /// False: the file makes no jobs (and those it made are removed).
    pub enabled: bool,
    /// Schedule of a checklist file (`every 30m`).
    pub every: String,
    /// IANA zone of cadence slots and active hours.
    pub timezone: String,
    /// Window of heartbeats whose section names none (`HH:MM-HH:MM`).
    pub active_hours: Option<String>,
    /// Context mode of heartbeats whose section names none.
    pub context: ContextMode,
}

impl HeartbeatSettings {
    /// The settings of `config`, in `timezone` (`scheduler.timezone`, resolved); a context
    /// mode that doesn't parse means `session`.
    pub fn from_config(config: &HeartbeatConfig, timezone: String) -> Self {
        Self {
            enabled: config.enabled,
            every: config.every.clone(),
            timezone,
            active_hours: config.active_hours.clone(),
            context: ContextMode::parse(&config.context).unwrap_or(ContextMode::Session),
        }
    }
}

/// Keeps the heartbeat jobs of one context in step with its HEARTBEAT.md: regenerated
/// when the file's content hash differs from the one the jobs were made from, removed
/// with the file.
pub struct HeartbeatSync {
    store: Arc<dyn DynJobStore>,
    file: Arc<dyn WatchedFile>,
    context: String,
    settings: HeartbeatSettings,
    clock: Arc<dyn Clock>,
    /// The stamp last looked at, so an unchanged file is not re-read.
    seen: Option<FileStamp>,
    /// The hash of the last file that could not be used, so its warning is logged once.
    refused: Option<String>,
}

impl HeartbeatSync {
    /// A sync of `file` with the heartbeat jobs of `context` in `store`; new jobs are first
    /// due after the `clock`'s now.
    pub fn new(
        store: Arc<dyn DynJobStore>,
        file: Arc<dyn WatchedFile>,
        context: &str,
        settings: HeartbeatSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { store, file, context: context.to_owned(), settings, clock, seen: None, refused: None }
    }

    /// Looks at the file and regenerates the jobs if it changed; returns whether the
    /// job table was changed. Problems are logged, never fatal.
    pub async fn check(&mut self) -> bool {
        match self.try_check().await {
            Ok(changed) => changed,
            Err(error) => {
                tracing::warn!("can't sync HEARTBEAT.md with its jobs: {error}");
                false
            }
        }
    }

    /// [`Self::check`], with its problem returned instead of logged.
    pub async fn try_check(&mut self) -> Result<bool, HeartbeatSyncError> {
        let location = self.file.location();
        let stamp = self.file.stamp()?;
        if let Some(stamp) = stamp
            && stamp.length > MAX_FILE_BYTES as u64
        {
            if self.seen != Some(stamp) {
                tracing::warn!(
                    path = %location,
                    bytes = stamp.length,
                    "HEARTBEAT.md is over {MAX_FILE_BYTES} bytes; its heartbeat jobs stay as they were",
                );
                self.seen = Some(stamp);
            }
            return Ok(false);
        }
        if stamp.is_some() && stamp == self.seen {
            return Ok(false);
        }
        let current: Vec<Job> = self
            .store
            .list_boxed()
            .await?
            .into_iter()
            .filter(|job| job.kind == JobKind::Heartbeat && job.owner_context == self.context)
            .collect();
        let text = match stamp {
            // Bytes that aren't UTF-8 become U+FFFD: a damaged file still runs its
            // readable sections.
            Some(_) if self.settings.enabled => Some(String::from_utf8_lossy(&self.file.read()?).into_owned()),
            _ => None,
        };
        self.seen = stamp;
        let Some(text) = text else {
            if current.is_empty() {
                return Ok(false);
            }
            tracing::info!(path = %location, "HEARTBEAT.md is gone or heartbeats are off: removing its jobs");
            self.store.replace_generated_boxed(JobKind::Heartbeat, &self.context, &[]).await?;
            return Ok(true);
        };
        let hash = content_hash(&text);
        if !current.is_empty() && current.iter().all(|job| job.source_hash.as_deref() == Some(hash.as_str())) {
            return Ok(false);
        }
        let defaults = HeartbeatDefaults {
            every: &self.settings.every,
            timezone: &self.settings.timezone,
            active_hours: self.settings.active_hours.as_deref(),
            context: self.settings.context,
        };
        let now = Timestamp::from_millisecond(self.clock.unix_millis()).unwrap_or(Timestamp::UNIX_EPOCH);
        let made = match heartbeat_jobs(&self.context, &text, &defaults, &current, now) {
            Ok(made) => made,
            Err(error) => {
                if self.refused.as_deref() != Some(hash.as_str()) {
                    tracing::warn!(path = %location, "{error}; its heartbeat jobs stay as they were");
                    self.refused = Some(hash);
                }
                return Ok(false);
            }
        };
        for warning in &made.warnings {
            tracing::warn!(path = %location, "HEARTBEAT.md: {warning}");
        }
        if made.jobs.is_empty() && current.is_empty() {
            tracing::info!(path = %location, "HEARTBEAT.md asks for nothing: no heartbeat runs");
            return Ok(false);
        }
        self.store.replace_generated_boxed(JobKind::Heartbeat, &self.context, &made.jobs).await?;
        tracing::info!(path = %location, jobs = made.jobs.len(), hash = %made.hash, "heartbeat jobs regenerated from HEARTBEAT.md");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::clock::FixedClock;
    use crate::housekeeping::fakes::{FakeFile, MemoryJobs};

    const CHECKLIST: &str = "# Checks\n\n- Is the disk full?\n";

    const SECTIONS: &str = "## Email Triage\n- Cadence: hourly\n- Prompt: Check my email\n\n\
                            ## Weekly Digest\n- Cadence: weekly\n- Prompt: Summarize the week\n";

    fn settings(enabled: bool) -> HeartbeatSettings {
        HeartbeatSettings {
            enabled,
            every: "every 30m".to_owned(),
            timezone: "UTC".to_owned(),
            active_hours: None,
            context: ContextMode::Session,
        }
    }

    fn sync_of(store: &Arc<MemoryJobs>, file: &Arc<FakeFile>, enabled: bool) -> HeartbeatSync {
        let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        HeartbeatSync::new(store.clone(), file.clone(), "owner", settings(enabled), Arc::new(clock))
    }

    /// The names of the owner's heartbeat jobs, sorted.
    fn heartbeats(store: &MemoryJobs) -> Vec<String> {
        let mut names: Vec<String> = store
            .all()
            .into_iter()
            .filter(|job| job.kind == JobKind::Heartbeat && job.owner_context == "owner")
            .map(|job| job.name)
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn heartbeat_jobs_are_added_regenerated_on_change_and_removed_with_the_file() {
        let store = Arc::new(MemoryJobs::default());
        let file = Arc::new(FakeFile::default());
        let mut sync = sync_of(&store, &file, true);
        assert!(!sync.check().await, "no file, no jobs: nothing to change");

        file.write(CHECKLIST.as_bytes(), 1);
        assert!(sync.check().await);
        assert_eq!(heartbeats(&store), ["HEARTBEAT.md"]);
        let job = store.all().into_iter().find(|job| job.kind == JobKind::Heartbeat).unwrap();
        assert_eq!(job.source_hash, Some(content_hash(CHECKLIST)));
        assert_eq!((job.schedule.as_str(), job.context_mode), ("every 30m", ContextMode::Session));
        assert!(job.next_run.is_some_and(|next| next > 1_800_000_000_000), "first due after now");

        // An unchanged stamp is not even read; a touched but equal file changes nothing.
        let (reads, writes) = (file.reads(), store.writes());
        assert!(!sync.check().await);
        assert_eq!(file.reads(), reads);
        file.write(CHECKLIST.as_bytes(), 2);
        assert!(!sync.check().await);
        assert_eq!((file.reads(), store.writes()), (reads + 1, writes));

        file.write(SECTIONS.as_bytes(), 3);
        assert!(sync.check().await);
        assert_eq!(heartbeats(&store), ["Email Triage", "Weekly Digest"]);

        file.delete();
        assert!(sync.check().await);
        assert!(heartbeats(&store).is_empty());
        assert!(!sync.check().await);
    }

    #[tokio::test]
    async fn other_jobs_stay_and_an_edit_keeps_the_state_of_unchanged_heartbeats() {
        let other = |id: &str, kind: JobKind, context: &str| Job {
            id: id.to_owned(),
            kind,
            owner_context: context.to_owned(),
            ..crate::jobs::new_user_job(
                &crate::jobs::JobRequest {
                    name: id,
                    schedule: "every 1h",
                    message: "hello",
                    channel: None,
                    timezone: None,
                    default_zone: "UTC",
                    owner_context: context,
                },
                id.to_owned(),
                "2027-01-01T00:00:00Z".parse().unwrap(),
            )
            .unwrap()
        };
        let store = Arc::new(MemoryJobs::with([
            other("reminder", JobKind::User, "owner"),
            other("theirs", JobKind::Heartbeat, "group:x"),
        ]));
        let file = Arc::new(FakeFile::default());
        let mut sync = sync_of(&store, &file, true);
        file.write(SECTIONS.as_bytes(), 1);
        assert!(sync.check().await);
        let email = store.all().into_iter().find(|job| job.name == "Email Triage").unwrap();
        store.set_status_boxed(&email.id, crate::jobs::JobStatus::Paused, email.next_run).await.unwrap();

        file.write(format!("{SECTIONS}\n## Plants\n- Cadence: daily\n- Prompt: Water them?\n").as_bytes(), 2);
        assert!(sync.check().await);
        assert_eq!(heartbeats(&store), ["Email Triage", "Plants", "Weekly Digest"]);
        assert_eq!(store.job(&email.id).status, crate::jobs::JobStatus::Paused, "a pause outlives the edit");
        assert!(store.all().iter().any(|job| job.id == "reminder"));
        assert!(store.all().iter().any(|job| job.id == "theirs"), "another context's heartbeats stay");
    }

    #[tokio::test]
    async fn heartbeats_turned_off_remove_the_jobs_and_an_oversized_file_keeps_them() {
        let store = Arc::new(MemoryJobs::default());
        let file = Arc::new(FakeFile::default());
        file.write(CHECKLIST.as_bytes(), 1);
        assert!(sync_of(&store, &file, true).check().await);
        assert_eq!(heartbeats(&store), ["HEARTBEAT.md"]);

        let oversized = format!("- {}\n", "x".repeat(MAX_FILE_BYTES));
        file.write(oversized.as_bytes(), 2);
        let mut sync = sync_of(&store, &file, true);
        let reads = file.reads();
        assert!(!sync.check().await);
        assert_eq!((file.reads(), heartbeats(&store)), (reads, vec!["HEARTBEAT.md".to_owned()]));

        file.write(CHECKLIST.as_bytes(), 3);
        let mut off = sync_of(&store, &file, false);
        assert!(off.check().await);
        assert!(heartbeats(&store).is_empty());
        assert_eq!(file.reads(), reads, "heartbeats off: the file is not read");
    }

    #[tokio::test]
    async fn a_file_that_asks_for_nothing_makes_no_jobs() {
        let store = Arc::new(MemoryJobs::default());
        let file = Arc::new(FakeFile::default());
        file.write(b"# Heartbeat checklist\n\n- [ ]\n", 1);
        assert!(!sync_of(&store, &file, true).check().await);
        assert!(heartbeats(&store).is_empty());
        assert_eq!(store.writes(), 0);
    }
}
