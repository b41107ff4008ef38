//! Schedules of the scheduler as pure data: parsing `--schedule` strings and heartbeat
//! cadences, computing the next due time in a time zone, and restart catch-up. No IO and
//! no clock: callers pass the time, so the runtime and the CLI compute the same answers.

mod cadence;
mod civil;
mod cron;
mod error;
mod pattern;

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use jiff::civil::{DateTime, Weekday};
use jiff::tz::TimeZone;

use crate::duration::{BareNumber, DurationError, parse_duration};

pub use cadence::{Cadence, CadenceSlot, WeekParity};
pub use civil::ClockTime;
pub use cron::CronExpression;
pub use error::{CronField, ParseProblem, ScheduleError};

use civil::{parse_weekday, resolve_civil, weekday_name};
use pattern::CivilPattern;

/// The longest `every` interval; rarer jobs read better as cron or `at`.
const MAX_INTERVAL_DAYS: u64 = 365;
const SECONDS_PER_DAY: u64 = 86_400;

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A five-field cron expression, evaluated on the wall clock of the job's zone.
    Cron(CronExpression),
    /// A fixed interval in absolute time, unaffected by DST.
    Every(Interval),
    /// Once.
    At(OneShot),
    /// Every day at a wall-clock time.
    Daily(ClockTime),
    /// Every week on a weekday at a wall-clock time.
    Weekly { weekday: Weekday, time: ClockTime },
    /// A heartbeat cadence with its jittered slot; built from [`Cadence::choose_slot`],
    /// never parsed from a `--schedule` string.
    Cadence(CadenceSlot),
}

/// An `every` interval: due at `anchor + k × period` for every integer k.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    seconds: u64,
    anchor: Timestamp,
}

impl Interval {
    /// An interval of `seconds` anchored at the Unix epoch, or `None` outside 1 second
    /// to 365 days.
    pub fn new(seconds: u64) -> Option<Self> {
        (1..=MAX_INTERVAL_DAYS * SECONDS_PER_DAY)
            .contains(&seconds)
            .then_some(Self { seconds, anchor: Timestamp::UNIX_EPOCH })
    }

    /// The same interval counted from `anchor` (e.g. the job's creation), so "every 1d"
    /// runs at the time of day it was created rather than at midnight UTC.
    pub fn anchored_at(self, anchor: Timestamp) -> Self {
        Self { anchor, ..self }
    }

    pub fn seconds(self) -> u64 {
        self.seconds
    }

    pub fn anchor(self) -> Timestamp {
        self.anchor
    }

    fn next_after(self, after: Timestamp) -> Option<Timestamp> {
        let period = i128::from(self.seconds) * 1_000_000_000;
        let anchor = self.anchor.as_nanosecond();
        let steps = (after.as_nanosecond() - anchor).div_euclid(period) + 1;
        Timestamp::from_nanosecond(anchor + steps * period).ok()
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The largest unit that divides evenly, so "every 90m" stays "every 90m" and
        // "every 3600s" reads "every 1h".
        let (count, unit) = [(SECONDS_PER_DAY, "d"), (3600, "h"), (60, "m")]
            .into_iter()
            .find(|(size, _)| self.seconds.is_multiple_of(*size))
            .map_or((self.seconds, "s"), |(size, unit)| (self.seconds / size, unit));
        write!(formatter, "every {count}{unit}")
    }
}

/// The time of a one-shot job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneShot {
    /// Written with an offset (`Z`, `+02:00`): one exact instant.
    Instant(Timestamp),
    /// Written without an offset: a wall-clock time in the job's zone.
    Local(DateTime),
}

impl Schedule {
    /// Parses a `--schedule` string: `"0 9 * * 1"`, `"every 5m"`, `"at
    /// 2026-12-01T09:00:00Z"`, `"daily 09:00"` or `"weekly mon 09:00"`.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        parse_schedule(text.trim()).map_err(|problem| ScheduleError::Parse { input: text.to_string(), problem })
    }

    /// The first due time strictly after `after`, read on the wall clock of `zone` for
    /// wall-clock kinds; `None` for a one-shot at or before `after`.
    pub fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        match self {
            Schedule::Cron(expression) => expression.pattern().next_after(after, zone),
            Schedule::Every(interval) => interval.next_after(after),
            Schedule::At(OneShot::Instant(instant)) => Some(*instant).filter(|instant| *instant > after),
            Schedule::At(OneShot::Local(datetime)) => resolve_civil(*datetime, zone).filter(|instant| *instant > after),
            Schedule::Daily(time) => CivilPattern::at_time(*time).next_after(after, zone),
            Schedule::Weekly { weekday, time } => {
                CivilPattern::at_time(*time).on_weekday(*weekday).next_after(after, zone)
            }
            Schedule::Cadence(slot) => slot.pattern().next_after(after, zone),
        }
    }

    /// The first due time after `now`, for creating a job: a one-shot in the past is
    /// refused here rather than stored as a job that never runs.
    pub fn first_due(&self, now: Timestamp, zone: &TimeZone) -> Result<Timestamp, ScheduleError> {
        self.next_after(now, zone).ok_or_else(|| ScheduleError::NoFutureRun { schedule: self.to_string() })
    }

    /// What to do at start-up. `since` is the job's last run, or its creation if it never
    /// ran. However many slots passed while squidbot was down, at most one catch-up run
    /// is due: a burst of stale runs helps nobody.
    pub fn catch_up(&self, since: Timestamp, now: Timestamp, zone: &TimeZone) -> CatchUp {
        CatchUp { missed: self.next_after(since, zone).filter(|due| *due <= now), next: self.next_after(now, zone) }
    }

    /// Whether the job runs more than once.
    pub fn is_recurring(&self) -> bool {
        match self {
            Schedule::At(_) => false,
            Schedule::Cron(_)
            | Schedule::Every(_)
            | Schedule::Daily(_)
            | Schedule::Weekly { .. }
            | Schedule::Cadence(_) => true,
        }
    }
}

