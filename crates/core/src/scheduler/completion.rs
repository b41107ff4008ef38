//! A run's task and the report it sends back to the loop, even when the executor
//! panics.

use tokio::sync::mpsc;

use super::{JobRunError, RunTrigger};
use crate::jobs::Job;

/// A run that ended, reported by its task.
pub(super) struct Finished {
    /// The job as it ran.
    pub(super) job: Job,
    pub(super) trigger: RunTrigger,
    /// When it started (ms).
    pub(super) started: i64,
    pub(super) result: Result<(), JobRunError>,
}

/// Owns the running job and sends the outcome to the loop when dropped, so an executor
/// that panics still frees its job (as a failed run) instead of leaving it running for
/// ever.
pub(super) struct Completion {
    sender: mpsc::UnboundedSender<Finished>,
    job: Option<Job>,
    trigger: RunTrigger,
    started: i64,
    result: Option<Result<(), JobRunError>>,
}

impl Completion {
    pub(super) fn new(sender: mpsc::UnboundedSender<Finished>, job: Job, trigger: RunTrigger, started: i64) -> Self {
        Self { sender, job: Some(job), trigger, started, result: None }
    }

    /// The job being run.
    pub(super) fn job(&self) -> Option<&Job> {
        self.job.as_ref()
    }

    /// Reports `result` (by dropping `self`).
    pub(super) fn report(mut self, result: Result<(), JobRunError>) {
        self.result = Some(result);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let Some(job) = self.job.take() else { return };
        let result = self.result.take().unwrap_or(Err(JobRunError::Panicked));
        let finished = Finished { job, trigger: self.trigger, started: self.started, result };
        if self.sender.send(finished).is_err() {
            tracing::debug!("a job run ended after the scheduler stopped");
        }
    }
}
