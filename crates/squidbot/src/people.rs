//! People's roles, approvals and prices from the config: their checks, and the people's
//! policy built over the database for the gateway and the CLI.
//!
//! People's roles (`[user_roles.<name>]`) are not agent roles (`[agents.<role>]`): every
//! message here says "people's role" or "agent role".

use squidbot_core::delegation::roles as agent_roles;
use squidbot_core::people::RoleBook;
use squidbot_llm::ConfigIssue;
use squidbot_types::config::Config;
use squidbot_types::people::BUILT_IN_ROLES;
use squidbot_types::sandbox::SandboxBackend;

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
