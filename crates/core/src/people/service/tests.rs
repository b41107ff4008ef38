//! The people's policy in the agent loop: a scripted model asks for tools on behalf of
//! people of each role, and the loop (never the model) decides.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use squidbot_types::ToolSpec;
use squidbot_types::config::{ApprovalRule, ApprovalsConfig, ModelPrice, UserRoleConfig};
use squidbot_types::people::{ApprovalStatus, AuditKind, BudgetLimits, CHILD, USER};
use squidbot_types::session::EntryBody;

use super::*;
use crate::agent::{Agent, AgentEvents, AgentSettings, SilentEvents, TurnInput, TurnStatus};
use crate::clock::FixedClock;
use crate::context::RuntimeInfo;
use crate::people::audit::verify_log;
use crate::people::memory::{MemoryApprovals, MemoryAudit, MemoryDirectory, MemoryUsage};
use crate::scripted::{ScriptedModel, Step, calls, text};
use crate::store::DynSessionStore;
use crate::store::memory::MemorySessionStore;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use crate::workspace::MemoryWorkspace;

const KEY: &[u8] = b"test audit key, thirty-two bytes";
// 2026-11-27T15:00:00Z
const NOW_MS: u64 = 1_795_791_600_000;

/// A tool that counts its runs; `exec` changes things, `peek` doesn't.
struct Counting {
    name: &'static str,
    changes: bool,
    runs: Arc<AtomicUsize>,
}

impl Tool for Counting {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: "test".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn mutates(&self) -> bool {
        self.changes
    }

    async fn call<'a>(&'a self, arguments: Value, _context: &'a ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("ran {} with {arguments}", self.name)))
    }
}

struct Fixture {
    directory: Arc<MemoryDirectory>,
    usage: Arc<MemoryUsage>,
    audit: Arc<MemoryAudit>,
    approvals: Arc<MemoryApprovals>,
    people: Arc<People>,
    exec_runs: Arc<AtomicUsize>,
    store: Arc<MemorySessionStore>,
}

fn user(id: &str, role: &str) -> User {
    User {
        id: id.into(),
        name: id.to_uppercase(),
        role: role.into(),
        context: if id == "ann" { OWNER_CONTEXT.into() } else { format!("user:{id}") },
        created_ms: 0,
        disabled: false,
        budget: BudgetLimits::default(),
    }
}

fn fixture(settings: PeopleSettings) -> Fixture {
    let directory = Arc::new(MemoryDirectory::default());
    directory.put(user("ann", ADMIN));
    directory.put(user("bob", USER));
    directory.put(user("kim", CHILD));
    let usage = Arc::new(MemoryUsage::default());
    let audit = Arc::new(MemoryAudit::new(KEY));
    let approvals = Arc::new(MemoryApprovals::default());
    let stores = PeopleStores {
        directory: directory.clone(),
        usage: usage.clone(),
        audit: audit.clone(),
        approvals: approvals.clone(),
    };
    let clock = Arc::new(FixedClock(SystemTime::UNIX_EPOCH + Duration::from_millis(NOW_MS)));
    let people = Arc::new(People::new(settings, stores, clock).with_random(crate::random::SeededRandom::new(7)));
    Fixture {
        directory,
        usage,
        audit,
        approvals,
        people,
        exec_runs: Arc::new(AtomicUsize::new(0)),
        store: Arc::new(MemorySessionStore::new()),
    }
}

impl Fixture {
    fn agent(&self, steps: Vec<Step>) -> (Agent, Arc<ScriptedModel>) {
        let provider = ScriptedModel::new(steps);
        let mut tools = ToolRegistry::new();
        tools.register(Arc::new(Counting { name: "exec", changes: true, runs: self.exec_runs.clone() }));
        tools.register(Arc::new(Counting { name: "read_file", changes: false, runs: Arc::new(AtomicUsize::new(0)) }));
        let settings = AgentSettings {
            model: "fake/model".into(),
            max_turns: 5,
            max_tokens: 100,
            temperature: None,
            context_window: 10_000,
            stream: false,
            workspace: PathBuf::from("/tmp"),
            runtime: RuntimeInfo::default(),
            context: OWNER_CONTEXT.into(),
        };
        let agent = Agent::new(
            provider.clone(),
            tools,
            self.store.clone() as Arc<dyn DynSessionStore>,
            Arc::new(MemoryWorkspace::new()),
            Arc::new(FixedClock(SystemTime::UNIX_EPOCH + Duration::from_millis(NOW_MS))),
            settings,
        )
        .with_people(self.people.clone());
        (agent, provider)
    }

