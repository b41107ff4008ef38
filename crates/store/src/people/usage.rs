//! `SqliteUsage`: every model call's tokens and cost in the shared database (core's
//! `UsageLedger` port), and the budget warnings already given.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{Row, params};
use squidbot_core::clock::{Clock, SystemClock, from_unix_millis, rfc3339};
use squidbot_core::people::{PeopleStoreError, UsageGrouping, UsageLedger, UsageSubject};
use squidbot_types::people::{UsageRecord, UsageTotals};

use super::{failed, from_sql_count, read, to_sql_count, write};
use crate::database::Database;

/// A budget warning is remembered this long: past every period it can be about (a
/// calendar month at most), so the table holds a few entries per person.
const NOTICE_KEPT_MS: i64 = 62 * 24 * 60 * 60 * 1000;

const DAY_SECONDS: i64 = 24 * 60 * 60;

const DAY_MS: i64 = DAY_SECONDS * 1000;

/// Sums selected after the grouping key, in the order [`totals_from_row`] reads them.
const SUMS: &str = "count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), \
     coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0), total(cost)";

/// Reads [`SUMS`] from column `first` on.
fn totals_from_row(row: &Row<'_>, first: usize) -> rusqlite::Result<UsageTotals> {
    Ok(UsageTotals {
        calls: from_sql_count(row.get(first)?),
        input_tokens: from_sql_count(row.get(first + 1)?),
        output_tokens: from_sql_count(row.get(first + 2)?),
        cache_read_tokens: from_sql_count(row.get(first + 3)?),
        cache_write_tokens: from_sql_count(row.get(first + 4)?),
        cost: row.get(first + 5)?,
    })
}

/// The usage ledger in the shared database. Calls block. Cheap to clone.
#[derive(Clone)]
pub struct SqliteUsage {
    database: Database,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SqliteUsage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SqliteUsage").field("database", &self.database).finish_non_exhaustive()
    }
}

impl SqliteUsage {
    /// The ledger in `database`, budget warnings stamped with the system clock.
    pub fn new(database: Database) -> Self {
        Self { database, clock: Arc::new(SystemClock) }
    }

    /// The same, budget warnings stamped (and forgotten) by `clock`'s time.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Deletes the usage of a person being purged: every call of `user_id` (when given)
    /// and every call made in `context` without a user. Calls others made in `context`
    /// stay: they are theirs. Returns how many went.
    pub fn delete_of(&self, user_id: Option<&str>, context: &str) -> Result<usize, PeopleStoreError> {
        read(&self.database, &format!("delete the usage of {}", user_id.unwrap_or(context)), |connection| {
            delete_usage_of(connection, user_id, context)
        })
    }

    /// Deletes calls made before `at_ms` (retention); how many went.
    pub fn delete_before(&self, at_ms: i64) -> Result<usize, PeopleStoreError> {
        read(&self.database, "delete old usage", |connection| {
            connection.prepare_cached("DELETE FROM usage WHERE at_ms < ?1")?.execute([at_ms])
        })
    }
}

/// [`SqliteUsage::delete_of`] inside the caller's transaction.
pub(super) fn delete_usage_of(
    connection: &rusqlite::Connection,
    user_id: Option<&str>,
    context: &str,
) -> rusqlite::Result<usize> {
    let without_user =
        connection.prepare_cached("DELETE FROM usage WHERE user_id IS NULL AND context = ?1")?.execute([context])?;
    let of_user = match user_id {
        Some(user_id) => connection.prepare_cached("DELETE FROM usage WHERE user_id = ?1")?.execute([user_id])?,
        None => 0,
    };
    Ok(without_user + of_user)
}

