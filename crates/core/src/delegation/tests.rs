//! Delegation end to end inside the core: an assistant and its sub-agents on in-process
//! providers, with real sessions in a memory store.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use squidbot_types::message::{ToolCall, Usage};
use squidbot_types::session::EntryBody;
use squidbot_types::{ChatMessage, ToolSpec};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::agent::{Agent, AgentSettings, SilentEvents, TurnStatus};
use crate::clock::FixedClock;
use crate::context::{PromptProfile, RuntimeInfo};
use crate::events::{EventHub, Filter, TurnEventKind};
use crate::provider::{Completion, CompletionRequest, StopReason};
use crate::runs::{RunRequest, Runner};
use crate::scripted::{ScriptedModel as Fake, Step, call, text};
use crate::store::DynSessionStore;
use crate::store::memory::MemorySessionStore;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use crate::workspace::MemoryWorkspace;

fn report_done(result: &str) -> Step {
    call("set_status", serde_json::json!({"status": "finished", "outcome": "done", "result": result}))
}

/// A read-only tool that records the context of every call.
#[derive(Default)]
struct Probe {
    seen: Mutex<Vec<ToolContext>>,
}

impl Tool for Probe {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "probe".into(),
            description: "looks".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(
        &'a self,
        _arguments: serde_json::Value,
        context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.seen.lock().unwrap().push(context.clone());
        Ok(ToolOutput::text("probe trace: 42 widgets"))
    }
}

fn settings(max_turns: u32) -> AgentSettings {
    AgentSettings {
        model: "fake/model".into(),
        max_turns,
        max_tokens: 100,
        temperature: None,
        context_window: 100_000,
        stream: false,
        workspace: PathBuf::from("/tmp"),
        runtime: RuntimeInfo::default(),
        context: "owner".into(),
    }
}

struct Options {
    max_workers: usize,
    timeout: Duration,
    worker_max_turns: u32,
    direct: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { max_workers: 4, timeout: Duration::from_secs(300), worker_max_turns: 10, direct: false }
    }
}

struct Fixture {
    delegator: Arc<Delegator>,
    assistant: Arc<Agent>,
    store: Arc<MemorySessionStore>,
    assistant_llm: Arc<Fake>,
    worker_llm: Arc<Fake>,
    probe: Arc<Probe>,
}

fn fixture(assistant_steps: Vec<Step>, worker_steps: Vec<Step>, options: Options) -> Fixture {
    let store = Arc::new(MemorySessionStore::new());
    let workspace =
        Arc::new(MemoryWorkspace::new().with("SOUL.md", "assistant soul").with("AGENTS.md", "shared rules"));
    let clock = Arc::new(FixedClock(SystemTime::UNIX_EPOCH));
    let pool = Arc::new(WorkerPool::new());
    let worker_llm = Fake::new(worker_steps);
    let probe = Arc::new(Probe::default());
    let mut worker_tools = ToolRegistry::new();
    worker_tools.register(Arc::new(SetStatusTool::new(pool.clone())));
    worker_tools.register(probe.clone());
    let mut delegator = Delegator::new(pool, options.max_workers);
    for role in [roles::WORKER, roles::RESEARCHER] {
        let agent = Agent::new(
            worker_llm.clone(),
            worker_tools.clone(),
            store.clone(),
            workspace.clone(),
            clock.clone(),
            settings(options.worker_max_turns),
        )
        .with_prompt_profile(PromptProfile::sub_agent(role));
        delegator = delegator.with_role(
            role,
            RoleAgent { agent: Arc::new(agent), timeout: options.timeout, summary: roles::summary(role) },
        );
    }
    let delegator = Arc::new(delegator);
    let assistant_llm = Fake::new(assistant_steps);
    let mut tools = ToolRegistry::new();
    if options.direct {
        tools.register(Arc::new(SpawnTool::new(delegator.clone(), roles::WORKER)));
        tools.register(probe.clone());
    } else {
        tools.register(Arc::new(DelegateTool::new(delegator.clone())));
        tools.register(Arc::new(CancelWorkerTool::new(delegator.clone())));
    }
    let assistant = Agent::new(assistant_llm.clone(), tools, store.clone(), workspace, clock, settings(10))
        .with_delegation(delegator.clone());
    Fixture { delegator, assistant: Arc::new(assistant), store, assistant_llm, worker_llm, probe }
}

