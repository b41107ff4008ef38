//! The router: resolves `provider/model` ids to adapters, retries with backoff and walks
//! the fallback chain.

pub(crate) mod backoff;
mod config;
mod embedding;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StreamSink};
use squidbot_types::config::Config;

use config::{Adapter, Route};
pub use config::{ConfigIssue, KeySource, ProviderInfo, split_model_id};
pub use embedding::embedder_from_config;

/// An [`LlmProvider`] over every configured provider, addressed as `provider/model`.
#[derive(Debug)]
pub struct Router {
    providers: BTreeMap<String, Route>,
    default_model: String,
    fallbacks: Vec<String>,
    max_retries: u32,
}

impl Router {
    /// Builds the router from config; `env` looks up environment variables (API keys).
    /// A provider lacking its key is not an error here: calls to it fail, and
    /// [`Router::validate_keys`] lists it.
    pub fn from_config(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, Vec<ConfigIssue>> {
        let routes = config::build(config, env)?;
        Ok(Self {
            providers: routes.providers,
            default_model: routes.default_model,
            fallbacks: routes.fallbacks,
            max_retries: routes.max_retries,
        })
    }

    /// Replaces the fallback chain tried after the requested model.
    pub fn with_fallbacks(mut self, fallbacks: Vec<String>) -> Result<Self, Vec<ConfigIssue>> {
        let issues: Vec<ConfigIssue> = fallbacks
            .iter()
            .enumerate()
            .filter_map(|(position, model_id)| {
                let is_known = |name: &str| self.providers.contains_key(name);
                config::check_model_id(&format!("fallbacks[{position}]"), model_id, &is_known).err()
            })
            .collect();
        if !issues.is_empty() {
            return Err(issues);
        }
        for model_id in &fallbacks {
            if let Some(route) = split_model_id(model_id).and_then(|(name, _)| self.providers.get_mut(name)) {
                route.in_use = true;
            }
        }
        self.fallbacks = fallbacks;
        Ok(self)
    }

    /// Replaces the number of retries per provider.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// `llm.model`.
    pub fn default_model(&self) -> &str {
        &self.default_model
    }

    /// Models tried, in order, after the requested one fails.
    pub fn fallbacks(&self) -> &[String] {
        &self.fallbacks
    }

    /// Checks that a call to `model_id` could be made (known provider, key present), e.g.
    /// for a `--model` override, without calling anything.
    pub fn check_model(&self, model_id: &str) -> Result<(), ProviderError> {
        self.resolve(model_id).map(|_| ())
    }

    /// Providers in use that need an API key and have none.
    pub fn validate_keys(&self) -> Vec<ConfigIssue> {
        config::missing_keys(&self.providers)
    }

    /// The configured context window of the provider serving `model_id`.
    pub fn context_window(&self, model_id: &str) -> Option<u32> {
        let (provider, _) = split_model_id(model_id)?;
        self.providers.get(provider)?.context_window
    }

    /// Configured providers and those named by model ids, for `status`. Never shows keys.
    pub fn describe(&self) -> Vec<ProviderInfo> {
        self.providers.values().filter(|route| route.in_use).map(|route| route.info.clone()).collect()
    }

    fn resolve<'a>(&'a self, model_id: &'a str) -> Result<(&'a Adapter, &'a str), ProviderError> {
        let Some((provider, model)) = split_model_id(model_id) else {
            return Err(ProviderError::Config {
                message: format!("model id {model_id:?} is not of the form provider/model"),
            });
        };
        let Some(route) = self.providers.get(provider) else {
            return Err(ProviderError::Config {
                message: format!(
                    "model id {model_id:?} names provider {provider:?}, which has no [providers.{provider}] section and no preset"
                ),
            });
        };
        Ok((route.adapter()?, model))
    }

    /// The requested model, then the fallbacks it isn't already.
    fn chain<'a>(&'a self, requested: &'a str) -> Vec<&'a str> {
        let mut chain = vec![requested];
        for model_id in &self.fallbacks {
            if !chain.contains(&model_id.as_str()) {
                chain.push(model_id);
            }
        }
        chain
    }

