//! Hooks around tool calls: a veto reaches the model as the call's result, a rewrite is
//! what the tool gets, and after-hooks never delay the reply.

use super::*;
use crate::hooks::HookVerdict;
use crate::hooks::fake::FixedHooks;

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
    let provider = FakeProvider::new(vec![calls(&[("a", "echo", r#"{"command":"rm -rf /"}"#)]), text("done")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Echo));
    let hooks = Arc::new(hooks);
    let (agent, _) = agent(provider.clone(), tools, 5);
    let agent = agent.with_hooks(hooks.clone());
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let outcome = agent.run_turn(&mut session, "go", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reply, "done");
    (provider, hooks)
}

#[tokio::test]
async fn a_veto_reaches_the_model_as_the_result_of_the_call() {
    let (provider, hooks) = run_with(FixedHooks::new(HookVerdict::Veto("no deleting".into()))).await;
    assert_eq!(tool_results(&provider), [("Refused by a hook: no deleting".to_owned(), true)]);
    let seen = hooks.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].event, "before_tool");
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
async fn an_allowed_call_runs_as_asked_and_after_hooks_hear_of_it() {
    let (provider, hooks) = run_with(FixedHooks::new(HookVerdict::Allow)).await;
    assert_eq!(tool_results(&provider), [(r#"got {"command":"rm -rf /"}"#.to_owned(), false)]);
    for _ in 0..100 {
        if !hooks.after_done.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let done = hooks.after_done.lock().unwrap();
    assert_eq!(done.len(), 1);
    assert!(done[0].ok && done[0].output.contains("rm -rf"), "{done:?}");
}

#[tokio::test(start_paused = true)]
async fn a_slow_after_hook_does_not_delay_the_reply() {
    let hooks = FixedHooks { after_delay: Duration::from_secs(3600), ..FixedHooks::new(HookVerdict::Allow) };
    let started = tokio::time::Instant::now();
    let (_, hooks) = run_with(hooks).await;
    assert!(started.elapsed() < Duration::from_secs(1), "the reply waited {:?}", started.elapsed());
    assert!(hooks.after_done.lock().unwrap().is_empty());
}
