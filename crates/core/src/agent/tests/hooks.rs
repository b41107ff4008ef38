//! Hooks around tool calls: a veto reaches the model as the call's result, a rewrite is
//! what the tool gets, and after-hooks never delay the reply.

use super::*;
use crate::hooks::fake::FixedHooks;
use crate::hooks::{HookEvent, HookInput, HookVerdict};

/// Echoes the arguments it was given.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: "echoes its arguments".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        _context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("got {arguments}")))
    }
}

fn tool_results(provider: &FakeProvider) -> Vec<(String, bool)> {
    provider.requests()[1]
        .messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::Tool { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

async fn run_with(hooks: FixedHooks) -> (Arc<FakeProvider>, Arc<FixedHooks>) {
    let (provider, hooks, outcome) = run_turn_with(hooks, "go").await;
    assert_eq!(outcome.reply, "done");
    (provider, hooks)
}

async fn run_turn_with(hooks: FixedHooks, message: &str) -> (Arc<FakeProvider>, Arc<FixedHooks>, TurnOutcome) {
    let provider = FakeProvider::new(vec![calls(&[("a", "echo", r#"{"command":"rm -rf /"}"#)]), text("done")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Echo));
    let hooks = Arc::new(hooks);
    let (agent, _) = agent(provider.clone(), tools, 5);
    let agent = agent.with_hooks(vec![hooks.clone()]);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let outcome = agent.run_turn(&mut session, message, &SilentEvents, &CancellationToken::new()).await.unwrap();
    (provider, hooks, outcome)
}

fn seen_of(hooks: &FixedHooks, event: HookEvent) -> Vec<HookInput> {
    hooks.seen.lock().unwrap().iter().filter(|input| input.event == event).cloned().collect()
}

async fn observed_eventually(hooks: &FixedHooks, count: usize) -> Vec<HookEvent> {
    for _ in 0..100 {
        if hooks.observed.lock().unwrap().len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    hooks.observed_events()
}

#[tokio::test]
async fn a_veto_reaches_the_model_as_the_result_of_the_call() {
    let (provider, hooks) = run_with(FixedHooks::new(HookVerdict::Veto("no deleting".into()))).await;
    assert_eq!(tool_results(&provider), [("Refused by a hook: no deleting".to_owned(), true)]);
    let seen = seen_of(&hooks, HookEvent::BeforeTool);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].tool, "echo");
    assert_eq!(seen[0].arguments, serde_json::json!({"command": "rm -rf /"}));
    assert_eq!(seen[0].session, "cli:local");
}

#[tokio::test]
async fn a_rewrite_changes_what_the_tool_gets() {
    let rewrite = HookVerdict::Rewrite(serde_json::json!({"command": "ls"}));
    let (provider, _) = run_with(FixedHooks::new(rewrite)).await;
    assert_eq!(tool_results(&provider), [(r#"got {"command":"ls"}"#.to_owned(), false)]);
}

#[tokio::test]
async fn an_allowed_call_runs_as_asked_and_observers_hear_of_every_event_in_order() {
    let (provider, hooks) = run_with(FixedHooks::new(HookVerdict::Allow)).await;
    assert_eq!(tool_results(&provider), [(r#"got {"command":"rm -rf /"}"#.to_owned(), false)]);
    let observed = observed_eventually(&hooks, 4).await;
    assert_eq!(
        observed,
        [HookEvent::SessionCreated, HookEvent::TurnStarted, HookEvent::AfterTool, HookEvent::TurnFinished]
    );
    let observed = hooks.observed.lock().unwrap();
    assert_eq!(observed[2].detail["ok"], true);
    assert!(observed[2].detail["output"].as_str().unwrap().contains("rm -rf"), "{observed:?}");
    assert_eq!(observed[3].detail["status"], "completed");
    assert_eq!(observed[3].detail["tool_calls"], 1);
    let decided: Vec<HookEvent> = hooks.seen.lock().unwrap().iter().map(|input| input.event).collect();
    assert_eq!(decided, [HookEvent::MessageReceived, HookEvent::BeforeTool, HookEvent::BeforeReply]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_after_hook_does_not_delay_the_reply() {
    let hooks = FixedHooks { after_delay: Duration::from_secs(3600), ..FixedHooks::new(HookVerdict::Allow) };
    let started = tokio::time::Instant::now();
    let (_, hooks) = run_with(hooks).await;
    assert!(started.elapsed() < Duration::from_secs(1), "the reply waited {:?}", started.elapsed());
    assert!(hooks.observed.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_rewritten_message_is_what_the_model_reads_and_the_session_keeps() {
    let hooks = FixedHooks::on(HookEvent::MessageReceived, HookVerdict::Rewrite("go, politely".into()));
    let (provider, hooks, _) = run_turn_with(hooks, "go").await;
    assert_eq!(seen_of(&hooks, HookEvent::MessageReceived)[0].text.as_deref(), Some("go"));
    let first = &provider.requests()[0];
    let said: Vec<&str> = first
        .messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::User { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said, ["go, politely"]);
}

#[tokio::test]
async fn a_vetoed_message_never_reaches_the_model_and_the_person_reads_why() {
    let hooks = FixedHooks::on(HookEvent::MessageReceived, HookVerdict::Veto("no homework answers".into()));
    let (provider, _, outcome) = run_turn_with(hooks, "solve my homework").await;
    assert!(provider.requests().is_empty(), "the model was asked");
    assert_eq!(outcome.status, TurnStatus::Refused);
    assert_eq!(outcome.reply, "Your message was not accepted: no homework answers");
}

#[tokio::test]
async fn a_reply_hook_rewrites_or_withholds_the_final_answer() {
    let hooks = FixedHooks::on(HookEvent::BeforeReply, HookVerdict::Rewrite("done (checked)".into()));
    let (_, hooks, outcome) = run_turn_with(hooks, "go").await;
    assert_eq!(seen_of(&hooks, HookEvent::BeforeReply)[0].text.as_deref(), Some("done"));
    assert_eq!(outcome.reply, "done (checked)");

    let hooks = FixedHooks::on(HookEvent::BeforeReply, HookVerdict::Veto("it names a person".into()));
    let (_, _, outcome) = run_turn_with(hooks, "go").await;
    assert_eq!(outcome.reply, "The reply was withheld: it names a person");
}

#[tokio::test]
async fn a_reply_hook_holds_the_stream_and_readers_get_only_what_it_decided() {
    let provider = FakeProvider::new(vec![Step::StreamPieces(vec!["The secret ", "plan is ", "ready."])]);
    let hooks = Arc::new(FixedHooks::on(HookEvent::BeforeReply, HookVerdict::Rewrite("Plan ready.".into())));
    let (agent, _) = agent(provider, ToolRegistry::new(), 5);
    let agent = agent.with_hooks(vec![hooks.clone()]);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let events = super::Streamed::default();
    let outcome = agent.run_turn(&mut session, "status?", &events, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reply, "Plan ready.");
    let deltas = events.deltas.lock().unwrap().clone();
    assert_eq!(deltas, ["Plan ready."], "nothing streamed before the hook decided: {deltas:?}");
    assert_eq!(seen_of(&hooks, HookEvent::BeforeReply)[0].text.as_deref(), Some("The secret plan is ready."));
}
