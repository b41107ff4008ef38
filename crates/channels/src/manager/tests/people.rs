//! The channels under the people's policy, end to end: two fake adapters, `tg` (of the
//! kind `telegram`, which writes to people by their id) and `chat` (of the kind
//! `discord`, which can't), a real `Runner` whose agent has `People` over core's
//! in-memory stores, and a scripted model that calls `exec` when asked to "run ls".

use std::sync::atomic::{AtomicUsize, Ordering};

use squidbot_core::people::memory::{MemoryApprovals, MemoryAudit, MemoryDirectory, MemoryUsage};
use squidbot_core::people::{ApprovalStore, People, PeopleSettings, PeopleStores};
use squidbot_types::people::{ADMIN, Actor, ApprovalRequest, ApprovalStatus, BudgetLimits, Identity, USER, User};
use squidbot_types::session::EntryBody;

use super::*;
use crate::people::ChannelNotifier;

/// What the scripted model answers after `exec` ran.
fn ran_ls() -> String {
    r#"tool said: ran exec with {"command":"ls"}"#.to_owned()
}

/// Calls `exec` with `{"command":"ls"}` when asked to "run ls" and then says what the
/// tool answered; echoes anything else. Every call costs 3 input and 2 output tokens.
struct Script;

impl LlmProvider for Script {
    async fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        _sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        let usage = Usage { input_tokens: 3, output_tokens: 2, ..Usage::default() };
        let reply = match request.messages.last() {
            Some(ChatMessage::User { content, .. }) if content == "run ls" => {
                let call = ToolCall {
                    id: format!("call-{}", request.messages.len()),
                    name: "exec".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                };
                return Ok(Completion {
                    content: String::new(),
                    tool_calls: vec![call],
                    usage,
                    stop_reason: StopReason::ToolUse,
                    model: "fake/script".into(),
                });
            }
            Some(ChatMessage::User { content, .. }) => format!("echo: {content}"),
            Some(ChatMessage::Tool { content, .. }) => format!("tool said: {content}"),
            Some(ChatMessage::Assistant { .. }) | None => "?".to_owned(),
        };
        Ok(Completion {
            content: reply,
            tool_calls: Vec::new(),
            usage,
            stop_reason: StopReason::EndTurn,
            model: "fake/script".into(),
        })
    }
}

/// A stand-in for `exec` that counts its runs.
struct Exec(Arc<AtomicUsize>);

impl Tool for Exec {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "exec".into(),
            description: "runs a command".into(),
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
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("ran exec with {arguments}")))
    }
}

fn user(id: &str, role: &str) -> User {
    User {
        id: id.to_owned(),
        name: id.to_uppercase(),
        role: role.to_owned(),
        context: format!("user:{id}"),
        created_ms: 0,
        disabled: false,
        budget: BudgetLimits::default(),
    }
}

fn identity(channel: &str, sender_id: &str) -> Identity {
    Identity { channel: channel.to_owned(), sender_id: sender_id.to_owned() }
}

/// Ann (admin) and Bob (user, 1,000 tokens a day) are linked on both channels; Kim is
/// linked on `tg` and disabled.
fn directory() -> Arc<MemoryDirectory> {
    let directory = Arc::new(MemoryDirectory::default());
    directory.put(user("ann", ADMIN));
    directory.put(User {
        budget: BudgetLimits { daily_tokens: Some(1_000), ..BudgetLimits::default() },
        ..user("bob", USER)
    });
    directory.put(User { disabled: true, ..user("kim", USER) });
    for (channel, sender, id) in [
        ("tg", "ann-tg", "ann"),
        ("chat", "ann-chat", "ann"),
        ("tg", "bob-tg", "bob"),
        ("chat", "bob-chat", "bob"),
        ("tg", "kim-tg", "kim"),
    ] {
        directory.link(identity(channel, sender), id);
    }
    directory
}

struct PeopleHarness {
    runner: Arc<Runner>,
    people: Arc<People>,
    usage: Arc<MemoryUsage>,
    approvals: Arc<MemoryApprovals>,
    exec_runs: Arc<AtomicUsize>,
    channels: HashMap<String, (Arc<FakeChannel>, mpsc::Sender<InboundMessage>)>,
    manager: Arc<ChannelManager>,
    shutdown: CancellationToken,
    running: tokio::task::JoinHandle<()>,
}