/// The outcome of [`Schedule::catch_up`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatchUp {
    /// The earliest due time missed between the last run and now: when set, run the job
    /// once now.
    pub missed: Option<Timestamp>,
    /// The first due time strictly after now (`None` for a one-shot).
    pub next: Option<Timestamp>,
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Schedule::parse(text)
    }
}

/// User schedules display in the form they parse from, so `cron list` output can be
/// pasted back into `--schedule`.
impl fmt::Display for Schedule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Cron(expression) => write!(formatter, "{expression}"),
            Schedule::Every(interval) => write!(formatter, "{interval}"),
            Schedule::At(OneShot::Instant(instant)) => write!(formatter, "at {instant}"),
            Schedule::At(OneShot::Local(datetime)) => write!(formatter, "at {datetime}"),
            Schedule::Daily(time) => write!(formatter, "daily {time}"),
            Schedule::Weekly { weekday, time } => write!(formatter, "weekly {} {time}", weekday_name(*weekday)),
            Schedule::Cadence(slot) => write!(formatter, "{slot}"),
        }
    }
}

/// The IANA name `configured` stands for: itself, or for `local` the machine's zone
/// (`TZ`, then `/etc/localtime`), UTC when the machine's zone has no IANA name.
pub fn configured_zone_name(configured: &str) -> String {
    let configured = configured.trim();
    if !configured.eq_ignore_ascii_case("local") {
        return configured.to_owned();
    }
    TimeZone::try_system().ok().and_then(|zone| zone.iana_name().map(str::to_owned)).unwrap_or_else(|| "UTC".to_owned())
}

/// Looks up an IANA time zone (`Europe/Berlin`, `America/New_York`, `UTC`).
pub fn resolve_zone(name: &str) -> Result<TimeZone, ScheduleError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(ScheduleError::UnknownZone { name: name.to_string(), reason: "the name is empty".to_string() });
    }
    TimeZone::get(trimmed).map_err(|error| ScheduleError::UnknownZone {
        name: name.to_string(),
        reason: format!("{error}; use an IANA name such as Europe/Berlin or America/New_York"),
    })
}

fn parse_schedule(text: &str) -> Result<Schedule, ParseProblem> {
    if text.is_empty() {
        return Err(ParseProblem::Empty);
    }
    let (keyword, rest) =
        text.split_once(char::is_whitespace).map_or((text, ""), |(keyword, rest)| (keyword, rest.trim()));
    match keyword.to_ascii_lowercase().as_str() {
        "every" => parse_every(rest),
        "at" => parse_at(rest),
        "daily" if !rest.is_empty() => Ok(Schedule::Daily(ClockTime::parse(rest)?)),
        "weekly" if !rest.is_empty() => {
            let (weekday, time) = rest.split_once(char::is_whitespace).ok_or(ParseProblem::UnexpectedText {
                expected: "a weekday and a time, e.g. \"weekly mon 09:00\"",
                found: rest.to_string(),
            })?;
            Ok(Schedule::Weekly { weekday: parse_weekday(weekday)?, time: ClockTime::parse(time.trim())? })
        }
        word @ ("hourly" | "daily" | "weekly" | "biweekly" | "monthly") => {
            Err(ParseProblem::CadenceWithoutTime { word: word.to_string() })
        }
        _ if text.starts_with(|character: char| character.is_ascii_digit() || character == '*') => {
            Ok(Schedule::Cron(CronExpression::parse(text)?))
        }
        _ => Err(ParseProblem::UnknownForm),
    }
}

fn parse_every(text: &str) -> Result<Schedule, ParseProblem> {
    let too_long = ParseProblem::IntervalTooLong { max_days: MAX_INTERVAL_DAYS };
    let interval = parse_duration(text, BareNumber::Refused).map_err(|error| match error {
        DurationError::MissingNumber | DurationError::MissingUnit => ParseProblem::MissingInterval,
        DurationError::UnknownUnit { unit } => ParseProblem::UnknownIntervalUnit { unit },
        DurationError::TooLong => too_long.clone(),
    })?;
    if interval.is_zero() {
        return Err(ParseProblem::ZeroInterval);
    }
    Interval::new(interval.as_secs()).map(Schedule::Every).ok_or(too_long)
}

fn parse_at(text: &str) -> Result<Schedule, ParseProblem> {
    let timestamp_error = match text.parse::<Timestamp>() {
        Ok(instant) => return Ok(Schedule::At(OneShot::Instant(instant))),
        Err(error) => error,
    };
    let civil_error = match text.parse::<DateTime>() {
        Ok(datetime) => return Ok(Schedule::At(OneShot::Local(datetime))),
        Err(error) => error,
    };
    // Report the reading the user meant: with an offset, the instant's error.
    let time_part = text.split_once(['T', 't', ' ']).map_or("", |(_, time)| time);
    let has_offset = time_part.contains(['Z', 'z', '+', '-']);
    let reason = if has_offset { timestamp_error } else { civil_error };
    Err(ParseProblem::InvalidDateTime { text: text.to_string(), reason: reason.to_string() })
}

#[cfg(test)]
mod tests;
