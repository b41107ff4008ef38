//! Loading `config.toml`: parse, apply `SQUIDBOT__SECTION__KEY` env overrides, check the
//! shape (errors name the key), resolve `"secret:NAME"` values from the vault, and the
//! cross-field rules.

pub mod vault;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use squidbot_core::duration::{BareNumber, parse_duration};
use squidbot_llm::{ConfigIssue, Router};
use squidbot_types::config::{Config, GatewayAuthConfig, GatewayAuthMode};

/// Prefix of environment overrides.
const ENV_PREFIX: &str = "SQUIDBOT__";

/// A loaded configuration and where its values came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The effective configuration.
    pub config: Config,
    /// True when the file existed.
    pub file_exists: bool,
    /// Keys set from the environment, dotted (`llm.model`).
    pub env_keys: Vec<String>,
}

/// Reads the config file (a missing file means all defaults), applies env overrides and
/// replaces every `"secret:NAME"` credential with its value from the vault.
pub fn load(path: &Path) -> Result<LoadedConfig> {
    let mut loaded = load_unresolved(path)?;
    vault::resolve(&mut loaded.config, path)?;
    Ok(loaded)
}

/// [`load`] without the vault: `"secret:NAME"` values stay as written (the `secrets`
/// commands must run while a referenced secret is still missing).
pub fn load_unresolved(path: &Path) -> Result<LoadedConfig> {
    let (mut table, file_exists) = match std::fs::read_to_string(path) {
        Ok(text) => {
            let table: toml::Table = toml::from_str(&text)
                .map_err(|error| anyhow!("can't read config {}: {}", path.display(), one_line(&error.to_string())))?;
            (table, true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => (toml::Table::new(), false),
        Err(error) => bail!("can't read config {}: {error}", path.display()),
    };
    let overrides = env_overrides(std::env::vars());
    let env_keys: Vec<String> = overrides.iter().map(|(key, _)| key.join(".")).collect();
    for (key, value) in &overrides {
        set_path(&mut table, key, typed_value(value))?;
    }
    let config = deserialize(table, &overrides, path)?;
    Ok(LoadedConfig { config, file_exists, env_keys })
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `SQUIDBOT__LLM__MODEL=x` → (["llm", "model"], "x").
fn env_overrides(vars: impl Iterator<Item = (String, String)>) -> Vec<(Vec<String>, String)> {
    let mut overrides: Vec<(Vec<String>, String)> = vars
        .filter_map(|(name, value)| {
            let rest = name.strip_prefix(ENV_PREFIX)?;
            let key: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
            (!key.iter().any(String::is_empty)).then_some((key, value))
        })
        .collect();
    overrides.sort();
    overrides
}

/// Reads an env value as TOML (numbers, booleans) or JSON (arrays, tables), else a string.
fn typed_value(raw: &str) -> toml::Value {
    let trimmed = raw.trim();
    if (trimmed.starts_with('[') || trimmed.starts_with('{'))
        && let Ok(json) = serde_json::from_str::<serde_json::Value>(trimmed)
        && let Ok(value) = toml::Value::try_from(json)
    {
        return value;
    }
    match toml::from_str::<toml::Table>(&format!("value = {trimmed}")) {
        Ok(mut table) => match table.remove("value") {
            Some(value @ (toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_))) => value,
            _ => toml::Value::String(raw.to_owned()),
        },
        Err(_) => toml::Value::String(raw.to_owned()),
    }
}

fn set_path(table: &mut toml::Table, key: &[String], value: toml::Value) -> Result<()> {
    let Some((last, parents)) = key.split_last() else { return Ok(()) };
    let mut current = table;
    for (depth, part) in parents.iter().enumerate() {
        let entry = current.entry(part.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = match entry {
            toml::Value::Table(inner) => inner,
            _ => bail!(
                "can't apply {ENV_PREFIX}{}: {} is not a table",
                key.iter().map(|part| part.to_uppercase()).collect::<Vec<_>>().join("__"),
                key[..=depth].join(".")
            ),
        };
    }
    current.insert(last.clone(), value);
    Ok(())
}

/// Deserializes with the failing key named. A value that came from the environment and
/// was read as a number or boolean is retried as a string before giving up.
fn deserialize(mut table: toml::Table, overrides: &[(Vec<String>, String)], path: &Path) -> Result<Config> {
    let mut stringified = BTreeSet::new();
    loop {
        let value = toml::Value::Table(table.clone());
        match serde_path_to_error::deserialize::<_, Config>(value) {
            Ok(config) => return Ok(config),
            Err(error) => {
                let key = error.path().to_string();
                let retry = overrides
                    .iter()
                    .find(|(override_key, _)| override_key.join(".") == key && !stringified.contains(&key));
                if let Some((override_key, raw)) = retry {
                    stringified.insert(key.clone());
                    set_path(&mut table, override_key, toml::Value::String(raw.clone()))?;
                    continue;
                }
                let from_env = overrides.iter().any(|(override_key, _)| key.starts_with(&override_key.join(".")));
                let source = if from_env { " (set from the environment)" } else { "" };
                bail!(
                    "invalid config {}: {}: {}{source}",
                    path.display(),
                    if key == "." { "(top level)".to_owned() } else { key },
                    one_line(&error.inner().to_string())
                );
            }
        }
    }
}

/// Problems of `[scheduler]`: a zone, schedule, window or mode that doesn't parse.
fn scheduler_issues(scheduler: &squidbot_types::config::SchedulerConfig) -> Vec<ConfigIssue> {
    use squidbot_core::schedule::{Schedule, configured_zone_name, resolve_zone};
    let mut issues = Vec::new();
    let mut issue = |key: &str, problem: String| issues.push(ConfigIssue { key: key.into(), problem });
    if let Err(error) = resolve_zone(&configured_zone_name(&scheduler.timezone)) {
        issue("scheduler.timezone", format!("{error}; or \"local\" for this machine's zone"));
    }
    let heartbeat = &scheduler.heartbeat;
    if let Err(error) = Schedule::parse(&heartbeat.every) {
        issue("scheduler.heartbeat.every", error.to_string());
    }
    if let Some(window) = &heartbeat.active_hours
        && squidbot_core::heartbeat::ActiveHours::parse(window).is_none()
    {
        issue("scheduler.heartbeat.active_hours", format!("{window:?} is not a window such as 08:00-22:00"));
    }
    if squidbot_core::jobs::ContextMode::parse(&heartbeat.context).is_none() {
        issue("scheduler.heartbeat.context", format!("{:?} is not session, isolated or silent", heartbeat.context));
    }
    issues
}

/// Cross-field checks beyond the schema. Returns the problems found, each naming its key.
pub fn validate(config: &Config) -> Vec<ConfigIssue> {
    let mut issues = match Router::from_config(config, &|name| std::env::var(name).ok()) {
        Ok(_) => Vec::new(),
        Err(issues) => issues,
    };
    for (index, pattern) in config.tools.exec.blocked_patterns.iter().enumerate() {
        if let Err(error) = regex::Regex::new(pattern) {
            issues.push(ConfigIssue {
                key: format!("tools.exec.blocked_patterns[{index}]"),
                problem: format!("not a valid regular expression: {}", one_line(&error.to_string())),
            });
        }
    }
    if let Err(error) = tracing_subscriber::EnvFilter::try_new(&config.logging.level) {
        issues.push(ConfigIssue { key: "logging.level".into(), problem: format!("not a valid filter: {error}") });
    }
    for (role, agent) in &config.agents {
        if agent.max_turns == Some(0) {
            issues.push(ConfigIssue { key: format!("agents.{role}.max_turns"), problem: "must be at least 1".into() });
        }
    }
    issues.extend(crate::agents::issues(config));
    if parse_duration(&config.sessions.archive_after, BareNumber::Seconds).is_err() {
        issues.push(ConfigIssue {
            key: "sessions.archive_after".into(),
            problem: format!("{:?} is not a duration such as 90s, 30m, 24h or 7d", config.sessions.archive_after),
        });
    }
    if parse_duration(&config.sessions.unload_after, BareNumber::Seconds).ok().is_none_or(|idle| idle.is_zero()) {
        issues.push(ConfigIssue {
            key: "sessions.unload_after".into(),
            problem: format!("{:?} is not a duration such as 90s, 15m or 1h", config.sessions.unload_after),
        });
    }
    if parse_duration(&config.sessions.keep_job_runs, BareNumber::Seconds).is_err() {
        issues.push(ConfigIssue {
            key: "sessions.keep_job_runs".into(),
            problem: format!("{:?} is not a duration such as 12h, 7d or 30d", config.sessions.keep_job_runs),
        });
    }
    if config.sessions.max_open == 0 {
        issues.push(ConfigIssue { key: "sessions.max_open".into(), problem: "must be at least 1".into() });
    }
    issues.extend(scheduler_issues(&config.scheduler));
    issues.extend(crate::channels::settings::issues(config));
    let memory = &config.memory;
    let thresholds = [memory.compact_at, memory.aggressive_at, memory.emergency_at];
    if !(thresholds.windows(2).all(|pair| pair[0] <= pair[1])
        && thresholds.iter().all(|share| *share > 0.0 && *share <= 1.0))
    {
        issues.push(ConfigIssue {
            key: "memory.compact_at".into(),
            problem: "compact_at <= aggressive_at <= emergency_at must hold, each in (0, 1]".into(),
        });
    }
    if memory.document_cap < 100 {
        issues.push(ConfigIssue { key: "memory.document_cap".into(), problem: "must be at least 100".into() });
    }
    if config.tools.exec.timeout_secs == 0 {
        issues.push(ConfigIssue { key: "tools.exec.timeout_secs".into(), problem: "must be at least 1".into() });
    }
    issues.extend(password_issue(&config.gateway.auth));
    issues.extend(crate::bus::issue(config));
    issues.extend(crate::people::issues(config));
    issues.extend(hook_issues(&config.hooks));
    if let Err(mcp_issues) = squidbot_mcp::check(&config.mcp) {
        issues.extend(mcp_issues.into_iter().map(|issue| ConfigIssue { key: issue.key, problem: issue.problem }));
    }
    issues
}

/// Each `[[hooks]]` entry names a known event, a program, a time limit and valid globs.
fn hook_issues(hooks: &[squidbot_types::hooks::HookConfig]) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (index, hook) in hooks.iter().enumerate() {
        match squidbot_types::hooks::HookEvent::from_name(&hook.event) {
            None => issues.push(ConfigIssue {
                key: format!("hooks[{index}].event"),
                problem: format!(
                    "unknown event {:?}; known: {}",
                    hook.event,
                    squidbot_types::hooks::HookEvent::names()
                ),
            }),
            Some(event) if !event.is_about_a_tool() && !hook.tools.is_empty() => issues.push(ConfigIssue {
                key: format!("hooks[{index}].tools"),
                problem: format!("only before_tool and after_tool hooks apply to tools, not {event}"),
            }),
            Some(_) => {}
        }
        if hook.command.first().is_none_or(|program| program.is_empty()) {
            issues.push(ConfigIssue { key: format!("hooks[{index}].command"), problem: "must name a program".into() });
        }
        for (position, directory) in hook.write.iter().enumerate() {
            if !directory.is_absolute() {
                issues.push(ConfigIssue {
                    key: format!("hooks[{index}].write[{position}]"),
                    problem: format!("{} is not an absolute path", directory.display()),
                });
            }
        }
        if hook.timeout_ms == 0 {
            issues
                .push(ConfigIssue { key: format!("hooks[{index}].timeout_ms"), problem: "must be at least 1".into() });
        }
    }
    issues.extend(
        squidbot_tools::hooks::check(hooks)
            .into_iter()
            .map(|error| ConfigIssue { key: format!("hooks[{}].tools", error.index), problem: error.problem }),
    );
    issues
}

/// In password mode the hash must be present and an argon2id PHC string.
fn password_issue(auth: &GatewayAuthConfig) -> Option<ConfigIssue> {
    if auth.mode != GatewayAuthMode::Password {
        return None;
    }
    let issue = |key: &str, problem: String| Some(ConfigIssue { key: key.into(), problem });
    let (key, hash) = match (&auth.password_hash, &auth.password_hash_env) {
        (Some(hash), _) if !hash.is_empty() => ("gateway.auth.password_hash", hash.expose().to_owned()),
        (_, Some(variable)) => match std::env::var(variable) {
            Ok(hash) => ("gateway.auth.password_hash_env", hash),
            Err(_) => return issue("gateway.auth.password_hash_env", format!("names {variable}, which is not set")),
        },
        (_, None) => {
            return issue(
                "gateway.auth.password_hash",
                "mode is password but neither password_hash nor password_hash_env is set".into(),
            );
        }
    };
    squidbot_server::Auth::from_password_hash(&hash).err().and_then(|problem| issue(key, problem))
}

/// Every secret value the config can reach (inline keys, values resolved from the vault
/// and the env vars they name) and every value in the vault, so logs can scrub them.
pub fn secret_values(config: &Config) -> Vec<String> {
    let mut values = Vec::new();
    for (name, provider) in &config.providers {
        if let Some(key) = &provider.api_key {
            values.push(key.expose().to_owned());
        }
        values.extend(provider.headers.values().map(|header| header.expose().to_owned()));
        let preset_env = squidbot_llm::preset(name).map(|preset| preset.api_key_env.to_owned());
        for variable in provider.api_key_env.iter().cloned().chain(preset_env) {
            if let Ok(value) = std::env::var(&variable) {
                values.push(value);
            }
        }
    }
    let gateway = &config.gateway.auth;
    values.extend(gateway.token.iter().chain(&gateway.password_hash).map(|secret| secret.expose().to_owned()));
    for variable in gateway.token_env.iter().chain(&gateway.password_hash_env) {
        if let Ok(value) = std::env::var(variable) {
            values.push(value);
        }
    }
    // MCP headers carry credentials (`Authorization: Bearer …`): the whole value and the
    // credential after the scheme.
    for header in config.mcp.servers.values().flat_map(|server| server.headers.values()) {
        values.push(header.expose().to_owned());
        values.extend(header.expose().split_whitespace().last().map(str::to_owned));
    }
    values.extend(crate::channels::settings::secret_values(config));
    let web = &config.tools.web;
    values.extend(web.brave_api_key.iter().map(|key| key.expose().to_owned()));
    if let Ok(value) = std::env::var(&web.brave_api_key_env) {
        values.push(value);
    }
    for preset in squidbot_llm::presets() {
        if let Ok(value) = std::env::var(preset.api_key_env) {
            values.push(value);
        }
    }
    // Every value in the vault, referenced or not (skills' `addons.env`, MCP servers' `env`).
    values.extend(vault::known_secrets(config.vault.key).values().map(|secret| secret.expose().to_owned()));
    // An unresolved `secret:NAME` reference is a name, not a secret.
    values.retain(|value| value.len() >= 4 && !value.starts_with(vault::SECRET_PREFIX));
    values.sort();
    values.dedup();
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_become_dotted_keys() {
        let vars = vec![
            ("SQUIDBOT__LLM__MODEL".to_owned(), "a/b".to_owned()),
            ("SQUIDBOT__PROVIDERS__LOCAL__API_KEY".to_owned(), "k".to_owned()),
            ("OTHER".to_owned(), "x".to_owned()),
            ("SQUIDBOT____BROKEN".to_owned(), "x".to_owned()),
        ];
        let overrides = env_overrides(vars.into_iter());
        let keys: Vec<String> = overrides.iter().map(|(key, _)| key.join(".")).collect();
        assert_eq!(keys, ["llm.model", "providers.local.api_key"]);
    }

    #[test]
    fn env_values_are_typed_when_they_parse() {
        assert_eq!(typed_value("5"), toml::Value::Integer(5));
        assert_eq!(typed_value("true"), toml::Value::Boolean(true));
        assert_eq!(typed_value("sk-test"), toml::Value::String("sk-test".into()));
        assert_eq!(
            typed_value("[\"a/b\",\"c/d\"]"),
            toml::Value::Array(vec![toml::Value::String("a/b".into()), toml::Value::String("c/d".into())])
        );
    }

    #[test]
    fn a_numeric_looking_string_from_env_falls_back_to_text() {
        let mut table = toml::Table::new();
        let overrides = vec![(vec!["llm".to_owned(), "model".to_owned()], "12345".to_owned())];
        set_path(&mut table, &overrides[0].0, typed_value("12345")).unwrap();
        let config = deserialize(table, &overrides, Path::new("c.toml")).unwrap();
        assert_eq!(config.llm.model, "12345");
    }

    #[test]
    fn password_mode_needs_a_usable_argon2id_hash() {
        let mut auth = GatewayAuthConfig { mode: GatewayAuthMode::Password, ..GatewayAuthConfig::default() };
        assert_eq!(password_issue(&auth).unwrap().key, "gateway.auth.password_hash");
        auth.password_hash =
            Some(squidbot_types::Secret::new("$argon2i$v=19$m=16,t=2,p=1$c2FsdHNhbHQ$2YzvB0fcB8PVYfxlBcEgjw"));
        let issue = password_issue(&auth).unwrap();
        assert_eq!(issue.key, "gateway.auth.password_hash");
        assert!(issue.problem.contains("argon2id"), "{}", issue.problem);
        auth.password_hash = Some(squidbot_types::Secret::new(squidbot_server::Auth::hash_password("pw").unwrap()));
        assert!(password_issue(&auth).is_none());
        auth.mode = GatewayAuthMode::Token;
        auth.password_hash = Some(squidbot_types::Secret::new("garbage"));
        assert!(password_issue(&auth).is_none(), "only password mode reads the hash");
    }

    #[test]
    fn schema_errors_name_the_key() {
        let table: toml::Table = toml::from_str("[providers.local]\nkind = \"carrier-pigeon\"\n").unwrap();
        let error = deserialize(table, &[], Path::new("c.toml")).unwrap_err().to_string();
        assert!(error.contains("providers.local.kind"), "{error}");
        let table: toml::Table = toml::from_str("[llm]\nmodle = \"x\"\n").unwrap();
        let error = deserialize(table, &[], Path::new("c.toml")).unwrap_err().to_string();
        assert!(error.contains("modle"), "{error}");
    }

    #[test]
    fn an_inline_brave_key_is_scrubbed() {
        let table: toml::Table =
            toml::from_str("[tools.web]\nsearch_backend = \"brave\"\nbrave_api_key = \"brave-inline-key\"\n").unwrap();
        let config = deserialize(table, &[], Path::new("c.toml")).unwrap();
        assert!(secret_values(&config).contains(&"brave-inline-key".to_owned()));
    }
}