    async fn run(&self, request: &CompletionRequest, sink: &dyn StreamSink) -> Result<Completion, ProviderError> {
        let sink = TrackingSink { inner: sink, streamed: AtomicBool::new(false) };
        let chain = self.chain(&request.model);
        let mut last_error = None;
        for (position, model_id) in chain.iter().copied().enumerate() {
            let (adapter, model) = match self.resolve(model_id) {
                Ok(resolved) => resolved,
                // The requested model must work; a broken fallback is skipped, not fatal.
                Err(error) if position > 0 => {
                    tracing::warn!(model = model_id, %error, "skipping fallback model");
                    last_error.get_or_insert(error);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let mut attempt_request = request.clone();
            attempt_request.model = model.to_owned();
            let error = match self.call_with_retries(adapter, &attempt_request, model_id, &sink).await {
                Ok(mut completion) => {
                    completion.model = model_id.to_owned();
                    return Ok(completion);
                }
                Err(error) => error,
            };
            let next = chain.get(position + 1);
            match next {
                Some(next) if error.should_fall_back() => {
                    tracing::warn!(model = model_id, fallback = *next, %error, "falling back to the next model");
                    last_error = Some(error);
                }
                _ => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| ProviderError::Config { message: "no model to call".to_owned() }))
    }

    async fn call_with_retries(
        &self,
        adapter: &Adapter,
        request: &CompletionRequest,
        model_id: &str,
        sink: &TrackingSink<'_>,
    ) -> Result<Completion, ProviderError> {
        backoff::with_retries(self.max_retries, model_id, "model call", || async {
            sink.reset_if_streamed();
            match adapter {
                Adapter::OpenAi(provider) => provider.complete(request, sink).await,
                Adapter::Anthropic(provider) => provider.complete(request, sink).await,
            }
        })
        .await
    }
}

impl LlmProvider for Router {
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> impl Future<Output = Result<Completion, ProviderError>> + Send + 'a {
        self.run(request, sink)
    }
}

/// Forwards text and remembers whether any arrived since the last reset.
struct TrackingSink<'a> {
    inner: &'a dyn StreamSink,
    streamed: AtomicBool,
}

impl TrackingSink<'_> {
    /// Voids partial text before another attempt starts over.
    fn reset_if_streamed(&self) {
        if self.streamed.swap(false, Ordering::SeqCst) {
            self.inner.stream_reset();
        }
    }
}

impl StreamSink for TrackingSink<'_> {
    fn text_delta(&self, text: &str) {
        self.streamed.store(true, Ordering::SeqCst);
        self.inner.text_delta(text);
    }

    fn stream_reset(&self) {
        self.streamed.store(false, Ordering::SeqCst);
        self.inner.stream_reset();
    }
}

#[cfg(test)]
mod tests {
    use squidbot_types::Secret;
    use squidbot_types::config::{AgentConfig, ProviderConfig, ProviderKind};

    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn config(model: &str) -> Config {
        let mut config = Config::default();
        config.llm.model = model.to_owned();
        config
    }

    fn issue_keys(result: Result<Router, Vec<ConfigIssue>>) -> Vec<String> {
        result.unwrap_err().into_iter().map(|issue| issue.key).collect()
    }

    #[test]
    fn model_ids_split_at_the_first_slash() {
        assert_eq!(
            split_model_id("openrouter/meta-llama/llama-3.1-8b"),
            Some(("openrouter", "meta-llama/llama-3.1-8b"))
        );
        assert_eq!(split_model_id("openai/gpt-4o"), Some(("openai", "gpt-4o")));
        assert_eq!(split_model_id("gpt-4o"), None);
        assert_eq!(split_model_id("/gpt-4o"), None);
        assert_eq!(split_model_id("openai/"), None);
    }

    #[test]
    fn every_bad_model_id_is_named_by_key() {
        let mut config = config("");
        config.llm.fallbacks = vec!["nowhere/x".into(), "groq/llama".into(), "plain".into()];
        config
            .agents
            .insert("coder".into(), AgentConfig { model: Some("mystery/model".into()), ..AgentConfig::default() });
        let keys = issue_keys(Router::from_config(&config, &no_env));
        assert_eq!(keys, vec!["llm.model", "llm.fallbacks[0]", "llm.fallbacks[2]", "agents.coder.model"]);
    }

