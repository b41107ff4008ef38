//! People's roles, approvals and prices from the config: their checks, and the people's
//! policy built over the database for the gateway and the CLI.
//!
//! People's roles (`[user_roles.<name>]`) are not agent roles (`[agents.<role>]`): every
//! message here says "people's role" or "agent role".

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use serde_json::json;
use squidbot_core::clock::{SystemClock, unix_millis};
use squidbot_core::delegation::roles as agent_roles;
use squidbot_core::people::{Directory, OWNER_CONTEXT, People, PeopleSettings, PeopleStores, RoleBook};
use squidbot_llm::ConfigIssue;
use squidbot_store::{Database, SqliteApprovals, SqliteAudit, SqliteDirectory, SqliteUsage, load_or_create_audit_key};
use squidbot_types::config::Config;
use squidbot_types::people::{ADMIN, AuditKind, BUILT_IN_ROLES, Identity, User};
use squidbot_types::sandbox::SandboxBackend;

use crate::wiring::Environment;

/// The people's stores over the database, and the audit key.
#[derive(Clone)]
pub struct PeopleDatabase {
    /// Users, identities and tokens.
    pub directory: SqliteDirectory,
    /// The usage ledger.
    pub usage: SqliteUsage,
    /// The audit trail.
    pub audit: SqliteAudit,
    /// Approval requests.
    pub approvals: SqliteApprovals,
    /// The audit key (from `$SQUIDBOT_HOME/audit.key`).
    pub key: Vec<u8>,
}

/// The audit key's file name in `$SQUIDBOT_HOME`: beside the database, out of every
/// command's reach.
const AUDIT_KEY_FILE: &str = "audit.key";

impl std::fmt::Debug for PeopleDatabase {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        formatter.debug_struct("PeopleDatabase").finish_non_exhaustive()
    }
}

/// Opens the people's stores (creating the audit key on first use).
pub fn open(environment: &Environment) -> Result<PeopleDatabase> {
    open_at(&environment.paths.home, environment.database()?)
}

/// [`open`] for commands that run without an [`Environment`] (the `secrets` commands,
/// which must work while the config names a secret not stored yet).
pub fn open_at(home: &Path, database: Database) -> Result<PeopleDatabase> {
    let key_path = home.join(AUDIT_KEY_FILE);
    let key = load_or_create_audit_key(&key_path)
        .map_err(|error| anyhow::anyhow!("{error}"))
        .with_context(|| format!("the audit key {}", key_path.display()))?;
    Ok(PeopleDatabase {
        directory: SqliteDirectory::new(database.clone()),
        usage: SqliteUsage::new(database.clone()),
        audit: SqliteAudit::new(database.clone(), &key),
        approvals: SqliteApprovals::new(database),
        key,
    })
}

impl PeopleDatabase {
    /// The people's policy of `config` over these stores.
    pub fn policy(&self, config: &Config) -> People {
        let stores = PeopleStores {
            directory: Arc::new(self.directory.clone()),
            usage: Arc::new(self.usage.clone()),
            audit: Arc::new(self.audit.clone()),
            approvals: Arc::new(self.approvals.clone()),
        };
        People::new(PeopleSettings::from_config(config), stores, Arc::new(SystemClock))
            .with_leak_scanner(squidbot_core::leaks::LeakScanner::new(crate::config::secret_values(config)))
    }

