//! The compiled form of every wall-clock schedule (a set of civil minutes, as cron
//! describes it) and the search for its next due time, jumping field by field.

use jiff::Timestamp;
use jiff::civil::{DateTime, Weekday};
use jiff::tz::TimeZone;

use super::civil::{ClockTime, days_in_month, resolve_civil, week_index, weekday_from_sunday};

/// How far ahead the search looks. Dates and weekdays repeat every 400 Gregorian years,
/// so a pattern that fires at all fires within any window this long; the bound only
/// stops a search for a pattern that can never fire (refused at parse time anyway).
const SEARCH_YEARS: i32 = 401;

/// How day-of-month and day-of-week combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DayRule {
    /// Both must match: the usual case, where one of them is unrestricted.
    Both,
    /// Either may match: cron's rule when both fields are restricted.
    Either,
}

/// Sets of allowed values as bit masks (bit n set = value n allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CivilPattern {
    pub(crate) minutes: u64,
    pub(crate) hours: u32,
    /// Bits 1 to 31.
    pub(crate) days_of_month: u32,
    /// Bits 1 to 12.
    pub(crate) months: u16,
    /// Bits 0 (Sunday) to 6.
    pub(crate) days_of_week: u8,
    pub(crate) day_rule: DayRule,
    /// For biweekly slots: run only in weeks whose `week_index` has this remainder mod 2.
    pub(crate) week_parity: Option<i64>,
}

pub(crate) const ALL_HOURS: u32 = (1 << 24) - 1;
pub(crate) const ALL_DAYS_OF_MONTH: u32 = !1;
pub(crate) const ALL_MONTHS: u16 = ((1 << 13) - 1) & !1;
pub(crate) const ALL_DAYS_OF_WEEK: u8 = (1 << 7) - 1;

/// A single bit, or no bit for a value too large for the mask (such a pattern never
/// matches rather than panicking on a shift overflow).
pub(crate) fn bit(value: u32) -> u64 {
    1u64.checked_shl(value).unwrap_or(0)
}

/// The smallest allowed value at or above `from`.
fn next_allowed(mask: u64, from: u32) -> Option<u32> {
    let remaining = mask & u64::MAX.checked_shl(from).unwrap_or(0);
    (remaining != 0).then(|| remaining.trailing_zeros())
}

impl CivilPattern {
    /// Every day at `time`; the base of daily, weekly and monthly slots.
    pub(crate) fn at_time(time: ClockTime) -> Self {
        Self {
            minutes: bit(u32::from(time.minute())),
            hours: bit(u32::from(time.hour())) as u32,
            days_of_month: ALL_DAYS_OF_MONTH,
            months: ALL_MONTHS,
            days_of_week: ALL_DAYS_OF_WEEK,
            day_rule: DayRule::Both,
            week_parity: None,
        }
    }

    pub(crate) fn on_weekday(mut self, weekday: Weekday) -> Self {
        self.days_of_week = bit(weekday.to_sunday_zero_offset().unsigned_abs().into()) as u8;
        self
    }

    fn day_matches(&self, year: i32, month: u32, day: u32) -> bool {
        let by_month = self.days_of_month & (bit(day) as u32) != 0;
        let by_week = self.days_of_week & (bit(weekday_from_sunday(year, month, day)) as u8) != 0;
        let by_day = match self.day_rule {
            DayRule::Both => by_month && by_week,
            DayRule::Either => by_month || by_week,
        };
        by_day && self.week_parity.is_none_or(|parity| week_index(year, month, day).rem_euclid(2) == parity)
    }

