//! `SqliteDirectory`: users, their linked identities and gateway tokens in the shared
//! database: core's `Directory` port, and the changes `squidbot users` makes.

use rusqlite::{Connection, OptionalExtension, Row, params};
use squidbot_core::people::{Directory, PeopleStoreError};
use squidbot_types::people::{BudgetLimits, Identity, User};

use super::{check_user_id, failed, from_sql_count, read, to_sql_count, write};
use crate::database::Database;

const USER_COLUMNS: &str = "u.id, u.name, u.role, u.context, u.created_ms, u.disabled, u.budget_daily_tokens, \
     u.budget_monthly_tokens, u.budget_daily_cost, u.budget_monthly_cost";

fn user_from_row(row: &Row<'_>) -> rusqlite::Result<User> {
    Ok(User {
        id: row.get(0)?,
        name: row.get(1)?,
        role: row.get(2)?,
        context: row.get(3)?,
        created_ms: row.get(4)?,
        disabled: row.get(5)?,
        budget: BudgetLimits {
            daily_tokens: row.get::<_, Option<i64>>(6)?.map(from_sql_count),
            monthly_tokens: row.get::<_, Option<i64>>(7)?.map(from_sql_count),
            daily_cost: row.get(8)?,
            monthly_cost: row.get(9)?,
        },
    })
}

/// The one user a query (selecting [`USER_COLUMNS`]) finds.
fn one_user(connection: &Connection, sql: &str, parameters: impl rusqlite::Params) -> rusqlite::Result<Option<User>> {
    connection.prepare_cached(sql)?.query_row(parameters, user_from_row).optional()
}

/// The user `id` links `identity`, if any.
fn owner_of(connection: &Connection, identity: &Identity) -> rusqlite::Result<Option<String>> {
    connection
        .prepare_cached("SELECT user_id FROM identities WHERE channel = ?1 AND sender_id = ?2")?
        .query_row(params![identity.channel, identity.sender_id], |row| row.get(0))
        .optional()
}

/// Users in the shared database. Calls block. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SqliteDirectory {
    database: Database,
}