impl UsageLedger for SqliteUsage {
    fn record(&self, record: &UsageRecord) -> Result<(), PeopleStoreError> {
        read(&self.database, "record a model call's usage", |connection| {
            connection
                .prepare_cached(
                    "INSERT INTO usage (at_ms, user_id, context, session_key, agent, provider, model, \
                     input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                )?
                .execute(params![
                    record.at_ms,
                    record.user,
                    record.context,
                    record.session_key,
                    record.agent,
                    record.provider,
                    record.model,
                    to_sql_count(record.input_tokens),
                    to_sql_count(record.output_tokens),
                    to_sql_count(record.cache_read_tokens),
                    to_sql_count(record.cache_write_tokens),
                    record.cost,
                ])
                .map(drop)
        })
    }

    fn totals(&self, subject: &UsageSubject, since_ms: i64) -> Result<UsageTotals, PeopleStoreError> {
        if since_ms >= 0 && since_ms % DAY_MS == 0 {
            // Whole days (every budget period): the per-day sums, at most a month of rows.
            let (name, who) = match subject {
                UsageSubject::User(user) => (format!("user:{user}"), user.as_str()),
                UsageSubject::Context(context) => (format!("context:{context}"), context.as_str()),
            };
            return read(&self.database, &format!("read the usage of {who}"), |connection| {
                connection
                    .prepare_cached(
                        "SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens), 0), \
                         coalesce(sum(output_tokens), 0), coalesce(sum(cache_read_tokens), 0), \
                         coalesce(sum(cache_write_tokens), 0), total(cost) \
                         FROM usage_daily WHERE subject = ?1 AND day >= ?2",
                    )?
                    .query_row(params![name, since_ms / DAY_MS], |row| totals_from_row(row, 0))
            });
        }
        // Each form reads one index: (user_id, at_ms) or (context, at_ms).
        let (sql, who) = match subject {
            UsageSubject::User(user) => {
                (format!("SELECT {SUMS} FROM usage WHERE user_id = ?1 AND at_ms >= ?2"), user.as_str())
            }
            UsageSubject::Context(context) => (
                format!("SELECT {SUMS} FROM usage WHERE context = ?1 AND user_id IS NULL AND at_ms >= ?2"),
                context.as_str(),
            ),
        };
        read(&self.database, &format!("read the usage of {who}"), |connection| {
            connection.prepare_cached(&sql)?.query_row(params![who, since_ms], |row| totals_from_row(row, 0))
        })
    }

    fn first_notice(&self, key: &str) -> Result<bool, PeopleStoreError> {
        let now = self.clock.unix_millis();
        let action = "remember a budget warning";
        write(&self.database, action, |connection| {
            // Forgotten as new ones come, so the table stays a few rows per person.
            connection
                .prepare_cached("DELETE FROM usage_notices WHERE at_ms < ?1")
                .and_then(|mut statement| statement.execute([now.saturating_sub(NOTICE_KEPT_MS)]))
                .map_err(failed(action))?;
            connection
                .prepare_cached("INSERT INTO usage_notices (key, at_ms) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING")
                .and_then(|mut statement| statement.execute(params![key, now]))
                .map(|inserted| inserted > 0)
                .map_err(failed(action))
        })
    }

    fn breakdown(
        &self,
        since_ms: i64,
        user: Option<&str>,
        by: UsageGrouping,
    ) -> Result<Vec<(String, UsageTotals)>, PeopleStoreError> {
        // Days are grouped by number and named as core's `UsageGrouping::key_of` names
        // them: the UTC day the time falls in, times before 1970 on its first day.
        let key = match by {
            UsageGrouping::User => "coalesce(user_id, 'context:' || context)".to_owned(),
            UsageGrouping::Model => "provider || '/' || model".to_owned(),
            UsageGrouping::Day => format!("max(at_ms, 0) / 1000 / {DAY_SECONDS}"),
        };
        let sql =
            format!("SELECT {key}, {SUMS} FROM usage WHERE at_ms >= ?1 AND (?2 IS NULL OR user_id = ?2) GROUP BY 1");
        let rows = read(&self.database, "read the usage", |connection| {
            let mut statement = connection.prepare_cached(&sql)?;
            let rows = statement.query_map(params![since_ms, user], |row| {
                let key = match by {
                    UsageGrouping::User | UsageGrouping::Model => row.get::<_, String>(0)?,
                    UsageGrouping::Day => day_name(row.get::<_, i64>(0)?),
                };
                Ok((key, totals_from_row(row, 1)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        // Sorted as core sorts them (byte order), whatever SQLite's order.
        let sorted: BTreeMap<String, UsageTotals> = rows.into_iter().collect();
        Ok(sorted.into_iter().collect())
    }
}

/// `YYYY-MM-DD` (UTC) of day number `day` since 1970-01-01.
fn day_name(day: i64) -> String {
    rfc3339(from_unix_millis(day.saturating_mul(DAY_SECONDS * 1000))).get(..10).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_named_like_core_names_them() {
        assert_eq!(day_name(0), "1970-01-01");
        assert_eq!(day_name(20_000), "2024-10-04");
    }
}
