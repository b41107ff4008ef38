//! Turning `[llm]` and `[providers.*]` config plus presets into routes, with every problem
//! reported as a [`ConfigIssue`] naming the config key to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use squidbot_core::provider::ProviderError;
use squidbot_types::Secret;
use squidbot_types::config::{Config, ProviderConfig, ProviderKind};

use crate::anthropic::AnthropicProvider;
use crate::http::{self, Endpoint};
use crate::openai::OpenAiProvider;
use crate::presets::{self, Preset};
use crate::router::embedding;

/// One problem in the configuration, tied to the key that causes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted config key, such as `providers.local.api_base` or `llm.fallbacks[0]`.
    pub key: String,
    /// What is wrong and, where it helps, how to fix it.
    pub problem: String,
}

impl ConfigIssue {
    pub(crate) fn new(key: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { key: key.into(), problem: problem.into() }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.key, self.problem)
    }
}

impl std::error::Error for ConfigIssue {}

/// Where a provider's API key comes from. Never holds the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `providers.<name>.api_key` in the config file.
    Inline,
    /// The named environment variable.
    Env(String),
    /// The provider needs a key and none was found.
    Missing,
    /// A local server that works without a key, and none was given.
    NotRequired,
}

impl fmt::Display for KeySource {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Inline => formatter.write_str("inline"),
            Self::Env(variable) => write!(formatter, "env {variable}"),
            Self::Missing => formatter.write_str("missing"),
            Self::NotRequired => formatter.write_str("not required"),
        }
    }
}

/// What `status` shows about one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Provider name as used in model ids.
    pub name: String,
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Base URL.
    pub api_base: String,
    /// Where the key comes from.
    pub key: KeySource,
    /// Whether images are sent to its models.
    pub vision: bool,
}

/// The adapter speaking a route's wire protocol.
#[derive(Debug, Clone)]
pub(crate) enum Adapter {
    OpenAi(OpenAiProvider),
    Anthropic(AnthropicProvider),
}

/// A provider the router can send requests to.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) info: ProviderInfo,
    /// Environment variable to suggest when the key is missing.
    pub(crate) key_env: String,
    pub(crate) context_window: Option<u32>,
    /// Configured or named by a model id, so `status` and key checks mention it.
    pub(crate) in_use: bool,
    /// The adapter, or why none could be built (reported at call time).
    pub(crate) adapter: Result<Adapter, ProviderError>,
    /// Where the provider lives and its key, for adapters built beside the router (embeddings).
    pub(crate) endpoint: Endpoint,
}

impl Route {
    /// The adapter to call, or the configuration error that stops the call before any request.
    pub(crate) fn adapter(&self) -> Result<&Adapter, ProviderError> {
        if let Some(problem) = self.key_problem() {
            return Err(ProviderError::Config { message: problem });
        }
        self.adapter.as_ref().map_err(Clone::clone)
    }

    /// What to tell the user when the provider needs a key and has none.
    pub(crate) fn key_problem(&self) -> Option<String> {
        (self.info.key == KeySource::Missing).then(|| missing_key_problem(&self.info.name, &self.key_env))
    }
}

fn missing_key_problem(name: &str, key_env: &str) -> String {
    format!("no API key for provider {name}: set {key_env} or providers.{name}.api_key")
}

/// Everything the router needs, built from config.
#[derive(Debug)]
pub(crate) struct Routes {
    pub(crate) providers: BTreeMap<String, Route>,
    pub(crate) default_model: String,
    pub(crate) fallbacks: Vec<String>,
    pub(crate) max_retries: u32,
}

/// Splits `provider/model` at the first `/`; both parts must be non-empty.
pub fn split_model_id(model_id: &str) -> Option<(&str, &str)> {
    let (provider, model) = model_id.split_once('/')?;
    (!provider.is_empty() && !model.is_empty()).then_some((provider, model))
}

