//! Shared test plumbing: settings pointing at a fake, a running receive loop and its
//! inbound queue.

use std::sync::Arc;
use std::time::Duration;

use squidbot_channel_discord::{DiscordChannel, DiscordSettings};
use squidbot_channels::{Channel, ChannelError, InboundMessage, InboundSink};
use squidbot_testkit::fake_discord::FakeDiscord;
use squidbot_types::Secret;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

/// The token the fakes accept.
pub const TOKEN: &str = "fake-bot-token";

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);

/// Settings for a channel talking to `discord`.
pub fn settings(discord: &FakeDiscord) -> DiscordSettings {
    let mut settings = DiscordSettings::new("discord", Secret::new(TOKEN));
    settings.api_base = discord.api_base();
    settings
}

/// A receive loop running against a fake.
pub struct Running {
    pub channel: Arc<DiscordChannel>,
    pub receiver: mpsc::Receiver<InboundMessage>,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), ChannelError>>,
}

/// Starts the receive loop with `settings` and waits until the fake has a live session.
pub async fn start_with(discord: &FakeDiscord, settings: DiscordSettings) -> Running {
    let running = spawn(settings);
    discord.wait_for_live().await;
    running
}

/// Starts the receive loop with the default test settings.
pub async fn start(discord: &FakeDiscord) -> Running {
    start_with(discord, settings(discord)).await
}

/// Starts the receive loop without waiting for anything.
pub fn spawn(settings: DiscordSettings) -> Running {
    let channel = Arc::new(DiscordChannel::new(settings).unwrap());
    let (sink, receiver) = InboundSink::bounded(16);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let channel = Arc::clone(&channel);
        let shutdown = shutdown.clone();
        async move { channel.run(sink, shutdown).await }
    });
    Running { channel, receiver, shutdown, task }
}

impl Running {
    /// The next delivered message.
    pub async fn next_message(&mut self) -> InboundMessage {
        match timeout(PATIENCE, self.receiver.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the receive loop ended"),
            Err(_elapsed) => panic!("no message within {PATIENCE:?}"),
        }
    }

    /// The texts of the next `count` delivered messages.
    pub async fn next_texts(&mut self, count: usize) -> Vec<String> {
        let mut texts = Vec::new();
        for _ in 0..count {
            texts.push(self.next_message().await.text);
        }
        texts
    }

    /// Waits for the receive loop to end on its own.
    pub async fn outcome(self) -> Result<(), ChannelError> {
        match timeout(PATIENCE, self.task).await {
            Ok(joined) => joined.unwrap(),
            Err(_elapsed) => panic!("the receive loop did not end within {PATIENCE:?}"),
        }
    }

    /// Cancels the loop and checks it returns Ok within a second.
    pub async fn stop(self) {
        let started = Instant::now();
        self.shutdown.cancel();
        let result = timeout(Duration::from_secs(1), self.task).await.expect("shutdown took over a second").unwrap();
        assert_eq!(result, Ok(()));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