    /// Makes sure the person who onboarded is a user: when there is none yet, an `admin`
    /// whose context is `owner` (so their memories, sessions, jobs and approved senders
    /// stay theirs) with every channel's `owners` linked. Returns them when made now.
    pub fn ensure_owner(&self, config: &Config, people: &People) -> Result<Option<User>> {
        if !self.directory.users().map_err(|error| anyhow::anyhow!(error))?.is_empty() {
            return Ok(None);
        }
        let name = std::env::var("USER").ok().filter(|name| !name.trim().is_empty()).unwrap_or_else(|| "Owner".into());
        let now = unix_millis(std::time::SystemTime::now());
        let owner = User {
            id: "owner".into(),
            name,
            role: ADMIN.into(),
            context: OWNER_CONTEXT.into(),
            created_ms: now,
            disabled: false,
            budget: Default::default(),
        };
        self.directory.add_user(&owner).map_err(|error| anyhow::anyhow!(error))?;
        let mut linked = Vec::new();
        for (channel, settings) in &config.channels {
            for id in &settings.owners {
                let identity = Identity { channel: channel.clone(), sender_id: id.clone() };
                match self.directory.link(&owner.id, &identity, now) {
                    Ok(_) => linked.push(identity.to_string()),
                    Err(error) => tracing::warn!(%error, "can't link an owner id to the first admin"),
                }
            }
        }
        people.audit_as(
            AuditKind::UserChange,
            "system",
            &owner.id,
            true,
            json!({"action": "add", "role": ADMIN, "context": OWNER_CONTEXT, "linked": linked, "why": "the first admin"}),
        );
        Ok(Some(owner))
    }
}

/// Whether `name` is a usable people's role name: lower-case letters, digits, `-`, `_`.
fn valid_role_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|character| character.is_ascii_lowercase() || character.is_ascii_digit() || "-_".contains(character))
}

/// Whether a tool entry of a people's role or an approval rule names something real: a
/// tool, `mcp`, an MCP glob (`files__*`), a glob over tool names or `@changing`.
fn known_tool_entry(entry: &str, approvals: bool) -> bool {
    (approvals && (entry == squidbot_core::people::rules::CHANGING || entry == "*"))
        || entry.contains('*')
        || entry.contains("__")
        || agent_roles::known_tools().contains(&entry)
}

/// Problems of `[user_roles]`, `[approvals]`, `[prices]` and `[audit]`.
pub fn issues(config: &Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut issue = |key: String, problem: String| issues.push(ConfigIssue { key, problem });
    let agent_role_names = crate::agents::names(config);
    for (name, role) in &config.user_roles {
        let key = format!("user_roles.{name}");
        if !valid_role_name(name) {
            issue(key.clone(), "a people's role name is 1 to 32 lower-case letters, digits, `-` or `_`".into());
        }
        if agent_role_names.contains(name) {
            issue(
                key.clone(),
                format!(
                    "`{name}` is an agent role ([agents.{name}]); give the people's role another name so the two are never confused"
                ),
            );
        }
        for (index, tool) in role.tools.iter().flatten().enumerate() {
            if !known_tool_entry(tool, false) {
                issue(format!("{key}.tools[{index}]"), format!("no tool is called `{tool}`"));
            }
        }
        for (index, model) in role.models.iter().flatten().enumerate() {
            if !model.contains('/') {
                issue(
                    format!("{key}.models[{index}]"),
                    format!("{model:?} is not provider/model (globs allowed: local/*)"),
                );
            }
        }
        for (index, agent) in role.agents.iter().flatten().enumerate() {
            if !agent_role_names.contains(agent) {
                issue(format!("{key}.agents[{index}]"), format!("no agent role is called `{agent}`"));
            }
        }
        for (field, cost) in
            [("budget_daily_cost", role.budget_daily_cost), ("budget_monthly_cost", role.budget_monthly_cost)]
        {
            if cost.is_some_and(|cost| !cost.is_finite() || cost < 0.0) {
                issue(format!("{key}.{field}"), "must be a number of 0 or more".into());
            }
        }
    }
    let book = RoleBook::new(&config.user_roles);
    if config.approvals.timeout_secs == 0 {
        issue("approvals.timeout_secs".into(), "must be at least 1".into());
    }
    for (index, rule) in config.approvals.rules.iter().flatten().enumerate() {
        let key = format!("approvals.rules[{index}]");
        for role in &rule.roles {
            if !book.has(role) {
                issue(
                    format!("{key}.roles"),
                    format!("no people's role is called `{role}` (built in: {})", BUILT_IN_ROLES.join(", ")),
                );
            }
        }
        if rule.tools.is_empty() {
            issue(format!("{key}.tools"), "name at least one tool, a glob such as cron_*, or @changing".into());
        }
        for tool in &rule.tools {
            if !known_tool_entry(tool, true) {
                issue(format!("{key}.tools"), format!("no tool is called `{tool}`"));
            }
        }
    }
    for (model, price) in &config.prices {
        let key = format!("prices.\"{model}\"");
        if !model.contains('/') {
            issue(key.clone(), "price keys are provider/model".into());
        }
        let values = [Some(price.input), Some(price.output), price.cache_read, price.cache_write];
        if values.into_iter().flatten().any(|value| !value.is_finite() || value < 0.0) {
            issue(key, "prices are numbers of 0 or more (per million tokens)".into());
        }
    }
    issues
}

