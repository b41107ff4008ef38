//! Durations as people write them (`90s`, `30 min`, `24h`, `7 days`): the one parser
//! behind `every …` schedules and the duration settings of the configuration.

use std::time::Duration;

/// What a bare number (`15`, no unit) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareNumber {
    /// Seconds, as in configuration values.
    Seconds,
    /// Nothing: a unit is required ([`DurationError::MissingUnit`]).
    Refused,
}

/// Why a duration can't be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// It doesn't start with a number.
    #[error("can't read the duration: it doesn't start with a number")]
    MissingNumber,
    /// A number without a unit where one is required.
    #[error("can't read the duration: the number has no unit (s, m, h or d)")]
    MissingUnit,
    /// A unit other than seconds, minutes, hours or days.
    #[error("can't read the duration: unknown unit {unit:?} (use s, m, h or d)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// Longer than a `u64` of seconds.
    #[error("can't read the duration: it is too long")]
    TooLong,
}

/// Reads a whole number followed by an optional unit, with or without a space between:
/// `s`, `sec`, `secs`, `second`, `seconds`; `m`, `min`, `mins`, `minute`, `minutes`; `h`,
/// `hour`, `hours`; `d`, `day`, `days` (any case). `bare` says what a number without a
/// unit means.
pub fn parse_duration(text: &str, bare: BareNumber) -> Result<Duration, DurationError> {
    let text = text.trim();
    let digits = text.find(|character: char| !character.is_ascii_digit()).unwrap_or(text.len());
    let (count, unit) = text.split_at(digits);
    if count.is_empty() {
        return Err(DurationError::MissingNumber);
    }
    let unit = unit.trim();
    let unit_seconds = match (unit.to_ascii_lowercase().as_str(), bare) {
        ("", BareNumber::Seconds) => 1,
        ("", BareNumber::Refused) => return Err(DurationError::MissingUnit),
        ("s" | "sec" | "secs" | "second" | "seconds", _) => 1,
        ("m" | "min" | "mins" | "minute" | "minutes", _) => 60,
        ("h" | "hour" | "hours", _) => 3600,
        ("d" | "day" | "days", _) => 86_400,
        _ => return Err(DurationError::UnknownUnit { unit: unit.to_owned() }),
    };
    // Digits only, so a failed parse is an overflow.
    let count = count.parse::<u64>().map_err(|_| DurationError::TooLong)?;
    count.checked_mul(unit_seconds).map(Duration::from_secs).ok_or(DurationError::TooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(text: &str) -> Result<u64, DurationError> {
        parse_duration(text, BareNumber::Seconds).map(|duration| duration.as_secs())
    }

    #[test]
    fn short_and_long_units_parse_with_or_without_a_space() {
        assert_eq!(seconds("90s"), Ok(90));
        assert_eq!(seconds("30m"), Ok(1800));
        assert_eq!(seconds("24h"), Ok(86_400));
        assert_eq!(seconds("2d"), Ok(172_800));
        assert_eq!(seconds("5 minutes"), Ok(300));
        assert_eq!(seconds(" 3 Hours "), Ok(10_800));
        assert_eq!(seconds("1 day"), Ok(86_400));
        assert_eq!(seconds("10 SECS"), Ok(10));
        assert_eq!(seconds("0s"), Ok(0));
    }

    #[test]
    fn a_bare_number_is_seconds_or_refused() {
        assert_eq!(seconds("15"), Ok(15));
        assert_eq!(parse_duration("15", BareNumber::Refused), Err(DurationError::MissingUnit));
    }

    #[test]
    fn other_texts_are_refused_with_the_reason() {
        assert_eq!(seconds("soon"), Err(DurationError::MissingNumber));
        assert_eq!(seconds(""), Err(DurationError::MissingNumber));
        assert_eq!(seconds("5 weeks"), Err(DurationError::UnknownUnit { unit: "weeks".to_owned() }));
        assert_eq!(seconds("-5s"), Err(DurationError::MissingNumber));
        assert_eq!(seconds("99999999999999999999s"), Err(DurationError::TooLong));
        assert_eq!(seconds("999999999999999999d"), Err(DurationError::TooLong));
    }
}
