//! Heartbeat cadences (hourly … monthly) and the jittered concrete slot each one gets,
//! so heartbeats of many users don't all fire at the top of the hour.

use std::fmt;
use std::str::FromStr;

use jiff::civil::Weekday;

use crate::random::{RandomSource, SeededRandom};

use super::civil::{ClockTime, WEEKDAYS, weekday_name};
use super::error::ScheduleError;
use super::pattern::{ALL_DAYS_OF_MONTH, ALL_HOURS, CivilPattern, bit};

/// Waking hours for daily and rarer heartbeats: 06:00 inclusive to 22:00 exclusive.
const WINDOW_START_MINUTE: u16 = 6 * 60;
const WINDOW_MINUTES: u64 = 16 * 60;

/// How often a heartbeat from HEARTBEAT.md runs, before a slot is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cadence {
    Hourly,
    Daily,
    Weekly,
    Biweekly,
    Monthly,
}

impl Cadence {
    /// Every cadence, in increasing period.
    pub const ALL: [Self; 5] = [Self::Hourly, Self::Daily, Self::Weekly, Self::Biweekly, Self::Monthly];

    /// Parses a cadence name, any case, surrounding spaces ignored. `bi-weekly` is
    /// accepted for `biweekly` because both spellings are common in prose.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "hourly" => Ok(Cadence::Hourly),
            "daily" => Ok(Cadence::Daily),
            "weekly" => Ok(Cadence::Weekly),
            "biweekly" | "bi-weekly" => Ok(Cadence::Biweekly),
            "monthly" => Ok(Cadence::Monthly),
            _ => Err(ScheduleError::UnknownCadence { input: text.to_string() }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cadence::Hourly => "hourly",
            Cadence::Daily => "daily",
            Cadence::Weekly => "weekly",
            Cadence::Biweekly => "biweekly",
            Cadence::Monthly => "monthly",
        }
    }

    /// Chooses the concrete slot from `seed`. The same seed always gives the same slot,
    /// so a job that stores its seed (or the slot) keeps its time across restarts.
    pub fn choose_slot(self, seed: u64) -> CadenceSlot {
        let mut random = SlotDraws(SeededRandom::new(seed));
        match self {
            Cadence::Hourly => CadenceSlot::Hourly { minute: random.below(60) as u8 },
            Cadence::Daily => CadenceSlot::Daily { time: random.waking_time() },
            Cadence::Weekly => CadenceSlot::Weekly { weekday: random.weekday(), time: random.waking_time() },
            Cadence::Biweekly => {
                let (weekday, time) = (random.weekday(), random.waking_time());
                let parity = if random.below(2) == 0 { WeekParity::Even } else { WeekParity::Odd };
                CadenceSlot::Biweekly { weekday, time, parity }
            }
            Cadence::Monthly => CadenceSlot::Monthly { day: 1 + random.below(28) as u8, time: random.waking_time() },
        }
    }
}

impl FromStr for Cadence {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Cadence::parse(text)
    }
}

impl fmt::Display for Cadence {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Which alternate weeks a biweekly heartbeat runs in, counting whole weeks from Monday
/// 1970-01-05 (so the alternation never breaks at a new year).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeekParity {
    Even,
    Odd,
}

/// The concrete time a heartbeat cadence was given. Built by [`Cadence::choose_slot`];
/// the fields are public for display and storage, and a value out of range (a minute of
/// 75, a day of 31) just never or rarely matches rather than failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CadenceSlot {
    Hourly { minute: u8 },
    Daily { time: ClockTime },
    Weekly { weekday: Weekday, time: ClockTime },
    Biweekly { weekday: Weekday, time: ClockTime, parity: WeekParity },
    Monthly { day: u8, time: ClockTime },
}

impl CadenceSlot {
    pub fn cadence(&self) -> Cadence {
        match self {
            CadenceSlot::Hourly { .. } => Cadence::Hourly,
            CadenceSlot::Daily { .. } => Cadence::Daily,
            CadenceSlot::Weekly { .. } => Cadence::Weekly,
            CadenceSlot::Biweekly { .. } => Cadence::Biweekly,
            CadenceSlot::Monthly { .. } => Cadence::Monthly,
        }
    }

    pub(crate) fn pattern(&self) -> CivilPattern {
        match *self {
            CadenceSlot::Hourly { minute } => CivilPattern {
                minutes: bit(minute.into()),
                hours: ALL_HOURS,
                ..CivilPattern::at_time(ClockTime::MIDNIGHT)
            },
            CadenceSlot::Daily { time } => CivilPattern::at_time(time),
            CadenceSlot::Weekly { weekday, time } => CivilPattern::at_time(time).on_weekday(weekday),
            CadenceSlot::Biweekly { weekday, time, parity } => CivilPattern {
                week_parity: Some(match parity {
                    WeekParity::Even => 0,
                    WeekParity::Odd => 1,
                }),
                ..CivilPattern::at_time(time).on_weekday(weekday)
            },
            CadenceSlot::Monthly { day, time } => CivilPattern {
                days_of_month: bit(day.into()) as u32 & ALL_DAYS_OF_MONTH,
                ..CivilPattern::at_time(time)
            },
        }
    }
}

impl fmt::Display for CadenceSlot {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CadenceSlot::Hourly { minute } => write!(formatter, "hourly at :{minute:02}"),
            CadenceSlot::Daily { time } => write!(formatter, "daily at {time}"),
            CadenceSlot::Weekly { weekday, time } => {
                write!(formatter, "weekly on {} at {time}", weekday_name(*weekday))
            }
            CadenceSlot::Biweekly { weekday, time, parity } => {
                let parity = match parity {
                    WeekParity::Even => "even",
                    WeekParity::Odd => "odd",
                };
                write!(formatter, "biweekly on {} at {time} ({parity} weeks)", weekday_name(*weekday))
            }
            CadenceSlot::Monthly { day, time } => write!(formatter, "monthly on day {day} at {time}"),
        }
    }
}

/// The draws that place a slot, from a generator seeded by the job, so the same seed
/// always gives the same slot.
struct SlotDraws(SeededRandom);

impl SlotDraws {
    fn below(&mut self, bound: u64) -> u64 {
        self.0.below(bound)
    }

    fn weekday(&mut self) -> Weekday {
        WEEKDAYS[self.below(7) as usize % WEEKDAYS.len()]
    }

    fn waking_time(&mut self) -> ClockTime {
        let minute_of_day = WINDOW_START_MINUTE + self.below(WINDOW_MINUTES) as u16;
        ClockTime::from_minute_of_day(minute_of_day).unwrap_or(ClockTime::MIDNIGHT)
    }
}
