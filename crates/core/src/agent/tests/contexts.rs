//! Whose files a context's prompt is read from: a person's own `USER.md` (never the
//! owner's), a group's `GROUP.md`, and the workspace's other files.

use std::collections::HashMap;

use super::*;
use crate::workspace::{ContextKind, ContextProfile, ContextWorkspaceError};

/// Workspaces and profiles of other contexts held in memory, as the store lays them out.
struct FakeContexts(HashMap<String, ContextWorkspace>);

impl ContextWorkspaces for FakeContexts {
    fn workspace(&self, context: &str) -> Result<Option<ContextWorkspace>, ContextWorkspaceError> {
        Ok(self.0.get(context).cloned())
    }
}

fn context(path: &str, kind: ContextKind, workspace: MemoryWorkspace, profile: MemoryWorkspace) -> ContextWorkspace {
    ContextWorkspace {
        path: PathBuf::from(path),
        files: Arc::new(workspace),
        profile: Some(ContextProfile { kind, files: Arc::new(profile) }),
    }
}

/// An agent whose own (the owner's) workspace has a private USER.md, with bob's and a
/// chess club's contexts beside it; the system prompt of one turn in each of `contexts`.
async fn prompts_of(contexts: &[&str]) -> Vec<String> {
    let provider = FakeProvider::new(contexts.iter().map(|_| text("ok")).collect());
    let owner = MemoryWorkspace::new().with("SOUL.md", "be kind").with("USER.md", "the owner's private notes");
    let shared = MemoryWorkspace::new().with("SOUL.md", "be kind");
    let others = FakeContexts(HashMap::from([
        (
            "user:bob".to_owned(),
            context(
                "/home/users/bob/workspace",
                ContextKind::Person,
                shared.clone().with("USER.md", "a stale copy in the workspace"),
                MemoryWorkspace::new().with("USER.md", "Bob plays chess on Sundays").with("GROUP.md", "not a group"),
            ),
        ),
        (
            "group:telegram:-100".to_owned(),
            context(
                "/home/groups/telegram:-100/workspace",
                ContextKind::Group,
                shared.with("USER.md", "written by the assistant").with("GROUP.md", "in the workspace"),
                MemoryWorkspace::new().with("GROUP.md", "The chess club: five players, Tuesday nights"),
            ),
        ),
    ]));
    let settings = AgentSettings {
        model: "fake/model".into(),
        max_turns: 2,
        max_tokens: 100,
        temperature: None,
        context_window: 10_000,
        stream: false,
        workspace: PathBuf::from("/home/workspace"),
        runtime: RuntimeInfo { workspace: "/home/workspace".into(), ..RuntimeInfo::default() },
        context: "owner".into(),
    };
    let agent = Agent::new(
        provider.clone(),
        ToolRegistry::new(),
        Arc::new(MemorySessionStore::new()),
        Arc::new(owner),
        Arc::new(FixedClock(SystemTime::UNIX_EPOCH)),
        settings,
    )
    .with_context_workspaces(Arc::new(others));
    for context in contexts {
        let (mut session, _) = agent.open_session_in(&format!("telegram:{context}"), context).await.unwrap();
        agent.run_turn(&mut session, "hi", &SilentEvents, &CancellationToken::new()).await.unwrap();
    }
    provider.requests().into_iter().map(|request| request.system).collect()
}

#[tokio::test]
async fn a_persons_prompt_has_their_own_user_md_and_never_the_owners() {
    let prompts = prompts_of(&["user:bob", "owner"]).await;
    let bob = &prompts[0];
    assert!(bob.contains("# USER.md\n\nBob plays chess on Sundays"), "{bob}");
    assert!(!bob.contains("the owner's private notes"), "{bob}");
    assert!(!bob.contains("a stale copy in the workspace"), "USER.md is read beside the workspace: {bob}");
    assert!(!bob.contains("GROUP.md"), "a person's context is no group: {bob}");
    assert!(bob.contains("be kind"), "the rest still comes from the workspace");
    assert!(bob.contains("/home/users/bob/workspace"), "the prompt names his workspace: {bob}");
    let owner = &prompts[1];
    assert!(owner.contains("# USER.md\n\nthe owner's private notes"), "{owner}");
    assert!(!owner.contains("Bob plays chess") && !owner.contains("/home/users/bob"), "{owner}");
}

#[tokio::test]
async fn a_group_chats_prompt_has_its_group_md_after_where_user_md_goes() {
    let prompts = prompts_of(&["group:telegram:-100"]).await;
    let group = &prompts[0];
    assert!(group.contains("# GROUP.md\n\nThe chess club: five players, Tuesday nights"), "{group}");
    assert!(!group.contains("in the workspace"), "GROUP.md is read beside the workspace: {group}");
    assert!(!group.contains("USER.md"), "a group has no USER.md: {group}");
    assert!(!group.contains("the owner's private notes"), "{group}");
    let soul = group.find("# SOUL.md").unwrap();
    let club = group.find("# GROUP.md").unwrap();
    assert!(soul < club);
}