fn fake(name: &str) -> (Arc<FakeChannel>, mpsc::Sender<InboundMessage>) {
    let (incoming, receiver) = mpsc::channel(16);
    let channel = Arc::new(FakeChannel {
        name: name.to_owned(),
        capabilities: capabilities(StreamMode::SendOnce, 1_000),
        steps: Mutex::new(VecDeque::new()),
        incoming: tokio::sync::Mutex::new(receiver),
        send_failures: Mutex::new(VecDeque::new()),
        recorded: Mutex::new(Recorded::default()),
    });
    (channel, incoming)
}

fn start_with_people(direct: DirectPolicy) -> PeopleHarness {
    let usage = Arc::new(MemoryUsage::default());
    let approvals = Arc::new(MemoryApprovals::default());
    let stores = PeopleStores {
        directory: directory(),
        usage: usage.clone(),
        audit: Arc::new(MemoryAudit::new(b"test audit key, thirty-two bytes")),
        approvals: approvals.clone(),
    };
    let people = Arc::new(People::new(PeopleSettings::default(), stores, Arc::new(SystemClock)));
    let exec_runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::default();
    tools.register(Arc::new(Exec(exec_runs.clone())));
    let settings = AgentSettings {
        model: "fake/script".into(),
        max_turns: 4,
        max_tokens: 100,
        temperature: None,
        context_window: 10_000,
        stream: false,
        workspace: PathBuf::from("/nonexistent"),
        runtime: squidbot_core::context::RuntimeInfo::default(),
        context: "owner".into(),
    };
    let agent = Agent::new(
        Arc::new(Script),
        tools,
        Arc::new(MemorySessionStore::default()),
        Arc::new(MemoryWorkspace::new()),
        Arc::new(SystemClock),
        settings,
    )
    .with_people(people.clone());
    let runner = Runner::new(Arc::new(agent), EventHub::new());
    let mut channels = HashMap::new();
    let mut entries = Vec::new();
    for (name, kind) in [("tg", "telegram"), ("chat", "discord")] {
        let (channel, incoming) = fake(name);
        let policy = Arc::new(AccessPolicy::new(
            name,
            access(direct),
            Arc::new(MemoryApprovedSenders::default()),
            Arc::new(PairingCodes::new(Box::new(SeededRandom::new(5)))),
            Arc::new(SystemClock),
        ));
        entries.push(ChannelEntry { channel: channel.clone(), kind: kind.to_owned(), policy });
        channels.insert(name.to_owned(), (channel, incoming));
    }
    let manager = Arc::new(ChannelManager::new(
        runner.clone(),
        entries,
        Arc::new(Saved(Mutex::new(Vec::new()))),
        Box::new(SeededRandom::new(1)),
        ManagerSettings::default(),
    ));
    people.set_notifier(Arc::new(ChannelNotifier::new(&manager)));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.clone().run(shutdown.clone()));
    PeopleHarness { runner, people, usage, approvals, exec_runs, channels, manager, shutdown, running }
}

fn direct(channel: &str, id: &str, sender: &str, text: &str) -> InboundMessage {
    InboundMessage { channel: channel.to_owned(), ..direct_message(id, sender, text) }
}

/// A message in the room `room-1` of `channel` that mentions the bot.
fn in_room(channel: &str, id: &str, sender: &str, text: &str) -> InboundMessage {
    InboundMessage {
        channel: channel.to_owned(),
        platform_message_id: id.to_owned(),
        conversation: Conversation { id: "room-1".to_owned(), kind: ConversationKind::Group, thread: None },
        sender: Sender { id: sender.to_owned(), display_name: None },
        text: text.to_owned(),
        mentions_bot: true,
        attachments: Vec::new(),
        received_at: Timestamp::UNIX_EPOCH,
    }
}

impl PeopleHarness {
    fn channel(&self, name: &str) -> &Arc<FakeChannel> {
        &self.channels[name].0
    }

    async fn deliver(&self, message: InboundMessage) {
        self.channels[&message.channel].1.send(message).await.unwrap();
    }

    /// The texts `channel` sent to `conversation`, in order.
    fn sent_to(&self, channel: &str, conversation: &str) -> Vec<String> {
        let recorded = self.channel(channel).recorded.lock().unwrap();
        recorded.sent.iter().filter(|sent| sent.conversation.id == conversation).map(|sent| sent.text.clone()).collect()
    }

