//! Unit tests of the agent loop with an in-process provider and tools.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use squidbot_types::session::EntryBody;

use super::*;
use crate::clock::FixedClock;
use crate::compactor::CompactionPolicy;
use crate::scripted::{ScriptedModel as FakeProvider, Step, calls, text, text_using};
use crate::store::memory::MemorySessionStore;
use crate::tool::{Tool, ToolOutput};
use crate::workspace::MemoryWorkspace;

/// A read-only tool that waits until `expected` calls are in flight at once, proving
/// concurrency (run one at a time, it would time out).
struct Rendezvous {
    barrier: Arc<tokio::sync::Barrier>,
}

impl Tool for Rendezvous {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "rendezvous".into(),
            description: "waits for its twin".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(
        &'a self,
        _arguments: serde_json::Value,
        _context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match tokio::time::timeout(Duration::from_secs(5), self.barrier.wait()).await {
            Ok(_) => Ok(ToolOutput::text("met")),
            Err(_) => Err(ToolError::RespondToModel("twin never came".into())),
        }
    }
}

fn agent(provider: Arc<FakeProvider>, tools: ToolRegistry, max_turns: u32) -> (Agent, Arc<MemorySessionStore>) {
    let store = Arc::new(MemorySessionStore::new());
    let settings = AgentSettings {
        model: "fake/model".into(),
        max_turns,
        max_tokens: 100,
        temperature: None,
        context_window: 10_000,
        stream: true,
        workspace: PathBuf::from("/tmp"),
        runtime: RuntimeInfo::default(),
        context: "owner".into(),
    };
    let agent = Agent::new(
        provider,
        tools,
        store.clone(),
        Arc::new(MemoryWorkspace::new().with("SOUL.md", "be kind")),
        Arc::new(FixedClock(SystemTime::UNIX_EPOCH)),
        settings,
    );
    (agent, store)
}

#[tokio::test]
async fn text_reply_is_recorded_with_model_and_usage() {
    let provider = FakeProvider::new(vec![text("hello there")]);
    let (agent, store) = agent(provider.clone(), ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let outcome = agent.run_turn(&mut session, "hi", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reply, "hello there");
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.usage.input_tokens, 10);
    let stored = store.load_boxed("cli:local").await.unwrap().unwrap();
    let types: Vec<&str> = stored.entries.iter().map(|entry| entry.body.type_name()).collect();
    assert_eq!(types, ["model_change", "message", "message"]);
    assert!(provider.requests()[0].system.contains("be kind"));
}

