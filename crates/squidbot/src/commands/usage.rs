//! `squidbot usage`: the model calls' tokens and cost since a time, summed per UTC day,
//! user or model.

use std::time::SystemTime;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use squidbot_core::clock::unix_millis;
use squidbot_core::duration::{BareNumber, parse_duration};
use squidbot_core::people::{Directory, UsageGrouping, UsageLedger};
use squidbot_types::people::UsageTotals;

use crate::cli::{UsageArgs, UsageBy};
use crate::wiring::Environment;

/// The time `--since` names, in ms since the Unix epoch: a duration back from `now_ms`
/// (`7d`, `24h`), an instant (`2026-01-31T09:00:00Z`) or a UTC day (`2026-01-31`).
pub(super) fn since_ms(text: &str, now_ms: i64) -> Result<i64> {
    if let Ok(duration) = parse_duration(text, BareNumber::Refused) {
        let back = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms.saturating_sub(back));
    }
    if let Ok(instant) = text.trim().parse::<jiff::Timestamp>() {
        return Ok(instant.as_millisecond());
    }
    if let Ok(day) = text.trim().parse::<jiff::civil::Date>()
        && let Ok(start) = day.to_zoned(jiff::tz::TimeZone::UTC)
    {
        return Ok(start.timestamp().as_millisecond());
    }
    bail!(
        "can't read --since {text:?}: give a duration such as 7d, 24h or 30m, or a time such as 2026-01-31 (UTC) or \
         2026-01-31T09:00:00Z"
    )
}

fn grouping(by: UsageBy) -> UsageGrouping {
    match by {
        UsageBy::User => UsageGrouping::User,
        UsageBy::Model => UsageGrouping::Model,
        UsageBy::Day => UsageGrouping::Day,
    }
}

fn by_name(by: UsageBy) -> &'static str {
    match by {
        UsageBy::User => "user",
        UsageBy::Model => "model",
        UsageBy::Day => "day",
    }
}

fn totals_json(key: Option<&str>, totals: &UsageTotals) -> Value {
    let mut value = json!({
        "calls": totals.calls,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "cache_read_tokens": totals.cache_read_tokens,
        "cache_write_tokens": totals.cache_write_tokens,
        "total_tokens": totals.tokens(),
        "cost": totals.cost,
    });
    if let Some(key) = key {
        value["key"] = json!(key);
    }
    value
}

/// Runs `squidbot usage`.
pub fn run(environment: &Environment, arguments: &UsageArgs) -> Result<()> {
    let now = unix_millis(SystemTime::now());
    let since = since_ms(&arguments.since, now)?;
    let database = crate::people::open(environment)?;
    if let Some(user) = &arguments.user
        && database.directory.user(user)?.is_none()
    {
        bail!("can't show the usage of {user:?}: there is no such user (`squidbot users list` shows them)");
    }
    let rows = database.usage.breakdown(since, arguments.user.as_deref(), grouping(arguments.by))?;
    let mut total = UsageTotals::default();
    for (_, totals) in &rows {
        total.calls += totals.calls;
        total.input_tokens += totals.input_tokens;
        total.output_tokens += totals.output_tokens;
        total.cache_read_tokens += totals.cache_read_tokens;
        total.cache_write_tokens += totals.cache_write_tokens;
        total.cost += totals.cost;
    }
    if arguments.json {
        let value = json!({
            "since_ms": since,
            "by": by_name(arguments.by),
            "user": arguments.user,
            "rows": rows.iter().map(|(key, totals)| totals_json(Some(key), totals)).collect::<Vec<_>>(),
            "total": totals_json(None, &total),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no model calls since {}", super::users::local_time_ms(since));
        return Ok(());
    }
    // Unpriced calls count tokens only; the column shows when some call had a price.
    let priced = rows.iter().any(|(_, totals)| totals.cost > 0.0);
    let key_width = rows.iter().map(|(key, _)| key.chars().count()).max().unwrap_or(0).max(5);
    let header = by_name(arguments.by).to_uppercase();
    let mut line = format!(
        "{header:<key_width$}  {:>6}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}",
        "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "TOTAL"
    );
    if priced {
        line.push_str(&format!("  {:>10}", "COST"));
    }
    println!("{line}");
    let print = |key: &str, totals: &UsageTotals| {
        let mut line = format!(
            "{key:<key_width$}  {:>6}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}",
            totals.calls,
            totals.input_tokens,
            totals.output_tokens,
            totals.cache_read_tokens,
            totals.cache_write_tokens,
            totals.tokens()
        );
        if priced {
            line.push_str(&format!("  {:>10.4}", totals.cost));
        }
        println!("{line}");
    };
    for (key, totals) in &rows {
        print(key, totals);
    }
    if rows.len() > 1 {
        print("total", &total);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_days_and_instants() {
        let now = 1_800_000_000_000;
        assert_eq!(since_ms("7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(since_ms("90 min", now).unwrap(), now - 90 * 60_000);
        assert_eq!(since_ms("2026-01-31", now).unwrap(), 1_769_817_600_000);
        assert_eq!(since_ms("2026-01-31T00:00:01Z", now).unwrap(), 1_769_817_601_000);
        for bad in ["nonsense", "7", "", "7 weeks"] {
            let error = since_ms(bad, now).unwrap_err().to_string();
            assert!(error.starts_with("can't read --since"), "{bad}: {error}");
        }
    }
}