impl Fixture {
    async fn turn(&self, input: &str) -> crate::agent::TurnOutcome {
        let (mut session, _) = self.assistant.open_session("cli:local").await.unwrap();
        self.assistant
            .run_turn_correlated(&mut session, input.into(), &SilentEvents, &CancellationToken::new(), "corr-1")
            .await
            .unwrap()
    }

    async fn entries(&self, key: &str) -> Vec<EntryBody> {
        self.store.load_boxed(key).await.unwrap().unwrap().entries.into_iter().map(|entry| entry.body).collect()
    }

    fn only_worker(&self) -> WorkerSnapshot {
        let workers = self.delegator.pool().list();
        assert_eq!(workers.len(), 1, "{workers:?}");
        workers[0].clone()
    }
}

/// Tool results the assistant's model received in its last request.
fn tool_results(request: &CompletionRequest) -> Vec<(String, bool)> {
    request
        .messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::Tool { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

fn delegate(role: &str, priority: &str) -> Step {
    call(
        "delegate",
        serde_json::json!({"agent": role, "task": "count the widgets", "context": "they are in the shed", "response_format": "a number", "priority": priority}),
    )
}

#[tokio::test]
async fn normal_delegation_returns_the_workers_result_and_keeps_its_traces_out() {
    let fixture = fixture(
        vec![delegate("researcher", "normal"), text("There are 42 widgets.")],
        vec![call("probe", serde_json::json!({})), report_done("42")],
        Options::default(),
    );
    let outcome = fixture.turn("how many widgets?").await;
    assert_eq!(outcome.reply, "There are 42 widgets.");
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Done);
    assert_eq!(worker.role, "researcher");
    assert_eq!(worker.session_key, format!("worker:researcher:{}", worker.id));

    // The assistant saw the result, naming the worker's session, and nothing of its tools.
    let last = fixture.assistant_llm.requests().last().unwrap().clone();
    let results = tool_results(&last);
    assert_eq!(results.len(), 1);
    assert!(!results[0].1, "{results:?}");
    assert!(results[0].0.contains("42") && results[0].0.contains(&worker.session_key), "{results:?}");
    let sent = format!("{:?}", last.messages);
    assert!(!sent.contains("probe trace") && !sent.contains("set_status"), "{sent}");

    // The worker got a self-contained brief and a sub-agent prompt.
    let brief = &fixture.worker_llm.requests()[0];
    let ChatMessage::User { content, .. } = &brief.messages[0] else { panic!("{brief:?}") };
    assert!(content.contains("count the widgets") && content.contains("they are in the shed"), "{content}");
    assert!(content.contains("## Respond with\na number"), "{content}");
    assert!(brief.system.contains("researcher sub-agent") && !brief.system.contains("assistant soul"));
    assert!(brief.tools.iter().any(|tool| tool.name == "set_status"));

    // Session isolation: each session holds its own entries.
    let assistant_entries = format!("{:?}", fixture.entries("cli:local").await);
    assert!(assistant_entries.contains("delegate") && !assistant_entries.contains("probe"), "{assistant_entries}");
    let worker_entries = fixture.entries(&worker.session_key).await;
    let names: Vec<&str> = worker_entries
        .iter()
        .filter_map(|entry| match entry {
            EntryBody::ToolCall { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["probe", "set_status"]);
    assert!(format!("{worker_entries:?}").contains("probe trace: 42 widgets"));
    assert_eq!(fixture.worker_llm.requests().len(), 2, "reporting an outcome ends the worker without another call");
}

#[tokio::test]
async fn the_correlation_id_reaches_the_worker_its_tools_and_the_outcome() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("done")],
        vec![call("probe", serde_json::json!({})), report_done("ok")],
        Options::default(),
    );
    let outcome = fixture.turn("go").await;
    assert_eq!(outcome.correlation_id, "corr-1");
    let worker = fixture.only_worker();
    assert_eq!(worker.correlation_id, "corr-1");
    let seen = fixture.probe.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].correlation_id, "corr-1");
    assert_eq!(seen[0].session_key, worker.session_key);
    let entries = fixture.entries(&worker.session_key).await;
    let EntryBody::Message { content, .. } =
        entries.iter().find(|entry| matches!(entry, EntryBody::Message { .. })).unwrap()
    else {
        unreachable!()
    };
    assert!(content.contains("correlation corr-1") && content.contains("for session cli:local"), "{content}");
}

