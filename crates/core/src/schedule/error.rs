//! What can be wrong with a schedule string, a time zone name or a job's due time.

use std::fmt;

/// Why a schedule, cadence or zone was refused. Raised at creation, so the user sees it
/// before a job exists rather than as a silent job that never runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule string does not parse; `problem` says which part is wrong.
    #[error("can't parse schedule {input:?}: {problem}")]
    Parse { input: String, problem: ParseProblem },
    /// The heartbeat cadence is not one of hourly, daily, weekly, biweekly, monthly.
    #[error("can't parse cadence {input:?}: expected hourly, daily, weekly, biweekly or monthly")]
    UnknownCadence { input: String },
    /// The zone name is not in the time zone database.
    #[error("can't use time zone {name:?}: {reason}")]
    UnknownZone { name: String, reason: String },
    /// The schedule parses but has no due time after now (a one-shot in the past).
    #[error("can't schedule {schedule:?}: it has no due time after now")]
    NoFutureRun { schedule: String },
}

/// The part of a schedule string that is wrong, classified so callers and tests can tell
/// cases apart without matching message text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseProblem {
    #[error("the schedule is empty")]
    Empty,
    #[error(
        "expected a cron expression (5 fields), \"every N<s|m|h|d>\", \"at <date and time>\", \
         \"daily HH:MM\" or \"weekly <weekday> HH:MM\""
    )]
    UnknownForm,
    #[error("{word:?} is a heartbeat cadence, not a job schedule; give a time, e.g. \"daily 09:00\"")]
    CadenceWithoutTime { word: String },
    #[error("a cron expression has 5 fields (minute hour day-of-month month day-of-week), found {found}")]
    CronFieldCount { found: usize },
    #[error("the {field} field has an empty list item")]
    EmptyListItem { field: CronField },
    #[error("{field} {value} is out of range {min}-{max}")]
    ValueOutOfRange { field: CronField, value: u64, min: u32, max: u32 },
    #[error("{text:?} is not a valid {field}")]
    InvalidValue { field: CronField, text: String },
    #[error("the {field} range {start}-{end} runs backwards")]
    ReversedRange { field: CronField, start: u32, end: u32 },
    #[error("the {field} step {step} must be between 1 and {max}")]
    StepOutOfRange { field: CronField, step: u64, max: u32 },
    #[error("the {field} step in {text:?} needs a range or *, e.g. \"*/15\" or \"0-30/5\"")]
    StepWithoutRange { field: CronField, text: String },
    #[error("it never fires: no chosen month has any of the chosen days of the month")]
    NeverFires,
    #[error("\"every\" needs a number and a unit, e.g. \"every 30s\", \"every 5m\", \"every 2h\"")]
    MissingInterval,
    #[error("{unit:?} is not an interval unit; use s, m, h or d")]
    UnknownIntervalUnit { unit: String },
    #[error("the interval must be at least 1 second")]
    ZeroInterval,
    #[error("the interval must be at most {max_days} days; use a cron expression or \"at\" for rarer runs")]
    IntervalTooLong { max_days: u64 },
    #[error("{text:?} is not a date and time: {reason}")]
    InvalidDateTime { text: String, reason: String },
    #[error("{text:?} is not a time of day; use HH:MM from 00:00 to 23:59")]
    InvalidClockTime { text: String },
    #[error("{text:?} is not a weekday; use mon, tue, wed, thu, fri, sat or sun")]
    UnknownWeekday { text: String },
    #[error("expected {expected}, found {found:?}")]
    UnexpectedText { expected: &'static str, found: String },
}

/// One of the five cron fields, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronField {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl fmt::Display for CronField {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        })
    }
}
