//! What the channel manager adds to a message: from an adapter handing over an inbound
//! message to the model being called (de-duplication, policy, routing, opening the
//! session, starting the turn), and from the model's answer to the adapter's `send`
//! (the finished event, rendering, splitting). Measured against the same turns started
//! directly on the runner, with an instant in-process model and an in-memory store, so
//! only squidbot's own work is timed. Run: `cargo bench -p squidbot-channels --bench manager`.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squidbot_channels::{
    AccessConfig, AccessPolicy, Attachment, AttachmentError, AttachmentStore, Capabilities, Channel, ChannelEntry,
    ChannelError, ChannelManager, Conversation, ConversationKind, DirectPolicy, GroupPolicy, InboundMessage,
    InboundSink, ManagerSettings, MarkdownFlavor, MemoryApprovedSenders, OutboundMessage, PairingCodes, SeededRandom,
    Sender, SentMessage, StreamMode,
};
use squidbot_core::agent::{Agent, AgentSettings};
use squidbot_core::clock::SystemClock;
use squidbot_core::events::{EventHub, TurnEventKind};
use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};
use squidbot_core::runs::{RunRequest, Runner};
use squidbot_core::store::memory::MemorySessionStore;
use squidbot_core::tool::ToolRegistry;
use squidbot_core::workspace::MemoryWorkspace;
use squidbot_types::Usage;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 200;
const MESSAGES: usize = 2_000;
const REPLY: &str = "Sure: the **backup** ran at 03:00 and `rsync` reported no errors.\n\nAnything else?";

/// When the model was called and when it answered, per turn.
#[derive(Default)]
struct Marks {
    called: Vec<Instant>,
    answered: Vec<Instant>,
}

struct InstantModel(Arc<Mutex<Marks>>);

impl LlmProvider for InstantModel {
    async fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        self.0.lock().unwrap().called.push(Instant::now());
        sink.text_delta(REPLY);
        let completion = Completion {
            content: REPLY.into(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: StopReason::EndTurn,
            model: request.model.clone(),
        };
        self.0.lock().unwrap().answered.push(Instant::now());
        Ok(completion)
    }
}

fn runner(marks: Arc<Mutex<Marks>>) -> Arc<Runner> {
    let settings = AgentSettings {
        model: "bench/instant".into(),
        max_turns: 4,
        max_tokens: 100,
        temperature: None,
        context_window: 100_000,
        stream: true,
        workspace: PathBuf::from("/nonexistent"),
        runtime: squidbot_core::context::RuntimeInfo::default(),
        context: "owner".into(),
    };
    let agent = Agent::new(
        Arc::new(InstantModel(marks)),
        ToolRegistry::default(),
        Arc::new(MemorySessionStore::default()),
        Arc::new(MemoryWorkspace::new().with("SOUL.md", "You are a helpful assistant.")),
        Arc::new(SystemClock),
        settings,
    );
    Runner::new(Arc::new(agent), EventHub::new())
}

/// An adapter without a platform: messages come from the bench, sends are timed.
struct BenchChannel {
    incoming: tokio::sync::Mutex<mpsc::Receiver<InboundMessage>>,
    sent: mpsc::UnboundedSender<Instant>,
}

impl Channel for BenchChannel {
    fn name(&self) -> &str {
        "bench"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::SendOnce,
            typing: false,
            threads: false,
            max_message_chars: 4_096,
            markdown: MarkdownFlavor::TelegramHtml,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let mut incoming = self.incoming.lock().await;
        inbound.forward(&mut incoming, &shutdown).await.map_err(|closed| ChannelError::transient(closed.to_string()))
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.sent.send(Instant::now()).map_err(|_closed| ChannelError::fatal("bench ended"))?;
        Ok(SentMessage { conversation: message.conversation.clone(), platform_message_id: "sent".into() })
    }
}

struct NoFiles;

impl AttachmentStore for NoFiles {
    fn save(&self, _session_key: &str, _attachment: &Attachment) -> Result<PathBuf, AttachmentError> {
        Err(AttachmentError::NotKept)
    }
}

fn message(number: usize) -> InboundMessage {
    let sender = format!("user-{number}");
    InboundMessage {
        channel: "bench".into(),
        platform_message_id: format!("m-{number}"),
        conversation: Conversation { id: sender.clone(), kind: ConversationKind::Direct, thread: None },
        sender: Sender { id: sender, display_name: None },
        text: "Did the backup run last night?".into(),
        mentions_bot: true,
        attachments: Vec::new(),
        received_at: jiff::Timestamp::now(),
    }
}