    #[test]
    fn provider_sections_are_checked_field_by_field() {
        let mut config = config("local/model");
        let mut local = ProviderConfig::default();
        local.headers.insert("bad header".into(), squidbot_types::Secret::new("x"));
        local.context_window = Some(0);
        config.providers.insert("local".into(), local);
        config.providers.insert(
            "remote".into(),
            ProviderConfig { api_base: Some("ftp://example.com".into()), ..ProviderConfig::default() },
        );
        let issues = Router::from_config(&config, &no_env).unwrap_err();
        let keys: Vec<_> = issues.iter().map(|issue| issue.key.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "providers.local.api_base",
                "providers.local.headers.bad header",
                "providers.local.context_window",
                "providers.remote.api_base",
            ]
        );
        assert!(issues[0].to_string().starts_with("providers.local.api_base: not set"));
    }

    #[test]
    fn presets_work_without_a_section_and_sections_override_presets() {
        let mut config = config("groq/llama-3.1-8b-instant");
        config.llm.fallbacks = vec!["ollama/qwen".into()];
        config.providers.insert(
            "openai".into(),
            ProviderConfig {
                api_base: Some("http://127.0.0.1:9/v1".into()),
                api_key: Some(Secret::new("sk-inline")),
                context_window: Some(32_000),
                ..ProviderConfig::default()
            },
        );
        let env = |name: &str| (name == "GROQ_API_KEY").then(|| "gsk-env".to_owned());
        let router = Router::from_config(&config, &env).unwrap();
        let described: Vec<_> = router
            .describe()
            .into_iter()
            .map(|info| (info.name, info.kind, info.api_base, info.key.to_string(), info.vision))
            .collect();
        assert_eq!(
            described,
            vec![
                (
                    "groq".into(),
                    ProviderKind::Openai,
                    "https://api.groq.com/openai/v1".into(),
                    "env GROQ_API_KEY".into(),
                    false
                ),
                (
                    "ollama".into(),
                    ProviderKind::Openai,
                    "http://127.0.0.1:11434/v1".into(),
                    "not required".into(),
                    false
                ),
                ("openai".into(), ProviderKind::Openai, "http://127.0.0.1:9/v1".into(), "inline".into(), true),
            ]
        );
        // `vision` in a section overrides the preset either way.
        let mut overridden = self::config("ollama/llava");
        overridden
            .providers
            .insert("ollama".into(), ProviderConfig { vision: Some(true), ..ProviderConfig::default() });
        overridden
            .providers
            .insert("openai".into(), ProviderConfig { vision: Some(false), ..ProviderConfig::default() });
        let seeing = Router::from_config(&overridden, &no_env).unwrap();
        let vision: Vec<_> = seeing.describe().into_iter().map(|info| (info.name, info.vision)).collect();
        assert_eq!(vision, vec![("ollama".to_owned(), true), ("openai".to_owned(), false)]);
        assert!(router.validate_keys().is_empty());
        assert_eq!(router.context_window("openai/gpt-4o"), Some(32_000));
        assert_eq!(router.context_window("groq/x"), None);
        assert_eq!(router.context_window("unknown/x"), None);
        assert!(router.check_model("deepseek/deepseek-chat").is_err());
    }

    #[test]
    fn key_resolution_prefers_inline_then_configured_env_then_preset_env() {
        let env = |name: &str| match name {
            "MY_KEY" => Some("from-my-key".to_owned()),
            "OPENROUTER_API_KEY" => Some("from-preset".to_owned()),
            _ => None,
        };
        let source = |section: ProviderConfig| {
            let mut config = config("openrouter/x");
            config.providers.insert("openrouter".into(), section);
            Router::from_config(&config, &env).unwrap().describe()[0].key.clone()
        };
        let inline = ProviderConfig {
            api_key: Some(Secret::new("k")),
            api_key_env: Some("MY_KEY".into()),
            ..ProviderConfig::default()
        };
        assert_eq!(source(inline), KeySource::Inline);
        let configured = ProviderConfig { api_key_env: Some("MY_KEY".into()), ..ProviderConfig::default() };
        assert_eq!(source(configured), KeySource::Env("MY_KEY".into()));
        let unset = ProviderConfig { api_key_env: Some("UNSET_KEY".into()), ..ProviderConfig::default() };
        assert_eq!(source(unset), KeySource::Env("OPENROUTER_API_KEY".into()));
    }

    #[test]
    fn missing_key_is_reported_not_fatal() {
        let router = Router::from_config(&config("openrouter/meta-llama/llama-3.1-8b"), &no_env).unwrap();
        let issues = router.validate_keys();
        assert_eq!(issues.len(), 1);
        assert_eq!(
            issues[0].to_string(),
            "providers.openrouter.api_key: no API key for provider openrouter: set OPENROUTER_API_KEY or providers.openrouter.api_key"
        );
        let error = router.check_model("openrouter/meta-llama/llama-3.1-8b").unwrap_err();
        assert!(matches!(error, ProviderError::Config { .. }));
        assert!(error.to_string().contains("OPENROUTER_API_KEY"));
    }

    #[test]
    fn custom_sections_need_an_api_base_and_default_to_the_openai_wire() {
        let mut config = config("local/test-model");
        config.providers.insert("local".into(), ProviderConfig::default());
        let issues = Router::from_config(&config, &no_env).unwrap_err();
        assert_eq!(issues.iter().map(|issue| issue.key.as_str()).collect::<Vec<_>>(), vec!["providers.local.api_base"]);
        config.providers.get_mut("local").unwrap().api_base = Some("http://127.0.0.1:8089/v1".into());
        let router = Router::from_config(&config, &no_env).unwrap();
        assert_eq!(router.describe()[0].kind, ProviderKind::Openai);
        assert_eq!(router.describe()[0].key, KeySource::NotRequired);
        assert!(router.check_model("local/test-model").is_ok());
        assert_eq!(router.default_model(), "local/test-model");
    }

    #[test]
    fn fallback_chain_skips_the_requested_model() {
        let mut config = config("openai/a");
        config.llm.fallbacks = vec!["openai/a".into(), "groq/b".into()];
        let router = Router::from_config(&config, &no_env).unwrap();
        assert_eq!(router.chain("ollama/c"), vec!["ollama/c", "openai/a", "groq/b"]);
        assert_eq!(router.chain("openai/a"), vec!["openai/a", "groq/b"]);
        let router = router.with_fallbacks(vec!["vllm/d".into()]).unwrap();
        assert_eq!(router.chain("openai/a"), vec!["openai/a", "vllm/d"]);
        let issues = router.with_fallbacks(vec!["bad".into()]).unwrap_err();
        assert_eq!(issues[0].key, "fallbacks[0]");
    }
}
