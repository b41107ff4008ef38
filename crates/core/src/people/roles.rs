//! People's roles as policies: what the agents may do for someone of each role. The
//! built-in roles have defaults a `[user_roles.<name>]` table changes key by key; a role
//! of your own starts from nothing allowed.
//!
//! These are people's roles. The agent roles of `[agents.<role>]` (assistant, worker, …)
//! are a different thing: a person's role limits every agent working for them.

use std::collections::BTreeMap;

use squidbot_types::config::UserRoleConfig;
use squidbot_types::people::{ADMIN, BudgetLimits, CHILD, GUEST, USER};
use squidbot_types::sandbox::SandboxBackend;

use super::glob::matches;
use crate::delegation::roles as agent_roles;

/// Tools that only move work between the agents (hand-over, progress): every role holds
/// them; what the sub-agents then do is checked on their own calls.
pub const PLUMBING: [&str; 4] =
    [agent_roles::DELEGATE, agent_roles::SPAWN, agent_roles::CANCEL_WORKER, agent_roles::SET_STATUS];

/// Memory tools that change something.
const MEMORY_CHANGES: [&str; 3] = ["memory_save", "memory_delete", "memory_write"];
/// Scheduled-job tools that change something.
const SCHEDULE_CHANGES: [&str; 4] = ["cron_add", "cron_remove", "cron_pause", "cron_resume"];

/// What someone of one people's role may have done for them.
#[derive(Debug, Clone, PartialEq)]
pub struct RolePolicy {
    /// The role's name.
    pub name: String,
    /// Tools allowed (names, globs, `mcp`); `None`: every tool.
    pub tools: Option<Vec<String>>,
    /// MCP servers allowed; `None`: every one.
    pub mcp_servers: Option<Vec<String>>,
    /// Sandbox backend for its commands (`None`: the configured one).
    pub sandbox: Option<SandboxBackend>,
    /// May change long-term memory.
    pub memory: bool,
    /// May change scheduled jobs.
    pub schedule: bool,
    /// May install skills.
    pub install_skills: bool,
    /// May be sent files.
    pub send_files: bool,
    /// May use the web.
    pub web: bool,
    /// Models allowed (`provider/model`, globs); `None`: every one.
    pub models: Option<Vec<String>>,
    /// Agent roles its assistant may hand work to; `None`: every one.
    pub agents: Option<Vec<String>>,
    /// The role's budget.
    pub budget: BudgetLimits,
    /// Whether budgets apply.
    pub budget_applies: bool,
}

fn names(list: &[&str]) -> Option<Vec<String>> {
    Some(list.iter().map(|name| (*name).to_owned()).collect())
}

impl RolePolicy {
    /// The defaults of a built-in role, or of a role of your own (nothing allowed).
    pub fn default_for(name: &str) -> RolePolicy {
        let everything = RolePolicy {
            name: name.to_owned(),
            tools: None,
            mcp_servers: None,
            sandbox: None,
            memory: true,
            schedule: true,
            install_skills: true,
            send_files: true,
            web: true,
            models: None,
            agents: None,
            budget: BudgetLimits::default(),
            budget_applies: true,
        };
        match name {
            ADMIN => RolePolicy { budget_applies: false, ..everything },
            USER => RolePolicy { install_skills: false, ..everything },
            CHILD => RolePolicy {
                tools: names(&[
                    "read_file",
                    "list_dir",
                    "grep",
                    "find",
                    "web_search",
                    "web_fetch",
                    "memory_recall",
                    "memory_save",
                ]),
                mcp_servers: Some(Vec::new()),
                schedule: false,
                install_skills: false,
                send_files: false,
                ..everything
            },
            GUEST => RolePolicy {
                tools: names(&["read_file", "list_dir", "grep", "find", "web_search", "web_fetch", "memory_recall"]),
                mcp_servers: Some(Vec::new()),
                memory: false,
                schedule: false,
                install_skills: false,
                send_files: false,
                ..everything
            },
            _ => RolePolicy {
                tools: Some(Vec::new()),
                mcp_servers: Some(Vec::new()),
                memory: false,
                schedule: false,
                install_skills: false,
                send_files: false,
                web: false,
                ..everything
            },
        }
    }