#[tokio::test]
async fn a_plain_final_answer_is_the_workers_result_in_one_call() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("It's written.")],
        vec![call("probe", serde_json::json!({})), text("  done: wrote the file\n")],
        Options::default(),
    );
    let outcome = fixture.turn("go").await;
    assert_eq!(outcome.reply, "It's written.");
    let worker = fixture.only_worker();
    assert_eq!((worker.state, worker.result.as_deref()), (WorkerState::Done, Some("done: wrote the file")));
    assert_eq!(fixture.worker_llm.requests().len(), 2, "a tool call, then the answer; no reminder");
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert_eq!(results.len(), 1);
    assert!(!results[0].1 && results[0].0.contains("finished]\n\ndone: wrote the file"), "{results:?}");
}

#[tokio::test]
async fn a_worker_that_reports_failed_is_failed_even_after_a_plain_answer() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("It couldn't.")],
        vec![call(
            "set_status",
            serde_json::json!({"status": "stuck", "outcome": "failed", "result": "note.txt is read-only"}),
        )],
        Options::default(),
    );
    fixture.turn("go").await;
    let worker = fixture.only_worker();
    assert_eq!((worker.state, worker.result.as_deref()), (WorkerState::Failed, Some("note.txt is read-only")));
    assert_eq!(fixture.worker_llm.requests().len(), 1);
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert!(results[0].1 && results[0].0.contains("failed] note.txt is read-only"), "{results:?}");
}

#[tokio::test]
async fn an_empty_final_answer_gets_exactly_one_reminder_then_fails() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("It could not finish.")],
        vec![text(""), text("   "), text("never asked for")],
        Options::default(),
    );
    fixture.turn("go").await;
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Failed);
    assert_eq!(worker.result.as_deref(), Some("it ended 2 times without an answer, even after a reminder"));
    let requests = fixture.worker_llm.requests();
    assert_eq!(requests.len(), 2, "one reminder, no more");
    let Some(ChatMessage::User { content, .. }) = requests[1].messages.last() else { panic!("{:?}", requests[1]) };
    assert!(content.contains("You ended without an answer"), "{content}");
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert!(results[0].1 && results[0].0.contains("failed"), "{results:?}");
}

#[tokio::test]
async fn a_reminded_worker_that_then_answers_succeeds() {
    let fixture =
        fixture(vec![delegate("worker", "normal"), text("42.")], vec![text(""), text("42")], Options::default());
    fixture.turn("go").await;
    let worker = fixture.only_worker();
    assert_eq!((worker.state, worker.result.as_deref()), (WorkerState::Done, Some("42")));
    assert_eq!(fixture.worker_llm.requests().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_worker_past_its_timeout_fails_and_the_assistant_goes_on() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("It took too long.")],
        vec![Step::Hang],
        Options { timeout: Duration::from_secs(30), ..Options::default() },
    );
    let outcome = fixture.turn("go").await;
    assert_eq!(outcome.reply, "It took too long.");
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Failed);
    assert_eq!(worker.result.as_deref(), Some("timed out after 30s"));
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert!(results[0].1 && results[0].0.contains("timed out after 30s"), "{results:?}");
}

