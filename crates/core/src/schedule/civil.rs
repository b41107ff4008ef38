//! Wall-clock pieces shared by the schedule kinds: times of day, weekday names, calendar
//! arithmetic, and turning a civil time into an instant across DST gaps and repeats.

use std::fmt;

use jiff::Timestamp;
use jiff::civil::{DateTime, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};

use super::error::ParseProblem;

/// A time of day to the minute, as in "daily 09:00".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClockTime {
    hour: u8,
    minute: u8,
}

impl ClockTime {
    pub const MIDNIGHT: ClockTime = ClockTime { hour: 0, minute: 0 };

    /// A time of day, or `None` past 23:59.
    pub fn new(hour: u8, minute: u8) -> Option<Self> {
        (hour < 24 && minute < 60).then_some(Self { hour, minute })
    }

    pub fn hour(self) -> u8 {
        self.hour
    }

    pub fn minute(self) -> u8 {
        self.minute
    }

    /// Minutes since midnight: how the jitter picks a time inside a window.
    pub(crate) fn from_minute_of_day(minute_of_day: u16) -> Option<Self> {
        let hour = u8::try_from(minute_of_day / 60).ok()?;
        let minute = u8::try_from(minute_of_day % 60).ok()?;
        Self::new(hour, minute)
    }

    /// Parses `HH:MM` (or `H:MM`).
    pub(crate) fn parse(text: &str) -> Result<Self, ParseProblem> {
        let invalid = || ParseProblem::InvalidClockTime { text: text.to_string() };
        let (hour, minute) = text.split_once(':').ok_or_else(invalid)?;
        let digits = |part: &str, lengths: &[usize]| {
            lengths.contains(&part.len()) && part.bytes().all(|byte| byte.is_ascii_digit())
        };
        if !digits(hour, &[1, 2]) || !digits(minute, &[2]) {
            return Err(invalid());
        }
        let hour = hour.parse::<u8>().map_err(|_| invalid())?;
        let minute = minute.parse::<u8>().map_err(|_| invalid())?;
        Self::new(hour, minute).ok_or_else(invalid)
    }
}

impl fmt::Display for ClockTime {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{:02}:{:02}", self.hour, self.minute)
    }
}

/// Weekdays from Monday, as the jitter draws them.
pub(crate) const WEEKDAYS: [Weekday; 7] = [
    Weekday::Monday,
    Weekday::Tuesday,
    Weekday::Wednesday,
    Weekday::Thursday,
    Weekday::Friday,
    Weekday::Saturday,
    Weekday::Sunday,
];

/// The three-letter name used in displays, so a displayed schedule parses again.
pub(crate) fn weekday_name(weekday: Weekday) -> &'static str {
    match weekday {
        Weekday::Monday => "mon",
        Weekday::Tuesday => "tue",
        Weekday::Wednesday => "wed",
        Weekday::Thursday => "thu",
        Weekday::Friday => "fri",
        Weekday::Saturday => "sat",
        Weekday::Sunday => "sun",
    }
}

/// A weekday from its three-letter or full English name, any case.
pub(crate) fn parse_weekday(text: &str) -> Result<Weekday, ParseProblem> {
    let lower = text.to_ascii_lowercase();
    WEEKDAYS
        .into_iter()
        .find(|weekday| lower == weekday_name(*weekday) || lower == full_weekday_name(*weekday))
        .ok_or_else(|| ParseProblem::UnknownWeekday { text: text.to_string() })
}

fn full_weekday_name(weekday: Weekday) -> &'static str {
    match weekday {
        Weekday::Monday => "monday",
        Weekday::Tuesday => "tuesday",
        Weekday::Wednesday => "wednesday",
        Weekday::Thursday => "thursday",
        Weekday::Friday => "friday",
        Weekday::Saturday => "saturday",
        Weekday::Sunday => "sunday",
    }
}

/// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`): plain arithmetic, so the search needs no fallible date types.
pub(crate) fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Day of the week with Sunday = 0, as cron counts.
pub(crate) fn weekday_from_sunday(year: i32, month: u32, day: u32) -> u32 {
    // 1970-01-01 was a Thursday.
    (days_from_civil(year, month, day) + 4).rem_euclid(7) as u32
}

/// Whole weeks since Monday 1970-01-05: fixes which weeks a biweekly job runs in, and
/// unlike ISO week numbers it never breaks its alternation at a new year.
pub(crate) fn week_index(year: i32, month: u32, day: u32) -> i64 {
    (days_from_civil(year, month, day) - 4).div_euclid(7)
}

pub(crate) fn is_leap_year(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The instant a wall-clock time names in `zone`. In a repeated hour (fall back) it is
/// the first occurrence, so the job runs once; in a skipped hour (spring forward) it is
/// the end of the gap, the first instant that exists after the time asked for.
pub(crate) fn resolve_civil(datetime: DateTime, zone: &TimeZone) -> Option<Timestamp> {
    match zone.to_ambiguous_timestamp(datetime).offset() {
        AmbiguousOffset::Unambiguous { offset } | AmbiguousOffset::Fold { before: offset, .. } => {
            offset.to_timestamp(datetime).ok()
        }
        AmbiguousOffset::Gap { after, .. } => {
            // Read with the later offset, a time inside the gap falls before the
            // transition, so the next transition from there is the end of the gap.
            let before_gap = after.to_timestamp(datetime).ok()?;
            zone.following(before_gap).next().map(|transition| transition.timestamp())
        }
    }
}
