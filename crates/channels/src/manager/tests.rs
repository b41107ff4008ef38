//! The manager driven end to end in process: a fake adapter, a real core `Runner` over an
//! echoing model, real policies. Under the people's policy: `people`.

mod people;
mod tree;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use squidbot_core::agent::{Agent, AgentSettings};
use squidbot_core::clock::SystemClock;
use squidbot_core::events::EventHub;
use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};
use squidbot_core::random::SeededRandom;
use squidbot_core::runs::{Runner, UserMessage};
use squidbot_core::store::memory::MemorySessionStore;
use squidbot_core::tool::{SharedFile, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use squidbot_core::workspace::MemoryWorkspace;
use squidbot_types::{ChatMessage, ToolCall, ToolSpec, Usage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::outbound::fit;
use super::*;
use crate::markdown::MarkdownFlavor;
use crate::pairing::{MemoryApprovedSenders, PairingCodes};
use crate::policy::{AccessConfig, DirectPolicy, GroupPolicy};
use crate::port::{
    Attachment, AttachmentData, Capabilities, Channel, ChannelError, ConversationKind, InboundMessage, OutboundMessage,
    Sender, SentMessage, StreamMode,
};

/// Streams "echo: <message>" word by word (and the paths of images sent with it);
/// "long" answers with a reply over the limit, "slow" waits a while first, "hang" never
/// answers; "chart" calls the `share` tool, then answers about it.
struct Echo;

/// The reply after the `share` tool ran.
const CHART_REPLY: &str = "Here is the chart you asked for, with last week's numbers.";

/// Hands over `/data/chart.png`.
struct Share;

impl Tool for Share {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "share".into(),
            description: "shares the chart".into(),
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
        let file = SharedFile { path: "/data/chart.png".into(), name: "chart.png".into(), mime: "image/png".into() };
        Ok(ToolOutput::text("shared").with_file(file))
    }
}

fn chart() -> Attachment {
    Attachment {
        name: "chart.png".into(),
        mime: "image/png".into(),
        data: AttachmentData::Path("/data/chart.png".into()),
    }
}

impl LlmProvider for Echo {
    async fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        let (last, images) = match request.messages.last() {
            Some(ChatMessage::User { content, images }) => (content.clone(), images.clone()),
            Some(ChatMessage::Tool { .. }) => ("shared".to_owned(), Vec::new()),
            _ => (String::new(), Vec::new()),
        };
        if last == "chart" {
            let call = ToolCall { id: "call-1".into(), name: "share".into(), arguments: "{}".into() };
            return Ok(Completion {
                content: String::new(),
                tool_calls: vec![call],
                usage: Usage { input_tokens: 1, output_tokens: 1, ..Usage::default() },
                stop_reason: StopReason::ToolUse,
                model: "fake/echo".into(),
            });
        }
        let reply = match last.as_str() {
            "long" => {
                (0..30).map(|number| format!("Paragraph {number} says something.")).collect::<Vec<_>>().join("\n\n")
            }
            "shared" => CHART_REPLY.to_owned(),
            _ if !images.is_empty() => {
                let paths: Vec<&str> = images.iter().map(|image| image.path.as_str()).collect();
                format!("echo: {last} (images: {})", paths.join(", "))
            }
            _ => format!("echo: {last}"),
        };
        if last == "hang" {
            sink.text_delta("thinking about it for a long while...");
            std::future::pending::<()>().await;
        }
        for word in reply.split_inclusive(' ') {
            sink.text_delta(word);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Ok(Completion {
            content: reply,
            tool_calls: Vec::new(),
            usage: Usage { input_tokens: 1, output_tokens: 1, ..Usage::default() },
            stop_reason: StopReason::EndTurn,
            model: "fake/echo".into(),
        })
    }
}

fn runner() -> Arc<Runner> {
    let settings = AgentSettings {
        model: "fake/echo".into(),
        max_turns: 4,
        max_tokens: 100,
        temperature: None,
        context_window: 10_000,
        stream: true,
        workspace: PathBuf::from("/nonexistent"),
        runtime: squidbot_core::context::RuntimeInfo::default(),
        context: "owner".into(),
    };
    let mut tools = ToolRegistry::default();
    tools.register(Arc::new(Share));
    let agent = Agent::new(
        Arc::new(Echo),
        tools,
        Arc::new(MemorySessionStore::default()),
        Arc::new(MemoryWorkspace::new()),
        Arc::new(SystemClock),
        settings,
    );
    Runner::new(Arc::new(agent), EventHub::new())
}

/// What the fake's receive loop does on each start.
enum RunStep {
    /// Fails at once with this error.
    Fail(ChannelError),
    /// Delivers what the test sends until shutdown.
    Serve,
}

#[derive(Default)]
struct Recorded {
    sent: Vec<OutboundMessage>,
    edits: Vec<(String, String)>,
    typing: usize,
    acknowledged: Vec<String>,
    runs: usize,
}

struct FakeChannel {
    name: String,
    capabilities: Capabilities,
    steps: Mutex<VecDeque<RunStep>>,
    incoming: tokio::sync::Mutex<mpsc::Receiver<InboundMessage>>,
    send_failures: Mutex<VecDeque<ChannelError>>,
    recorded: Mutex<Recorded>,
}

impl Channel for FakeChannel {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        self.recorded.lock().unwrap().runs += 1;
        let step = self.steps.lock().unwrap().pop_front().unwrap_or(RunStep::Serve);
        match step {
            RunStep::Fail(error) => Err(error),
            RunStep::Serve => {
                let mut incoming = self.incoming.lock().await;
                inbound
                    .forward(&mut incoming, &shutdown)
                    .await
                    .map_err(|closed| ChannelError::transient(closed.to_string()))?;
                // The test's queue ended: stay up until shutdown, as a live platform would.
                shutdown.cancelled().await;
                Ok(())
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        if let Some(error) = self.send_failures.lock().unwrap().pop_front() {
            return Err(error);
        }
        let mut recorded = self.recorded.lock().unwrap();
        recorded.sent.push(message.clone());
        Ok(SentMessage {
            conversation: message.conversation.clone(),
            platform_message_id: format!("m{}", recorded.sent.len()),
        })
    }

    async fn edit(&self, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
        self.recorded.lock().unwrap().edits.push((sent.platform_message_id.clone(), text.to_owned()));
        Ok(())
    }

    async fn typing(&self, _conversation: &Conversation) -> Result<(), ChannelError> {
        self.recorded.lock().unwrap().typing += 1;
        Ok(())
    }

    async fn acknowledge(&self, message: &InboundMessage) -> Result<(), ChannelError> {
        self.recorded.lock().unwrap().acknowledged.push(message.platform_message_id.clone());
        Ok(())
    }
}

struct Saved(Mutex<Vec<(String, String)>>);

impl AttachmentStore for Saved {
    fn save(&self, session_key: &str, attachment: &Attachment) -> Result<PathBuf, AttachmentError> {
        self.0.lock().unwrap().push((session_key.to_owned(), attachment.name.clone()));
        Ok(PathBuf::from(format!("/data/{session_key}/{}", attachment.name)))
    }
}

struct Harness {
    runner: Arc<Runner>,
    manager: Arc<ChannelManager>,
    channel: Arc<FakeChannel>,
    incoming: mpsc::Sender<InboundMessage>,
    saved: Arc<Saved>,
    shutdown: CancellationToken,
    running: tokio::task::JoinHandle<()>,
}

fn capabilities(streams: StreamMode, max_message_chars: usize) -> Capabilities {
    Capabilities { streams, typing: true, threads: false, max_message_chars, markdown: MarkdownFlavor::PlainText }
}

fn access(direct: DirectPolicy) -> AccessConfig {
    AccessConfig {
        owners: vec!["owner-id".to_owned()],
        direct,
        groups: GroupPolicy::Mention,
        allowed_senders: Vec::new(),
        allowed_rooms: Vec::new(),
        refusal: Some("Sorry, I only talk with my owner.".to_owned()),
    }
}

fn start(capabilities: Capabilities, steps: Vec<RunStep>, direct: DirectPolicy) -> Harness {
    let (incoming, receiver) = mpsc::channel(16);
    let channel = Arc::new(FakeChannel {
        name: "fake".to_owned(),
        capabilities,
        steps: Mutex::new(steps.into()),
        incoming: tokio::sync::Mutex::new(receiver),
        send_failures: Mutex::new(VecDeque::new()),
        recorded: Mutex::new(Recorded::default()),
    });
    let policy = Arc::new(AccessPolicy::new(
        "fake",
        access(direct),
        Arc::new(MemoryApprovedSenders::default()),
        Arc::new(PairingCodes::new(Box::new(SeededRandom::new(5)))),
        Arc::new(SystemClock),
    ));
    let runner = runner();
    let saved = Arc::new(Saved(Mutex::new(Vec::new())));
    let settings = ManagerSettings { edit_interval: Duration::from_millis(500), ..ManagerSettings::default() };
    let manager = Arc::new(
        ChannelManager::new(
            runner.clone(),
            vec![ChannelEntry { channel: channel.clone(), kind: "scripted".to_owned(), policy }],
            saved.clone(),
            Box::new(SeededRandom::new(1)),
            settings,
        )
        .with_models(vec!["fake/echo".to_owned(), "fake/other".to_owned()]),
    );
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.clone().run(shutdown.clone()));
    Harness { runner, manager, channel, incoming, saved, shutdown, running }
}

fn direct_message(id: &str, sender: &str, text: &str) -> InboundMessage {
    InboundMessage {
        channel: "fake".to_owned(),
        platform_message_id: id.to_owned(),
        conversation: Conversation { id: format!("dm-{sender}"), kind: ConversationKind::Direct, thread: None },
        sender: Sender { id: sender.to_owned(), display_name: None },
        text: text.to_owned(),
        mentions_bot: false,
        attachments: Vec::new(),
        received_at: Timestamp::UNIX_EPOCH,
    }
}

impl Harness {
    async fn deliver(&self, message: InboundMessage) {
        self.incoming.send(message).await.unwrap();
    }

    /// Waits (in paused time) until `done` holds for what the channel recorded.
    async fn wait_for(&self, what: &str, done: impl Fn(&Recorded) -> bool) {
        for _ in 0..2_000 {
            if done(&self.channel.recorded.lock().unwrap()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let recorded = self.channel.recorded.lock().unwrap();
        panic!("timed out waiting for {what}: sent {:?}, edits {:?}", recorded.sent, recorded.edits);
    }

    fn texts(&self) -> Vec<String> {
        self.channel.recorded.lock().unwrap().sent.iter().map(|message| message.text.clone()).collect()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.running.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn an_owner_message_is_answered_once_and_a_redelivery_is_dropped() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "hello there")).await;
    harness.deliver(direct_message("1", "owner-id", "hello there")).await;
    harness.wait_for("the reply", |recorded| !recorded.sent.is_empty()).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(harness.texts(), ["echo: hello there"]);
    {
        let recorded = harness.channel.recorded.lock().unwrap();
        assert_eq!(recorded.sent[0].reply_to.as_deref(), Some("1"));
        assert_eq!(recorded.acknowledged, ["1"]);
        assert!(recorded.typing >= 1);
    }
    let health = &harness.manager.health()[0];
    assert_eq!((health.received, health.duplicates, health.answered, health.sent), (1, 1, 1, 1));
    assert!(health.is_up());
    assert_eq!(health.kind, "scripted");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stranger_gets_one_refusal_and_no_turn() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "stranger", "hi")).await;
    harness.deliver(direct_message("2", "stranger", "hi again")).await;
    harness.wait_for("the refusal", |recorded| !recorded.sent.is_empty()).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(harness.texts(), ["Sorry, I only talk with my owner."]);
    assert!(harness.runner.agent().settings().model == "fake/echo");
    assert_eq!(harness.manager.health()[0].denied, 2);
    assert_eq!(harness.manager.health()[0].answered, 0);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stranger_under_pairing_gets_a_code_and_an_approved_one_is_answered_in_their_own_context() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::Pairing);
    harness.deliver(direct_message("1", "stranger", "let me in")).await;
    harness.wait_for("the code", |recorded| !recorded.sent.is_empty()).await;
    let text = harness.texts().remove(0);
    assert!(text.contains("squidbot users approve"), "{text}");
    let code: String = text.split("code: ").nth(1).unwrap().chars().take(6).collect();
    let entry = harness.manager.channels.get("fake").unwrap();
    let approved = entry.policy.approve(&code).unwrap();
    assert_eq!(approved.sender_id, "stranger");
    harness.deliver(direct_message("2", "stranger", "thanks")).await;
    harness.wait_for("the answer", |recorded| recorded.sent.len() == 2).await;
    assert_eq!(harness.texts()[1], "echo: thanks");
    let session = harness.runner.session("fake:stranger").await.unwrap();
    assert_eq!(session.lock().await.header().context, "user:fake:stranger");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_streamed_reply_is_sent_once_then_edited_to_the_final_text() {
    let harness = start(capabilities(StreamMode::EditInPlace, 1_000), vec![], DirectPolicy::OwnerOnly);
    let words = "one two three four five six seven eight nine ten eleven twelve";
    harness.deliver(direct_message("7", "owner-id", words)).await;
    let final_text = format!("echo: {words}");
    harness
        .wait_for("the final edit", |recorded| recorded.edits.last().is_some_and(|(_, text)| *text == final_text))
        .await;
    {
        let recorded = harness.channel.recorded.lock().unwrap();
        assert_eq!(recorded.sent.len(), 1, "one message, then edits");
        assert!(recorded.sent[0].text.len() < final_text.len(), "the first message shows part of the reply");
        assert!(recorded.edits.len() >= 2, "edited as text arrived: {:?}", recorded.edits);
        assert!(recorded.edits.iter().all(|(id, _)| id == "m1"));
    }
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_file_a_tool_hands_over_goes_with_the_reply_or_after_the_streamed_one() {
    // Sent once: the file rides on the reply.
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "chart")).await;
    harness.wait_for("the reply", |recorded| !recorded.sent.is_empty()).await;
    {
        let recorded = harness.channel.recorded.lock().unwrap();
        assert_eq!(recorded.sent.len(), 1);
        assert_eq!(recorded.sent[0].text, CHART_REPLY);
        assert_eq!(recorded.sent[0].attachments, [chart()]);
    }
    harness.stop().await;

    // Streamed by editing: the reply is edited in place, the file follows on its own.
    let harness = start(capabilities(StreamMode::EditInPlace, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("2", "owner-id", "chart")).await;
    harness.wait_for("the file", |recorded| recorded.sent.iter().any(|sent| !sent.attachments.is_empty())).await;
    {
        let recorded = harness.channel.recorded.lock().unwrap();
        assert_eq!(recorded.sent.len(), 2, "{:?}", recorded.sent);
        assert!(recorded.sent[0].attachments.is_empty());
        assert_eq!(recorded.edits.last().map(|(_, text)| text.as_str()), Some(CHART_REPLY));
        assert_eq!(recorded.sent[1].text, "");
        assert_eq!(recorded.sent[1].attachments, [chart()]);
    }
    harness.stop().await;

    // The platform refuses the file: the text still goes, then a note.
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.channel.send_failures.lock().unwrap().push_back(ChannelError::rejected("file too large"));
    harness.deliver(direct_message("3", "owner-id", "chart")).await;
    harness.wait_for("the note", |recorded| recorded.sent.len() == 2).await;
    assert_eq!(harness.texts(), [CHART_REPLY, "(couldn't send chart.png: the platform refused it)"]);
    assert!(harness.channel.recorded.lock().unwrap().sent.iter().all(|sent| sent.attachments.is_empty()));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_long_reply_is_split_at_the_platform_limit_on_paragraphs() {
    let harness = start(capabilities(StreamMode::SendOnce, 200), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "long")).await;
    harness.wait_for("every piece", |recorded| recorded.sent.len() >= 2).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let texts = harness.texts();
    assert!(texts.len() >= 4, "{texts:?}");
    assert!(texts.iter().all(|text| text.chars().count() <= 200));
    assert!(texts.iter().all(|text| text.trim_end().ends_with("something.")), "cut on paragraphs: {texts:?}");
    let joined = texts.join("\n\n");
    for number in 0..30 {
        assert!(joined.contains(&format!("Paragraph {number} says")), "paragraph {number} lost");
    }
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_send_waits_the_retry_after_and_a_passing_fault_is_retried() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    {
        let mut failures = harness.channel.send_failures.lock().unwrap();
        failures.push_back(ChannelError::rate_limited(Duration::from_secs(7), "can't send: 429"));
        failures.push_back(ChannelError::transient("can't send: 502"));
    }
    let began = tokio::time::Instant::now();
    harness.deliver(direct_message("1", "owner-id", "hi")).await;
    harness.wait_for("the reply", |recorded| !recorded.sent.is_empty()).await;
    assert!(began.elapsed() >= Duration::from_secs(7), "retry_after honoured: {:?}", began.elapsed());
    assert_eq!(harness.texts(), ["echo: hi"]);
    let health = &harness.manager.health()[0];
    assert_eq!((health.sent, health.send_failures), (1, 0));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn commands_reset_stop_and_report() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "hang")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(harness.runner.active_runs().len(), 1);
    harness.deliver(direct_message("2", "owner-id", "/stop")).await;
    harness.wait_for("stopped", |recorded| recorded.sent.len() >= 2).await;
    let texts = harness.texts();
    assert!(texts.contains(&"Stopped.".to_owned()), "{texts:?}");
    assert!(texts.iter().any(|text| text.ends_with("(stopped)")), "{texts:?}");
    harness.deliver(direct_message("3", "owner-id", "/status")).await;
    harness.wait_for("status", |recorded| recorded.sent.len() >= 3).await;
    let status = harness.texts().pop().unwrap();
    assert!(status.contains("model: fake/echo") && status.contains("session: fake:owner-id"), "{status}");
    assert!(status.contains("fake running"), "{status}");
    harness.deliver(direct_message("4", "owner-id", "/new")).await;
    harness.wait_for("reset", |recorded| recorded.sent.len() >= 4).await;
    assert_eq!(harness.texts().pop().unwrap(), "Started a new conversation.");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn attachments_are_saved_and_named_in_the_input_and_images_reach_the_model() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    let mut message = direct_message("1", "owner-id", "look");
    message.attachments.push(Attachment {
        name: "cat.png".to_owned(),
        mime: "image/png".to_owned(),
        data: AttachmentData::Bytes(vec![1, 2, 3]),
    });
    message.attachments.push(Attachment {
        name: "notes.txt".to_owned(),
        mime: "text/plain".to_owned(),
        data: AttachmentData::Bytes(b"hello".to_vec()),
    });
    harness.deliver(message).await;
    harness.wait_for("the reply", |recorded| !recorded.sent.is_empty()).await;
    assert_eq!(
        harness.saved.0.lock().unwrap().clone(),
        [("fake:owner-id".to_owned(), "cat.png".to_owned()), ("fake:owner-id".to_owned(), "notes.txt".to_owned())]
    );
    let text = harness.texts().remove(0);
    assert!(text.contains("[attachment cat.png (image/png, 3 bytes) saved at /data/fake:owner-id/cat.png]"), "{text}");
    assert!(
        text.contains("[attachment notes.txt (text/plain, 5 bytes) saved at /data/fake:owner-id/notes.txt]"),
        "{text}"
    );
    assert!(text.ends_with("(images: /data/fake:owner-id/cat.png)"), "only the image is an image: {text}");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_adapter_is_restarted_with_backoff_and_a_fatal_one_stays_down() {
    let steps = vec![
        RunStep::Fail(ChannelError::transient("can't connect: reset")),
        RunStep::Fail(ChannelError::transient("can't connect: reset")),
        RunStep::Serve,
    ];
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), steps, DirectPolicy::OwnerOnly);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let health = harness.manager.health().remove(0);
    assert!(matches!(health.state, ChannelState::Restarting { attempt: 1, .. }), "{health:?}");
    assert_eq!(health.last_error.as_deref(), Some("can't connect: reset"));
    // 5 s ±10 %, then 10 s ±10 %.
    tokio::time::sleep(Duration::from_millis(3_400)).await;
    assert_eq!(harness.channel.recorded.lock().unwrap().runs, 1, "not before 4.5 s");
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(harness.channel.recorded.lock().unwrap().runs, 3);
    assert!(harness.manager.health()[0].is_up());
    assert_eq!(harness.manager.health()[0].restarts, 2);
    harness.deliver(direct_message("1", "owner-id", "still here?")).await;
    harness.wait_for("the reply", |recorded| !recorded.sent.is_empty()).await;
    harness.stop().await;

    let harness = start(
        capabilities(StreamMode::SendOnce, 1_000),
        vec![RunStep::Fail(ChannelError::fatal("can't log in: 401 Unauthorized"))],
        DirectPolicy::OwnerOnly,
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    let health = harness.manager.health().remove(0);
    assert_eq!(health.state, ChannelState::Failed);
    assert_eq!(harness.channel.recorded.lock().unwrap().runs, 1);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_message_posted_to_a_channel_session_outside_a_turn_reaches_its_conversation() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "remember me")).await;
    harness.wait_for("the reply", |recorded| !recorded.sent.is_empty()).await;
    harness.runner.post_user_message(UserMessage {
        session_key: "fake:owner-id".to_owned(),
        message_id: "bus-1".to_owned(),
        from: "assistant".to_owned(),
        role: "assistant".to_owned(),
        priority: "normal".to_owned(),
        text: "[daily] the report is ready".to_owned(),
        correlation_id: "c".to_owned(),
    });
    harness.wait_for("the posted message", |recorded| recorded.sent.len() == 2).await;
    {
        let recorded = harness.channel.recorded.lock().unwrap();
        assert_eq!(recorded.sent[1].text, "[daily] the report is ready");
        assert_eq!(recorded.sent[1].conversation.id, "dm-owner-id");
    }
    harness.stop().await;
}

#[test]
fn fit_never_exceeds_the_limit_even_when_rendering_grows_the_text() {
    let capabilities = Capabilities {
        streams: StreamMode::SendOnce,
        typing: false,
        threads: false,
        max_message_chars: 100,
        markdown: MarkdownFlavor::TelegramHtml,
    };
    let text = "<&>".repeat(200);
    let pieces = fit(&text, capabilities);
    assert!(pieces.iter().all(|piece| piece.chars().count() <= 100), "{pieces:?}");
    let restored: String = pieces.concat().replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    assert_eq!(restored.chars().filter(|character| *character == '<').count(), 200);
}
