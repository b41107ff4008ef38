//! Five-field cron expressions: parsing each field into a set of allowed values.

use std::fmt;

use super::error::{CronField, ParseProblem};
use super::pattern::{CivilPattern, DayRule, bit};

const MONTH_NAMES: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// A parsed cron expression: `minute hour day-of-month month day-of-week`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpression {
    pattern: CivilPattern,
    /// The fields as written (lower-cased, single spaces), shown back to the user.
    text: String,
}

impl CronExpression {
    /// Parses the five fields. Ranges (`1-5`), lists (`1,15`), steps (`*/15`, `0-30/5`)
    /// and names (`jan`, `mon`) are accepted; day-of-week 7 is Sunday like 0.
    pub(crate) fn parse(text: &str) -> Result<Self, ParseProblem> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day_of_month, month, day_of_week] = fields.as_slice() else {
            return Err(ParseProblem::CronFieldCount { found: fields.len() });
        };
        let (minutes, _) = parse_field(minute, CronField::Minute)?;
        let (hours, _) = parse_field(hour, CronField::Hour)?;
        let (days_of_month, month_day_star) = parse_field(day_of_month, CronField::DayOfMonth)?;
        let (months, _) = parse_field(month, CronField::Month)?;
        let (days_of_week, week_day_star) = parse_field(day_of_week, CronField::DayOfWeek)?;
        // Seven and zero both name Sunday.
        let days_of_week = (days_of_week | (days_of_week >> 7)) & 0x7f;
        let pattern = CivilPattern {
            minutes,
            hours: hours as u32,
            days_of_month: days_of_month as u32,
            months: months as u16,
            days_of_week: days_of_week as u8,
            // Vixie cron's rule: a day field that starts with `*` does not restrict by
            // itself, and when both are restricted a day matching either runs.
            day_rule: if month_day_star || week_day_star { DayRule::Both } else { DayRule::Either },
            week_parity: None,
        };
        if !pattern.has_possible_day() {
            return Err(ParseProblem::NeverFires);
        }
        Ok(Self { pattern, text: fields.join(" ").to_ascii_lowercase() })
    }

    pub(crate) fn pattern(&self) -> &CivilPattern {
        &self.pattern
    }
}

impl fmt::Display for CronExpression {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.text)
    }
}

/// The values a field may take, and the names it accepts for them.
fn bounds(field: CronField) -> (u32, u32, &'static [&'static str]) {
    match field {
        CronField::Minute => (0, 59, &[]),
        CronField::Hour => (0, 23, &[]),
        CronField::DayOfMonth => (1, 31, &[]),
        CronField::Month => (1, 12, &MONTH_NAMES),
        CronField::DayOfWeek => (0, 7, &WEEKDAY_NAMES),
    }
}

/// Parses one field into a bit set, and whether it starts with `*` (which matters for
/// the day-of-month / day-of-week rule).
fn parse_field(text: &str, field: CronField) -> Result<(u64, bool), ParseProblem> {
    let (min, max, _) = bounds(field);
    let mut allowed = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(ParseProblem::EmptyListItem { field });
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(parse_step(step, field)?)),
            None => (item, None),
        };
        let (start, end) = if range == "*" {
            // `*` on day-of-week is 0-6: 7 would only repeat Sunday and skew steps.
            (min, if field == CronField::DayOfWeek { 6 } else { max })
        } else if let Some((start, end)) = range.split_once('-') {
            let (start, end) = (parse_value(start, field)?, parse_value(end, field)?);
            if start > end {
                return Err(ParseProblem::ReversedRange { field, start, end });
            }
            (start, end)
        } else {
            if step.is_some() {
                return Err(ParseProblem::StepWithoutRange { field, text: item.to_string() });
            }
            let value = parse_value(range, field)?;
            (value, value)
        };
        let step = step.unwrap_or(1);
        let mut value = start;
        while value <= end {
            allowed |= bit(value);
            value += step;
        }
    }
    Ok((allowed, text.starts_with('*')))
}

fn parse_step(text: &str, field: CronField) -> Result<u32, ParseProblem> {
    let (_, max, _) = bounds(field);
    let step = parse_number(text, field)?;
    u32::try_from(step).ok().filter(|step| (1..=max).contains(step)).ok_or(ParseProblem::StepOutOfRange {
        field,
        step,
        max,
    })
}

fn parse_value(text: &str, field: CronField) -> Result<u32, ParseProblem> {
    let (min, max, names) = bounds(field);
    if let Some(index) = names.iter().position(|name| name.eq_ignore_ascii_case(text)) {
        // Month names count from 1, weekday names from Sunday = 0.
        let index = u32::try_from(index).map_err(|_| invalid(text, field))?;
        return Ok(if field == CronField::Month { index + 1 } else { index });
    }
    let value = parse_number(text, field)?;
    u32::try_from(value).ok().filter(|value| (min..=max).contains(value)).ok_or(ParseProblem::ValueOutOfRange {
        field,
        value,
        min,
        max,
    })
}

fn parse_number(text: &str, field: CronField) -> Result<u64, ParseProblem> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(invalid(text, field));
    }
    // Digits only, so the one failure left is overflow: report it as out of range.
    Ok(text.parse::<u64>().unwrap_or(u64::MAX))
}

fn invalid(text: &str, field: CronField) -> ParseProblem {
    ParseProblem::InvalidValue { field, text: text.to_string() }
}
