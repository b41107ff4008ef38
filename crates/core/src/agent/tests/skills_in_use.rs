//! The skills a turn read are shared by its tool calls and forgotten when the next turn
//! starts.

use std::path::Path;

use super::*;

/// Notes a skill as read when asked, and answers with the skills its turn read so far.
struct SkillReader;

impl Tool for SkillReader {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill_reader".into(),
            description: "reads a skill".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if arguments["read"] == true {
            context.skills_in_use.record(Path::new("/skills/github"));
        }
        Ok(ToolOutput::text(format!("in use: {:?}", context.skills_in_use.directories())))
    }
}

#[tokio::test]
async fn a_skill_read_in_one_step_counts_for_the_next_steps_of_its_turn_only() {
    let provider = FakeProvider::new(vec![
        calls(&[("a", "skill_reader", r#"{"read": true}"#)]),
        calls(&[("b", "skill_reader", "{}")]),
        text("first turn done"),
        calls(&[("c", "skill_reader", "{}")]),
        text("second turn done"),
    ]);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(SkillReader));
    let (agent, _store) = agent(provider.clone(), tools, 5);
    let (mut session, _) = agent.open_session("cli:local").await.unwrap();
    agent.run_turn(&mut session, "use github", &SilentEvents, &CancellationToken::new()).await.unwrap();
    agent.run_turn(&mut session, "again", &SilentEvents, &CancellationToken::new()).await.unwrap();
    let requests = provider.requests();
    let last_result = |index: usize| format!("{:?}", requests[index].messages.last().unwrap());
    assert!(last_result(2).contains("/skills/github"), "a later step of the turn sees it: {}", last_result(2));
    assert!(last_result(4).contains("in use: []"), "the next turn starts with none: {}", last_result(4));
}
