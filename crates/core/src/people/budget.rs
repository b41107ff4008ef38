//! Budgets: a person's (or role's) daily and monthly limits against what was used. Days
//! and months are UTC.

use jiff::Timestamp;
use jiff::civil::Date;
use squidbot_types::people::{BudgetLimits, UsageTotals};

/// Share of a limit at which the person is told, once per period.
pub const WARN_PERCENT: u64 = 80;

/// What was used in the current day and month.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetUse {
    /// Since the start of today (UTC).
    pub day: UsageTotals,
    /// Since the start of this month (UTC).
    pub month: UsageTotals,
}

/// A budget period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// Today (UTC).
    Day,
    /// This calendar month (UTC).
    Month,
}

impl Period {
    /// `daily` or `monthly`.
    pub fn adjective(self) -> &'static str {
        match self {
            Period::Day => "daily",
            Period::Month => "monthly",
        }
    }
}

/// Where someone stands against their budget.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetState {
    /// Under 80 % of every limit.
    Fine,
    /// At or past 80 % of a limit.
    Warn {
        /// Which period.
        period: Period,
        /// Percent used.
        percent: u64,
        /// The start of the period (ms), to tell a person once per period.
        period_start_ms: i64,
    },
    /// A limit is used up.
    Exhausted {
        /// Which period.
        period: Period,
        /// `tokens` or `cost`.
        what: &'static str,
        /// When it resets (ms since the Unix epoch).
        resets_at_ms: i64,
    },
}

/// The limits in force: the person's own where set, else their role's.
pub fn effective(own: &BudgetLimits, role: &BudgetLimits) -> BudgetLimits {
    BudgetLimits {
        daily_tokens: own.daily_tokens.or(role.daily_tokens),
        monthly_tokens: own.monthly_tokens.or(role.monthly_tokens),
        daily_cost: own.daily_cost.or(role.daily_cost),
        monthly_cost: own.monthly_cost.or(role.monthly_cost),
    }
}

/// Start of the UTC day holding `now_ms`.
pub fn day_start_ms(now_ms: i64) -> i64 {
    now_ms.div_euclid(86_400_000) * 86_400_000
}

fn date_of(now_ms: i64) -> Date {
    Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH).to_zoned(jiff::tz::TimeZone::UTC).date()
}

fn ms_of(date: Date) -> i64 {
    date.to_zoned(jiff::tz::TimeZone::UTC).map(|zoned| zoned.timestamp().as_millisecond()).unwrap_or(0)
}

/// Start of the UTC month holding `now_ms`.
pub fn month_start_ms(now_ms: i64) -> i64 {
    ms_of(date_of(now_ms).first_of_month())
}

fn next_month_ms(now_ms: i64) -> i64 {
    let first = date_of(now_ms).first_of_month();
    first.checked_add(jiff::Span::new().months(1)).map_or(now_ms + 31 * 86_400_000, ms_of)
}

/// Where `used` stands against `limits` at `now_ms`: exhausted wins over a warning, the
/// day over the month.
pub fn evaluate(limits: &BudgetLimits, used: &BudgetUse, now_ms: i64) -> BudgetState {
    let checks = [
        (Period::Day, "tokens", limits.daily_tokens.map(|limit| (used.day.tokens() as f64, limit as f64))),
        (Period::Day, "cost", limits.daily_cost.map(|limit| (used.day.cost, limit))),
        (Period::Month, "tokens", limits.monthly_tokens.map(|limit| (used.month.tokens() as f64, limit as f64))),
        (Period::Month, "cost", limits.monthly_cost.map(|limit| (used.month.cost, limit))),
    ];
    let mut warning = BudgetState::Fine;
    for (period, what, check) in checks {
        let Some((used, limit)) = check else { continue };
        let start = if period == Period::Day { day_start_ms(now_ms) } else { month_start_ms(now_ms) };
        if used >= limit {
            let resets_at_ms = if period == Period::Day { start + 86_400_000 } else { next_month_ms(now_ms) };
            return BudgetState::Exhausted { period, what, resets_at_ms };
        }
        let percent = if limit > 0.0 { (used / limit * 100.0) as u64 } else { 100 };
        if percent >= WARN_PERCENT && warning == BudgetState::Fine {
            warning = BudgetState::Warn { period, percent, period_start_ms: start };
        }
    }
    warning
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(day_tokens: u64, month_tokens: u64) -> BudgetUse {
        BudgetUse {
            day: UsageTotals { input_tokens: day_tokens, ..Default::default() },
            month: UsageTotals { input_tokens: month_tokens, cost: 3.0, ..Default::default() },
        }
    }

    // 2026-11-27T15:00:00Z
    const NOW: i64 = 1_795_791_600_000;

    #[test]
    fn periods_are_utc_days_and_months() {
        assert_eq!(day_start_ms(NOW), 1_795_737_600_000);
        assert_eq!(month_start_ms(NOW), 1_793_491_200_000); // 2026-11-01
        assert_eq!(next_month_ms(NOW), 1_796_083_200_000); // 2026-12-01
    }

    #[test]
    fn limits_warn_at_eighty_percent_and_refuse_at_the_limit() {
        let limits = BudgetLimits { daily_tokens: Some(1000), monthly_cost: Some(10.0), ..Default::default() };
        assert_eq!(evaluate(&limits, &used(100, 100), NOW), BudgetState::Fine);
        assert_eq!(
            evaluate(&limits, &used(850, 850), NOW),
            BudgetState::Warn { period: Period::Day, percent: 85, period_start_ms: day_start_ms(NOW) }
        );
        assert_eq!(
            evaluate(&limits, &used(1000, 1000), NOW),
            BudgetState::Exhausted {
                period: Period::Day,
                what: "tokens",
                resets_at_ms: day_start_ms(NOW) + 86_400_000
            }
        );
        let monthly = BudgetLimits { monthly_cost: Some(3.0), ..Default::default() };
        assert_eq!(
            evaluate(&monthly, &used(0, 0), NOW),
            BudgetState::Exhausted { period: Period::Month, what: "cost", resets_at_ms: next_month_ms(NOW) }
        );
        assert_eq!(evaluate(&BudgetLimits::default(), &used(u64::MAX / 8, 0), NOW), BudgetState::Fine);
    }

    #[test]
    fn a_persons_own_limits_win_over_the_roles() {
        let own = BudgetLimits { daily_tokens: Some(5), ..Default::default() };
        let role = BudgetLimits { daily_tokens: Some(50), monthly_tokens: Some(500), ..Default::default() };
        let limits = effective(&own, &role);
        assert_eq!(limits.daily_tokens, Some(5));
        assert_eq!(limits.monthly_tokens, Some(500));
    }
}
