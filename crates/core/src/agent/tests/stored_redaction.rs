//! What a turn stores and announces of a tool call is redacted; the tool itself gets the
//! arguments as the model wrote them.

use std::sync::Mutex;

use super::*;
use crate::leaks::LeakScanner;

/// Keeps the arguments it is called with.
#[derive(Default)]
struct Recorder(Mutex<Vec<serde_json::Value>>);

impl Tool for Arc<Recorder> {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_note".into(),
            description: "writes a note".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        _context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(arguments);
        Ok(ToolOutput::text("written"))
    }
}

#[tokio::test]
async fn a_tool_calls_secret_arguments_are_stored_redacted_and_the_tool_gets_them_verbatim() {
    let arguments =
        r#"{"path":"notes.txt","content":"pw correct-horse-battery-staple, key sk-proj-abcdefghijklmnopqrstuvwx1234"}"#;
    let provider = FakeProvider::new(vec![calls(&[("a", "write_note", arguments)]), text("done")]);
    let recorder = Arc::new(Recorder::default());
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(recorder.clone()));
    let (agent, store) = agent(provider, tools, 5);
    let agent = agent.with_leak_scanner(LeakScanner::new(["correct-horse-battery-staple".to_owned()]));
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    agent.run_turn(&mut session, "save it", &SilentEvents, &CancellationToken::new()).await.unwrap();

    let received = recorder.0.lock().unwrap().clone();
    let verbatim: serde_json::Value = serde_json::from_str(arguments).unwrap();
    assert_eq!(received, [verbatim], "the tool gets the arguments as the model wrote them");
    let entries = store.load_boxed("cli:local").await.unwrap().unwrap().entries;
    let stored: Vec<&str> = entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::ToolCall { arguments, .. } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        stored,
        [r#"{"path":"notes.txt","content":"pw [REDACTED:configured_secret], key [REDACTED:openai_key]"}"#]
    );
    let everything = format!("{entries:?}");
    assert!(!everything.contains("battery") && !everything.contains("abcdefghij"), "{everything}");
}

/// Keeps what every finished tool call is announced to have returned.
#[derive(Default)]
struct Finished(Mutex<Vec<(String, bool, String)>>);

impl AgentEvents for Finished {
    fn tool_finished(&self, call: &ToolCall, is_error: bool, output: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((
            call.name.clone(),
            is_error,
            output.to_owned(),
        ));
    }
}

#[tokio::test]
async fn the_tool_finished_event_carries_the_output_with_its_secrets_redacted() {
    let provider = FakeProvider::new(vec![calls(&[("a", "leaky", "{}")]), text("done")]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Leaky));
    let (agent, store) = agent(provider, tools, 5);
    let agent = agent.with_leak_scanner(LeakScanner::new(["configured-secret-value".to_owned()]));
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    let events = Finished::default();
    agent.run_turn(&mut session, "go", &events, &CancellationToken::new()).await.unwrap();

    let finished = events.0.lock().unwrap().clone();
    let expected = "OPENAI_API_KEY=[REDACTED:openai_key]\nmine=[REDACTED:configured_secret]\nok";
    assert_eq!(finished, [("leaky".to_owned(), false, expected.to_owned())]);
    let entries = store.load_boxed("cli:local").await.unwrap().unwrap().entries;
    let stored: Vec<&str> = entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::ToolResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(stored, [expected], "the event and the session file hold the same redacted text");
}
