//! Known providers as data: wire protocol, base URL and where their key lives.

use squidbot_types::config::ProviderKind;

/// Defaults for a provider named in config or in a model id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Name used in model ids (`groq/llama-3.1-8b-instant`) and `[providers.<name>]`.
    pub name: &'static str,
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Base URL of the API.
    pub api_base: &'static str,
    /// Environment variable conventionally holding the key.
    pub api_key_env: &'static str,
    /// False for local servers that accept requests without a key.
    pub key_required: bool,
    /// Whether its current models take images (`[providers.<name>] vision` overrides).
    pub vision: bool,
}

const fn hosted(name: &'static str, kind: ProviderKind, api_base: &'static str, api_key_env: &'static str) -> Preset {
    Preset { name, kind, api_base, api_key_env, key_required: true, vision: false }
}

/// A hosted provider whose models take images.
const fn seeing(preset: Preset) -> Preset {
    Preset { vision: true, ..preset }
}

const fn local(name: &'static str, api_base: &'static str, api_key_env: &'static str) -> Preset {
    Preset { name, kind: ProviderKind::Openai, api_base, api_key_env, key_required: false, vision: false }
}

const PRESETS: &[Preset] = &[
    seeing(hosted("openai", ProviderKind::Openai, "https://api.openai.com/v1", "OPENAI_API_KEY")),
    seeing(hosted("anthropic", ProviderKind::Anthropic, "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY")),
    hosted("openrouter", ProviderKind::Openai, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    hosted("groq", ProviderKind::Openai, "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    hosted("deepseek", ProviderKind::Openai, "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    hosted("xai", ProviderKind::Openai, "https://api.x.ai/v1", "XAI_API_KEY"),
    hosted("mistral", ProviderKind::Openai, "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    hosted("together", ProviderKind::Openai, "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    hosted("fireworks", ProviderKind::Openai, "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    local("ollama", "http://127.0.0.1:11434/v1", "OLLAMA_API_KEY"),
    local("lmstudio", "http://127.0.0.1:1234/v1", "LMSTUDIO_API_KEY"),
    local("vllm", "http://127.0.0.1:8000/v1", "VLLM_API_KEY"),
    local("llamacpp", "http://127.0.0.1:8080/v1", "LLAMACPP_API_KEY"),
];

/// Every known preset, in a stable order.
pub fn presets() -> &'static [Preset] {
    PRESETS
}

/// The preset called `name`, if any.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|preset| preset.name == name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_and_env_vars_are_unique() {
        let names: BTreeSet<_> = presets().iter().map(|preset| preset.name).collect();
        let variables: BTreeSet<_> = presets().iter().map(|preset| preset.api_key_env).collect();
        assert_eq!(names.len(), presets().len());
        assert_eq!(variables.len(), presets().len());
    }

    #[test]
    fn every_preset_is_well_formed() {
        for preset in presets() {
            let url = reqwest::Url::parse(preset.api_base).unwrap();
            assert!(!preset.api_base.ends_with('/'), "{}", preset.name);
            assert!(!preset.name.contains('/'), "{}", preset.name);
            assert!(preset.api_key_env.ends_with("_API_KEY"), "{}", preset.api_key_env);
            // Hosted services use TLS; only loopback servers may skip the key.
            let loopback = url.host_str() == Some("127.0.0.1");
            assert_eq!(url.scheme() == "https", !loopback, "{}", preset.name);
            assert_eq!(preset.key_required, !loopback, "{}", preset.name);
        }
    }

    #[test]
    fn lookup_by_name() {
        assert_eq!(preset("anthropic").map(|found| found.kind), Some(ProviderKind::Anthropic));
        assert_eq!(preset("groq").map(|found| found.api_base), Some("https://api.groq.com/openai/v1"));
        assert!(preset("ollama").is_some_and(|found| !found.key_required));
        assert!(preset("nope").is_none());
    }
}
