//! The router against scripted servers: retries, fallbacks, keys and model ids.

use std::time::Duration;

use squidbot_core::provider::{LlmProvider, ProviderError};
use squidbot_llm::Router;
use squidbot_testkit::{Reply, ScriptedLlm};
use squidbot_types::Secret;
use squidbot_types::config::{Config, ProviderConfig, ProviderKind};

use crate::{KEY, Recorder, request, server};

fn no_env(_: &str) -> Option<String> {
    None
}

fn section(kind: ProviderKind, server: &ScriptedLlm) -> ProviderConfig {
    ProviderConfig {
        kind: Some(kind),
        api_base: Some(server.base_url()),
        api_key: Some(Secret::new(KEY)),
        ..ProviderConfig::default()
    }
}

/// `local` (OpenAI wire) as the default model's provider.
fn config(primary: &ScriptedLlm) -> Config {
    let mut config = Config::default();
    config.llm.model = "local/test-model".into();
    config.providers.insert("local".into(), section(ProviderKind::Openai, primary));
    config
}

#[tokio::test(start_paused = true)]
async fn rate_limit_is_retried_after_the_requested_delay() {
    let server = server().await;
    server.push(Reply::rate_limited(Some(5)));
    server.push(Reply::text("finally"));
    let router = Router::from_config(&config(&server), &no_env).unwrap();
    let started = tokio::time::Instant::now();
    let completion = router.complete(&request("local/test-model", true), &Recorder::default()).await.unwrap();
    assert_eq!(completion.content, "finally");
    assert_eq!(completion.model, "local/test-model");
    assert!(started.elapsed() >= Duration::from_secs(5), "waited only {:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.requests()[1].body["model"], "test-model");
    server.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn auth_errors_are_not_retried() {
    let server = server().await;
    server.push(Reply::auth_failure());
    let router = Router::from_config(&config(&server), &no_env).unwrap();
    let error = router.complete(&request("local/test-model", false), &Recorder::default()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
    assert_eq!(server.requests().len(), 1);
    server.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn context_overflow_neither_retries_nor_falls_back() {
    let primary = server().await;
    let backup = server().await;
    primary.push(Reply::context_overflow());
    let mut config = config(&primary);
    config.llm.fallbacks = vec!["backup/claude-test".into()];
    config.providers.insert("backup".into(), section(ProviderKind::Anthropic, &backup));
    let router = Router::from_config(&config, &no_env).unwrap();
    let error = router.complete(&request("local/test-model", true), &Recorder::default()).await.unwrap_err();
    assert!(matches!(error, ProviderError::ContextOverflow { .. }), "{error:?}");
    assert!(backup.requests().is_empty());
    primary.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn failing_primary_falls_back_to_the_next_provider() {
    let primary = server().await;
    let backup = server().await;
    primary.push_all([Reply::server_error(500), Reply::server_error(500), Reply::server_error(500)]);
    backup.push(Reply::text("from the backup"));
    let mut config = config(&primary);
    config.llm.max_retries = 2;
    config.llm.fallbacks = vec!["backup/claude-test".into()];
    config.providers.insert("backup".into(), section(ProviderKind::Anthropic, &backup));
    let router = Router::from_config(&config, &no_env).unwrap();
    let sink = Recorder::default();
    let completion = router.complete(&request("local/test-model", true), &sink).await.unwrap();
    assert_eq!(completion.model, "backup/claude-test");
    assert_eq!(completion.content, "from the backup");
    assert_eq!(primary.requests().len(), 3);
    assert_eq!(backup.requests()[0].body["model"], "claude-test");
    assert_eq!(sink.resets(), 0, "nothing was streamed before the backup answered");
    primary.assert_clean();
    backup.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn partial_text_is_reset_before_a_retry_and_a_fallback() {
    let primary = server().await;
    let backup = server().await;
    primary.push_all([Reply::cut_stream("The first attempt"), Reply::cut_stream("The second attempt")]);
    backup.push(Reply::text("The backup answer"));
    let mut config = config(&primary);
    config.llm.max_retries = 1;
    config.llm.fallbacks = vec!["backup/claude-test".into()];
    config.providers.insert("backup".into(), section(ProviderKind::Anthropic, &backup));
    let router = Router::from_config(&config, &no_env).unwrap();
    let sink = Recorder::default();
    let completion = router.complete(&request("local/test-model", true), &sink).await.unwrap();
    assert_eq!(completion.model, "backup/claude-test");
    assert_eq!(sink.resets(), 2);
    assert_eq!(sink.text(), "The backup answer");
    primary.assert_clean();
    backup.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn a_model_override_still_uses_the_configured_fallbacks() {
    let primary = server().await;
    let backup = server().await;
    primary.push(Reply::garbage("nonsense"));
    backup.push(Reply::text("fine"));
    let mut config = config(&primary);
    config.llm.max_retries = 0;
    config.llm.fallbacks = vec!["backup/claude-test".into()];
    config.providers.insert("backup".into(), section(ProviderKind::Anthropic, &backup));
    let router = Router::from_config(&config, &no_env).unwrap();
    let completion =
        router.complete(&request("local/meta-llama/llama-3.1-8b", false), &Recorder::default()).await.unwrap();
    assert_eq!(completion.model, "backup/claude-test");
    assert_eq!(primary.requests()[0].body["model"], "meta-llama/llama-3.1-8b");
    primary.assert_clean();
    backup.assert_clean();
}

#[tokio::test]
async fn missing_key_fails_with_the_env_var_to_set() {
    let server = server().await;
    let mut config = config(&server);
    let local = config.providers.get_mut("local").unwrap();
    local.api_key = None;
    local.api_key_env = Some("SQUIDBOT_TEST_LOCAL_KEY".into());
    let router = Router::from_config(&config, &no_env).unwrap();
    assert_eq!(router.validate_keys().len(), 1);
    let error = router.complete(&request("local/test-model", true), &Recorder::default()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Config { .. }), "{error:?}");
    assert!(error.to_string().contains("SQUIDBOT_TEST_LOCAL_KEY"), "{error}");
    assert!(error.to_string().contains("providers.local.api_key"), "{error}");
    assert!(server.requests().is_empty());

    let env = |name: &str| (name == "SQUIDBOT_TEST_LOCAL_KEY").then(|| KEY.to_owned());
    let router = Router::from_config(&config, &env).unwrap();
    server.push(Reply::text("authenticated"));
    let completion = router.complete(&request("local/test-model", true), &Recorder::default()).await.unwrap();
    assert_eq!(completion.content, "authenticated");
    let described = format!("{:?}", router.describe());
    assert!(!described.contains(KEY), "describe must never show the key");
    server.assert_clean();
}

#[tokio::test]
async fn preset_without_a_key_names_its_env_var() {
    let mut config = Config::default();
    config.llm.model = "openrouter/meta-llama/llama-3.1-8b".into();
    let router = Router::from_config(&config, &no_env).unwrap();
    let error = router.complete(&request("openrouter/meta-llama/llama-3.1-8b", true), &Recorder::default()).await;
    let error = error.unwrap_err();
    assert_eq!(
        error.to_string(),
        "can't call the model: no API key for provider openrouter: set OPENROUTER_API_KEY or providers.openrouter.api_key"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_abandons_the_request() {
    let server = server().await;
    server.push(Reply::text("never read").after(Duration::from_secs(60)));
    let router = Router::from_config(&config(&server), &no_env).unwrap();
    let sink = Recorder::default();
    let question = request("local/test-model", true);
    tokio::select! {
        result = router.complete(&question, &sink) => panic!("the call should still be waiting: {result:?}"),
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    assert_eq!(sink.text(), "");
    server.assert_clean();
}
