//! What the loop computes from a job's stored text: its parsed schedule, zone and active
//! hours, its first queue slot after a (re)load, its next slot after a run, and whether
//! a slot falls outside its window.

use std::fmt;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use crate::heartbeat::ActiveHours;
use crate::jobs::Job;
use crate::schedule::{Schedule, resolve_zone};

/// A job's schedule, ready to compute with.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    schedule: Schedule,
    zone: TimeZone,
    active_hours: Option<ActiveHours>,
}

/// A job's place in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    /// When it is due (ms).
    pub(super) due: i64,
    /// The stored next run its claim compares against: `Some(due)`, except for a
    /// recurring job stored without one, whose slot was computed here.
    pub(super) expected: Option<i64>,
}

/// Why a due slot passes without a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SkipReason {
    /// The job's previous run has not ended; runs never stack.
    StillRunning,
    /// The slot falls outside the job's active hours.
    OutsideActiveHours(ActiveHours),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::StillRunning => formatter.write_str("previous run still going"),
            SkipReason::OutsideActiveHours(window) => write!(formatter, "outside active hours {window}"),
        }
    }
}

impl Plan {
    /// Reads `job`'s schedule, zone and active hours; `Err` says which no longer reads
    /// (a hand-edited row, a zone gone from the time zone database).
    pub(super) fn of(job: &Job) -> Result<Self, String> {
        let schedule = job.parsed_schedule().map_err(|error| error.to_string())?;
        let zone = resolve_zone(&job.timezone).map_err(|error| error.to_string())?;
        let active_hours =
            match job.active_hours.as_deref().map(str::trim).filter(|text| !text.is_empty()) {
                None => None,
                Some(text) => Some(ActiveHours::parse(text).ok_or_else(|| {
                    format!("can't read active hours {text:?}: expected HH:MM-HH:MM, e.g. 09:00-22:00")
                })?),
            };
        Ok(Self { schedule, zone, active_hours })
    }

    /// Where an active job goes in the queue when it is (re)loaded: its stored next run,
    /// even a past one (then it runs once now: the start-up catch-up). A recurring job
    /// stored without a next run is due at the first slot it missed since it last ran
    /// (or was made), else at its next slot; a one-shot without one is done.
    pub(super) fn first_slot(&self, job: &Job, now: Timestamp) -> Option<Slot> {
        if let Some(next) = job.next_run {
            return Some(Slot { due: next, expected: Some(next) });
        }
        if !self.schedule.is_recurring() {
            return None;
        }
        let since = Timestamp::from_millisecond(job.last_run.unwrap_or(job.created)).unwrap_or(Timestamp::UNIX_EPOCH);
        let catch_up = self.schedule.catch_up(since, now, &self.zone);
        catch_up.missed.or(catch_up.next).map(|due| Slot { due: due.as_millisecond(), expected: None })
    }

    /// The first slot after the millisecond `now` falls in: however many slots passed,
    /// a job due now runs once. `None` for a one-shot. Always later than `now`'s
    /// millisecond, so a job never comes due again at once and the loop can't spin
    /// (a slot later in the same millisecond, `at …T09:00:00.5004Z`, is the one
    /// running now).
    pub(super) fn next_after(&self, now: Timestamp) -> Option<i64> {
        let end_of_millisecond = Timestamp::from_millisecond(now.as_millisecond())
            .and_then(|start| start.checked_add(SignedDuration::from_nanos(999_999)))
            .unwrap_or(now);
        self.schedule.next_after(end_of_millisecond, &self.zone).map(Timestamp::as_millisecond)
    }

    /// Why a run starting at `now` is skipped for the job's window, if it is. The start
    /// time rather than the slot decides: a slot made up late (after downtime, a clock
    /// jump) must not wake anyone at night, and on time the two are the same.
    pub(super) fn outside_active_hours(&self, now: Timestamp) -> Option<SkipReason> {
        let window = self.active_hours?;
        let local = now.to_zoned(self.zone.clone()).time();
        (!window.contains(local)).then_some(SkipReason::OutsideActiveHours(window))
    }
}