/// Checks one model id against the known providers.
pub(crate) fn check_model_id(
    key: &str,
    model_id: &str,
    is_known: &dyn Fn(&str) -> bool,
) -> Result<String, ConfigIssue> {
    if model_id.trim().is_empty() {
        return Err(ConfigIssue::new(key, "not set; use provider/model, e.g. openai/gpt-4o-mini"));
    }
    let Some((provider, _)) = split_model_id(model_id) else {
        return Err(ConfigIssue::new(key, format!("{model_id:?} is not of the form provider/model")));
    };
    if !is_known(provider) {
        return Err(ConfigIssue::new(
            key,
            format!(
                "{model_id:?} names provider {provider:?}, which has no [providers.{provider}] section and no preset"
            ),
        ));
    }
    Ok(provider.to_owned())
}

/// Builds routes for every configured provider and every preset, then checks model ids.
pub(crate) fn build(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Result<Routes, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    let llm = &config.llm;
    if llm.timeout_secs == 0 {
        issues.push(ConfigIssue::new("llm.timeout_secs", "must be at least 1"));
    }
    if llm.max_tokens == 0 {
        issues.push(ConfigIssue::new("llm.max_tokens", "must be at least 1"));
    }
    let timeout = Duration::from_secs(llm.timeout_secs.max(1));
    let client = match http::http_client() {
        Ok(client) => Some(client),
        Err(error) => {
            issues.push(ConfigIssue::new("llm", error.to_string()));
            None
        }
    };
    let empty = ProviderConfig::default();
    let names: BTreeSet<&str> = config
        .providers
        .keys()
        .map(String::as_str)
        .chain(presets::presets().iter().map(|preset| preset.name))
        .collect();
    let mut providers = BTreeMap::new();
    for name in names {
        let configured = config.providers.get(name);
        let section = configured.unwrap_or(&empty);
        let built = build_route(name, section, presets::preset(name), env, timeout, client.as_ref());
        match built {
            Ok(mut route) => {
                route.in_use = configured.is_some();
                providers.insert(name.to_owned(), route);
            }
            Err(mut problems) => issues.append(&mut problems),
        }
    }

    let mut referenced = Vec::new();
    // A section that failed to build has its own issues; naming it again here would mislead.
    let is_known = |name: &str| providers.contains_key(name) || config.providers.contains_key(name);
    let mut check = |key: String, model_id: &str| match check_model_id(&key, model_id, &is_known) {
        Ok(provider) => referenced.push(provider),
        Err(issue) => issues.push(issue),
    };
    check("llm.model".to_owned(), &llm.model);
    for (position, model_id) in llm.fallbacks.iter().enumerate() {
        check(format!("llm.fallbacks[{position}]"), model_id);
    }
    for (role, agent) in &config.agents {
        if let Some(model_id) = &agent.model {
            check(format!("agents.{role}.model"), model_id);
        }
    }
    let kind_of = |name: &str| providers.get(name).map(|route| route.info.kind);
    match embedding::check_embedding_model(config, &is_known, &kind_of) {
        Ok(Some((provider, _))) => referenced.push(provider),
        Ok(None) => {}
        Err(mut problems) => issues.append(&mut problems),
    }
    for provider in referenced {
        if let Some(route) = providers.get_mut(&provider) {
            route.in_use = true;
        }
    }
    for route in providers.values() {
        if let (true, Err(error)) = (route.in_use, &route.adapter) {
            issues.push(ConfigIssue::new(format!("providers.{}", route.info.name), error.to_string()));
        }
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    Ok(Routes {
        providers,
        default_model: llm.model.clone(),
        fallbacks: llm.fallbacks.clone(),
        max_retries: llm.max_retries,
    })
}

/// One provider: its section merged over the preset of the same name.
pub(crate) fn build_route(
    name: &str,
    section: &ProviderConfig,
    preset: Option<&Preset>,
    env: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
    client: Option<&reqwest::Client>,
) -> Result<Route, Vec<ConfigIssue>> {
    let key = |field: &str| format!("providers.{name}.{field}");
    let mut issues = Vec::new();
    if name.is_empty() || name.contains('/') || name.chars().any(char::is_whitespace) {
        issues.push(ConfigIssue::new(
            format!("providers.{name}"),
            "a provider name may not be empty or contain '/' or spaces",
        ));
    }
    let kind = Some(provider_kind(section, preset));
    let api_base = section.api_base.clone().or(preset.map(|preset| preset.api_base.to_owned()));
    match &api_base {
        None => issues.push(ConfigIssue::new(
            key("api_base"),
            format!(
                "not set and there is no preset named {name:?}; set it to the server's base URL, e.g. http://127.0.0.1:8080/v1"
            ),
        )),
        Some(url) => {
            if let Err(problem) = check_url(url) {
                issues.push(ConfigIssue::new(key("api_base"), problem));
            }
        }
    }
    for (header, value) in &section.headers {
        if HeaderName::from_bytes(header.as_bytes()).is_err() {
            issues.push(ConfigIssue::new(key(&format!("headers.{header}")), "not a valid HTTP header name"));
        } else if HeaderValue::from_str(value.expose()).is_err() {
            issues.push(ConfigIssue::new(
                key(&format!("headers.{header}")),
                "the value holds characters not allowed in an HTTP header",
            ));
        }
    }
    if section.api_key_env.as_deref().is_some_and(|variable| variable.trim().is_empty()) {
        issues.push(ConfigIssue::new(key("api_key_env"), "is empty; name an environment variable or remove it"));
    }
    if section.context_window == Some(0) {
        issues.push(ConfigIssue::new(key("context_window"), "must be at least 1"));
    }
    let (Some(kind), Some(api_base), Some(client), true) = (kind, api_base, client, issues.is_empty()) else {
        return Err(issues);
    };

    let configured_env = section.api_key_env.clone().filter(|variable| !variable.trim().is_empty());
    let key_required = configured_env.is_some() || preset.is_some_and(|preset| preset.key_required);
    let key_env = configured_env
        .clone()
        .or(preset.map(|preset| preset.api_key_env.to_owned()))
        .unwrap_or_else(|| format!("{}_API_KEY", name.to_uppercase().replace('-', "_")));
    let from_env = |variable: &str| env(variable).filter(|value| !value.trim().is_empty());
    let (api_key, key_source) = if let Some(inline) = section.api_key.clone().filter(|key| !key.is_empty()) {
        (Some(inline), KeySource::Inline)
    } else if let Some((variable, value)) = configured_env
        .iter()
        .map(String::as_str)
        .chain(preset.map(|preset| preset.api_key_env))
        .find_map(|variable| from_env(variable).map(|value| (variable.to_owned(), value)))
    {
        (Some(Secret::new(value.trim())), KeySource::Env(variable))
    } else if key_required {
        (None, KeySource::Missing)
    } else {
        (None, KeySource::NotRequired)
    };

    let vision = section.vision.unwrap_or_else(|| preset.is_some_and(|preset| preset.vision));
    let endpoint = Endpoint {
        provider: name.to_owned(),
        api_base: api_base.clone(),
        api_key,
        headers: section.headers.iter().map(|(name, value)| (name.clone(), value.expose().to_owned())).collect(),
        timeout,
        vision,
    };
    let adapter = match kind {
        ProviderKind::Openai => OpenAiProvider::with_client(client.clone(), endpoint.clone()).map(Adapter::OpenAi),
        ProviderKind::Anthropic => {
            AnthropicProvider::with_client(client.clone(), endpoint.clone()).map(Adapter::Anthropic)
        }
    };
    Ok(Route {
        info: ProviderInfo { name: name.to_owned(), kind, api_base, key: key_source, vision },
        key_env,
        context_window: section.context_window,
        in_use: false,
        adapter,
        endpoint,
    })
}

/// The wire protocol of a provider: its section's, else its preset's, else OpenAI's (most
/// custom endpoints speak it).
pub(crate) fn provider_kind(section: &ProviderConfig, preset: Option<&Preset>) -> ProviderKind {
    section.kind.or(preset.map(|preset| preset.kind)).unwrap_or(ProviderKind::Openai)
}

fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|error| format!("{url:?} is not a URL: {error}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} must start with http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    Ok(())
}

/// Issues for providers in use that need a key and have none.
pub(crate) fn missing_keys(providers: &BTreeMap<String, Route>) -> Vec<ConfigIssue> {
    providers
        .values()
        .filter(|route| route.in_use && route.info.key == KeySource::Missing)
        .map(|route| {
            ConfigIssue::new(
                format!("providers.{}.api_key", route.info.name),
                missing_key_problem(&route.info.name, &route.key_env),
            )
        })
        .collect()
}