#[tokio::test]
async fn images_are_recorded_with_the_message_and_stay_in_later_history() {
    let provider = FakeProvider::new(vec![text("a cat"), text("grey")]);
    let (agent, store) = agent(provider.clone(), ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("telegram:1").await.unwrap();
    let images = [ImageRef::new("/data/telegram:1.files/cat.jpg")];
    let input = TurnInput { text: "what is this?", images: &images, actor: None };
    agent.run_turn_correlated(&mut session, input, &SilentEvents, &CancellationToken::new(), "corr").await.unwrap();
    // Reopened from the store, the next turn's request still carries the image.
    let (mut reopened, _) = agent.open_session("telegram:1").await.unwrap();
    agent.run_turn(&mut reopened, "what colour?", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let requests = provider.requests();
    assert_eq!(requests[0].messages, vec![ChatMessage::user_with_images("what is this?", images.to_vec())]);
    assert_eq!(requests[1].messages[0], ChatMessage::user_with_images("what is this?", images.to_vec()));
    assert_eq!(requests[1].messages[2], ChatMessage::user("what colour?"));
    let stored = store.load_boxed("telegram:1").await.unwrap().unwrap();
    let recorded: Vec<&Vec<ImageRef>> = stored
        .entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::Message { images, .. } => Some(images),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, [&images.to_vec(), &Vec::new(), &Vec::new(), &Vec::new()]);
    // An image counts toward the size estimate.
    assert!(estimate_message_tokens(&requests[0].messages) > 1_000);
}

#[tokio::test]
async fn independent_read_only_calls_run_concurrently_and_results_go_back() {
    let provider =
        FakeProvider::new(vec![calls(&[("a", "rendezvous", "{}"), ("b", "rendezvous", "{}")]), text("done")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Rendezvous { barrier: Arc::new(tokio::sync::Barrier::new(2)) }));
    let (agent, _) = agent(provider.clone(), tools, 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let outcome = agent.run_turn(&mut session, "go", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reply, "done");
    assert_eq!(outcome.tool_calls, 2);
    let second = &provider.requests()[1].messages;
    let results: Vec<_> = second
        .iter()
        .filter_map(|message| match message {
            ChatMessage::Tool { call_id, content, is_error, .. } => {
                Some((call_id.as_str(), content.as_str(), *is_error))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results, [("a", "met", false), ("b", "met", false)]);
}

#[tokio::test]
async fn a_turn_syncs_before_acting_and_at_its_end_only() {
    use crate::store::Durability::{Synced, Written};
    let provider = FakeProvider::new(vec![calls(&[("a", "rendezvous", "{}")]), text("done"), text("again")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Rendezvous { barrier: Arc::new(tokio::sync::Barrier::new(1)) }));
    let (agent, store) = agent(provider, tools, 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    agent.run_turn(&mut session, "go", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let durabilities = |store: &MemorySessionStore| -> Vec<(usize, Durability)> {
        store.appends().into_iter().map(|(ids, durability)| (ids.len(), durability)).collect()
    };
    // The model change and the user's message, unsynced; the tool call, synced before
    // the tool runs; its result, unsynced (the next model call follows); the reply.
    assert_eq!(durabilities(&store), [(2, Written), (2, Synced), (1, Written), (1, Synced)]);
    agent.run_turn(&mut session, "once more", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(durabilities(&store)[4..], [(1, Written), (1, Synced)]);
}

#[tokio::test]
async fn tool_failures_become_results_for_the_model() {
    let provider =
        FakeProvider::new(vec![calls(&[("a", "no_such_tool", "{}"), ("b", "rendezvous", "{oops")]), text("sorry")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Rendezvous { barrier: Arc::new(tokio::sync::Barrier::new(1)) }));
    let (agent, _) = agent(provider.clone(), tools, 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let outcome = agent.run_turn(&mut session, "go", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reply, "sorry");
    let errors: Vec<String> = provider.requests()[1]
        .messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::Tool { content, is_error: true, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2);
    assert!(errors[0].contains("unknown tool `no_such_tool`"), "{errors:?}");
    assert!(errors[1].contains("invalid JSON"), "{errors:?}");
}

#[tokio::test]
async fn max_turns_stops_and_tells_the_user() {
    let provider = FakeProvider::new(vec![calls(&[("a", "rendezvous", "{}")]), calls(&[("b", "rendezvous", "{}")])]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Rendezvous { barrier: Arc::new(tokio::sync::Barrier::new(1)) }));
    let (agent, _) = agent(provider, tools, 2);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let outcome = agent.run_turn(&mut session, "loop", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::MaxTurns);
    assert!(outcome.reply.contains("max_turns = 2"), "{}", outcome.reply);
    // The next turn's history is still valid: every call answered, the notice last.
    let history = session.history();
    assert!(matches!(history.last(), Some(ChatMessage::Assistant { content, .. }) if content.contains("max_turns")));
}

#[tokio::test]
async fn cancelling_mid_stream_records_the_partial_reply_as_interrupted() {
    let provider = FakeProvider::new(vec![Step::StreamThenHang("partial ans")]);
    let (agent, store) = agent(provider, ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        trigger.cancel();
    });
    let outcome = agent.run_turn(&mut session, "hi", &SilentEvents, &cancel).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Cancelled);
    let stored = store.load_boxed("cli:local").await.unwrap().unwrap();
    let last = stored.entries.last().unwrap();
    assert!(
        matches!(&last.body, EntryBody::Message { content, interrupted: true, .. } if content == "partial ans"),
        "{last:?}"
    );
}

#[tokio::test]
async fn context_overflow_from_the_provider_retries_with_less_history() {
    let overflow =
        || Step::Fail(ProviderError::ContextOverflow { provider: "fake".into(), message: "too long".into() });
    let provider = FakeProvider::new(vec![text("one"), overflow(), text("fits now")]);
    let (agent, _) = agent(provider.clone(), ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let big = "word ".repeat(3_000);
    agent.run_turn(&mut session, &big, &SilentEvents, &CancellationToken::new()).await.unwrap();
    let outcome = agent.run_turn(&mut session, "again", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reply, "fits now");
    let requests = provider.requests();
    assert_eq!(requests[1].messages.len(), 3);
    assert_eq!(requests[2].messages, vec![ChatMessage::user("again")]);
}

#[tokio::test]
async fn provider_errors_end_the_turn_and_keep_the_session_valid() {
    let provider =
        FakeProvider::new(vec![Step::Fail(ProviderError::Auth { provider: "fake".into(), message: "bad key".into() })]);
    let (agent, _) = agent(provider, ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let error = agent.run_turn(&mut session, "hi", &SilentEvents, &CancellationToken::new()).await.unwrap_err();
    assert!(error.to_string().contains("authentication failed"), "{error}");
    assert_eq!(session.history(), vec![ChatMessage::user("hi")]);
}

fn compacting(agent: Agent) -> Agent {
    agent.with_compaction(CompactionSettings {
        policy: CompactionPolicy::default(),
        model: "fake/model".into(),
        memories: None,
    })
}

#[tokio::test]
async fn background_compaction_summarises_older_turns_and_is_applied_next_turn() {
    let provider = FakeProvider::new(vec![
        text("a1"),
        text("a2"),
        text("a3"),
        text_using("a4", 8_600),
        text("{\"summary\": \"They discussed q1 to q3.\", \"memories\": []}"),
        text("a5"),
    ]);
    let (agent, store) = agent(provider.clone(), ToolRegistry::new(), 5);
    let agent = compacting(agent);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    for question in ["q1", "q2", "q3", "q4"] {
        agent.run_turn(&mut session, question, &SilentEvents, &CancellationToken::new()).await.unwrap();
    }
    agent.settle(&mut session, &SilentEvents).await.unwrap();
    let summary_request = &provider.requests()[4];
    assert!(summary_request.tools.is_empty());
    assert!(summary_request.messages[0].char_len() > 0);
    agent.run_turn(&mut session, "q5", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let last = provider.requests().last().unwrap().messages.clone();
    assert!(
        matches!(&last[0], ChatMessage::User { content, .. } if content.contains("They discussed q1 to q3.")),
        "{last:?}"
    );
    assert!(!last.iter().any(|message| *message == ChatMessage::user("q1")), "{last:?}");
    let stored = store.load_boxed("cli:local").await.unwrap().unwrap();
    assert!(
        stored
            .entries
            .iter()
            .any(|entry| matches!(&entry.body, EntryBody::Compaction { method, .. } if method == "aggressive"))
    );
}

#[tokio::test]
async fn compacting_now_summarises_all_but_the_last_turn() {
    let provider = FakeProvider::new(vec![
        text("a1"),
        text("a2"),
        text("{\"summary\": \"They said q1.\", \"memories\": []}"),
        text("a3"),
    ]);
    let (agent, store) = agent(provider.clone(), ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    assert_eq!(agent.compact_now(&mut session, &SilentEvents).await.unwrap(), None, "compaction is off");
    let agent = compacting(agent);
    assert_eq!(agent.compact_now(&mut session, &SilentEvents).await.unwrap(), None, "nothing to condense");
    for question in ["q1", "q2"] {
        agent.run_turn(&mut session, question, &SilentEvents, &CancellationToken::new()).await.unwrap();
    }
    assert_eq!(agent.compact_now(&mut session, &SilentEvents).await.unwrap(), Some(2));
    agent.run_turn(&mut session, "q3", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let last = provider.requests().last().unwrap().messages.clone();
    assert!(matches!(&last[0], ChatMessage::User { content, .. } if content.contains("They said q1.")), "{last:?}");
    assert_eq!(last[1], ChatMessage::user("q2"));
    let stored = store.load_boxed("cli:local").await.unwrap().unwrap();
    assert!(stored.entries.iter().any(|entry| matches!(entry.body, EntryBody::Compaction { .. })));
}

#[tokio::test]
async fn a_model_chosen_for_the_session_answers_and_is_recorded() {
    let provider = FakeProvider::new(vec![text("a1"), text("a2"), text("a3")]);
    let (agent, store) = agent(provider.clone(), ToolRegistry::new(), 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    agent.run_turn(&mut session, "q1", &SilentEvents, &CancellationToken::new()).await.unwrap();
    session.choose_model(Some("other/model".into()));
    agent.run_turn(&mut session, "q2", &SilentEvents, &CancellationToken::new()).await.unwrap();
    session.choose_model(None);
    agent.run_turn(&mut session, "q3", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let models: Vec<String> = provider.requests().iter().map(|request| request.model.clone()).collect();
    assert_eq!(models[1], "other/model");
    assert_eq!(models[0], models[2]);
    let stored = store.load_boxed("cli:local").await.unwrap().unwrap();
    let changes: Vec<&str> = stored
        .entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::ModelChange { new, .. } => Some(new.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [models[0].as_str(), "other/model", models[0].as_str()]);
}

#[tokio::test]
async fn emergency_truncation_needs_no_model_call() {
    let provider = FakeProvider::new(vec![text("a1"), text("a2"), text_using("a3", 9_700), text("a4")]);
    let (agent, _) = agent(provider.clone(), ToolRegistry::new(), 5);
    let agent = compacting(agent);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    for question in ["q1", "q2", "q3"] {
        agent.run_turn(&mut session, question, &SilentEvents, &CancellationToken::new()).await.unwrap();
    }
    assert_eq!(provider.requests().len(), 3, "no summary call");
    agent.run_turn(&mut session, "q4", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let last = provider.requests().last().unwrap().messages.clone();
    assert!(matches!(&last[0], ChatMessage::User { content, .. } if content.contains("were dropped")), "{last:?}");
}

/// Returns fixed text, e.g. a file that happens to hold secrets.
struct Leaky;

impl Tool for Leaky {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "leaky".into(),
            description: "prints secrets".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(
        &'a self,
        _arguments: serde_json::Value,
        _context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(
            "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123456\nmine=configured-secret-value\nok",
        ))
    }
}

#[derive(Default)]
struct Warnings(Mutex<Vec<String>>);

impl AgentEvents for Warnings {
    fn warning(&self, message: &str) {
        self.0.lock().unwrap().push(message.to_owned());
    }
}

#[tokio::test]
async fn secrets_in_tool_output_are_redacted_before_the_model_sees_them() {
    let provider = FakeProvider::new(vec![calls(&[("a", "leaky", "{}")]), text("done")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Leaky));
    let (agent, store) = agent(provider.clone(), tools, 5);
    let agent = agent.with_leak_scanner(crate::leaks::LeakScanner::new(["configured-secret-value".to_owned()]));
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let warnings = Warnings::default();
    agent.run_turn(&mut session, "go", &warnings, &CancellationToken::new()).await.unwrap();
    let sent = format!("{:?}", provider.requests()[1].messages);
    assert!(!sent.contains("abcdefghijklmnop") && !sent.contains("configured-secret-value"), "{sent}");
    assert!(sent.contains("[REDACTED:openai_key]") && sent.contains("[REDACTED:configured_secret]"), "{sent}");
    let stored = format!("{:?}", store.load_boxed("cli:local").await.unwrap().unwrap().entries);
    assert!(!stored.contains("configured-secret-value"), "the session file never holds it");
    let warnings = warnings.0.lock().unwrap();
    assert!(
        warnings.iter().any(|warning| warning.contains("Redacted 2 secret(s)") && warning.contains("leaky")),
        "{warnings:?}"
    );
}

/// Keeps every streamed delta and warning.
#[derive(Default)]
pub(super) struct Streamed {
    pub(super) deltas: Mutex<Vec<String>>,
    warnings: Mutex<Vec<String>>,
}

impl AgentEvents for Streamed {
    fn text_delta(&self, text: &str) {
        self.deltas.lock().unwrap().push(text.to_owned());
    }

    fn warning(&self, message: &str) {
        self.warnings.lock().unwrap().push(message.to_owned());
    }
}

#[tokio::test]
async fn secrets_in_the_streamed_reply_are_redacted_before_anyone_sees_them() {
    let provider = FakeProvider::new(vec![Step::StreamPieces(vec![
        "The password is corr",
        "ect-horse-",
        "battery-staple and the key s",
        "k-proj-abcdefghij",
        "klmnopqrstuvwx1234.",
        " Bye.",
    ])]);
    let (agent, store) = agent(provider, ToolRegistry::new(), 5);
    let agent = agent.with_leak_scanner(crate::leaks::LeakScanner::new(["correct-horse-battery-staple".to_owned()]));
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let events = Streamed::default();
    let outcome = agent.run_turn(&mut session, "tell me", &events, &CancellationToken::new()).await.unwrap();
    let expected = "The password is [REDACTED:configured_secret] and the key [REDACTED:openai_key]. Bye.";
    assert_eq!(outcome.reply, expected);
    let deltas = events.deltas.lock().unwrap().clone();
    assert_eq!(deltas.concat(), expected, "{deltas:?}");
    assert_eq!(deltas[0], "The password is ", "ordinary words go out at once: {deltas:?}");
    let stored = format!("{:?}", store.load_boxed("cli:local").await.unwrap().unwrap().entries);
    assert!(!stored.contains("battery") && !stored.contains("abcdefghij"), "{stored}");
    assert!(stored.contains("[REDACTED:configured_secret]"), "{stored}");
    let warnings = events.warnings.lock().unwrap();
    assert!(warnings.iter().any(|warning| warning.contains("Redacted 2 secret(s)")), "{warnings:?}");
}

/// Keeps the arguments of every announced tool call.
#[derive(Default)]
struct Announced(Mutex<Vec<String>>);

impl AgentEvents for Announced {
    fn tool_started(&self, call: &ToolCall) {
        self.0.lock().unwrap().push(call.arguments.clone());
    }
}

#[tokio::test]
async fn secrets_in_tool_call_arguments_are_redacted_in_the_announced_event() {
    let arguments = r#"{"path":"notes.txt","content":"pw correct-horse-battery-staple"}"#;
    let provider = FakeProvider::new(vec![calls(&[("a", "leaky", arguments), ("b", "leaky", "{}")]), text("done")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Leaky));
    let (agent, _store) = agent(provider, tools, 5);
    let agent = agent.with_leak_scanner(crate::leaks::LeakScanner::new(["correct-horse-battery-staple".to_owned()]));
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let events = Announced::default();
    agent.run_turn(&mut session, "go", &events, &CancellationToken::new()).await.unwrap();
    let announced = events.0.lock().unwrap().clone();
    assert_eq!(
        announced,
        [r#"{"path":"notes.txt","content":"pw [REDACTED:configured_secret]"}"#, "{}"],
        "the event is redacted, a clean call is announced as it came"
    );
}

#[tokio::test]
async fn a_background_compaction_is_tracked_and_stopped_by_shutdown() {
    let provider = FakeProvider::new(vec![
        text("a1"),
        text("a2"),
        text("a3"),
        text_using("a4", 8_600),
        Step::Hang, // the summary never comes
        text("a5"),
    ]);
    let (agent, store) = agent(provider.clone(), ToolRegistry::new(), 5);
    let agent = compacting(agent);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    for question in ["q1", "q2", "q3", "q4"] {
        agent.run_turn(&mut session, question, &SilentEvents, &CancellationToken::new()).await.unwrap();
    }
    while provider.requests().len() < 5 {
        tokio::task::yield_now().await; // until the summary is asked for
    }
    tokio::time::timeout(Duration::from_secs(5), agent.shutdown()).await.expect("shutdown waits for nothing hung");
    agent.settle(&mut session, &SilentEvents).await.unwrap();
    agent.run_turn(&mut session, "q5", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(provider.requests().len(), 6, "four turns, the stopped summary, one more turn");
    let stored = store.load_boxed("cli:local").await.unwrap().unwrap();
    assert!(!stored.entries.iter().any(|entry| matches!(&entry.body, EntryBody::Compaction { .. })));
}

mod contexts;
mod hooks;
mod skills_in_use;
mod stored_redaction;
