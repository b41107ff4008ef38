//! Agent roles from `[agents.<role>]`: what each role resolves to (model, turns, prompt
//! files, tool allowlist, timeout, sandbox) and the checks of those keys. The built-in
//! roles exist without a section; any other section defines a role starting from
//! `worker`'s defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use squidbot_core::context::PromptProfile;
use squidbot_core::delegation::roles;
use squidbot_llm::ConfigIssue;
use squidbot_types::config::{
    AgentConfig, AssistantMode, Config, DEFAULT_AGENT_TIMEOUT_SECS, DEFAULT_MAX_TURNS, DEFAULT_MAX_WORKERS, RoleSandbox,
};

/// One role with every setting resolved.
#[derive(Debug, Clone)]
pub struct Role {
    /// Model calls per turn.
    pub max_turns: u32,
    /// Tools it may see (before `set_status`, which every sub-agent gets).
    pub tools: Vec<String>,
    /// How long one of its workers may run.
    pub timeout: Duration,
    /// Its own sandbox policy, if it has one.
    pub sandbox: Option<RoleSandbox>,
    /// Prompt profile without the role notes the wiring adds.
    pub profile: PromptProfile,
}

/// Every role: the built-in ones, then the user-defined ones, sorted.
pub fn names(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = roles::BUILT_IN.iter().map(|name| (*name).to_owned()).collect();
    names.extend(config.agents.keys().filter(|name| !roles::BUILT_IN.contains(&name.as_str())).cloned());
    names
}

/// The assistant's mode.
pub fn assistant_mode(config: &Config) -> AssistantMode {
    config.agents.get(roles::ASSISTANT).and_then(|agent| agent.mode).unwrap_or_default()
}

/// Sub-agents one session may run at once.
pub fn max_workers(config: &Config) -> usize {
    config.agents.get(roles::ASSISTANT).and_then(|agent| agent.max_workers).unwrap_or(DEFAULT_MAX_WORKERS)
}

/// Resolves `name` (its model is chosen by the caller: overrides apply to it).
pub fn resolve(config: &Config, name: &str, workspace: &Path) -> Result<Role> {
    let empty = AgentConfig::default();
    let agent = config.agents.get(name).unwrap_or(&empty);
    let assistant = name == roles::ASSISTANT;
    let tools = match &agent.tools {
        Some(tools) => tools.clone(),
        None => roles::default_tools(name, assistant_mode(config) == AssistantMode::Direct)
            .into_iter()
            .map(str::to_owned)
            .collect(),
    };
    let mut profile = if assistant { PromptProfile::default() } else { PromptProfile::sub_agent(name) };
    if let Some(bootstrap) = &agent.bootstrap {
        profile.bootstrap.clone_from(bootstrap);
    }
    if let Some(file) = &agent.system_prompt_file {
        let path = prompt_file_path(workspace, file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("agents.{name}.system_prompt_file: can't read {}", path.display()))?;
        profile.appended.push(text);
    }
    if let Some(text) = &agent.system_prompt {
        profile.appended.push(text.clone());
    }
    if agent.max_turns == Some(0) {
        bail!("agents.{name}.max_turns: must be at least 1");
    }
    Ok(Role {
        max_turns: agent.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
        tools,
        timeout: Duration::from_secs(agent.timeout_secs.unwrap_or(DEFAULT_AGENT_TIMEOUT_SECS).max(1)),
        sandbox: agent.sandbox.clone(),
        profile,
    })
}

/// Where a `system_prompt_file` lives: absolute, `~/`-relative, or under the workspace.
pub fn prompt_file_path(workspace: &Path, file: &str) -> PathBuf {
    let expanded = crate::paths::expand_tilde(file);
    if expanded.is_absolute() { expanded } else { workspace.join(expanded) }
}

/// Problems with `[agents.*]`, each naming its key.
pub fn issues(config: &Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut issue = |key: String, problem: String| issues.push(ConfigIssue { key, problem });
    let servers: Vec<&str> = config.mcp.servers.keys().map(String::as_str).collect();
    for (name, agent) in &config.agents {
        let assistant = name == roles::ASSISTANT;
        if name.is_empty()
            || !name
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-')
        {
            issue(format!("agents.{name}"), "role names use a-z, 0-9, `_` and `-` only".into());
        }
        if let Some(tools) = &agent.tools {
            for (index, tool) in tools.iter().enumerate() {
                let key = format!("agents.{name}.tools[{index}]");
                if !roles::is_known_tool(tool, &servers) {
                    issue(
                        key,
                        format!(
                            "unknown tool {tool:?}; known: {}, or <server>__<tool> of an [mcp.servers] entry",
                            roles::known_tools().join(", ")
                        ),
                    );
                } else if !assistant && roles::ASSISTANT_ONLY.contains(&tool.as_str()) {
                    issue(key, format!("{tool} is for the assistant only: sub-agents don't start sub-agents"));
                } else if assistant && tool == roles::SET_STATUS {
                    issue(key, "set_status is for sub-agents; the assistant reports to the user directly".into());
                }
            }
        }
        if !assistant && agent.mode.is_some() {
            issue(format!("agents.{name}.mode"), "only agents.assistant has a mode".into());
        }
        if !assistant && agent.max_workers.is_some() {
            issue(format!("agents.{name}.max_workers"), "only agents.assistant has max_workers".into());
        }
        if agent.max_workers == Some(0) {
            issue(format!("agents.{name}.max_workers"), "must be at least 1".into());
        }
        if agent.timeout_secs == Some(0) {
            issue(format!("agents.{name}.timeout_secs"), "must be at least 1".into());
        }
        if let Some(bootstrap) = &agent.bootstrap {
            for (index, file) in bootstrap.iter().enumerate() {
                if file.trim().is_empty() || Path::new(file).is_absolute() || file.split('/').any(|part| part == "..") {
                    issue(
                        format!("agents.{name}.bootstrap[{index}]"),
                        format!("{file:?} must name a file inside the workspace, such as AGENTS.md"),
                    );
                }
            }
        }
    }
    issues
}