/// Why the gateway must not start: a person whose people's role may run `exec` while
/// commands would run unconfined (`backend` is the sandbox backend in force). Roles
/// nobody holds don't stop it; `users add` and `users role` refuse to hand them out.
pub fn unconfined_exec(
    config: &Config,
    backend: SandboxBackend,
    users: &[squidbot_types::people::User],
) -> Vec<String> {
    let book = RoleBook::new(&config.user_roles);
    let problems = book.startup_problems(backend);
    users
        .iter()
        .filter(|user| !user.disabled)
        .filter_map(|user| {
            let opening = format!("the people's role `{}` ", user.role);
            problems
                .iter()
                .find(|problem| problem.starts_with(&opening))
                .map(|problem| format!("{} ({}): {problem}", user.id, user.role))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use squidbot_types::config::{ApprovalRule, UserRoleConfig};

    use super::*;

    fn keys(config: &Config) -> Vec<String> {
        issues(config).into_iter().map(|issue| issue.key).collect()
    }

    #[test]
    fn the_defaults_are_fine() {
        assert!(issues(&Config::default()).is_empty(), "{:?}", issues(&Config::default()));
    }

    #[test]
    fn bad_roles_rules_and_prices_are_named() {
        let mut config = Config::default();
        config.user_roles.insert(
            "worker".into(),
            UserRoleConfig { tools: Some(vec!["exec".into(), "exce".into()]), ..Default::default() },
        );
        config.user_roles.insert(
            "Teen".into(),
            UserRoleConfig {
                models: Some(vec!["gpt".into()]),
                agents: Some(vec!["nobody".into()]),
                ..Default::default()
            },
        );
        config.approvals.rules =
            Some(vec![ApprovalRule { roles: vec!["martian".into()], tools: vec![], ..Default::default() }]);
        config.prices.insert("gpt".into(), Default::default());
        let found = keys(&config);
        for expected in [
            "user_roles.worker",
            "user_roles.worker.tools[1]",
            "user_roles.Teen",
            "user_roles.Teen.models[0]",
            "user_roles.Teen.agents[0]",
            "approvals.rules[0].roles",
            "approvals.rules[0].tools",
            "prices.\"gpt\"",
        ] {
            assert!(found.contains(&expected.to_owned()), "{expected} missing from {found:?}");
        }
        let worker = issues(&config).into_iter().find(|issue| issue.key == "user_roles.worker").unwrap();
        assert!(worker.problem.contains("is an agent role"), "{}", worker.problem);
    }

    #[test]
    fn commands_unconfined_for_anyone_but_admins_are_refused() {
        let person = |id: &str, role: &str| squidbot_types::people::User {
            id: id.into(),
            name: id.into(),
            role: role.into(),
            context: format!("user:{id}"),
            created_ms: 0,
            disabled: false,
            budget: Default::default(),
        };
        let mut config = Config::default();
        let users = [person("ann", "admin"), person("bob", "user"), person("kim", "child")];
        let found = unconfined_exec(&config, SandboxBackend::None, &users);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("bob (user): the people's role `user` may use `exec` with sandbox `none`"));
        assert!(unconfined_exec(&config, SandboxBackend::Landlock, &users).is_empty());
        config
            .user_roles
            .insert("user".into(), UserRoleConfig { sandbox: Some(SandboxBackend::Landlock), ..Default::default() });
        assert!(unconfined_exec(&config, SandboxBackend::None, &users).is_empty());
        assert!(issues(&config).is_empty(), "the config itself is fine");
    }
}