impl SqliteDirectory {
    /// The users in `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Adds `user`; refuses an invalid or taken id and a context another user has.
    pub fn add_user(&self, user: &User) -> Result<(), PeopleStoreError> {
        let action = format!("add the user {}", user.id);
        check_user_id(&user.id).map_err(|reason| PeopleStoreError::new(&action, reason))?;
        write(&self.database, &action, |connection| {
            if one_user(connection, &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = ?1"), [&user.id])
                .map_err(failed(&action))?
                .is_some()
            {
                return Err(PeopleStoreError::new(&action, format!("there is already a user {}", user.id)));
            }
            let holder = one_user(
                connection,
                &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.context = ?1"),
                [&user.context],
            )
            .map_err(failed(&action))?;
            if let Some(holder) = holder {
                return Err(PeopleStoreError::new(
                    &action,
                    format!("the memory context {} is already {}'s", user.context, holder.id),
                ));
            }
            let budget = &user.budget;
            connection
                .prepare_cached(
                    "INSERT INTO users (id, name, role, context, created_ms, disabled, budget_daily_tokens, \
                     budget_monthly_tokens, budget_daily_cost, budget_monthly_cost) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        user.id,
                        user.name,
                        user.role,
                        user.context,
                        user.created_ms,
                        user.disabled,
                        budget.daily_tokens.map(to_sql_count),
                        budget.monthly_tokens.map(to_sql_count),
                        budget.daily_cost,
                        budget.monthly_cost,
                    ])
                })
                .map_err(failed(&action))?;
            Ok(())
        })
    }

    /// Runs one `UPDATE users … WHERE id = ?1` with `value` as `?2`; an error names
    /// `what` when there is no user `id`.
    fn update(&self, id: &str, what: &str, sql: &str, value: impl rusqlite::ToSql) -> Result<(), PeopleStoreError> {
        let action = format!("change the {what} of {id}");
        let changed =
            read(&self.database, &action, |connection| connection.prepare_cached(sql)?.execute(params![id, value]))?;
        if changed == 0 {
            return Err(PeopleStoreError::new(action, format!("there is no user {id}")));
        }
        Ok(())
    }

    /// Gives user `id` the people's role `role`.
    pub fn set_role(&self, id: &str, role: &str) -> Result<(), PeopleStoreError> {
        self.update(id, "role", "UPDATE users SET role = ?2 WHERE id = ?1", role)
    }

    /// Renames user `id`.
    pub fn set_name(&self, id: &str, name: &str) -> Result<(), PeopleStoreError> {
        self.update(id, "name", "UPDATE users SET name = ?2 WHERE id = ?1", name)
    }

    /// Disables (or enables again) user `id`.
    pub fn set_disabled(&self, id: &str, disabled: bool) -> Result<(), PeopleStoreError> {
        self.update(id, "state", "UPDATE users SET disabled = ?2 WHERE id = ?1", disabled)
    }

    /// Replaces user `id`'s own budget.
    pub fn set_budget(&self, id: &str, budget: &BudgetLimits) -> Result<(), PeopleStoreError> {
        let action = format!("change the budget of {id}");
        let changed = read(&self.database, &action, |connection| {
            connection
                .prepare_cached(
                    "UPDATE users SET budget_daily_tokens = ?2, budget_monthly_tokens = ?3, \
                     budget_daily_cost = ?4, budget_monthly_cost = ?5 WHERE id = ?1",
                )?
                .execute(params![
                    id,
                    budget.daily_tokens.map(to_sql_count),
                    budget.monthly_tokens.map(to_sql_count),
                    budget.daily_cost,
                    budget.monthly_cost,
                ])
        })?;
        if changed == 0 {
            return Err(PeopleStoreError::new(action, format!("there is no user {id}")));
        }
        Ok(())
    }

    /// Links `identity` to user `id` at `now_ms`; true when it is new, false when it was
    /// already theirs. Refuses an identity linked to someone else, naming them.
    pub fn link(&self, id: &str, identity: &Identity, now_ms: i64) -> Result<bool, PeopleStoreError> {
        let action = format!("link {identity} to {id}");
        write(&self.database, &action, |connection| {
            let exists = connection
                .prepare_cached("SELECT 1 FROM users WHERE id = ?1")
                .and_then(|mut statement| statement.exists([id]))
                .map_err(failed(&action))?;
            if !exists {
                return Err(PeopleStoreError::new(&action, format!("there is no user {id}")));
            }
            match owner_of(connection, identity).map_err(failed(&action))? {
                Some(owner) if owner == id => Ok(false),
                Some(owner) => Err(PeopleStoreError::new(&action, format!("it is linked to {owner}"))),
                None => {
                    connection
                        .prepare_cached(
                            "INSERT INTO identities (channel, sender_id, user_id, linked_ms) VALUES (?1, ?2, ?3, ?4)",
                        )
                        .and_then(|mut statement| {
                            statement.execute(params![identity.channel, identity.sender_id, id, now_ms])
                        })
                        .map_err(failed(&action))?;
                    Ok(true)
                }
            }
        })
    }

    /// Unlinks `identity` from whoever has it; false when nobody had.
    pub fn unlink(&self, identity: &Identity) -> Result<bool, PeopleStoreError> {
        read(&self.database, &format!("unlink {identity}"), |connection| {
            connection
                .prepare_cached("DELETE FROM identities WHERE channel = ?1 AND sender_id = ?2")?
                .execute(params![identity.channel, identity.sender_id])
        })
        .map(|deleted| deleted > 0)
    }

    /// Gives user `id` the gateway token whose hash is `token_hash` (made at `now_ms`),
    /// or takes theirs away with `None`.
    pub fn set_token_hash(&self, id: &str, token_hash: Option<&str>, now_ms: i64) -> Result<(), PeopleStoreError> {
        let action = format!("change the gateway token of {id}");
        let changed = read(&self.database, &action, |connection| {
            connection
                .prepare_cached("UPDATE users SET token_hash = ?2, token_created_ms = ?3 WHERE id = ?1")?
                .execute(params![id, token_hash, token_hash.map(|_| now_ms)])
        })?;
        if changed == 0 {
            return Err(PeopleStoreError::new(action, format!("there is no user {id}")));
        }
        Ok(())
    }

    /// When user `id`'s gateway token was made; `None` when they have none (or there is
    /// no such user).
    pub fn token_created_ms(&self, id: &str) -> Result<Option<i64>, PeopleStoreError> {
        read(&self.database, &format!("read the gateway token of {id}"), |connection| {
            connection
                .prepare_cached("SELECT token_created_ms FROM users WHERE id = ?1")?
                .query_row([id], |row| row.get::<_, Option<i64>>(0))
                .optional()
                .map(Option::flatten)
        })
    }

    /// Removes user `id` with their identity links (their memories, sessions and usage
    /// stay until [`super::purge_context`]); false when there was no such user.
    pub fn remove_user(&self, id: &str) -> Result<bool, PeopleStoreError> {
        read(&self.database, &format!("remove the user {id}"), |connection| {
            connection.prepare_cached("DELETE FROM users WHERE id = ?1")?.execute([id])
        })
        .map(|deleted| deleted > 0)
    }
}

impl Directory for SqliteDirectory {
    fn users(&self) -> Result<Vec<User>, PeopleStoreError> {
        read(&self.database, "read the users", |connection| {
            let mut statement =
                connection.prepare_cached(&format!("SELECT {USER_COLUMNS} FROM users u ORDER BY u.id"))?;
            let users = statement.query_map([], user_from_row)?;
            users.collect()
        })
    }

    fn user(&self, id: &str) -> Result<Option<User>, PeopleStoreError> {
        read(&self.database, &format!("read the user {id}"), |connection| {
            one_user(connection, &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = ?1"), [id])
        })
    }

    fn by_identity(&self, identity: &Identity) -> Result<Option<User>, PeopleStoreError> {
        read(&self.database, &format!("find the user of {identity}"), |connection| {
            one_user(
                connection,
                &format!(
                    "SELECT {USER_COLUMNS} FROM identities i JOIN users u ON u.id = i.user_id \
                     WHERE i.channel = ?1 AND i.sender_id = ?2"
                ),
                params![identity.channel, identity.sender_id],
            )
        })
    }

    fn by_context(&self, context: &str) -> Result<Option<User>, PeopleStoreError> {
        read(&self.database, &format!("find the user of the context {context}"), |connection| {
            one_user(connection, &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.context = ?1"), [context])
        })
    }

    fn by_token_hash(&self, token_hash: &str) -> Result<Option<User>, PeopleStoreError> {
        read(&self.database, "find the user of a gateway token", |connection| {
            one_user(connection, &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.token_hash = ?1"), [token_hash])
        })
    }

    fn identities(&self, user: &str) -> Result<Vec<Identity>, PeopleStoreError> {
        read(&self.database, &format!("read the identities of {user}"), |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT channel, sender_id FROM identities WHERE user_id = ?1 ORDER BY channel, sender_id",
            )?;
            let identities =
                statement.query_map([user], |row| Ok(Identity { channel: row.get(0)?, sender_id: row.get(1)? }))?;
            identities.collect()
        })
    }
}
