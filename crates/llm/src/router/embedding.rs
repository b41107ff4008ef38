//! `[memory] embedding_model`: checking it and building the embedder it names.

use std::time::Duration;

use squidbot_types::config::{Config, ProviderConfig, ProviderKind};

use crate::embeddings::OpenAiEmbedder;
use crate::http;
use crate::presets;
use crate::router::config::{ConfigIssue, build_route, check_model_id, provider_kind, split_model_id};

const MODEL_KEY: &str = "memory.embedding_model";
const DIMENSIONS_KEY: &str = "memory.embedding_dimensions";

/// Checks `memory.embedding_model` and `memory.embedding_dimensions`. Returns the provider
/// and model named, `None` when no embedding model is configured.
pub(crate) fn check_embedding_model(
    config: &Config,
    is_known: &dyn Fn(&str) -> bool,
    kind_of: &dyn Fn(&str) -> Option<ProviderKind>,
) -> Result<Option<(String, String)>, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    if config.memory.embedding_dimensions == Some(0) {
        issues.push(ConfigIssue::new(DIMENSIONS_KEY, "must be at least 1; remove it to use the model's own size"));
    }
    let named = match config.memory.embedding_model.as_deref() {
        None => None,
        Some(model_id) if model_id.trim().is_empty() => {
            issues.push(ConfigIssue::new(
                MODEL_KEY,
                "is empty; use provider/model, e.g. openai/text-embedding-3-small, or remove it",
            ));
            None
        }
        Some(model_id) => match check_model_id(MODEL_KEY, model_id, is_known) {
            Err(issue) => {
                issues.push(issue);
                None
            }
            Ok(provider) if kind_of(&provider) == Some(ProviderKind::Anthropic) => {
                issues.push(ConfigIssue::new(
                    MODEL_KEY,
                    format!(
                        "{model_id:?} names provider {provider:?}, which speaks the anthropic wire; anthropic has no embeddings endpoint; use an OpenAI-compatible provider"
                    ),
                ));
                None
            }
            Ok(provider) => split_model_id(model_id).map(|(_, model)| (provider, model.to_owned())),
        },
    };
    if issues.is_empty() { Ok(named) } else { Err(issues) }
}

