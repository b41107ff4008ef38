//! Which tool calls wait for an admin: `[[approvals.rules]]`, or the defaults.

use serde_json::Value;
use squidbot_types::config::{ApprovalRule, ApprovalsConfig};
use squidbot_types::people::{ADMIN, CHILD, USER};

use super::glob::matches;
use crate::delegation::roles as agent_roles;

/// A tool group in a rule: every tool that changes something.
pub const CHANGING: &str = "@changing";

/// The rules used when `[approvals] rules` is not set: `exec` for `user`, every changing
/// tool for `child`, `cron_add` and `send_file` for everyone but admins.
pub fn default_rules() -> Vec<ApprovalRule> {
    let rule = |roles: &[&str], tools: &[&str]| ApprovalRule {
        roles: roles.iter().map(|role| (*role).to_owned()).collect(),
        tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
        arguments: Default::default(),
    };
    vec![
        rule(&[USER], &[agent_roles::EXEC]),
        rule(&[CHILD], &[CHANGING]),
        rule(&[], &["cron_add", agent_roles::SEND_FILE]),
    ]
}

/// The approval rules in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRules {
    rules: Vec<ApprovalRule>,
}

impl ApprovalRules {
    /// The configured rules, or the defaults.
    pub fn new(config: &ApprovalsConfig) -> ApprovalRules {
        ApprovalRules { rules: config.rules.clone().unwrap_or_else(default_rules) }
    }

    /// The rule a call of `tool` (which `changes` something or not) with `arguments`
    /// by someone of `role` falls under, in words; `None` when it runs without asking.
    pub fn rule_for(&self, role: &str, tool: &str, changes: bool, arguments: &Value) -> Option<String> {
        if super::roles::PLUMBING.contains(&tool) {
            return None;
        }
        self.rules.iter().find(|rule| applies(rule, role, tool, changes, arguments)).map(describe)
    }

    /// Whether some rule names `admin`.
    pub fn names_admins(&self) -> bool {
        self.rules.iter().any(|rule| rule.roles.iter().any(|role| role == ADMIN))
    }
}

fn applies(rule: &ApprovalRule, role: &str, tool: &str, changes: bool, arguments: &Value) -> bool {
    let role_matches = if rule.roles.is_empty() { role != ADMIN } else { rule.roles.iter().any(|named| named == role) };
    let tool_matches =
        rule.tools.iter().any(|pattern| if pattern == CHANGING { changes } else { matches(pattern, tool) });
    role_matches
        && tool_matches
        && rule.arguments.iter().all(|(name, pattern)| {
            let text = match arguments.get(name) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => return false,
            };
            matches(pattern, &text)
        })
}

fn describe(rule: &ApprovalRule) -> String {
    let roles = if rule.roles.is_empty() { "everyone but admins".to_owned() } else { rule.roles.join(", ") };
    let mut text = format!("{} for {roles}", rule.tools.join(", "));
    if !rule.arguments.is_empty() {
        let arguments: Vec<String> =
            rule.arguments.iter().map(|(name, pattern)| format!("{name} = {pattern:?}")).collect();
        text.push_str(&format!(" when {}", arguments.join(" and ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_defaults_hold_exec_for_users_and_every_change_for_children() {
        let rules = ApprovalRules::new(&ApprovalsConfig::default());
        assert_eq!(rules.rule_for(USER, "exec", true, &json!({"command": "ls"})).as_deref(), Some("exec for user"));
        assert_eq!(rules.rule_for(ADMIN, "exec", true, &json!({})), None);
        assert!(rules.rule_for(CHILD, "write_file", true, &json!({})).is_some());
        assert_eq!(rules.rule_for(CHILD, "read_file", false, &json!({})), None);
        assert!(rules.rule_for(USER, "cron_add", true, &json!({})).unwrap().contains("everyone but admins"));
        assert_eq!(rules.rule_for(ADMIN, "cron_add", true, &json!({})), None, "admins wait only when named");
        assert_eq!(rules.rule_for(CHILD, "delegate", true, &json!({})), None, "hand-over never waits");
        assert!(!rules.names_admins());
    }

    #[test]
    fn argument_patterns_narrow_a_rule() {
        let config = ApprovalsConfig {
            rules: Some(vec![ApprovalRule {
                roles: vec![ADMIN.into(), USER.into()],
                tools: vec!["exec".into()],
                arguments: [("command".to_owned(), "git push*".to_owned())].into(),
            }]),
            ..ApprovalsConfig::default()
        };
        let rules = ApprovalRules::new(&config);
        assert!(rules.rule_for(USER, "exec", true, &json!({"command": "git push origin"})).is_some());
        assert!(rules.rule_for(ADMIN, "exec", true, &json!({"command": "git push"})).is_some());
        assert_eq!(rules.rule_for(USER, "exec", true, &json!({"command": "git status"})), None);
        assert_eq!(rules.rule_for(USER, "exec", true, &json!({})), None);
        assert!(rules.names_admins());
    }
}