#[tokio::test]
async fn a_looping_worker_fails_at_max_turns() {
    let looping: Vec<Step> =
        (0..3).map(|_| call("set_status", serde_json::json!({"status": "still looking"}))).collect();
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("It got stuck.")],
        looping,
        Options { worker_max_turns: 3, ..Options::default() },
    );
    fixture.turn("go").await;
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Failed);
    assert!(worker.result.as_deref().unwrap().contains("max_turns = 3"), "{worker:?}");
    assert_eq!(worker.status, "still looking");
}

#[tokio::test]
async fn a_panicking_worker_is_caught_and_reported() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("Something broke.")],
        vec![Step::Panic("model adapter exploded")],
        Options::default(),
    );
    let outcome = fixture.turn("go").await;
    assert_eq!(outcome.reply, "Something broke.");
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Failed);
    assert!(worker.result.as_deref().unwrap().contains("panic: model adapter exploded"), "{worker:?}");
}

#[tokio::test]
async fn an_empty_result_fails_with_a_clear_reason() {
    let fixture = fixture(
        vec![delegate("worker", "normal"), text("Nothing came back.")],
        vec![call("set_status", serde_json::json!({"status": "x", "outcome": "done", "result": "  "}))],
        Options::default(),
    );
    fixture.turn("go").await;
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Failed);
    assert_eq!(worker.result.as_deref(), Some("it reported done but returned an empty result"));
}

#[tokio::test]
async fn unknown_roles_and_garbage_arguments_are_errors_for_the_model() {
    let fixture = fixture(
        vec![
            Step::Answer(Completion {
                content: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "a".into(),
                        name: "delegate".into(),
                        arguments: r#"{"agent": "astrologer", "task": "stars"}"#.into(),
                    },
                    ToolCall { id: "b".into(), name: "delegate".into(), arguments: r#"{"agent": 5}"#.into() },
                    ToolCall {
                        id: "c".into(),
                        name: "delegate".into(),
                        arguments: r#"{"agent": "worker", "task": "x", "priority": "urgent"}"#.into(),
                    },
                    ToolCall {
                        id: "d".into(),
                        name: "delegate".into(),
                        arguments: r#"{"agent": "worker", "task": "   "}"#.into(),
                    },
                ],
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                model: "fake/model".into(),
            }),
            text("Sorry."),
        ],
        Vec::new(),
        Options::default(),
    );
    assert_eq!(fixture.turn("go").await.reply, "Sorry.");
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert!(results.iter().all(|(_, is_error)| *is_error), "{results:?}");
    assert!(results[0].0.contains("no such role") && results[0].0.contains("researcher, worker"), "{results:?}");
    assert!(results[1].0.contains("invalid arguments"), "{results:?}");
    assert!(results[2].0.contains("unknown variant `urgent`"), "{results:?}");
    assert!(results[3].0.contains("the task is empty"), "{results:?}");
    assert!(fixture.delegator.pool().list().is_empty());
}

