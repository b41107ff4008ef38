//! `squidbot users`: the people the assistant works for (users with a people's role,
//! their linked identities, gateway tokens and budgets), approved senders of the chat
//! channels and pairing codes waiting for the owner. Works on the database, so a running
//! gateway sees each change at once; every change goes to the audit trail.

mod links;
mod listing;
mod purge;

use std::time::SystemTime;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use squidbot_core::clock::{from_unix_millis, unix_millis, unix_seconds};
use squidbot_core::people::tokens::{new_token, token_hash};
use squidbot_core::people::{Directory, People, RoleBook};
use squidbot_core::random::SystemRandom;
use squidbot_store::{ChannelAccessStore, SqliteChannelAccess, check_user_id};
use squidbot_types::config::Config;
use squidbot_types::people::{ADMIN, AuditKind, BudgetLimits, User};

use crate::cli::{BudgetArgs, UsersAction};
use crate::people::{PeopleDatabase, unconfined_exec};
use crate::wiring::Environment;

/// Who the audit trail names for changes made here.
const CLI_ACTOR: &str = "cli";

/// `time` in this machine's zone, to the minute.
fn local_time(time: SystemTime) -> String {
    jiff::Timestamp::from_second(unix_seconds(time))
        .map(|stamp| stamp.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// `millis` (since the Unix epoch) in this machine's zone, to the minute.
pub(super) fn local_time_ms(millis: i64) -> String {
    local_time(from_unix_millis(millis))
}

/// What every `users` action works with.
struct Users<'a> {
    environment: &'a Environment,
    database: PeopleDatabase,
    people: People,
    access: SqliteChannelAccess,
}

impl<'a> Users<'a> {
    fn open(environment: &'a Environment) -> Result<Users<'a>> {
        let database = crate::people::open(environment)?;
        let people = database.policy(environment.config());
        // The owner is the first user, whichever command comes first: users added before
        // them would leave the installation without its admin.
        if let Some(owner) = database.ensure_owner(environment.config(), &people)? {
            eprintln!(
                "note: made the first user, {} ({}), an admin whose memory context is {}",
                owner.id, owner.name, owner.context
            );
        }
        let access = SqliteChannelAccess::new(ChannelAccessStore::new(environment.database()?));
        Ok(Users { environment, database, people, access })
    }

    fn config(&self) -> &Config {
        self.environment.config()
    }

    /// The user `id`, or an error saying there is none.
    fn user(&self, id: &str) -> Result<User> {
        match self.database.directory.user(id)? {
            Some(user) => Ok(user),
            None => bail!("can't find the user {id:?}: there is no such user (`squidbot users list` shows them)"),
        }
    }

    /// Refuses a people's role `user` may not be given: one that does not exist, or one
    /// whose commands would run unconfined.
    fn check_role(&self, user: &User) -> Result<()> {
        let book = RoleBook::new(&self.config().user_roles);
        if !book.has(&user.role) {
            let names: Vec<&str> = book.names().collect();
            bail!(
                "can't give {} the role {:?}: there is no such people's role (the people's roles are {}; these are \
                 people's roles from [user_roles], not the agent roles of [agents])",
                user.id,
                user.role,
                names.join(", ")
            );
        }
        if let Some(problem) =
            unconfined_exec(self.config(), self.config().sandbox.backend, std::slice::from_ref(user)).first()
        {
            bail!("can't give {} the people's role `{}`: {problem}", user.id, user.role);
        }
        Ok(())
    }

    /// Writes a change made here to the audit trail.
    fn audit(&self, kind: AuditKind, subject: &str, detail: Value) {
        self.people.audit_as(kind, CLI_ACTOR, subject, true, detail);
    }
}

fn now_ms() -> i64 {
    unix_millis(SystemTime::now())
}

/// Runs a `squidbot users …` action.
pub fn run(environment: &Environment, action: UsersAction) -> Result<()> {
    let users = Users::open(environment)?;
    match action {
        UsersAction::List(flags) => listing::list(&users, flags.json),
        UsersAction::Show { user, json } => listing::show(&users, &user, json),
        UsersAction::Add { id, role, name } => add(&users, &id, &role, name),
        UsersAction::Role { user, role } => change_role(&users, &user, &role),
        UsersAction::Disable { user } => switch(&users, &user, Switch::Disable),
        UsersAction::Enable { user } => switch(&users, &user, Switch::Enable),
        UsersAction::Link { user, identity } => links::link(&users, &user, &identity),
        UsersAction::Unlink { identity } => links::unlink(&users, &identity),
        UsersAction::Token { user } => token(&users, &user),
        UsersAction::Budget(arguments) => budget(&users, &arguments),
        UsersAction::Approve { code, user, new, role } => {
            let target = match (user, new, role) {
                (Some(user), _, _) => links::PairingTarget::Existing(user),
                (None, Some(id), Some(role)) => links::PairingTarget::New { id, role },
                (None, Some(_), None) => bail!("can't approve {code}: --new needs --role"),
                (None, None, _) => links::PairingTarget::Guest,
            };
            links::approve(&users, &code, target)
        }
        UsersAction::Revoke { sender } => links::revoke(&users, &sender),
        UsersAction::Purge { user, yes } => purge::purge(&users, &user, yes),
    }
}

/// A new user of `role` whose context is `user:<id>`, checked.
fn new_user(users: &Users<'_>, id: &str, role: &str, name: Option<String>) -> Result<User> {
    if let Err(reason) = check_user_id(id) {
        bail!("can't add the user {id:?}: {reason}");
    }
    if users.database.directory.user(id)?.is_some() {
        bail!("can't add the user {id}: there is already a user {id}");
    }
    let user = User {
        id: id.to_owned(),
        name: name.filter(|name| !name.trim().is_empty()).unwrap_or_else(|| id.to_owned()),
        role: role.to_owned(),
        context: format!("user:{id}"),
        created_ms: now_ms(),
        disabled: false,
        budget: BudgetLimits::default(),
    };
    users.check_role(&user)?;
    Ok(user)
}

/// Stores `user` (checked by [`new_user`]) and audits it.
fn store_user(users: &Users<'_>, user: &User, why: &str) -> Result<()> {
    users.database.directory.add_user(user)?;
    users.audit(
        AuditKind::UserChange,
        &user.id,
        json!({"action": "add", "name": user.name, "role": user.role, "context": user.context, "why": why}),
    );
    Ok(())
}

fn add(users: &Users<'_>, id: &str, role: &str, name: Option<String>) -> Result<()> {
    let user = new_user(users, id, role, name)?;
    store_user(users, &user, "users add")?;
    println!(
        "added {} ({}) with the people's role {}; their memory context is {}",
        user.id, user.name, user.role, user.context
    );
    println!(
        "next: `squidbot users link {} CHANNEL:ID` for their chat accounts, `squidbot users token {}` for the gateway",
        user.id, user.id
    );
    Ok(())
}

fn change_role(users: &Users<'_>, id: &str, role: &str) -> Result<()> {
    let user = users.user(id)?;
    let old = user.role.clone();
    let changed = User { role: role.to_owned(), ..user };
    users.check_role(&changed)?;
    if old == role {
        println!("{id} already has the people's role {role}");
        return Ok(());
    }
    users.database.directory.set_role(id, role)?;
    users.audit(AuditKind::RoleChange, id, json!({"old": old, "new": role}));
    println!("{id}: people's role {old} → {role}");
    if old == ADMIN && !any_enabled_admin(users)? {
        println!("note: no enabled admin is left, so nobody can decide approvals; give someone the role admin");
    }
    Ok(())
}

fn any_enabled_admin(users: &Users<'_>) -> Result<bool> {
    Ok(users.database.directory.users()?.iter().any(|user| user.role == ADMIN && !user.disabled))
}

/// `users disable` or `users enable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    Disable,
    Enable,
}

fn switch(users: &Users<'_>, id: &str, switch: Switch) -> Result<()> {
    let user = users.user(id)?;
    let (action, disabled) = match switch {
        Switch::Disable => ("disable", true),
        Switch::Enable => ("enable", false),
    };
    if user.disabled == disabled {
        println!("{id} is already {action}d");
        return Ok(());
    }
    if !disabled {
        // Enabling hands their role out again: the same checks as giving it.
        users.check_role(&User { disabled: false, ..user.clone() })?;
    }
    users.database.directory.set_disabled(id, disabled)?;
    users.audit(AuditKind::UserChange, id, json!({"action": action}));
    if disabled {
        println!("disabled {id}: nobody answers them and their gateway token is refused");
        if user.role == ADMIN && !any_enabled_admin(users)? {
            println!("note: no enabled admin is left, so nobody can decide approvals");
        }
    } else {
        println!("enabled {id}");
    }
    Ok(())
}

fn token(users: &Users<'_>, id: &str) -> Result<()> {
    let user = users.user(id)?;
    let token = new_token(&mut SystemRandom);
    users.database.directory.set_token_hash(&user.id, Some(&token_hash(&token)), now_ms())?;
    users.audit(AuditKind::UserChange, &user.id, json!({"action": "token"}));
    println!("{token}");
    eprintln!(
        "this is {}'s gateway token; it replaces any earlier one, and it can't be shown again (only its hash is kept)",
        user.id
    );
    Ok(())
}

/// A token limit as people read it.
fn tokens_text(limit: Option<u64>) -> String {
    limit.map_or_else(|| "none".to_owned(), |tokens| format!("{tokens} tokens"))
}

/// A cost limit as people read it.
fn cost_text(limit: Option<f64>) -> String {
    limit.map_or_else(|| "none".to_owned(), |cost| format!("{cost:.2}"))
}

/// The four limits of `budget`, one per line, each marked `(own)` or `(role)`.
fn budget_lines(own: &BudgetLimits, effective: &BudgetLimits) -> Vec<String> {
    let mark = |own_set: bool, effective_set: bool| match (own_set, effective_set) {
        (true, _) => " (own)",
        (false, true) => " (role)",
        (false, false) => "",
    };
    vec![
        format!(
            "daily tokens    {}{}",
            tokens_text(effective.daily_tokens),
            mark(own.daily_tokens.is_some(), effective.daily_tokens.is_some())
        ),
        format!(
            "monthly tokens  {}{}",
            tokens_text(effective.monthly_tokens),
            mark(own.monthly_tokens.is_some(), effective.monthly_tokens.is_some())
        ),
        format!(
            "daily cost      {}{}",
            cost_text(effective.daily_cost),
            mark(own.daily_cost.is_some(), effective.daily_cost.is_some())
        ),
        format!(
            "monthly cost    {}{}",
            cost_text(effective.monthly_cost),
            mark(own.monthly_cost.is_some(), effective.monthly_cost.is_some())
        ),
    ]
}

fn budget(users: &Users<'_>, arguments: &BudgetArgs) -> Result<()> {
    let user = users.user(&arguments.user)?;
    for (flag, cost) in [("--daily-cost", arguments.daily_cost), ("--monthly-cost", arguments.monthly_cost)] {
        if cost.is_some_and(|cost| !cost.is_finite() || cost < 0.0) {
            bail!("can't change the budget of {}: {flag} must be a number of 0 or more", user.id);
        }
    }
    let changes = arguments.clear
        || arguments.daily_tokens.is_some()
        || arguments.monthly_tokens.is_some()
        || arguments.daily_cost.is_some()
        || arguments.monthly_cost.is_some();
    let own = if arguments.clear {
        BudgetLimits::default()
    } else {
        BudgetLimits {
            daily_tokens: arguments.daily_tokens.or(user.budget.daily_tokens),
            monthly_tokens: arguments.monthly_tokens.or(user.budget.monthly_tokens),
            daily_cost: arguments.daily_cost.or(user.budget.daily_cost),
            monthly_cost: arguments.monthly_cost.or(user.budget.monthly_cost),
        }
    };
    if changes && own != user.budget {
        users.database.directory.set_budget(&user.id, &own)?;
        users.audit(AuditKind::UserChange, &user.id, json!({"action": "budget", "old": user.budget, "new": own}));
    }
    let policy = RoleBook::new(&users.config().user_roles).policy(&user.role).clone();
    let effective = squidbot_core::people::budget::effective(&own, &policy.budget);
    println!("budget of {} (people's role {}; UTC days and months)", user.id, user.role);
    for line in budget_lines(&own, &effective) {
        println!("  {line}");
    }
    if !policy.budget_applies {
        println!(
            "note: the people's role {} is exempt from budgets (set budget_applies = true to change that)",
            user.role
        );
    }
    Ok(())
}