    /// The defaults of `name` changed by its `[user_roles.<name>]` table.
    pub fn configured(name: &str, config: &UserRoleConfig) -> RolePolicy {
        let mut policy = RolePolicy::default_for(name);
        if let Some(tools) = &config.tools {
            policy.tools = Some(tools.clone());
        }
        if let Some(servers) = &config.mcp_servers {
            policy.mcp_servers = Some(servers.clone());
        }
        if config.sandbox.is_some() {
            policy.sandbox = config.sandbox;
        }
        let flags = [
            (config.memory, &mut policy.memory),
            (config.schedule, &mut policy.schedule),
            (config.install_skills, &mut policy.install_skills),
            (config.send_files, &mut policy.send_files),
            (config.web, &mut policy.web),
            (config.budget_applies, &mut policy.budget_applies),
        ];
        for (value, slot) in flags {
            if let Some(value) = value {
                *slot = value;
            }
        }
        if let Some(models) = &config.models {
            policy.models = Some(models.clone());
        }
        if let Some(agents) = &config.agents {
            policy.agents = Some(agents.clone());
        }
        let budget = BudgetLimits {
            daily_tokens: config.budget_daily_tokens,
            monthly_tokens: config.budget_monthly_tokens,
            daily_cost: config.budget_daily_cost,
            monthly_cost: config.budget_monthly_cost,
        };
        if !budget.is_empty() {
            policy.budget = budget;
        }
        policy
    }

    /// Why `tool` may not run for this role, or `None` when it may.
    pub fn refuses_tool(&self, tool: &str) -> Option<String> {
        if PLUMBING.contains(&tool) {
            return None;
        }
        let role = &self.name;
        let capability = if MEMORY_CHANGES.contains(&tool) && !self.memory {
            Some("change long-term memory")
        } else if SCHEDULE_CHANGES.contains(&tool) && !self.schedule {
            Some("schedule jobs")
        } else if tool == agent_roles::SEND_FILE && !self.send_files {
            Some("be sent files")
        } else if agent_roles::WEB.contains(&tool) && !self.web {
            Some("use the web")
        } else {
            None
        };
        if let Some(capability) = capability {
            return Some(format!("the people's role `{role}` may not {capability}, so `{tool}` is not allowed"));
        }
        if let Some((server, _)) = tool.split_once("__")
            && let Some(servers) = &self.mcp_servers
            && !servers.iter().any(|allowed| allowed == server)
        {
            return Some(format!("the people's role `{role}` may not use the MCP server `{server}`"));
        }
        match &self.tools {
            None => None,
            Some(allowed) if allowed.iter().any(|entry| tool_entry_matches(entry, tool)) => None,
            Some(_) => Some(format!("the people's role `{role}` may not use the tool `{tool}`")),
        }
    }

    /// Whether this role may choose `model` (`provider/model`).
    pub fn allows_model(&self, model: &str) -> bool {
        self.models.as_ref().is_none_or(|allowed| allowed.iter().any(|pattern| matches(pattern, model)))
    }

    /// Whether this role's assistant may hand work to the agent role `agent`.
    pub fn allows_agent(&self, agent: &str) -> bool {
        self.agents.as_ref().is_none_or(|allowed| allowed.iter().any(|name| name == agent))
    }

    /// Whether this role may run `exec` at all.
    pub fn may_exec(&self) -> bool {
        self.refuses_tool(agent_roles::EXEC).is_none()
    }
}

/// Whether an allowlist entry (`read_file`, `cron_*`, `mcp`, `files__*`) covers `tool`.
fn tool_entry_matches(entry: &str, tool: &str) -> bool {
    if entry == agent_roles::MCP_TOOLS {
        return tool.contains("__");
    }
    matches(entry, tool)
}

/// Every people's role: the built-in ones and those of `[user_roles.*]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleBook {
    roles: BTreeMap<String, RolePolicy>,
    /// What an unknown role gets.
    guest: RolePolicy,
}

impl Default for RoleBook {
    fn default() -> Self {
        RoleBook::new(&BTreeMap::new())
    }
}

impl RoleBook {
    /// The built-in roles changed by `config`, and the roles it adds.
    pub fn new(config: &BTreeMap<String, UserRoleConfig>) -> RoleBook {
        let mut roles = BTreeMap::new();
        for name in squidbot_types::people::BUILT_IN_ROLES {
            roles.insert(name.to_owned(), RolePolicy::default_for(name));
        }
        for (name, table) in config {
            roles.insert(name.clone(), RolePolicy::configured(name, table));
        }
        let guest = roles.get(GUEST).cloned().unwrap_or_else(|| RolePolicy::default_for(GUEST));
        RoleBook { roles, guest }
    }

    /// The policy of `role`; an unknown role (one removed from the config) is treated
    /// as a guest, never as more.
    pub fn policy(&self, role: &str) -> &RolePolicy {
        self.roles.get(role).unwrap_or(&self.guest)
    }

