//! The test harness: a fake Slack, an adapter pointed at it and its receive loop running.

use std::sync::Arc;
use std::time::Duration;

use squidbot_channel_slack::{SlackChannel, SlackSettings};
use squidbot_channels::{Channel as _, ChannelError, InboundMessage, InboundSink};
use squidbot_testkit::fake_slack::FakeSlack;
use squidbot_types::Secret;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const APP_TOKEN: &str = "xapp-1-A0FAKE-1-secret";
pub const BOT_TOKEN: &str = "xoxb-1-fake-secret";

/// How long a test waits for something that should happen at once.
pub const PATIENCE: Duration = Duration::from_secs(5);

pub fn settings(slack: &FakeSlack) -> SlackSettings {
    SlackSettings {
        api_base: slack.api_base(),
        ..SlackSettings::new("work-slack", Secret::new(APP_TOKEN), Secret::new(BOT_TOKEN))
    }
}

/// An adapter whose receive loop runs against a fake.
pub struct Running {
    pub slack: FakeSlack,
    pub channel: Arc<SlackChannel>,
    pub received: mpsc::Receiver<InboundMessage>,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), ChannelError>>,
}

impl Running {
    /// A fake, an adapter with default settings, connected.
    pub async fn start() -> Running {
        let slack = FakeSlack::start(APP_TOKEN, BOT_TOKEN).await;
        let settings = settings(&slack);
        Running::start_with(slack, settings, 16).await
    }

    /// An adapter with `settings` against `slack`, with a queue of `capacity`, connected.
    pub async fn start_with(slack: FakeSlack, settings: SlackSettings, capacity: usize) -> Running {
        let running = Running::spawn(slack, settings, capacity);
        assert!(running.slack.wait_for_sockets(1).await, "the adapter didn't connect");
        running
    }

    /// Starts the receive loop without waiting for it to connect.
    pub fn spawn(slack: FakeSlack, settings: SlackSettings, capacity: usize) -> Running {
        let channel = Arc::new(SlackChannel::new(settings).unwrap());
        let (inbound, received) = InboundSink::bounded(capacity);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let channel = Arc::clone(&channel);
            let shutdown = shutdown.clone();
            async move { channel.run(inbound, shutdown).await }
        });
        Running { slack, channel, received, shutdown, task }
    }

    /// The next delivered message; panics if none comes.
    pub async fn next_message(&mut self) -> InboundMessage {
        match tokio::time::timeout(PATIENCE, self.received.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the receive loop stopped: {:?}", self.task.is_finished()),
            Err(_elapsed) => panic!("no message was delivered within {PATIENCE:?}"),
        }
    }

    /// Asserts that nothing is delivered for a moment.
    pub async fn assert_nothing_more(&mut self) {
        if let Ok(message) = tokio::time::timeout(Duration::from_millis(200), self.received.recv()).await {
            panic!("unexpected delivery: {message:?}");
        }
    }

    /// Cancels the loop and returns its result (panics if it doesn't end promptly).
    pub async fn stop(self) -> Result<(), ChannelError> {
        self.shutdown.cancel();
        finish(self.task).await
    }
}

/// The result of a receive loop that should end promptly by itself.
pub async fn finish(task: JoinHandle<Result<(), ChannelError>>) -> Result<(), ChannelError> {
    match tokio::time::timeout(PATIENCE, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join_error)) => panic!("the receive loop panicked: {join_error}"),
        Err(_elapsed) => panic!("the receive loop didn't end within {PATIENCE:?}"),
    }
}