    fn actor(&self, id: &str) -> Actor {
        Actor::of(&self.directory.user(id).unwrap().unwrap())
    }

    async fn turn(&self, agent: &Agent, session_key: &str, who: &Actor, events: &dyn AgentEvents) -> TurnOutcome {
        let (mut session, _) = agent.open_session_in(session_key, &who.context).await.unwrap();
        let input = TurnInput { text: "please", images: &[], actor: Some(who) };
        agent.run_turn_correlated(&mut session, input, events, &CancellationToken::new(), "corr").await.unwrap()
    }

    async fn tool_results(&self, session_key: &str) -> Vec<(String, bool)> {
        let loaded = self.store.load_boxed(session_key).await.unwrap().unwrap();
        loaded
            .entries
            .iter()
            .filter_map(|entry| match &entry.body {
                EntryBody::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }

    fn audit_kinds(&self) -> Vec<(AuditKind, String, bool)> {
        self.audit.snapshot().0.into_iter().map(|row| (row.event.kind, row.event.subject, row.event.ok)).collect()
    }
}

use crate::agent::TurnOutcome;

/// Events that remember what the person was told while the turn waited.
#[derive(Default)]
struct Told(std::sync::Mutex<Vec<String>>);

impl AgentEvents for Told {
    fn waiting(&self, message: &str) {
        self.0.lock().unwrap().push(message.to_owned());
    }
}

#[tokio::test]
async fn a_child_asking_for_exec_is_refused_by_policy_and_never_sees_the_tool() {
    let fixture = fixture(PeopleSettings::default());
    let (agent, provider) =
        fixture.agent(vec![calls(&[("1", "exec", r#"{"command":"squidbot users role kim admin"}"#)]), text("sorry")]);
    let kim = fixture.actor("kim");
    let outcome = fixture.turn(&agent, "telegram:kim", &kim, &SilentEvents).await;
    assert_eq!(outcome.reply, "sorry");
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 0, "the command never ran");
    let results = fixture.tool_results("telegram:kim").await;
    assert!(
        results[0].0.starts_with("Refused by policy: the people's role `child` may not use the tool `exec`"),
        "{results:?}"
    );
    assert!(results[0].1);
    let offered: Vec<String> = provider.requests()[0].tools.iter().map(|tool| tool.name.clone()).collect();
    assert_eq!(offered, ["read_file"], "exec is not even offered to a child");
    assert_eq!(fixture.audit_kinds(), [(AuditKind::ToolCall, "exec".into(), false)]);
    assert_eq!(verify_log(KEY, fixture.audit.as_ref()), Ok(1));
}

#[tokio::test]
async fn a_users_exec_waits_for_another_admin_and_runs_once_with_the_arguments_shown() {
    let fixture = fixture(PeopleSettings::default());
    let (agent, _) = fixture.agent(vec![calls(&[("1", "exec", r#"{"command":"ls -la"}"#)]), text("done")]);
    let bob = fixture.actor("bob");
    let told = Told::default();
    let approvals = fixture.approvals.clone();
    let people = fixture.people.clone();
    let hooks = Arc::new(crate::hooks::fake::FixedHooks::new(crate::hooks::HookVerdict::Allow));
    people.set_hooks(Arc::new(crate::hooks::HookBus::new(vec![hooks.clone()])));
    let ann = fixture.actor("ann");
    let admin = tokio::spawn(async move {
        let request = loop {
            if let Some(request) = approvals.pending().unwrap().pop() {
                break request;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(request.arguments, r#"{"command":"ls -la"}"#);
        assert_eq!(request.rule, "exec for user");
        // bob can't approve his own request, and a child can't approve at all.
        assert_eq!(people.decide(&request.id, &bob_actor(), true, None), Err(DecideError::NotAdmin));
        people.decide(&request.id.to_lowercase(), &ann, true, None).unwrap();
        assert!(matches!(
            people.decide(&request.id, &ann, false, None),
            Err(DecideError::Settled { status, .. }) if status == "approved"
        ));
        request.id
    });
    let outcome = fixture.turn(&agent, "telegram:bob", &bob, &told).await;
    let id = admin.await.unwrap();
    assert_eq!(outcome.reply, "done");
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 1);
    let results = fixture.tool_results("telegram:bob").await;
    assert_eq!(results, [(r#"ran exec with {"command":"ls -la"}"#.to_owned(), false)]);
    let told = told.0.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    assert!(told[0].contains(&id) && told[0].contains("needs an admin's approval"), "{told:?}");
    let kinds: Vec<AuditKind> = fixture.audit_kinds().into_iter().map(|(kind, _, _)| kind).collect();
    assert_eq!(
        kinds,
        [
            AuditKind::ApprovalRequested,
            AuditKind::ApprovalDecided, // bob refused as not an admin
            AuditKind::ApprovalDecided, // ann approved
            AuditKind::ApprovalDecided, // ann's second try refused: already decided
            AuditKind::ToolCall,
        ]
    );
    assert_eq!(verify_log(KEY, fixture.audit.as_ref()), Ok(5));
    // The configured hooks heard of the one decision taken (not of the refused tries).
    for _ in 0..100 {
        if !hooks.observed.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let observed = hooks.observed.lock().unwrap().clone();
    assert_eq!(observed.len(), 1, "{observed:?}");
    assert_eq!(observed[0].event, crate::hooks::HookEvent::ApprovalDecided);
    assert_eq!((observed[0].tool.as_str(), observed[0].user.as_deref()), ("exec", Some("bob")));
    assert_eq!(observed[0].detail["id"], id.as_str());
    assert_eq!(observed[0].detail["status"], "approved");
    assert_eq!(observed[0].detail["by"], "ann");
}

fn bob_actor() -> Actor {
    Actor::of(&user("bob", USER))
}

#[tokio::test]
async fn a_denial_reaches_the_model_as_a_refusal() {
    let fixture = fixture(PeopleSettings::default());
    let (agent, _) = fixture.agent(vec![calls(&[("1", "exec", r#"{"command":"rm notes"}"#)]), text("ok")]);
    let bob = fixture.actor("bob");
    let approvals = fixture.approvals.clone();
    let people = fixture.people.clone();
    let ann = fixture.actor("ann");
    tokio::spawn(async move {
        loop {
            if let Some(request) = approvals.pending().unwrap().pop() {
                people.decide(&request.id, &ann, false, Some("not today".into())).unwrap();
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    fixture.turn(&agent, "telegram:bob", &bob, &SilentEvents).await;
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 0);
    let results = fixture.tool_results("telegram:bob").await;
    assert_eq!(
        results[0].0,
        "An admin (ann) denied running `exec`: not today. Do not try it another way; tell the person."
    );
}

#[tokio::test]
async fn an_unanswered_request_expires_as_configured() {
    let approvals = ApprovalsConfig { timeout_secs: 1, ..ApprovalsConfig::default() };
    let fixture = fixture(PeopleSettings::new(&Default::default(), &approvals, &Default::default()));
    let (agent, _) = fixture.agent(vec![calls(&[("1", "exec", "{}")]), text("ok")]);
    let outcome = fixture.turn(&agent, "telegram:bob", &fixture.actor("bob"), &SilentEvents).await;
    assert_eq!(outcome.reply, "ok");
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 0);
    let results = fixture.tool_results("telegram:bob").await;
    assert!(results[0].0.contains("No admin answered approval request"), "{results:?}");
    let requested: Value = serde_json::from_str(&fixture.audit.snapshot().0[0].event.detail).unwrap();
    let settled = fixture.approvals.get(requested["id"].as_str().unwrap()).unwrap().unwrap();
    assert_eq!(settled.status, ApprovalStatus::Expired);
}

#[tokio::test]
async fn admins_wait_only_when_a_rule_names_them_and_never_for_themselves_alone() {
    let rules = ApprovalsConfig {
        rules: Some(vec![ApprovalRule { roles: vec![ADMIN.into()], tools: vec!["exec".into()], ..Default::default() }]),
        timeout_secs: 1,
        ..ApprovalsConfig::default()
    };
    let fixture = fixture(PeopleSettings::new(&Default::default(), &rules, &Default::default()));
    let (agent, _) = fixture.agent(vec![calls(&[("1", "exec", "{}")]), text("ok")]);
    fixture.turn(&agent, "cli:local", &fixture.actor("ann"), &SilentEvents).await;
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 1, "a sole admin runs at once");
    // With a second admin, ann's request waits for them; ann can't approve it herself.
    fixture.directory.put(user("zed", ADMIN));
    let (agent, _) = fixture.agent(vec![calls(&[("1", "exec", "{}")]), text("ok")]);
    let approvals = fixture.approvals.clone();
    let people = fixture.people.clone();
    let (ann, zed) = (fixture.actor("ann"), fixture.actor("zed"));
    tokio::spawn(async move {
        loop {
            if let Some(request) = approvals.pending().unwrap().pop() {
                assert_eq!(people.decide(&request.id, &ann, true, None), Err(DecideError::OwnRequest));
                people.decide(&request.id, &zed, true, None).unwrap();
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    fixture.turn(&agent, "cli:local", &fixture.actor("ann"), &SilentEvents).await;
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn budgets_refuse_turns_with_the_reset_time_and_spare_admins() {
    let mut roles = std::collections::BTreeMap::new();
    roles.insert(USER.to_owned(), UserRoleConfig { budget_daily_tokens: Some(35), ..Default::default() });
    roles.insert(ADMIN.to_owned(), UserRoleConfig { budget_daily_tokens: Some(1), ..Default::default() });
    let fixture = fixture(PeopleSettings::new(&roles, &ApprovalsConfig::default(), &Default::default()));
    let bob = fixture.actor("bob");
    // Each answer counts 10 input and 5 output tokens.
    let (agent, _) = fixture.agent(vec![text("one"), text("two"), text("three"), text("never asked")]);
    assert_eq!(fixture.turn(&agent, "telegram:bob", &bob, &SilentEvents).await.reply, "one");
    assert_eq!(fixture.turn(&agent, "telegram:bob", &bob, &SilentEvents).await.reply, "two");
    // 30 of 35 tokens used: told once, at the start of the next turn.
    let second = fixture.turn(&agent, "telegram:bob", &bob, &SilentEvents).await;
    assert_eq!(second.reply, "three\n\n_Heads-up: you have used 85 % of your daily budget._");
    let third = fixture.turn(&agent, "telegram:bob", &bob, &SilentEvents).await;
    assert_eq!(third.status, TurnStatus::Refused);
    assert_eq!(
        third.reply,
        "Your daily budget (tokens) is used up, so I can't answer until it resets at 2026-11-28 00:00 UTC."
    );
    // The refused message and the refusal are in the session: nothing is lost.
    let loaded = fixture.store.load_boxed("telegram:bob").await.unwrap().unwrap();
    let texts: Vec<String> = loaded
        .entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::Message { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts.len(), 8);
    assert_eq!(texts[6], "please");
    assert!(texts[7].starts_with("Your daily budget"));
    // Admins are exempt unless their role says budgets apply.
    let (agent, _) = fixture.agent(vec![text("admin answer")]);
    assert_eq!(fixture.turn(&agent, "cli:local", &fixture.actor("ann"), &SilentEvents).await.reply, "admin answer");
    // A person's own limit wins over the role's.
    let mut kim = user("kim", CHILD);
    kim.budget.daily_tokens = Some(1);
    fixture.directory.put(kim);
    fixture
        .usage
        .record(&squidbot_types::people::UsageRecord {
            at_ms: NOW_MS as i64,
            user: Some("kim".into()),
            context: "user:kim".into(),
            session_key: "s".into(),
            agent: "assistant".into(),
            provider: "fake".into(),
            model: "model".into(),
            input_tokens: 1,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost: None,
        })
        .unwrap();
    assert!(matches!(fixture.people.admit_turn(&fixture.actor("kim")), Admission::Refuse(_)));
    assert!(fixture.audit_kinds().iter().any(|(kind, _, ok)| *kind == AuditKind::BudgetRefusal && !ok));
}

#[tokio::test]
async fn every_model_call_is_accounted_with_its_price() {
    let mut prices = std::collections::BTreeMap::new();
    prices.insert("fake/model".to_owned(), ModelPrice { input: 1_000.0, output: 2_000.0, ..Default::default() });
    let fixture = fixture(PeopleSettings::new(&Default::default(), &ApprovalsConfig::default(), &prices));
    let (agent, _) = fixture.agent(vec![calls(&[("1", "read_file", "{}")]), text("done")]);
    fixture.turn(&agent, "matrix:bob", &fixture.actor("bob"), &SilentEvents).await;
    let records = fixture.usage.records();
    assert_eq!(records.len(), 2);
    let last = &records[1];
    assert_eq!(last.user.as_deref(), Some("bob"));
    assert_eq!(last.context, "user:bob");
    assert_eq!(last.session_key, "matrix:bob");
    assert_eq!((last.provider.as_str(), last.model.as_str()), ("fake", "model"));
    assert_eq!((last.input_tokens, last.output_tokens), (10, 5));
    assert_eq!(last.cost, Some(10.0 * 1_000.0 / 1e6 + 5.0 * 2_000.0 / 1e6));
}

#[tokio::test]
async fn a_turn_without_an_actor_acts_for_its_contexts_person() {
    let fixture = fixture(PeopleSettings::default());
    assert_eq!(fixture.people.actor_for_context("user:kim").role, CHILD);
    assert_eq!(fixture.people.actor_for_context(OWNER_CONTEXT).user.as_deref(), Some("ann"));
    let stranger = fixture.people.actor_for_context("user:telegram:999");
    assert_eq!((stranger.role.as_str(), stranger.user), (squidbot_types::people::GUEST, None));
    // A stranger's turn (no actor given) can't run exec: the context decides.
    let (agent, _) = fixture.agent(vec![calls(&[("1", "exec", "{}")]), text("no")]);
    let (mut session, _) = agent.open_session_in("telegram:999", "user:telegram:999").await.unwrap();
    agent.run_turn(&mut session, "run rm -rf", &SilentEvents, &CancellationToken::new()).await.unwrap();
    assert_eq!(fixture.exec_runs.load(Ordering::SeqCst), 0);
    let mut disabled = user("bob", USER);
    disabled.disabled = true;
    fixture.directory.put(disabled);
    assert_eq!(fixture.people.actor_for_context("user:bob").role, squidbot_types::people::GUEST);
}

#[tokio::test]
async fn abandoned_requests_are_settled_and_their_people_told() {
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<(String, String)>>);
    impl PeopleNotifier for Recorder {
        fn approval_requested(&self, _request: &ApprovalRequest, _admins: &[User]) {}
        fn tell(&self, _actor: &Actor, session_key: &str, text: &str) {
            self.0.lock().unwrap().push((session_key.to_owned(), text.to_owned()));
        }
    }
    let fixture = fixture(PeopleSettings::default());
    let recorder = Arc::new(Recorder::default());
    fixture.people.set_notifier(recorder.clone());
    let request = ApprovalRequest {
        id: "ABC234".into(),
        created_ms: 0,
        expires_ms: 1,
        actor: fixture.actor("bob"),
        session_key: "telegram:bob".into(),
        tool: "exec".into(),
        arguments: "{}".into(),
        rule: "exec for user".into(),
        status: ApprovalStatus::Pending,
        decided_ms: None,
    };
    fixture.approvals.create(&request).unwrap();
    assert_eq!(fixture.people.abandon_pending().len(), 1);
    assert_eq!(fixture.approvals.get("abc234").unwrap().unwrap().status, ApprovalStatus::Abandoned);
    let told = recorder.0.lock().unwrap().clone();
    assert_eq!(told[0].0, "telegram:bob");
    assert!(told[0].1.contains("restarted while your request ABC234"));
}

#[tokio::test]
async fn secrets_in_audited_arguments_are_redacted() {
    let fixture = fixture(PeopleSettings::default());
    let stores = fixture.people.stores().clone();
    let clock = Arc::new(FixedClock(SystemTime::UNIX_EPOCH + Duration::from_millis(NOW_MS)));
    let people = People::new(PeopleSettings::default(), stores, clock)
        .with_leak_scanner(crate::leaks::LeakScanner::new(["hunter2-very-secret-value".to_owned()]));
    let ann = fixture.actor("ann");
    people.audit(
        AuditKind::ToolCall,
        &ann,
        "exec",
        true,
        serde_json::json!({"arguments": {"command": "curl -H 'Authorization: hunter2-very-secret-value' x"}}),
    );
    let (rows, _) = fixture.audit.snapshot();
    let detail = &rows.last().unwrap().event.detail;
    assert!(!detail.contains("hunter2-very-secret-value"), "{detail}");
    assert!(detail.contains("[REDACTED"), "{detail}");
    assert_eq!(verify_log(KEY, fixture.audit.as_ref()), Ok(1));
}

#[tokio::test]
async fn a_model_outside_the_roles_list_is_refused() {
    let mut roles = std::collections::BTreeMap::new();
    roles.insert(USER.to_owned(), UserRoleConfig { models: Some(vec!["local/*".into()]), ..Default::default() });
    let fixture = fixture(PeopleSettings::new(&roles, &ApprovalsConfig::default(), &Default::default()));
    let (agent, provider) = fixture.agent(vec![text("never")]);
    let outcome = fixture.turn(&agent, "telegram:bob", &fixture.actor("bob"), &SilentEvents).await;
    assert_eq!(outcome.status, TurnStatus::Refused);
    assert_eq!(
        outcome.reply,
        "Sorry, the model `fake/model` is not one your role (user) may use; ask an admin to allow it."
    );
    assert!(provider.requests().is_empty(), "the model was never asked");
    // The admin's role has no list: every model.
    let (agent, _) = fixture.agent(vec![text("fine")]);
    assert_eq!(fixture.turn(&agent, "cli:local", &fixture.actor("ann"), &SilentEvents).await.reply, "fine");
}
