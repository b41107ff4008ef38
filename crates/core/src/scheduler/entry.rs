//! One job as the loop holds it between runs: only what scheduling needs (the full job
//! is read from the store when it runs), plus a fingerprint of the stored row that tells
//! a reload whether it changed.

use std::hash::{DefaultHasher, Hash, Hasher};

use jiff::Timestamp;

use super::plan::{Plan, Slot};
use crate::jobs::{Job, JobKind, JobStatus};

/// A job in memory. Thousands of these stay resident, so it holds no prompt, channel or
/// context: a run reads the stored job afresh (which also picks up a prompt edited a
/// moment ago).
pub(super) struct Entry {
    /// For logs.
    pub(super) name: String,
    pub(super) kind: JobKind,
    pub(super) status: JobStatus,
    /// The stored next run, as this loop last read or wrote it.
    pub(super) next_run: Option<i64>,
    /// [`fingerprint`] of the row as last read.
    pub(super) fingerprint: u64,
    /// Its parsed schedule, zone and window; `None` for a paused job.
    pub(super) plan: Option<Plan>,
    /// Its place in the queue; `None` when nothing is due (paused, or a one-shot done).
    pub(super) slot: Option<Slot>,
    /// The reload that last saw it in the table.
    pub(super) seen: u64,
}

impl Entry {
    /// The entry of `job` (as stored), queued at its first slot after a (re)load.
    pub(super) fn new(job: &Job, plan: Option<Plan>, now: Timestamp, seen: u64) -> Self {
        let slot = plan.as_ref().and_then(|plan| plan.first_slot(job, now));
        Self {
            name: job.name.clone(),
            kind: job.kind,
            status: job.status,
            next_run: job.next_run,
            fingerprint: fingerprint(job),
            plan,
            slot,
            seen,
        }
    }
}

/// A hash of every field of `job`. Destructured without `..`, so a field added to [`Job`]
/// must be added here before this compiles: a reload would otherwise miss its changes.
pub(super) fn fingerprint(job: &Job) -> u64 {
    let Job {
        id,
        kind,
        name,
        schedule,
        timezone,
        message,
        channel,
        context_mode,
        owner_context,
        status,
        next_run,
        last_run,
        last_error,
        consecutive_failures,
        created,
        source_hash,
        seed,
        active_hours,
    } = job;
    let mut hasher = DefaultHasher::new();
    for text in [id, name, schedule, timezone, message, owner_context] {
        text.hash(&mut hasher);
    }
    for text in [channel, last_error, source_hash, active_hours] {
        text.hash(&mut hasher);
    }
    for name in [kind.as_str(), context_mode.as_str(), status.as_str()] {
        name.hash(&mut hasher);
    }
    for number in [next_run, last_run, seed] {
        number.hash(&mut hasher);
    }
    (consecutive_failures, created).hash(&mut hasher);
    hasher.finish()
}
