//! A run's task and the report it sends back to the loop, even when the executor
//! panics.

use tokio::sync::mpsc;

use super::RunTrigger;
use crate::jobs::Job;

/// A run that ended, reported by its task.
pub(super) struct Finished {
    /// The job as it ran.
    pub(super) job: Job,
    pub(super) trigger: RunTrigger,
    /// When it started (ms).
    pub(super) started: i64,
    pub(super) result: Result<(), String>,
}

/// Owns the running job and sends the outcome to the loop when dropped, so an executor
/// that panics still frees its job (as a failed run) instead of leaving it running for
/// ever.
pub(super) struct Completion {
    sender: mpsc::UnboundedSender<Finished>,
    job: Option<Job>,
    trigger: RunTrigger,
    started: i64,
    result: Option<Result<(), String>>,
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
    pub(super) fn report(mut self, result: Result<(), String>) {
        self.result = Some(result);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let Some(job) = self.job.take() else { return };
        let result = self
            .result
            .take()
            .unwrap_or_else(|| Err("the run ended without a result (the executor panicked)".to_owned()));
        let finished = Finished { job, trigger: self.trigger, started: self.started, result };
        if self.sender.send(finished).is_err() {
            tracing::debug!("a job run ended after the scheduler stopped");
        }
    }
}
