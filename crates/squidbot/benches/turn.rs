//! Per-turn overhead of the agent with a 100-message history.
//!
//! Two measurements: the agent loop's own work with an instant in-process provider and
//! an in-memory store (what squidbot adds per turn), and a whole turn through the real
//! HTTP provider to the scripted server on loopback with the real JSONL store (fsync
//! included). Run: `cargo bench -p squidbot --bench turn`.

#![allow(clippy::expect_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use squidbot_core::agent::{Agent, AgentSettings, SilentEvents};
use squidbot_core::clock::SystemClock;
use squidbot_core::context::RuntimeInfo;
use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};
use squidbot_core::session::Session;
use squidbot_core::store::memory::MemorySessionStore;
use squidbot_core::store::{Durability, DynSessionStore};
use squidbot_core::tool::ToolRegistry;
use squidbot_store::{FsWorkspace, JsonlSessionStore};
use squidbot_testkit::{Reply, ScriptedLlm};
use squidbot_types::config::{Config, ProviderConfig, ProviderKind, ToolsConfig};
use squidbot_types::session::{EntryBody, MessageRole};
use squidbot_types::{Secret, Usage};
use tokio_util::sync::CancellationToken;

const HISTORY_MESSAGES: usize = 100;
const WARMUP: usize = 20;
const ITERATIONS: usize = 300;

/// Answers at once without any IO.
struct InstantProvider;

impl LlmProvider for InstantProvider {
    async fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        sink.text_delta("ok");
        Ok(Completion {
            content: "ok".into(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: StopReason::EndTurn,
            model: request.model.clone(),
        })
    }
}

fn settings(workspace: PathBuf, model: &str) -> AgentSettings {
    AgentSettings {
        model: model.into(),
        max_turns: 20,
        max_tokens: 1024,
        temperature: None,
        context_window: 200_000,
        stream: true,
        workspace: workspace.clone(),
        runtime: RuntimeInfo {
            name: "Squid".into(),
            workspace: workspace.display().to_string(),
            date: "2026-11-21".into(),
            os: "linux".into(),
            model: String::new(),
            channel: "bench".into(),
        },
        context: "owner".into(),
    }
}

fn tools() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in squidbot_tools::builtin_tools(&ToolsConfig::default(), Arc::new(squidbot_core::sandbox::HostShell)) {
        registry.register(tool);
    }
    registry
}

fn workspace() -> tempfile::TempDir {
    let directory = tempfile::tempdir().expect("temp dir");
    for name in ["SOUL.md", "IDENTITY.md", "AGENTS.md", "USER.md", "TOOLS.md"] {
        std::fs::write(directory.path().join(name), "A paragraph of bootstrap text for the benchmark.\n".repeat(8))
            .expect("write");
    }
    directory
}

async fn prefilled(agent: &Agent, key: &str, store: &dyn DynSessionStore) -> Session {
    let (mut session, _) = agent.open_session(key).await.expect("open");
    store.create_boxed(session.header()).await.expect("create");
    session.mark_persisted();
    let mut entries = Vec::new();
    for index in 0..HISTORY_MESSAGES {
        let role = if index % 2 == 0 { MessageRole::User } else { MessageRole::Assistant };
        let body = EntryBody::Message {
            role,
            content: format!("message {index}: a typical sentence or two of conversation text."),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        };
        entries.push(session.push(body, "2026-11-21T00:00:00Z".into()));
    }
    store.append_boxed(key, &entries, Durability::Synced).await.expect("append");
    session
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    let at = |fraction: f64| samples[((samples.len() as f64 * fraction) as usize).min(samples.len() - 1)];
    println!(
        "{label}: mean {:.3} ms, median {:.3} ms, p95 {:.3} ms ({} turns, {HISTORY_MESSAGES}-message history)",
        mean.as_secs_f64() * 1e3,
        at(0.5).as_secs_f64() * 1e3,
        at(0.95).as_secs_f64() * 1e3,
        samples.len()
    );
}

async fn measure(agent: &Agent, base: &Session, before_turn: impl Fn()) -> Vec<Duration> {
    let cancel = CancellationToken::new();
    let mut samples = Vec::with_capacity(ITERATIONS);
    for iteration in 0..WARMUP + ITERATIONS {
        let mut session = base.clone();
        before_turn();
        let started = Instant::now();
        agent.run_turn(&mut session, "what is next?", &SilentEvents, &cancel).await.expect("turn");
        if iteration >= WARMUP {
            samples.push(started.elapsed());
        }
    }
    samples
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let directory = workspace();
        let workspace_path = directory.path().to_path_buf();

        let store = Arc::new(MemorySessionStore::new());
        let agent = Agent::new(
            Arc::new(InstantProvider),
            tools(),
            store.clone(),
            Arc::new(FsWorkspace::new(workspace_path.clone())),
            Arc::new(SystemClock),
            settings(workspace_path.clone(), "instant/model"),
        );
        let base = prefilled(&agent, "bench:core", store.as_ref()).await;
        report("agent loop overhead (instant provider, memory store)", measure(&agent, &base, || {}).await);

        let server = ScriptedLlm::start().await;
        server.set_require_system_prompt(true);
        let mut config = Config::default();
        config.llm.model = "local/test-model".into();
        config.providers.insert(
            "local".into(),
            ProviderConfig {
                kind: Some(ProviderKind::Openai),
                api_base: Some(server.base_url()),
                api_key: Some(Secret::new("sk-bench")),
                ..ProviderConfig::default()
            },
        );
        let router = squidbot_llm::Router::from_config(&config, &|_| None).expect("router");
        let sessions = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(JsonlSessionStore::new(sessions.path().to_path_buf()));
        let agent = Agent::new(
            Arc::new(router),
            tools(),
            store.clone(),
            Arc::new(FsWorkspace::new(workspace_path.clone())),
            Arc::new(SystemClock),
            settings(workspace_path, "local/test-model"),
        );
        let base = prefilled(&agent, "bench:full", store.as_ref()).await;
        let samples = measure(&agent, &base, || server.push(Reply::text("ok"))).await;
        report("whole turn (HTTP+SSE to scripted server, JSONL store with fsync)", samples);
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    });
}
