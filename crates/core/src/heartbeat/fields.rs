//! The `Key: value` field lines of a HEARTBEAT.md section and the values they hold:
//! cadence, context mode and active hours.

use std::fmt;

use crate::jobs::ContextMode;

/// The context mode a `Context:` value names, ignoring case and surrounding whitespace.
pub fn context_mode(value: &str) -> Option<ContextMode> {
    ContextMode::parse(&value.trim().to_ascii_lowercase())
}

const MINUTES_PER_DAY: u16 = 24 * 60;

/// A daily window in which a heartbeat may run (`Active hours: 09:00-22:00`), in the
/// owner's timezone, which comes from configuration rather than the file. A start after
/// the end wraps past midnight (`22:00-06:00`); the end is exclusive and may be `24:00`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActiveHours {
    start_minute: u16,
    end_minute: u16,
}

impl ActiveHours {
    /// Parses `HH:MM-HH:MM` (also with an en or em dash, or ` to `, and spaces around
    /// the separator). A window whose start equals its end is rejected: it could mean
    /// "never" or "always", and guessing wrong either silences a heartbeat or runs it at
    /// night; all day is written `00:00-24:00`.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let (start, end) =
            value.split_once(['-', '\u{2013}', '\u{2014}']).or_else(|| split_once_ignoring_case(value, " to "))?;
        let start_minute = minute_of_day(start.trim()).filter(|minute| *minute < MINUTES_PER_DAY)?;
        let end_minute = minute_of_day(end.trim())?;
        (start_minute != end_minute).then_some(Self { start_minute, end_minute })
    }

    /// Minutes after midnight at which the window opens.
    pub fn start_minute_of_day(self) -> u16 {
        self.start_minute
    }

    /// Minutes after midnight at which the window closes (up to 1440 for `24:00`).
    pub fn end_minute_of_day(self) -> u16 {
        self.end_minute
    }

    /// Whether a wall-clock time falls inside the window.
    pub fn contains(self, time: jiff::civil::Time) -> bool {
        let minute = u16::from(time.hour().unsigned_abs()) * 60 + u16::from(time.minute().unsigned_abs());
        if self.start_minute < self.end_minute {
            (self.start_minute..self.end_minute).contains(&minute)
        } else {
            minute >= self.start_minute || minute < self.end_minute
        }
    }
}

impl fmt::Display for ActiveHours {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{:02}:{:02}-{:02}:{:02}",
            self.start_minute / 60,
            self.start_minute % 60,
            self.end_minute / 60,
            self.end_minute % 60
        )
    }
}

fn split_once_ignoring_case<'a>(value: &'a str, separator: &str) -> Option<(&'a str, &'a str)> {
    // ASCII lowercasing keeps byte offsets, so an index into the copy indexes `value`.
    let index = value.to_ascii_lowercase().find(separator)?;
    Some((&value[..index], &value[index + separator.len()..]))
}

/// `H:MM` or `HH:MM` as minutes after midnight; `24:00` is allowed for a window's end.
fn minute_of_day(value: &str) -> Option<u16> {
    let (hour, minute) = value.split_once(':')?;
    let all_digits = |part: &str| (1..=2).contains(&part.len()) && part.bytes().all(|byte| byte.is_ascii_digit());
    if !all_digits(hour) || minute.len() != 2 || !all_digits(minute) {
        return None;
    }
    let hour: u16 = hour.parse().ok()?;
    let minute: u16 = minute.parse().ok()?;
    match (hour, minute) {
        (24, 0) => Some(MINUTES_PER_DAY),
        (0..=23, 0..=59) => Some(hour * 60 + minute),
        _ => None,
    }
}

/// The field a `Key:` line names. Keys match ignoring case, spaces, `_` and `-`, so
/// `Active hours`, `active_hours` and `ActiveHours` are one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldName {
    Cadence,
    Prompt,
    Context,
    ActiveHours,
    Unknown,
}

/// A `Key: value` line.
#[derive(Debug, Clone, Copy)]
pub(super) struct FieldLine<'a> {
    pub name: FieldName,
    /// The key as written, for warnings.
    pub key: &'a str,
    /// The value, trimmed, with any bold marker that closed the key removed.
    pub value: &'a str,
}

/// Longest key taken for a field; longer text before a colon is a sentence, not a field.
const MAX_KEY_BYTES: usize = 32;
const MAX_KEY_WORDS: usize = 3;

/// Reads a field line, accepting the shapes seen in hand-written files: an optional list
/// marker (`- `, `* `, `+ `), an optional bold key (`**Cadence:**` or `**Cadence**:`),
/// and a colon followed by whitespace or the end of the line (so `https://…` and `10:30`
/// are not fields).
pub(super) fn field_line(text: &str) -> Option<FieldLine<'_>> {
    let mut rest = text.trim_start();
    for marker in ["- ", "* ", "+ ", "-\t", "*\t", "+\t"] {
        if let Some(stripped) = rest.strip_prefix(marker) {
            rest = stripped.trim_start();
            break;
        }
    }
    let rest = rest.strip_prefix("**").or_else(|| rest.strip_prefix("__")).unwrap_or(rest);
    let (key, after) = rest.split_once(':')?;
    let key = key.trim();
    let key = key.strip_suffix("**").or_else(|| key.strip_suffix("__")).unwrap_or(key).trim_end();
    let is_key_character = |character: char| character.is_alphanumeric() || matches!(character, ' ' | '_' | '-');
    if key.is_empty()
        || key.len() > MAX_KEY_BYTES
        || key.split_whitespace().count() > MAX_KEY_WORDS
        || !key.starts_with(char::is_alphabetic)
        || !key.chars().all(is_key_character)
    {
        return None;
    }
    let after_bold = after.strip_prefix("**").or_else(|| after.strip_prefix("__")).unwrap_or(after);
    if !(after_bold.is_empty() || after_bold.starts_with(char::is_whitespace)) {
        return None;
    }
    let normalised: String =
        key.chars().filter(|character| character.is_alphanumeric()).flat_map(char::to_lowercase).collect();
    let name = match normalised.as_str() {
        "cadence" => FieldName::Cadence,
        "prompt" => FieldName::Prompt,
        "context" | "contextmode" => FieldName::Context,
        "activehours" => FieldName::ActiveHours,
        _ => FieldName::Unknown,
    };
    Some(FieldLine { name, key, value: after_bold.trim() })
}

/// A single-word value without the decoration people add around it: backticks, bold or
/// italic markers, quotes, and a trailing full stop (`**daily**`, `` `daily` ``, `daily.`).
pub(super) fn clean_value(value: &str) -> &str {
    let mut value = value.trim();
    loop {
        let before = value;
        value = value.strip_suffix('.').unwrap_or(value).trim();
        for wrapper in ["**", "__", "`", "*", "_", "\"", "'"] {
            if let Some(inner) = value.strip_prefix(wrapper).and_then(|inner| inner.strip_suffix(wrapper)) {
                value = inner.trim();
            }
        }
        if value == before {
            return value;
        }
    }
}