    /// Whether `role` exists.
    pub fn has(&self, role: &str) -> bool {
        self.roles.contains_key(role)
    }

    /// Role names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.roles.keys().map(String::as_str)
    }

    /// Problems that must stop the gateway from starting: a role other than `admin` that
    /// may run `exec` while its commands would run unconfined (`default_backend` is the
    /// configured `[sandbox].backend`).
    pub fn startup_problems(&self, default_backend: SandboxBackend) -> Vec<String> {
        self.roles
            .values()
            .filter(|policy| policy.name != ADMIN && policy.may_exec())
            .filter(|policy| policy.sandbox.unwrap_or(default_backend) == SandboxBackend::None)
            .map(|policy| {
                format!(
                    "the people's role `{}` may use `exec` with sandbox `none`: only `admin` may run commands \
                     unconfined; set `[user_roles.{}] sandbox` to a confining backend or take `exec` from its `tools`",
                    policy.name, policy.name
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_roles_limit_what_they_should() {
        let book = RoleBook::default();
        assert_eq!(book.policy(ADMIN).refuses_tool("exec"), None);
        assert_eq!(book.policy(USER).refuses_tool("exec"), None);
        let child = book.policy(CHILD);
        assert!(child.refuses_tool("exec").unwrap().contains("may not use the tool `exec`"));
        assert!(child.refuses_tool("cron_add").unwrap().contains("schedule jobs"));
        assert!(child.refuses_tool("files__read").unwrap().contains("MCP server `files`"));
        assert_eq!(child.refuses_tool("delegate"), None, "hand-over is plumbing");
        assert_eq!(child.refuses_tool("web_search"), None);
        let guest = book.policy(GUEST);
        assert!(guest.refuses_tool("memory_save").unwrap().contains("change long-term memory"));
        assert!(guest.refuses_tool("send_file").unwrap().contains("be sent files"));
        assert_eq!(guest.refuses_tool("memory_recall"), None);
    }

    #[test]
    fn config_changes_built_in_roles_key_by_key_and_adds_roles() {
        let mut config = BTreeMap::new();
        config.insert(
            "child".to_owned(),
            UserRoleConfig {
                tools: Some(vec!["read_file".into()]),
                budget_daily_tokens: Some(50),
                ..Default::default()
            },
        );
        config.insert(
            "helper".to_owned(),
            UserRoleConfig {
                tools: Some(vec!["cron_*".into(), "mcp".into()]),
                schedule: Some(true),
                ..Default::default()
            },
        );
        let book = RoleBook::new(&config);
        let child = book.policy(CHILD);
        assert!(child.refuses_tool("web_search").is_some());
        assert_eq!(child.budget.daily_tokens, Some(50));
        assert!(child.web, "unset keys keep their defaults");
        let helper = book.policy("helper");
        assert_eq!(helper.refuses_tool("cron_add"), None);
        assert!(helper.refuses_tool("read_file").is_some());
        assert!(
            helper.refuses_tool("files__read").unwrap().contains("MCP server"),
            "a custom role starts with no servers"
        );
        assert!(book.policy("removed-role").refuses_tool("exec").is_some(), "unknown roles are guests");
    }

    #[test]
    fn exec_unconfined_is_refused_for_every_role_but_admin() {
        let book = RoleBook::default();
        let problems = book.startup_problems(SandboxBackend::None);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("`user`"));
        assert!(book.startup_problems(SandboxBackend::Landlock).is_empty());
        let mut config = BTreeMap::new();
        config.insert(
            "user".to_owned(),
            UserRoleConfig { sandbox: Some(SandboxBackend::Bubblewrap), ..Default::default() },
        );
        assert!(RoleBook::new(&config).startup_problems(SandboxBackend::None).is_empty());
    }

    #[test]
    fn models_and_agent_roles_follow_their_lists() {
        let mut config = BTreeMap::new();
        config.insert(
            "user".to_owned(),
            UserRoleConfig {
                models: Some(vec!["local/*".into()]),
                agents: Some(vec!["researcher".into()]),
                ..Default::default()
            },
        );
        let book = RoleBook::new(&config);
        let user = book.policy(USER);
        assert!(user.allows_model("local/small"));
        assert!(!user.allows_model("openai/gpt-5"));
        assert!(user.allows_agent("researcher"));
        assert!(!user.allows_agent("coder"));
        assert!(book.policy(ADMIN).allows_model("openai/gpt-5"));
    }
}