#[tokio::test]
async fn background_work_returns_at_once_and_its_result_arrives_later_as_its_own_message() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let fixture = fixture(
        vec![delegate("researcher", "background"), text("I'm on it."), text("The shed holds 42 widgets.")],
        vec![Step::Gated(gate.clone(), Box::new(report_done("42 widgets")))],
        Options::default(),
    );
    let runner = Runner::new(fixture.assistant.clone(), EventHub::new());
    let mut events = runner.hub().subscribe(Filter::Session("cli:local".into()));
    let request = |input: &str| RunRequest {
        session_key: "cli:local".into(),
        input: input.into(),
        images: Vec::new(),
        origin: "test".into(),
        run_id: None,
        correlation_id: None,
        actor: None,
    };
    let mut handle = runner.start(request("count the widgets later")).unwrap();
    let mut reply = None;
    while let Some(event) = handle.events.recv().await {
        if let TurnEventKind::Finished { reply: text, .. } = &event.kind {
            reply = Some(text.clone());
            break;
        }
    }
    assert_eq!(reply.as_deref(), Some("I'm on it."), "the assistant answered while the worker waits");
    let worker = fixture.only_worker();
    assert_eq!(worker.state, WorkerState::Running);
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert!(results[0].0.contains("in the background") && results[0].0.contains(&worker.id), "{results:?}");

    // The status block lists the running worker on the next prompt.
    let section = fixture.delegator.status_section("cli:local").unwrap();
    assert!(section.body.contains(&worker.id) && section.body.contains("Running:"), "{section:?}");

    gate.add_permits(1);
    let background = loop {
        let event = events.recv().await.unwrap();
        if let TurnEventKind::Background { text, worker_id, status, .. } = &event.kind {
            assert_eq!(event.correlation_id, worker.correlation_id);
            break (text.clone(), worker_id.clone(), status.clone());
        }
    };
    assert_eq!(background.1, worker.id);
    assert_eq!(background.2, "done");
    assert!(
        background.0.starts_with("[background researcher") && background.0.ends_with("42 widgets"),
        "{}",
        background.0
    );

    // It is a distinct entry of the assistant's session, seen by the model next turn.
    let entries = fixture.entries("cli:local").await;
    assert!(entries.iter().any(|entry| matches!(entry, EntryBody::Delegate { result, status, .. } if result == "42 widgets" && status == "done")));
    let mut handle = runner.start(request("so?")).unwrap();
    while let Some(event) = handle.events.recv().await {
        if event.kind.is_terminal() {
            break;
        }
    }
    let last = fixture.assistant_llm.requests().last().unwrap().clone();
    assert!(format!("{:?}", last.messages).contains("[Background result: researcher worker"), "{:?}", last.messages);
    assert!(last.system.contains("# Workers") && last.system.contains("Recently finished:"), "{}", last.system);
    assert!(fixture.delegator.take_results("cli:local").is_empty(), "delivered once");
    runner.drain().await;
}

#[tokio::test]
async fn without_a_runner_background_results_join_the_next_turn() {
    let fixture = fixture(
        vec![delegate("worker", "background"), text("On it."), text("It found 7.")],
        vec![report_done("7")],
        Options::default(),
    );
    fixture.turn("start").await;
    fixture.delegator.wait_for_background("cli:local", &CancellationToken::new()).await;
    let outcome = fixture.turn("and?").await;
    assert_eq!(outcome.reply, "It found 7.");
    let entries = fixture.entries("cli:local").await;
    let kinds: Vec<&str> = entries.iter().map(EntryBody::type_name).collect();
    let delegate = kinds.iter().position(|kind| *kind == "delegate").unwrap();
    let second_user = entries
        .iter()
        .rposition(|entry| matches!(entry, EntryBody::Message { content, .. } if content == "and?"))
        .unwrap();
    assert!(delegate < second_user, "{kinds:?}");
}

#[tokio::test]
async fn more_workers_than_allowed_is_refused_with_a_clear_error() {
    let fixture = fixture(
        vec![delegate("worker", "background"), delegate("worker", "background"), text("One at a time.")],
        vec![Step::Hang],
        Options { max_workers: 1, ..Options::default() },
    );
    fixture.turn("two things").await;
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert_eq!(results.len(), 2);
    assert!(!results[0].1);
    assert!(results[1].1 && results[1].0.contains("max_workers = 1"), "{results:?}");
    fixture.delegator.shutdown().await;
    assert_eq!(fixture.only_worker().state, WorkerState::Cancelled);
}

