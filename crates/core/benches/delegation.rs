//! Delegation overhead with in-process providers that answer at once and an in-memory
//! session store: a plain assistant turn, the same turn with a normal-priority delegation
//! round trip (assistant → worker → result → assistant), and the plain turn while 100
//! background workers keep working. Run: `cargo bench -p squidbot-core --bench delegation`.

#![allow(clippy::expect_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use squidbot_core::agent::{Agent, AgentSettings, SilentEvents};
use squidbot_core::clock::FixedClock;
use squidbot_core::context::{PromptProfile, RuntimeInfo};
use squidbot_core::delegation::{
    DelegateRequest, DelegateTool, Delegator, Parent, Priority, RoleAgent, SetStatusTool, WorkerPool, roles,
};
use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};
use squidbot_core::store::memory::MemorySessionStore;
use squidbot_core::tool::ToolRegistry;
use squidbot_core::workspace::MemoryWorkspace;
use squidbot_types::message::ToolCall;
use squidbot_types::{ChatMessage, Usage};
use tokio_util::sync::CancellationToken;

fn completion(content: &str, call: Option<(&str, String)>) -> Completion {
    Completion {
        content: content.into(),
        tool_calls: call
            .map(|(name, arguments)| ToolCall { id: "call-1".into(), name: name.into(), arguments })
            .into_iter()
            .collect(),
        usage: Usage::default(),
        stop_reason: StopReason::EndTurn,
        model: "fake/model".into(),
    }
}

/// The assistant: delegates when the user spoke last (if told to), answers otherwise.
struct AssistantModel {
    delegate: bool,
}

impl LlmProvider for AssistantModel {
    async fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        _sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        let user_spoke_last = matches!(request.messages.last(), Some(ChatMessage::User { .. }));
        if self.delegate && user_spoke_last {
            let arguments = r#"{"agent": "worker", "task": "count the widgets"}"#.to_owned();
            return Ok(completion("", Some(("delegate", arguments))));
        }
        Ok(completion("There are 42 widgets.", None))
    }
}

/// A worker that reports its outcome at once, or (`busy`) keeps reporting progress
/// every `latency` without finishing, like a long task on a real model.
struct WorkerModel {
    busy: Option<Duration>,
}

impl LlmProvider for WorkerModel {
    async fn complete<'a>(
        &'a self,
        _request: &'a CompletionRequest,
        _sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        match self.busy {
            Some(latency) => {
                tokio::time::sleep(latency).await;
                Ok(completion("", Some(("set_status", r#"{"status": "still counting"}"#.to_owned()))))
            }
            None => {
                let arguments = r#"{"status": "done", "outcome": "done", "result": "42"}"#.to_owned();
                Ok(completion("", Some(("set_status", arguments))))
            }
        }
    }
}

fn settings(max_turns: u32) -> AgentSettings {
    AgentSettings {
        model: "fake/model".into(),
        max_turns,
        max_tokens: 1024,
        temperature: None,
        context_window: 200_000,
        stream: false,
        workspace: PathBuf::from("/tmp"),
        runtime: RuntimeInfo::default(),
        context: "owner".into(),
    }
}

fn assistant(delegate: bool, busy_workers: Option<Duration>) -> Arc<Agent> {
    let store = Arc::new(MemorySessionStore::new());
    let workspace = Arc::new(MemoryWorkspace::new().with("SOUL.md", "Be kind.").with("AGENTS.md", "Work carefully."));
    let clock = Arc::new(FixedClock(SystemTime::UNIX_EPOCH));
    let pool = Arc::new(WorkerPool::new());
    let mut worker_tools = ToolRegistry::new();
    worker_tools.register(Arc::new(SetStatusTool::new(pool.clone())));
    let worker = Agent::new(
        Arc::new(WorkerModel { busy: busy_workers }),
        worker_tools,
        store.clone(),
        workspace.clone(),
        clock.clone(),
        settings(1_000_000),
    )
    .with_prompt_profile(PromptProfile::sub_agent(roles::WORKER));
    let role = RoleAgent { agent: Arc::new(worker), timeout: Duration::from_secs(3600), summary: "general".into() };
    let delegator = Arc::new(Delegator::new(pool, 1_000).with_role(roles::WORKER, role));
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(DelegateTool::new(delegator.clone())));
    let agent = Agent::new(Arc::new(AssistantModel { delegate }), tools, store, workspace, clock, settings(10))
        .with_delegation(delegator);
    Arc::new(agent)
}

/// One turn in a fresh session (so every iteration does the same work).
async fn turn(agent: &Agent, counter: &AtomicU64) {
    let key = format!("bench:{}", counter.fetch_add(1, Ordering::Relaxed));
    let (mut session, _) = agent.open_session(&key).await.expect("session");
    let outcome = agent
        .run_turn(&mut session, "how many widgets?", &SilentEvents, &CancellationToken::new())
        .await
        .expect("turn");
    assert_eq!(outcome.reply, "There are 42 widgets.");
}

fn delegation(criterion: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let counter = AtomicU64::new(0);

    let plain = assistant(false, None);
    criterion.bench_function("plain assistant turn", |bench| {
        bench.iter(|| runtime.block_on(turn(&plain, &counter)));
    });

    let delegating = assistant(true, None);
    criterion.bench_function("assistant turn with a delegation round trip", |bench| {
        bench.iter(|| runtime.block_on(turn(&delegating, &counter)));
    });

    // 100 background workers, each a model call every 100 ms, owned by another session.
    let loaded = assistant(false, Some(Duration::from_millis(100)));
    let delegator = loaded.delegation().expect("delegation").clone();
    runtime.block_on(async {
        let parent = Parent {
            session_key: "bench:background-owner".into(),
            context: "owner".into(),
            correlation_id: "bench".into(),
            cancel: CancellationToken::new(),
            actor: None,
        };
        for _ in 0..100 {
            let request = DelegateRequest {
                role: roles::WORKER.into(),
                task: "keep counting".into(),
                context: None,
                response_format: None,
                priority: Priority::Background,
            };
            delegator.delegate(request, &parent).await.expect("background worker");
        }
    });
    assert_eq!(delegator.pool().running().len(), 100);
    criterion.bench_function("plain assistant turn while 100 background workers run", |bench| {
        bench.iter(|| runtime.block_on(turn(&loaded, &counter)));
    });
    runtime.block_on(delegator.shutdown());
}

criterion_group!(benches, delegation);
criterion_main!(benches);
