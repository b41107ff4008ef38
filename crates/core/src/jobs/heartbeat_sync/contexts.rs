//! The heartbeats of the people's and groups' contexts: one [`HeartbeatSync`] for each
//! context whose directory holds a HEARTBEAT.md or whose heartbeat jobs are still in the
//! table, found by a scan every few checks, so a file that appears, changes or
//! disappears has its jobs (owned by that context) follow.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{HeartbeatSettings, HeartbeatSync};
use crate::clock::Clock;
use crate::jobs::{DynJobStore, JobKind};
use crate::workspace::ContextHeartbeatFiles;

/// Keeps the heartbeat jobs of every person's and group's context in step with their
/// HEARTBEAT.md. Between scans a check costs one look (a `stat`) per context that has a
/// file or jobs; contexts with neither cost nothing.
pub struct ContextHeartbeatSyncs {
    store: Arc<dyn DynJobStore>,
    files: Arc<dyn ContextHeartbeatFiles>,
    settings: HeartbeatSettings,
    clock: Arc<dyn Clock>,
    /// One sync per context found by the last scan.
    syncs: BTreeMap<String, HeartbeatSync>,
    /// Checks between two scans (at least one).
    scan_every: u32,
    /// Checks left until the next scan; the first check scans.
    until_scan: u32,
}

impl ContextHeartbeatSyncs {
    /// Syncs of the contexts `files` knows with their heartbeat jobs in `store`, looking
    /// for new and vanished files every `scan_every` checks.
    pub fn new(
        store: Arc<dyn DynJobStore>,
        files: Arc<dyn ContextHeartbeatFiles>,
        settings: HeartbeatSettings,
        clock: Arc<dyn Clock>,
        scan_every: u32,
    ) -> Self {
        Self { store, files, settings, clock, syncs: BTreeMap::new(), scan_every: scan_every.max(1), until_scan: 0 }
    }

    /// The contexts being watched now, in order.
    pub fn contexts(&self) -> Vec<String> {
        self.syncs.keys().cloned().collect()
    }

    /// Scans when one is due, then looks at every watched file and regenerates the jobs
    /// of those that changed; returns whether the job table was changed. Problems are
    /// logged, never fatal.
    pub async fn check(&mut self) -> bool {
        if self.until_scan == 0 {
            self.scan().await;
            self.until_scan = self.scan_every;
        }
        self.until_scan -= 1;
        let mut changed = false;
        for sync in self.syncs.values_mut() {
            changed |= sync.check().await;
        }
        changed
    }