#[tokio::test]
async fn the_assistant_and_people_can_cancel_a_worker() {
    let fixture = fixture(
        vec![delegate("worker", "background"), text("Started.")],
        vec![Step::Hang, Step::Hang],
        Options::default(),
    );
    fixture.turn("start").await;
    let worker = fixture.only_worker();
    // From outside (the gateway's workers.cancel): the worker ends as cancelled.
    fixture.delegator.cancel(&worker.id).unwrap();
    fixture.delegator.wait_for_background("cli:local", &CancellationToken::new()).await;
    let ended = fixture.delegator.pool().snapshot(&worker.id).unwrap();
    assert_eq!(ended.state, WorkerState::Cancelled);
    let delivered = fixture.delegator.take_results("cli:local");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].state, WorkerState::Cancelled);
    assert!(matches!(fixture.delegator.cancel(&worker.id), Err(PoolError::AlreadyEnded { .. })));

    // From the assistant: the tool refuses other sessions' workers and ended ones.
    let tool = CancelWorkerTool::new(fixture.delegator.clone());
    let context = |session: &str| ToolContext {
        workspace: PathBuf::from("/tmp"),
        session_key: session.into(),
        context: "owner".into(),
        cancel: CancellationToken::new(),
        correlation_id: String::new(),
        actor: None,
        skills_in_use: Default::default(),
    };
    let other = Tool::call(&tool, serde_json::json!({"id": worker.id}), &context("telegram:1")).await.unwrap_err();
    assert!(other.to_string().contains("no such worker"), "{other}");
    let ended = Tool::call(&tool, serde_json::json!({"id": worker.id}), &context("cli:local")).await.unwrap_err();
    assert!(ended.to_string().contains("already ended"), "{ended}");
    let parent = Parent {
        session_key: "cli:local".into(),
        context: "owner".into(),
        correlation_id: "c".into(),
        cancel: CancellationToken::new(),
        actor: None,
    };
    let request = DelegateRequest {
        role: "worker".into(),
        task: "wait".into(),
        context: None,
        response_format: None,
        priority: Priority::Background,
    };
    let Delegated::Started(second) = fixture.delegator.delegate(request, &parent).await.unwrap() else { panic!() };
    let stopped = Tool::call(&tool, serde_json::json!({"id": second.id}), &context("cli:local")).await.unwrap();
    assert!(stopped.content.starts_with("Cancelling") && stopped.content.contains(&second.id), "{}", stopped.content);
    fixture.delegator.wait_for_background("cli:local", &CancellationToken::new()).await;
    assert_eq!(fixture.delegator.pool().snapshot(&second.id).unwrap().state, WorkerState::Cancelled);
}

#[tokio::test]
async fn stopping_the_turn_stops_its_normal_priority_worker() {
    let fixture = fixture(vec![delegate("worker", "normal")], vec![Step::Hang], Options::default());
    let (mut session, _) = fixture.assistant.open_session("cli:local").await.unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let pool = fixture.delegator.pool().clone();
    tokio::spawn(async move {
        while pool.list().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        trigger.cancel();
    });
    let outcome = fixture.assistant.run_turn(&mut session, "go", &SilentEvents, &cancel).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Cancelled);
    fixture.delegator.shutdown().await;
    assert_eq!(fixture.only_worker().state, WorkerState::Cancelled);
}

#[tokio::test]
async fn direct_mode_spawns_a_blocking_child_with_its_own_session() {
    let fixture = fixture(
        vec![call("spawn", serde_json::json!({"task": "count the widgets"})), text("42 it is.")],
        vec![call("probe", serde_json::json!({})), report_done("42")],
        Options { direct: true, ..Options::default() },
    );
    let outcome = fixture.turn("count").await;
    assert_eq!(outcome.reply, "42 it is.");
    let worker = fixture.only_worker();
    assert_eq!(worker.role, "worker");
    assert_eq!(worker.state, WorkerState::Done);
    let results = tool_results(fixture.assistant_llm.requests().last().unwrap());
    assert!(results[0].0.contains("42") && !format!("{results:?}").contains("probe trace"), "{results:?}");
    assert!(format!("{:?}", fixture.entries(&worker.session_key).await).contains("probe trace"));
}

#[tokio::test]
async fn set_status_outside_a_worker_is_refused() {
    let tool = SetStatusTool::new(Arc::new(WorkerPool::new()));
    let context = ToolContext {
        workspace: PathBuf::from("/tmp"),
        session_key: "cli:local".into(),
        context: "owner".into(),
        cancel: CancellationToken::new(),
        correlation_id: String::new(),
        actor: None,
        skills_in_use: Default::default(),
    };
    let error = Tool::call(&tool, serde_json::json!({"status": "hi"}), &context).await.unwrap_err();
    assert!(error.to_string().contains("only works inside a delegated sub-agent"), "{error}");
}

mod messages;