fn percentile(samples: &mut [Duration], share: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * share).round() as usize;
    samples[index]
}

fn report(name: &str, samples: &mut [Duration]) -> (Duration, Duration) {
    let p50 = percentile(samples, 0.5);
    let p99 = percentile(samples, 0.99);
    println!(
        "{name:<52} p50 {:>8.1} µs  p99 {:>8.1} µs  max {:>8.1} µs",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        percentile(samples, 1.0).as_secs_f64() * 1e6
    );
    (p50, p99)
}

/// Turns started on the runner directly: start to model call, model answer to the
/// finished event.
async fn direct() -> (Vec<Duration>, Vec<Duration>) {
    let marks = Arc::new(Mutex::new(Marks::default()));
    let runner = runner(marks.clone());
    let (mut inbound, mut outbound) = (Vec::new(), Vec::new());
    for number in 0..WARMUP + MESSAGES {
        let began = Instant::now();
        let request = RunRequest {
            session_key: format!("bench:user-{number}"),
            input: "Did the backup run last night?".into(),
            images: Vec::new(),
            origin: "bench".into(),
            run_id: None,
            correlation_id: None,
            actor: None,
        };
        let mut handle = runner.start(request).unwrap();
        let finished = loop {
            let event = handle.events.recv().await.unwrap();
            if matches!(event.kind, TurnEventKind::Finished { .. }) {
                break Instant::now();
            }
        };
        if number >= WARMUP {
            let marks = marks.lock().unwrap();
            inbound.push(*marks.called.last().unwrap() - began);
            outbound.push(finished - *marks.answered.last().unwrap());
        }
    }
    (inbound, outbound)
}

/// The same turns through the channel manager: hand-over to model call, model answer to
/// the adapter's send.
async fn through_manager() -> (Vec<Duration>, Vec<Duration>) {
    let marks = Arc::new(Mutex::new(Marks::default()));
    let runner = runner(marks.clone());
    let (feed, incoming) = mpsc::channel(16);
    let (sent, mut sends) = mpsc::unbounded_channel();
    let channel = Arc::new(BenchChannel { incoming: tokio::sync::Mutex::new(incoming), sent });
    let access = AccessConfig {
        owners: Vec::new(),
        direct: DirectPolicy::Open,
        groups: GroupPolicy::Mention,
        allowed_senders: Vec::new(),
        allowed_rooms: Vec::new(),
        refusal: None,
    };
    let policy = Arc::new(AccessPolicy::new(
        "bench",
        access,
        Arc::new(MemoryApprovedSenders::default()),
        Arc::new(PairingCodes::new(Box::new(SeededRandom::new(1)))),
        Arc::new(SystemClock),
    ));
    let manager = Arc::new(ChannelManager::new(
        runner,
        vec![ChannelEntry { channel, kind: "bench".to_owned(), policy }],
        Arc::new(NoFiles),
        Box::new(SeededRandom::new(2)),
        ManagerSettings::default(),
    ));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let (mut inbound, mut outbound) = (Vec::new(), Vec::new());
    for number in 0..WARMUP + MESSAGES {
        let began = Instant::now();
        feed.send(message(number)).await.unwrap();
        let sent = sends.recv().await.unwrap();
        if number >= WARMUP {
            let marks = marks.lock().unwrap();
            inbound.push(*marks.called.last().unwrap() - began);
            outbound.push(sent - *marks.answered.last().unwrap());
        }
    }
    shutdown.cancel();
    running.await.unwrap();
    (inbound, outbound)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        println!("{MESSAGES} messages, one at a time, each a new session; instant model, in-memory store");
        let (mut direct_in, mut direct_out) = direct().await;
        let (mut managed_in, mut managed_out) = through_manager().await;
        let (direct_in_50, direct_in_99) = report("runner.start → model called", &mut direct_in);
        let (managed_in_50, managed_in_99) = report("adapter hand-over → model called", &mut managed_in);
        let (direct_out_50, direct_out_99) = report("model answered → finished event", &mut direct_out);
        let (managed_out_50, managed_out_99) =
            report("model answered → adapter send (rendered, split)", &mut managed_out);
        let added = |managed: Duration, direct: Duration| managed.saturating_sub(direct).as_secs_f64() * 1e6;
        println!(
            "manager adds: inbound p50 {:.1} µs / p99 {:.1} µs; outbound p50 {:.1} µs / p99 {:.1} µs",
            added(managed_in_50, direct_in_50),
            added(managed_in_99, direct_in_99),
            added(managed_out_50, direct_out_50),
            added(managed_out_99, direct_out_99)
        );
    });
}