    /// Watches the contexts that have a HEARTBEAT.md or heartbeat jobs, and no others:
    /// a context whose file is gone keeps its sync until its jobs are removed.
    async fn scan(&mut self) {
        let mut wanted: BTreeSet<String> = match self.files.contexts() {
            Ok(contexts) => contexts.into_iter().collect(),
            Err(error) => {
                // The ones watched so far stay; the next scan tries again.
                tracing::warn!("can't look for the people's and groups' HEARTBEAT.md: {error}");
                return;
            }
        };
        match self.store.list_boxed().await {
            Ok(jobs) => wanted
                .extend(jobs.into_iter().filter(|job| job.kind == JobKind::Heartbeat).map(|job| job.owner_context)),
            Err(error) => {
                tracing::warn!("can't list the heartbeat jobs: {error}");
                return;
            }
        }
        self.syncs.retain(|context, _| wanted.contains(context));
        for context in wanted {
            if self.syncs.contains_key(&context) {
                continue;
            }
            // The owner's file is watched on its own; so is any context kept elsewhere.
            let Some(file) = self.files.file(&context) else { continue };
            let sync =
                HeartbeatSync::new(self.store.clone(), file, &context, self.settings.clone(), self.clock.clone());
            self.syncs.insert(context, sync);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::clock::FixedClock;
    use crate::housekeeping::fakes::{FakeFile, MemoryJobs};
    use crate::jobs::ContextMode;
    use crate::sync::lock;
    use crate::workspace::{WatchedFile, WatchedFileError};

    /// HEARTBEAT.md files of `users/<id>/` and `groups/<id>/` in memory.
    #[derive(Default)]
    struct FakeDirectories {
        files: Mutex<HashMap<String, Arc<FakeFile>>>,
        scans: Mutex<usize>,
    }

    impl FakeDirectories {
        fn file_of(&self, context: &str) -> Arc<FakeFile> {
            lock(&self.files).entry(context.to_owned()).or_default().clone()
        }

        fn scans(&self) -> usize {
            *lock(&self.scans)
        }
    }

    impl ContextHeartbeatFiles for FakeDirectories {
        fn contexts(&self) -> Result<Vec<String>, WatchedFileError> {
            *lock(&self.scans) += 1;
            let files = lock(&self.files);
            let mut found: Vec<String> = files
                .iter()
                .filter(|(_, file)| file.stamp().ok().flatten().is_some())
                .map(|(context, _)| context.clone())
                .collect();
            found.sort();
            Ok(found)
        }

        fn file(&self, context: &str) -> Option<Arc<dyn WatchedFile>> {
            if !context.starts_with("user:") && !context.starts_with("group:") {
                return None;
            }
            Some(self.file_of(context))
        }
    }

    fn settings() -> HeartbeatSettings {
        HeartbeatSettings {
            enabled: true,
            every: "every 30m".to_owned(),
            timezone: "UTC".to_owned(),
            active_hours: None,
            context: ContextMode::Session,
        }
    }

    fn syncs_of(store: &Arc<MemoryJobs>, directories: &Arc<FakeDirectories>, scan_every: u32) -> ContextHeartbeatSyncs {
        let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        ContextHeartbeatSyncs::new(store.clone(), directories.clone(), settings(), Arc::new(clock), scan_every)
    }

    /// The heartbeat jobs as (owner context, name), sorted.
    fn heartbeats(store: &MemoryJobs) -> Vec<(String, String)> {
        let mut jobs: Vec<(String, String)> = store
            .all()
            .into_iter()
            .filter(|job| job.kind == JobKind::Heartbeat)
            .map(|job| (job.owner_context, job.name))
            .collect();
        jobs.sort();
        jobs
    }

    fn pair(context: &str, name: &str) -> (String, String) {
        (context.to_owned(), name.to_owned())
    }

    #[tokio::test]
    async fn a_users_heartbeat_file_makes_jobs_owned_by_that_user_and_follows_the_file() {
        let store = Arc::new(MemoryJobs::default());
        let directories = Arc::new(FakeDirectories::default());
        let mut syncs = syncs_of(&store, &directories, 5);
        assert!(!syncs.check().await, "nobody has a HEARTBEAT.md");

        directories.file_of("user:bob").write(b"## Plants\n- Cadence: daily\n- Prompt: Water the basil?\n", 1);
        directories.file_of("group:telegram:-100").write(b"- Anything new in the repo?\n", 1);
        for _ in 0..4 {
            assert!(!syncs.check().await, "a new file waits for the next scan");
        }
        assert!(syncs.check().await);
        assert_eq!(heartbeats(&store), [pair("group:telegram:-100", "HEARTBEAT.md"), pair("user:bob", "Plants")]);
        assert_eq!(syncs.contexts(), ["group:telegram:-100", "user:bob"]);
        assert_eq!(directories.scans(), 2, "a scan every five checks");

        // An edit is seen at the next check, without a scan.
        directories.file_of("user:bob").write(
            b"## Plants\n- Cadence: daily\n- Prompt: Water them?\n\n## Mail\n- Cadence: hourly\n- Prompt: Mail?\n",
            2,
        );
        assert!(syncs.check().await);
        assert_eq!(heartbeats(&store)[1..], [pair("user:bob", "Mail"), pair("user:bob", "Plants")]);

        // The file gone: its jobs go, then the context is no longer watched.
        directories.file_of("user:bob").delete();
        assert!(syncs.check().await);
        assert_eq!(heartbeats(&store), [pair("group:telegram:-100", "HEARTBEAT.md")]);
        for _ in 0..5 {
            syncs.check().await;
        }
        assert_eq!(syncs.contexts(), ["group:telegram:-100"]);
    }

    #[tokio::test]
    async fn jobs_left_by_a_file_deleted_while_nobody_watched_are_removed_and_the_owner_is_left_alone() {
        let store = Arc::new(MemoryJobs::default());
        let directories = Arc::new(FakeDirectories::default());
        directories.file_of("user:carol").write(b"- Check the calendar\n", 1);
        let owner_file = Arc::new(FakeFile::default());
        owner_file.write(b"- Is the disk full?\n", 1);
        let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        let mut owner = HeartbeatSync::new(store.clone(), owner_file, "owner", settings(), Arc::new(clock));
        assert!(owner.check().await);
        assert!(syncs_of(&store, &directories, 1).check().await);
        assert_eq!(heartbeats(&store), [pair("owner", "HEARTBEAT.md"), pair("user:carol", "HEARTBEAT.md")]);

        // Deleted while the gateway was down: the next start finds the jobs and removes them.
        directories.file_of("user:carol").delete();
        let mut syncs = syncs_of(&store, &directories, 1);
        assert!(syncs.check().await);
        assert_eq!(heartbeats(&store), [pair("owner", "HEARTBEAT.md")], "the owner's stay");
        assert!(!syncs.contexts().contains(&"owner".to_owned()), "the owner's file is watched on its own");
    }
}
