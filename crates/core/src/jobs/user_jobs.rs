//! User jobs as `squidbot cron` and the cron tools make and show them: validating a
//! request into a [`Job`], the next run after a resume, and a job as a JSON row. One
//! place, so the CLI and the model get the same rules and the same answers.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value, json};

use super::{ContextMode, Job, JobKind, JobStatus, anchor_at};
use crate::schedule::{Schedule, ScheduleError, resolve_zone};

/// What a user (or the model for them) asks for when adding a job.
#[derive(Debug, Clone, Copy)]
pub struct JobRequest<'a> {
    /// A name for people.
    pub name: &'a str,
    /// The schedule string ([`Schedule::parse`]).
    pub schedule: &'a str,
    /// The prompt the job's turn starts with.
    pub message: &'a str,
    /// Where replies go; `None` or blank means the owner's preferred channel.
    pub channel: Option<&'a str>,
    /// IANA zone; `None` means `default_zone`.
    pub timezone: Option<&'a str>,
    /// The zone of a job asked for without one (`scheduler.timezone`, resolved).
    pub default_zone: &'a str,
    /// The memory and session context the job acts for.
    pub owner_context: &'a str,
}

/// Why a job request was refused; nothing is written then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobRequestError {
    /// A required text is blank.
    #[error("the {field} must not be empty")]
    Empty {
        /// `name` or `message`.
        field: &'static str,
    },
    /// The schedule or zone is invalid, or a one-shot lies in the past.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

/// The active user job `request` describes, with id `id`, created at `now` and first due
/// at the schedule's first slot after `now`.
pub fn new_user_job(request: &JobRequest<'_>, id: String, now: Timestamp) -> Result<Job, JobRequestError> {
    for (field, text) in [("name", request.name), ("message", request.message)] {
        if text.trim().is_empty() {
            return Err(JobRequestError::Empty { field });
        }
    }
    let timezone = request.timezone.unwrap_or(request.default_zone).trim().to_owned();
    let zone = resolve_zone(&timezone)?;
    let schedule = anchor_at(Schedule::parse(request.schedule)?, now);
    let next_run = schedule.first_due(now, &zone)?;
    Ok(Job {
        id,
        kind: JobKind::User,
        name: request.name.trim().to_owned(),
        schedule: schedule.to_string(),
        timezone,
        message: request.message.to_owned(),
        channel: request.channel.map(str::trim).filter(|channel| !channel.is_empty()).map(str::to_owned),
        context_mode: ContextMode::default(),
        owner_context: request.owner_context.to_owned(),
        status: JobStatus::Active,
        next_run: Some(next_run.as_millisecond()),
        last_run: None,
        last_error: None,
        consecutive_failures: 0,
        created: now.as_millisecond(),
        source_hash: None,
        seed: None,
        active_hours: None,
    })
}

/// When `job` is next due if resumed at `now` (ms). Counted from now, not from the stored
/// next run: slots that passed while it was paused are skipped, not fired in a burst.
pub fn resumed_next_run(job: &Job, now: Timestamp) -> Result<i64, ScheduleError> {
    let zone = resolve_zone(&job.timezone)?;
    Ok(job.parsed_schedule()?.first_due(now, &zone)?.as_millisecond())
}

/// One job as `cron list --json` and `cron_list` show it; times are RFC 3339 in the
/// job's zone, `null` when none.
pub fn job_row(job: &Job) -> Value {
    let zone = job_zone(job);
    json!({
        "id": job.id,
        "kind": job.kind.as_str(),
        "name": job.name,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "message": job.message,
        "channel": job.channel,
        "context_mode": job.context_mode.as_str(),
        "active_hours": job.active_hours,
        "next_run": job_time(job.next_run, &zone),
        "last_run": job_time(job.last_run, &zone),
        "last_error": job.last_error,
        "status": job.status.as_str(),
        "failures": job.consecutive_failures,
    })
}

/// The job's zone, or UTC when the stored name no longer resolves (a time zone database
/// without it): showing a job must still work.
pub fn job_zone(job: &Job) -> TimeZone {
    resolve_zone(&job.timezone).unwrap_or(TimeZone::UTC)
}

/// `milliseconds` as RFC 3339 in `zone`; `None` when absent or out of range.
pub fn job_time(milliseconds: Option<i64>, zone: &TimeZone) -> Option<String> {
    let zoned = Timestamp::from_millisecond(milliseconds?).ok()?.to_zoned(zone.clone());
    Some(zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(schedule: &'a str, timezone: Option<&'a str>) -> JobRequest<'a> {
        JobRequest {
            name: " PR check ",
            schedule,
            message: "check PRs",
            channel: Some("  "),
            timezone,
            default_zone: "UTC",
            owner_context: "owner",
        }
    }

    #[test]
    fn a_weekly_request_becomes_an_active_job_due_at_the_next_slot_in_its_zone() {
        let now: Timestamp = "2026-03-04T12:00:00Z".parse().unwrap();
        let job = new_user_job(&request("weekly mon 09:00", Some("Europe/Berlin")), "abc".into(), now).unwrap();
        assert_eq!((job.name.as_str(), job.channel.as_deref(), job.status), ("PR check", None, JobStatus::Active));
        let row = job_row(&job);
        assert_eq!(row["next_run"], "2026-03-09T09:00:00+01:00");
        assert_eq!(row["timezone"], "Europe/Berlin");
        assert_eq!(job.created, now.as_millisecond());
    }

    #[test]
    fn bad_requests_are_refused_by_kind() {
        let now: Timestamp = "2026-03-04T12:00:00Z".parse().unwrap();
        let refused = |request: JobRequest<'_>| new_user_job(&request, "abc".into(), now).unwrap_err();
        assert_eq!(
            refused(JobRequest { message: " ", ..request("daily 09:00", None) }),
            JobRequestError::Empty { field: "message" }
        );
        assert!(matches!(
            refused(request("fortnightly", None)),
            JobRequestError::Schedule(ScheduleError::Parse { .. })
        ));
        assert!(matches!(
            refused(request("daily 09:00", Some("Mars/Base"))),
            JobRequestError::Schedule(ScheduleError::UnknownZone { .. })
        ));
        assert!(matches!(
            refused(request("at 2001-01-01T09:00:00Z", None)),
            JobRequestError::Schedule(ScheduleError::NoFutureRun { .. })
        ));
    }

    #[test]
    fn resuming_skips_the_slots_missed_while_paused() {
        let created: Timestamp = "2026-03-01T10:00:00Z".parse().unwrap();
        let job = new_user_job(&request("daily 09:00", None), "abc".into(), created).unwrap();
        let later: Timestamp = "2026-03-05T10:00:00Z".parse().unwrap();
        let next = resumed_next_run(&job, later).unwrap();
        assert_eq!(job_time(Some(next), &TimeZone::UTC).as_deref(), Some("2026-03-06T09:00:00+00:00"));
    }
}