/// `system_prompt_file`s that don't exist (relative ones are looked up in `workspace`).
pub fn prompt_file_issues(config: &Config, workspace: &Path) -> Vec<ConfigIssue> {
    config
        .agents
        .iter()
        .filter_map(|(name, agent)| {
            let path = prompt_file_path(workspace, agent.system_prompt_file.as_deref()?);
            (!path.is_file()).then(|| ConfigIssue {
                key: format!("agents.{name}.system_prompt_file"),
                problem: format!("{} does not exist", path.display()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_text: &str) -> Config {
        toml::from_str(toml_text).expect("config")
    }

    #[test]
    fn built_in_roles_exist_without_config_and_user_roles_join_them() {
        let config = config("[agents.translator]\nsystem_prompt = \"Translate.\"\n");
        assert_eq!(names(&config), ["assistant", "worker", "researcher", "coder", "memory", "heartbeat", "translator"]);
        let workspace = Path::new("/nonexistent");
        let translator = resolve(&config, "translator", workspace).unwrap();
        assert_eq!(translator.tools, roles::default_tools(roles::WORKER, false));
        assert_eq!(translator.profile.bootstrap, squidbot_core::context::SUB_AGENT_BOOTSTRAP_FILES);
        assert_eq!(translator.profile.appended, ["Translate."]);
        assert_eq!(translator.timeout, Duration::from_secs(300));
        let assistant = resolve(&config, "assistant", workspace).unwrap();
        assert!(assistant.tools.contains(&"delegate".to_owned()));
        assert_eq!(assistant.profile.bootstrap.len(), 7);
    }

    #[test]
    fn bad_allowlists_and_misplaced_keys_are_named() {
        let config = config(
            "[agents.researcher]\ntools = [\"read_file\", \"rm_rf\", \"delegate\"]\nmode = \"direct\"\ntimeout_secs = 0\n\
             [agents.assistant]\ntools = [\"set_status\"]\nmax_workers = 0\n[agents.\"Bad Name\"]\n",
        );
        let keys: Vec<String> = issues(&config).into_iter().map(|issue| issue.key).collect();
        assert_eq!(
            keys,
            [
                "agents.Bad Name",
                "agents.assistant.tools[0]",
                "agents.assistant.max_workers",
                "agents.researcher.tools[1]",
                "agents.researcher.tools[2]",
                "agents.researcher.mode",
                "agents.researcher.timeout_secs",
            ]
        );
    }

    #[test]
    fn a_role_sandbox_is_a_backend_name_or_a_whole_policy() {
        let config = config(
            "[agents.coder]\nsandbox = \"none\"\n[agents.researcher.sandbox]\nnetwork = true\nbackend = \"landlock\"\n",
        );
        let coder = resolve(&config, "coder", Path::new("/nonexistent")).unwrap();
        assert_eq!(coder.sandbox, Some(RoleSandbox::Backend(squidbot_types::sandbox::SandboxBackend::None)));
        let Some(RoleSandbox::Policy(policy)) =
            resolve(&config, "researcher", Path::new("/nonexistent")).unwrap().sandbox
        else {
            panic!("an inline policy");
        };
        assert!(policy.network);
        assert_eq!(policy.cpu_secs, squidbot_types::sandbox::SandboxConfig::default().cpu_secs);
        assert!(toml::from_str::<Config>("[agents.coder]\nsandbox = \"chroot\"\n").is_err());
    }

    #[test]
    fn a_missing_prompt_file_is_an_error_naming_the_key() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::write(directory.path().join("CODER.md"), "Write tests first.").unwrap();
        let config = config(
            "[agents.coder]\nsystem_prompt_file = \"CODER.md\"\nsystem_prompt = \"Be brief.\"\n\
             [agents.researcher]\nsystem_prompt_file = \"MISSING.md\"\n",
        );
        let issues = prompt_file_issues(&config, directory.path());
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, "agents.researcher.system_prompt_file");
        let coder = resolve(&config, "coder", directory.path()).unwrap();
        assert_eq!(coder.profile.appended, ["Write tests first.", "Be brief."]);
        let error = resolve(&config, "researcher", directory.path()).unwrap_err();
        assert!(error.to_string().starts_with("agents.researcher.system_prompt_file"), "{error}");
    }
}