/// The embedder `memory.embedding_model` names (`None` when unset), on the provider the
/// router would use for that name: same presets, key lookup through `env`, base URL,
/// headers and `llm.timeout_secs`. A provider of kind anthropic is refused. A missing API
/// key is not an error here (as with the router): every call then fails naming the key to set.
pub fn embedder_from_config(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<OpenAiEmbedder>, Vec<ConfigIssue>> {
    let empty = ProviderConfig::default();
    let section_of = |name: &str| config.providers.get(name);
    let is_known = |name: &str| section_of(name).is_some() || presets::preset(name).is_some();
    let kind_of = |name: &str| {
        let section = section_of(name);
        (section.is_some() || presets::preset(name).is_some())
            .then(|| provider_kind(section.unwrap_or(&empty), presets::preset(name)))
    };
    let Some((provider, model)) = check_embedding_model(config, &is_known, &kind_of)? else {
        return Ok(None);
    };
    let client = http::http_client().map_err(|error| vec![ConfigIssue::new(MODEL_KEY, error.to_string())])?;
    let timeout = Duration::from_secs(config.llm.timeout_secs.max(1));
    let section = section_of(&provider).unwrap_or(&empty);
    let route = build_route(&provider, section, presets::preset(&provider), env, timeout, Some(&client))?;
    let key_problem = route.key_problem();
    let mut embedder = OpenAiEmbedder::with_client(client, route.endpoint, model)
        .map_err(|error| vec![ConfigIssue::new(format!("providers.{provider}"), error.to_string())])?;
    if let Some(dimensions) = config.memory.embedding_dimensions {
        embedder = embedder.with_dimensions(dimensions);
    }
    if let Some(problem) = key_problem {
        embedder = embedder.unusable_because(problem);
    }
    Ok(Some(embedder))
}

#[cfg(test)]
mod tests {
    use squidbot_core::memory::Embedder;
    use squidbot_types::Secret;

    use super::*;
    use crate::Router;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn config(embedding_model: &str) -> Config {
        let mut config = Config::default();
        config.llm.model = "ollama/qwen".into();
        config.memory.embedding_model = Some(embedding_model.to_owned());
        config
    }

    fn issues(result: Result<Option<OpenAiEmbedder>, Vec<ConfigIssue>>) -> Vec<String> {
        result.unwrap_err().into_iter().map(|issue| issue.to_string()).collect()
    }

    #[test]
    fn no_embedding_model_means_no_embedder() {
        assert!(embedder_from_config(&Config::default(), &no_env).unwrap().is_none());
    }

    #[test]
    fn presets_and_sections_resolve_like_the_router() {
        let mut config = config("local/nomic-embed-text");
        config.memory.embedding_dimensions = Some(256);
        config.providers.insert(
            "local".into(),
            ProviderConfig {
                api_base: Some("http://127.0.0.1:9/v1".into()),
                api_key: Some(Secret::new("sk-inline")),
                ..ProviderConfig::default()
            },
        );
        let embedder = embedder_from_config(&config, &no_env).unwrap().unwrap();
        assert_eq!(Embedder::model(&embedder), "local/nomic-embed-text");
        assert_eq!(embedder.dimensions(), Some(256));
        let preset = embedder_from_config(&self::config("ollama/nomic-embed-text"), &no_env).unwrap().unwrap();
        assert_eq!(Embedder::model(&preset), "ollama/nomic-embed-text");
    }

    #[test]
    fn anthropic_unknown_and_malformed_models_are_issues() {
        let anthropic = issues(embedder_from_config(&config("anthropic/claude"), &no_env));
        assert_eq!(anthropic.len(), 1);
        assert!(anthropic[0].starts_with("memory.embedding_model: "), "{anthropic:?}");
        assert!(
            anthropic[0].contains("anthropic has no embeddings endpoint; use an OpenAI-compatible provider"),
            "{anthropic:?}"
        );
        let unknown = issues(embedder_from_config(&config("nowhere/embed"), &no_env));
        assert!(unknown[0].starts_with("memory.embedding_model: \"nowhere/embed\" names provider \"nowhere\""));
        let malformed = issues(embedder_from_config(&config("embed"), &no_env));
        assert!(malformed[0].contains("is not of the form provider/model"), "{malformed:?}");
        let mut zero = config("openai/text-embedding-3-small");
        zero.memory.embedding_dimensions = Some(0);
        assert_eq!(
            issues(embedder_from_config(&zero, &no_env)),
            vec!["memory.embedding_dimensions: must be at least 1; remove it to use the model's own size"]
        );
    }

    #[test]
    fn a_custom_section_of_kind_anthropic_is_refused_too() {
        let mut config = config("claude-proxy/embed");
        config.providers.insert(
            "claude-proxy".into(),
            ProviderConfig {
                kind: Some(ProviderKind::Anthropic),
                api_base: Some("http://127.0.0.1:9/v1".into()),
                ..ProviderConfig::default()
            },
        );
        let problems = issues(embedder_from_config(&config, &no_env));
        assert!(problems[0].contains("anthropic has no embeddings endpoint"), "{problems:?}");
    }

    #[test]
    fn router_validation_checks_the_embedding_model() {
        let keys = |config: &Config| match Router::from_config(config, &no_env) {
            Ok(_) => Vec::new(),
            Err(issues) => issues.into_iter().map(|issue| issue.key).collect::<Vec<_>>(),
        };
        assert_eq!(keys(&config("anthropic/claude")), vec!["memory.embedding_model"]);
        assert_eq!(keys(&config("mystery/embed")), vec!["memory.embedding_model"]);
        assert!(keys(&config("ollama/nomic-embed-text")).is_empty());
        let router = Router::from_config(&config("openai/text-embedding-3-small"), &no_env).unwrap();
        let missing: Vec<String> = router.validate_keys().into_iter().map(|issue| issue.key).collect();
        assert_eq!(missing, vec!["providers.openai.api_key"], "the embedding provider is in use");
    }

    #[tokio::test]
    async fn a_missing_key_fails_each_call_naming_the_variable() {
        let embedder = embedder_from_config(&config("openai/text-embedding-3-small"), &no_env).unwrap().unwrap();
        let error = embedder.embed(&["hello".to_owned()]).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "can't call the model: no API key for provider openai: set OPENAI_API_KEY or providers.openai.api_key"
        );
    }
}
