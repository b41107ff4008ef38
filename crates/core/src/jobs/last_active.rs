//! Where the owner last wrote, kept across restarts: restored into the runner at start and
//! saved when it changes, so after a restart job replies still go where the owner last
//! wrote.

use std::sync::Arc;

use crate::runs::Runner;

/// Where the owner last wrote, as saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastActive {
    /// The origin of the message (`openclaw`, `openai`, a channel name).
    pub origin: String,
    /// The session it went to.
    pub session_key: String,
}

/// Why the saved place could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LastActiveError {
    /// The storage failed.
    #[error("can't {action}: {reason}")]
    Storage {
        /// What was attempted.
        action: &'static str,
        /// The underlying error.
        reason: String,
    },
}

/// Where the place the owner last wrote is kept. Calls block (a database).
pub trait LastActiveStore: Send + Sync {
    /// The saved place; `Ok(None)` when none was saved or it can't be understood.
    fn load(&self) -> Result<Option<LastActive>, LastActiveError>;
    /// Saves `last`, replacing what was saved.
    fn save(&self, last: &LastActive) -> Result<(), LastActiveError>;
}

/// Keeps a runner's last-active tracker and its saved copy in step.
pub struct LastActiveTracker {
    store: Arc<dyn LastActiveStore>,
    runner: Arc<Runner>,
    saved: Option<LastActive>,
}

impl LastActiveTracker {
    /// Reads the saved place and gives it to `runner` unless someone wrote there already.
    /// A failed read is logged: job replies then wait for the owner's next message.
    pub fn restore(store: Arc<dyn LastActiveStore>, runner: &Arc<Runner>) -> Self {
        let saved = match store.load() {
            Ok(saved) => saved,
            Err(error) => {
                tracing::warn!(%error, "can't read where the owner last wrote; job replies wait for the next message");
                None
            }
        };
        if let Some(last) = &saved
            && runner.last_active().is_none()
        {
            runner.note_activity(&last.origin, &last.session_key);
        }
        Self { store, runner: runner.clone(), saved }
    }

    /// Saves where the owner last wrote if it changed since the last save; a failure is
    /// logged and retried on the next call.
    pub fn save_if_changed(&mut self) {
        let Some(last) = self.runner.last_active() else { return };
        let current = LastActive { origin: last.origin, session_key: last.session_key };
        if self.saved.as_ref() == Some(&current) {
            return;
        }
        match self.store.save(&current) {
            Ok(()) => self.saved = Some(current),
            Err(error) => tracing::warn!(%error, "can't remember where the owner last wrote"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::jobs::runner::tests::fixture;
    use crate::sync::lock;

    /// A saved place in memory, counting saves.
    #[derive(Default)]
    struct Saved {
        last: Mutex<Option<LastActive>>,
        saves: Mutex<usize>,
    }

    impl LastActiveStore for Saved {
        fn load(&self) -> Result<Option<LastActive>, LastActiveError> {
            Ok(lock(&self.last).clone())
        }

        fn save(&self, last: &LastActive) -> Result<(), LastActiveError> {
            *lock(&self.saves) += 1;
            *lock(&self.last) = Some(last.clone());
            Ok(())
        }
    }

    fn place(origin: &str, session_key: &str) -> LastActive {
        LastActive { origin: origin.to_owned(), session_key: session_key.to_owned() }
    }

    #[tokio::test]
    async fn the_saved_place_is_restored_and_saved_again_only_when_it_changes() {
        let store = Arc::new(Saved::default());
        *lock(&store.last) = Some(place("telegram", "telegram:dm:42"));
        let runner = fixture(Vec::new()).runner;
        let mut tracker = LastActiveTracker::restore(store.clone(), &runner);
        let restored = runner.last_active().expect("restored");
        assert_eq!((restored.origin.as_str(), restored.session_key.as_str()), ("telegram", "telegram:dm:42"));

        tracker.save_if_changed();
        assert_eq!(*lock(&store.saves), 0, "unchanged: nothing written");
        runner.note_activity("openclaw", "agent:main:main");
        tracker.save_if_changed();
        tracker.save_if_changed();
        assert_eq!(*lock(&store.saves), 1);
        assert_eq!(*lock(&store.last), Some(place("openclaw", "agent:main:main")));
    }

    #[tokio::test]
    async fn someone_who_wrote_already_wins_over_the_saved_place() {
        let store = Arc::new(Saved::default());
        *lock(&store.last) = Some(place("telegram", "telegram:dm:42"));
        let runner = fixture(Vec::new()).runner;
        runner.note_activity("openai", "openai:abc");
        LastActiveTracker::restore(store, &runner);
        assert_eq!(runner.last_active().map(|last| last.origin), Some("openai".to_owned()));
    }
}