    /// The first civil minute at or after `start` (whose seconds are ignored) that the
    /// pattern allows, or `None` within the search window.
    fn next_at_or_after(&self, start: DateTime) -> Option<DateTime> {
        let mut cursor = Cursor {
            year: i32::from(start.year()),
            month: start.month().unsigned_abs().into(),
            day: start.day().unsigned_abs().into(),
            hour: start.hour().unsigned_abs().into(),
            minute: start.minute().unsigned_abs().into(),
        };
        let last_year = cursor.year + SEARCH_YEARS;
        // Each pass either returns or moves the cursor forward, resetting the smaller
        // fields, so the loop ends by `last_year`.
        while cursor.year <= last_year {
            if self.months & (bit(cursor.month) as u16) == 0 {
                match next_allowed(self.months.into(), cursor.month + 1) {
                    Some(month) => cursor.start_month(cursor.year, month),
                    None => cursor.start_month(cursor.year + 1, 1),
                }
                continue;
            }
            if !self.day_matches(cursor.year, cursor.month, cursor.day) {
                cursor.next_day();
                continue;
            }
            match next_allowed(self.hours.into(), cursor.hour) {
                Some(hour) if hour == cursor.hour => {}
                Some(hour) if hour < 24 => {
                    (cursor.hour, cursor.minute) = (hour, 0);
                }
                _ => {
                    cursor.next_day();
                    continue;
                }
            }
            match next_allowed(self.minutes, cursor.minute) {
                Some(minute) if minute < 60 => return cursor.at_minute(minute),
                _ => cursor.next_hour(),
            }
        }
        None
    }

    /// The first instant strictly after `after` at which the pattern is due in `zone`.
    pub(crate) fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let local = zone.to_datetime(after);
        let mut start = local.with().second(0).subsec_nanosecond(0).build().ok()?;
        loop {
            let candidate = self.next_at_or_after(start)?;
            let instant = resolve_civil(candidate, zone)?;
            // Civil order maps onto instants monotonically (repeats resolve to their
            // first occurrence, gaps to their end), so the first candidate past
            // `after` is the answer; earlier ones are minutes already run, such as the
            // first pass of a repeated hour or a gap's end that was `after` itself.
            if instant > after {
                return Some(instant);
            }
            start = candidate.checked_add(jiff::SignedDuration::from_mins(1)).ok()?;
        }
    }

    /// Whether some calendar day satisfies the day fields. Only day-of-month against
    /// month can rule out every day: any date falls on every weekday over the years, and
    /// under `Either` the weekday alone suffices. February counts its leap-year 29th.
    pub(crate) fn has_possible_day(&self) -> bool {
        match self.day_rule {
            DayRule::Either => self.days_of_week != 0 || self.days_of_month != 0,
            DayRule::Both => {
                self.days_of_week != 0
                    && (1..=12u32).any(|month| {
                        self.months & (bit(month) as u16) != 0
                            && (1..=days_in_month(2000, month)).any(|day| self.days_of_month & (bit(day) as u32) != 0)
                    })
            }
        }
    }
}

/// A position in the civil calendar during the search, in plain integers so stepping
/// needs no fallible date arithmetic.
struct Cursor {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
}

impl Cursor {
    fn start_month(&mut self, year: i32, month: u32) {
        (self.year, self.month, self.day, self.hour, self.minute) = (year, month, 1, 0, 0);
    }

    fn next_day(&mut self) {
        (self.day, self.hour, self.minute) = (self.day + 1, 0, 0);
        if self.day > days_in_month(self.year, self.month) {
            if self.month == 12 {
                self.start_month(self.year + 1, 1);
            } else {
                self.start_month(self.year, self.month + 1);
            }
        }
    }

    fn next_hour(&mut self) {
        if self.hour >= 23 {
            self.next_day();
        } else {
            (self.hour, self.minute) = (self.hour + 1, 0);
        }
    }

    fn at_minute(&self, minute: u32) -> Option<DateTime> {
        DateTime::new(
            i16::try_from(self.year).ok()?,
            i8::try_from(self.month).ok()?,
            i8::try_from(self.day).ok()?,
            i8::try_from(self.hour).ok()?,
            i8::try_from(minute).ok()?,
            0,
            0,
        )
        .ok()
    }
}
