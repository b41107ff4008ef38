//! Shared syncs of the sessions directory: many sessions created at once need their
//! directory entries durable, and one `fsync` of the directory covers every entry made
//! before it started.

use squidbot_core::sync::lock;
use std::io;
use std::path::Path;
use std::sync::{Condvar, Mutex};

use super::file::sync_directory;

/// Runs at most one directory sync at a time and lets callers that arrive while one runs
/// share the next one instead of queueing a sync each.
#[derive(Debug, Default)]
pub(crate) struct DirectorySync {
    state: Mutex<SyncState>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct SyncState {
    /// Syncs started so far; each takes the next number.
    started: u64,
    /// The number of the latest sync that succeeded.
    succeeded: u64,
    /// Whether a sync is running.
    running: bool,
}

impl DirectorySync {
    /// Syncs started so far.
    #[cfg(test)]
    pub(crate) fn started(&self) -> u64 {
        lock(&self.state).started
    }

    /// Returns once a sync of `directory` that started after this call arrived has
    /// succeeded: every entry created before the call is then durable. Blocks; call from
    /// a blocking thread.
    pub(crate) fn sync(&self, directory: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        // A sync already running may have read the directory before this call's entry
        // was made: only a later one counts.
        let needed = state.started + 1;
        loop {
            if state.succeeded >= needed {
                return Ok(());
            }
            if !state.running {
                break;
            }
            state = squidbot_core::sync::wait(&self.finished, state);
        }
        state.started += 1;
        let number = state.started;
        state.running = true;
        drop(state);
        let result = sync_directory(directory);
        let mut state = lock(&self.state);
        state.running = false;
        // A failed sync helps no one: the callers waiting on it start their own and get
        // their own error.
        if result.is_ok() {
            state.succeeded = state.succeeded.max(number);
        }
        drop(state);
        self.finished.notify_all();
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_sync_succeeds_and_a_missing_directory_is_an_error() {
        let directory = tempfile::tempdir().unwrap();
        let syncs = DirectorySync::default();
        syncs.sync(directory.path()).unwrap();
        syncs.sync(directory.path()).unwrap();
        assert_eq!(syncs.state.lock().unwrap().started, 2, "each call after the last sync needs one of its own");
        let error = syncs.sync(&directory.path().join("missing")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(!syncs.state.lock().unwrap().running);
    }

    #[test]
    fn concurrent_callers_share_syncs() {
        let directory = tempfile::tempdir().unwrap();
        let syncs = Arc::new(DirectorySync::default());
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let syncs = Arc::clone(&syncs);
                let path = directory.path().to_path_buf();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        syncs.sync(&path).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let state = syncs.state.lock().unwrap();
        assert!(state.started >= 1 && state.started <= 16 * 20, "{} syncs", state.started);
        assert_eq!(state.succeeded, state.started);
    }

    #[test]
    fn a_caller_arriving_during_a_sync_waits_for_the_next_one() {
        let directory = tempfile::tempdir().unwrap();
        let syncs = DirectorySync::default();
        {
            let mut state = syncs.state.lock().unwrap();
            // As if sync 1 were running when this caller arrived, then finished.
            state.started = 1;
            state.succeeded = 1;
        }
        syncs.sync(directory.path()).unwrap();
        let state = syncs.state.lock().unwrap();
        assert_eq!((state.started, state.succeeded), (2, 2), "the running sync may predate the caller's entry");
    }
}