    /// Waits (in paused time) until `channel` sent `conversation` a text `done` accepts;
    /// that text.
    async fn wait_for(&self, channel: &str, conversation: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
        for _ in 0..2_000 {
            if let Some(text) = self.sent_to(channel, conversation).into_iter().find(|text| done(text)) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let recorded = self.channel(channel).recorded.lock().unwrap();
        panic!("timed out waiting for {what} in {channel}/{conversation}: sent {:?}", recorded.sent);
    }

    async fn context_of(&self, session_key: &str) -> String {
        let session = self.runner.session(session_key).await.unwrap();
        session.lock().await.header().context.clone()
    }

    /// The session's tool results, as (content, is_error).
    async fn tool_results(&self, session_key: &str) -> Vec<(String, bool)> {
        let session = self.runner.session(session_key).await.unwrap();
        let session = session.lock().await;
        session
            .entries()
            .iter()
            .filter_map(|entry| match &entry.body {
                EntryBody::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.running.await.unwrap();
    }
}

/// The request id in an admin's note (`… Reply /approve ABC123 or …`).
fn request_id(note: &str) -> String {
    note.split("/approve ").nth(1).and_then(|rest| rest.split_whitespace().next()).unwrap().to_owned()
}

#[tokio::test(start_paused = true)]
async fn a_linked_person_is_answered_on_every_channel_in_one_context_and_a_disabled_one_not_at_all() {
    // Direct messages are owner-only, and neither Bob nor Kim is an owner.
    let harness = start_with_people(DirectPolicy::OwnerOnly);
    harness.deliver(direct("tg", "1", "bob-tg", "hello from telegram")).await;
    harness.deliver(direct("chat", "1", "bob-chat", "hello from chat")).await;
    harness.wait_for("tg", "dm-bob-tg", "bob's reply", |text| text == "echo: hello from telegram").await;
    harness.wait_for("chat", "dm-bob-chat", "bob's reply", |text| text == "echo: hello from chat").await;
    assert_eq!(harness.context_of("tg:bob-tg").await, "user:bob");
    assert_eq!(harness.context_of("chat:bob-chat").await, "user:bob");
    let records = harness.usage.records();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|record| record.user.as_deref() == Some("bob") && record.context == "user:bob"));

    harness.deliver(direct("tg", "2", "kim-tg", "hello")).await;
    harness.wait_for("tg", "dm-kim-tg", "the refusal", |text| text == "Sorry, I only talk with my owner.").await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(harness.sent_to("tg", "dm-kim-tg"), ["Sorry, I only talk with my owner."]);
    assert_eq!(harness.usage.records().len(), 2, "no turn for a disabled user");
    assert_eq!(harness.manager.health()[0].denied, 1);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stranger_is_a_guest_whose_exec_is_refused_by_policy() {
    let harness = start_with_people(DirectPolicy::Open);
    let mut message = direct("tg", "1", "eve", "run ls");
    message.sender.display_name = Some("Eve".to_owned());
    harness.deliver(message).await;
    let reply = harness.wait_for("tg", "dm-eve", "the reply", |text| text.starts_with("tool said:")).await;
    assert!(
        reply.starts_with("tool said: Refused by policy: the people's role guest may not use the tool exec"),
        "{reply}"
    );
    let results = harness.tool_results("tg:eve").await;
    assert_eq!(results.len(), 1);
    assert!(results[0].0.starts_with("Refused by policy"), "{results:?}");
    assert!(results[0].1, "a refusal is an error result");
    assert_eq!(harness.exec_runs.load(Ordering::SeqCst), 0);
    assert_eq!(harness.context_of("tg:eve").await, "user:tg:eve");
    let records = harness.usage.records();
    assert!(records.iter().all(|record| record.user.is_none() && record.context == "user:tg:eve"));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn in_a_room_the_speakers_role_applies_and_the_room_keeps_the_memory() {
    // Chat platforms show the model's Markdown in their own format: plain text here, so
    // the refusals' code spans lose their backticks.
    let harness = start_with_people(DirectPolicy::OwnerOnly);
    harness.deliver(in_room("tg", "1", "eve", "run ls")).await;
    let refused = harness.wait_for("tg", "room-1", "the guest's reply", |text| text.starts_with("tool said:")).await;
    assert!(refused.contains("Refused by policy: the people's role guest"), "{refused}");
    harness.deliver(in_room("tg", "2", "ann-tg", "run ls")).await;
    harness.wait_for("tg", "room-1", "the admin's reply", |text| text == ran_ls()).await;
    assert_eq!(harness.exec_runs.load(Ordering::SeqCst), 1, "the admin's exec ran, the guest's did not");
    let results = harness.tool_results("tg:room-1").await;
    assert_eq!(results.iter().map(|(_, is_error)| *is_error).collect::<Vec<_>>(), [true, false], "{results:?}");
    assert_eq!(harness.context_of("tg:room-1").await, "group:tg:room-1");
    let records = harness.usage.records();
    assert!(records.iter().all(|record| record.context == "group:tg:room-1"), "{records:?}");
    assert!(records.iter().any(|record| record.user.as_deref() == Some("ann")));
    assert!(records.iter().any(|record| record.user.is_none()));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_admin_approves_a_waiting_request_that_reached_her_first_reachable_conversation() {
    let harness = start_with_people(DirectPolicy::OwnerOnly);
    harness.deliver(direct("tg", "1", "bob-tg", "run ls")).await;
    let waiting = harness.wait_for("tg", "dm-bob-tg", "the waiting note", |text| text.starts_with("⏳")).await;
    assert!(waiting.contains("exec needs an admin's approval"), "{waiting}");
    // Ann never wrote: her first identity, on `chat`, can't be written to first; her
    // `tg` one can, by her sender id.
    let note = harness.wait_for("tg", "ann-tg", "the request", |text| text.starts_with("🔐")).await;
    let id = request_id(&note);
    assert_eq!(
        note,
        format!(
            r#"🔐 BOB (user) asks to run exec: {{"command":"ls"}} — rule: exec for user. Reply /approve {id} or /deny {id} [reason]"#
        )
    );
    assert!(harness.channel("chat").recorded.lock().unwrap().sent.is_empty());
    assert_eq!(harness.context_of("tg:ann-tg").await, "user:ann", "the note's session is Ann's");

    harness.deliver(direct("tg", "2", "bob-tg", &format!("/approve {id}"))).await;
    let refused = harness.wait_for("tg", "dm-bob-tg", "the refusal", |text| text.starts_with("can't")).await;
    assert_eq!(refused, format!("can't approve {id}: only admins decide approvals"));
    assert_eq!(harness.exec_runs.load(Ordering::SeqCst), 0);

    harness.deliver(direct("tg", "3", "ann-tg", &format!("/approve {id}"))).await;
    let approved = harness.wait_for("tg", "dm-ann-tg", "the decision", |text| text.starts_with("approved")).await;
    assert_eq!(approved, format!("approved {id}: exec for BOB"));
    harness.wait_for("tg", "dm-bob-tg", "the reply", |text| text == ran_ls()).await;
    assert_eq!(harness.exec_runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        harness.sent_to("tg", "dm-bob-tg").iter().filter(|text| text.starts_with("⏳")).count(),
        1,
        "the waiting note is a message of its own, sent once"
    );

    harness.deliver(direct("tg", "4", "ann-tg", &format!("/approve {id}"))).await;
    let again = harness.wait_for("tg", "dm-ann-tg", "the second answer", |text| text.starts_with("can't")).await;
    assert_eq!(again, format!("can't approve {id}: approval request {id} is already approved"));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_denial_reaches_the_model_as_a_refusal_and_the_request_goes_where_the_admin_last_wrote() {
    let harness = start_with_people(DirectPolicy::OwnerOnly);
    harness.deliver(direct("chat", "1", "ann-chat", "/status")).await;
    let status = harness.wait_for("chat", "dm-ann-chat", "the status", |text| text.starts_with("model:")).await;
    assert!(status.contains("you: ANN (admin)"), "{status}");
    assert!(
        status.contains(
            "commands: /new, /stop, /status, /fork, /compact, /model [NAME], /usage, /approve ID, /deny ID [reason]"
        ),
        "{status}"
    );

    harness.deliver(direct("tg", "1", "bob-tg", "run ls")).await;
    let note = harness.wait_for("chat", "dm-ann-chat", "the request", |text| text.starts_with("🔐")).await;
    let id = request_id(&note);
    assert!(harness.sent_to("tg", "ann-tg").is_empty(), "only where she last wrote");
    harness.deliver(direct("chat", "2", "ann-chat", &format!("/deny {id} not tonight"))).await;
    let denied = harness.wait_for("chat", "dm-ann-chat", "the decision", |text| text.starts_with("denied")).await;
    assert_eq!(denied, format!("denied {id}: exec for BOB"));
    let reply = harness.wait_for("tg", "dm-bob-tg", "the reply", |text| text.starts_with("tool said:")).await;
    assert!(reply.starts_with("tool said: An admin (ann) denied running exec: not tonight."), "{reply}");
    assert_eq!(harness.exec_runs.load(Ordering::SeqCst), 0);
    let results = harness.tool_results("tg:bob-tg").await;
    assert!(results.len() == 1 && results[0].1, "{results:?}");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn usage_shows_the_writers_tokens_and_limits() {
    let harness = start_with_people(DirectPolicy::OwnerOnly);
    harness.deliver(direct("tg", "1", "bob-tg", "hello")).await;
    harness.wait_for("tg", "dm-bob-tg", "the reply", |text| text == "echo: hello").await;
    harness.deliver(direct("tg", "2", "bob-tg", "/usage")).await;
    let usage = harness.wait_for("tg", "dm-bob-tg", "the usage", |text| text.starts_with("Usage")).await;
    assert_eq!(
        usage,
        "Usage of BOB (user):\ntoday: 5 tokens in 1 model call\nthis month: 5 tokens in 1 model call\nlimits: 1000 \
         tokens a day"
    );
    // An owner id linked to nobody is the owner: an admin, whom budgets don't bind.
    harness.deliver(direct("tg", "3", "owner-id", "/usage")).await;
    let usage = harness.wait_for("tg", "dm-owner-id", "the owner's usage", |text| text.starts_with("Usage")).await;
    assert_eq!(
        usage,
        "Usage of owner (admin):\ntoday: 0 tokens in 0 model calls\nthis month: 0 tokens in 0 model calls\nlimits: \
         none (budgets don't apply to the role admin)"
    );
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_note_about_a_request_reaches_a_session_nobody_wrote_to_since_the_start() {
    let harness = start_with_people(DirectPolicy::OwnerOnly);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let bob = Actor::of(&user("bob", USER)).in_session("tg:bob-tg");
    let request = ApprovalRequest {
        id: "OLD123".into(),
        created_ms: 0,
        expires_ms: i64::MAX,
        actor: bob,
        session_key: "tg:bob-tg".into(),
        tool: "exec".into(),
        arguments: "{}".into(),
        rule: "exec for user".into(),
        status: ApprovalStatus::Pending,
        decided_ms: None,
    };
    harness.approvals.create(&request).unwrap();
    assert_eq!(harness.people.abandon_pending().len(), 1);
    let told = harness.wait_for("tg", "bob-tg", "the note", |text| text.contains("OLD123")).await;
    assert!(told.starts_with("squidbot restarted while your request OLD123 (exec) waited"), "{told}");
    assert_eq!(harness.context_of("tg:bob-tg").await, "user:bob");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_people_the_people_commands_say_so() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "/usage")).await;
    harness.deliver(direct_message("2", "owner-id", "/approve ABC123")).await;
    harness.deliver(direct_message("3", "owner-id", "/deny ABC123 no")).await;
    harness.wait_for("three answers", |recorded| recorded.sent.len() == 3).await;
    assert!(harness.texts().iter().all(|text| text == "Users and roles are not enabled on this squidbot."));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_strangers_pairing_request_reaches_the_admins_and_approve_lets_them_in() {
    let harness = start_with_people(DirectPolicy::Pairing);
    harness.deliver(direct("tg", "1", "eve-tg", "hello?")).await;
    let reply = harness.wait_for("tg", "dm-eve-tg", "the pairing code", |text| text.contains("this code:")).await;
    let code = reply.split("this code: ").nth(1).and_then(|rest| rest.split_whitespace().next()).unwrap().to_owned();
    let note = harness.wait_for("tg", "ann-tg", "the pairing request", |text| text.starts_with("👋")).await;
    assert!(note.contains(&format!("(tg:eve-tg) asks to talk to the assistant. Reply /approve {code}")), "{note}");
    // Bob (not an admin) can't let anyone in.
    harness.deliver(direct("tg", "2", "bob-tg", &format!("/approve {code}"))).await;
    let refused = harness.wait_for("tg", "dm-bob-tg", "the refusal", |text| text.starts_with("can't")).await;
    assert!(refused.contains("only admins"), "{refused}");
    harness.deliver(direct("tg", "3", "ann-tg", &format!("/approve {code}"))).await;
    let approved = harness.wait_for("tg", "dm-ann-tg", "the approval", |text| text.starts_with("approved")).await;
    assert_eq!(approved, "approved tg:eve-tg; they are answered from their next message (as a guest)");
    harness.deliver(direct("tg", "4", "eve-tg", "hi again")).await;
    harness.wait_for("tg", "dm-eve-tg", "the answer", |text| text == "echo: hi again").await;
    harness.stop().await;
}
