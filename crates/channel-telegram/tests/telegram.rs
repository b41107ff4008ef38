//! Integration tests of the Telegram adapter against the fake Bot API over real HTTP.

// The whole crate is test code; clippy's test allowance only reaches `#[test]` functions, not shared helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod faults;
mod inbound;
mod outbound;

use std::sync::Arc;
use std::time::Duration;

use squidbot_channel_telegram::{TelegramChannel, TelegramSettings};
use squidbot_channels::{Channel, ChannelError, InboundMessage, InboundSink};
use squidbot_testkit::fake_telegram::{FakeTelegram, FakeUser};
use squidbot_types::Secret;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The bot token the fake is started with (the bot's id is 4242).
const TOKEN: &str = "4242:fake-secret";

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(5);

fn settings(fake: &FakeTelegram) -> TelegramSettings {
    TelegramSettings {
        api_base: fake.api_base(),
        poll_timeout: Duration::from_secs(5),
        ..TelegramSettings::new("telegram", Secret::new(TOKEN))
    }
}

fn ada() -> FakeUser {
    FakeUser::new(501, "Ada").with_last_name("Lovelace").with_username("ada")
}

/// A channel whose receive loop runs against a fake.
struct Running {
    fake: FakeTelegram,
    channel: Arc<TelegramChannel>,
    received: mpsc::Receiver<InboundMessage>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ChannelError>>,
}

impl Running {
    async fn start() -> Running {
        Running::start_on(FakeTelegram::start(TOKEN).await)
    }

    /// Runs against a fake prepared beforehand.
    fn start_on(fake: FakeTelegram) -> Running {
        let settings = settings(&fake);
        Running::start_with(fake, settings)
    }

    fn start_with(fake: FakeTelegram, settings: TelegramSettings) -> Running {
        let channel = Arc::new(TelegramChannel::new(settings).unwrap());
        let (sink, received) = InboundSink::bounded(16);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let channel = Arc::clone(&channel);
            let shutdown = shutdown.clone();
            async move { channel.run(sink, shutdown).await }
        });
        Running { fake, channel, received, shutdown, task }
    }

    /// The next delivered message; panics if none comes soon.
    async fn next(&mut self) -> InboundMessage {
        match tokio::time::timeout(PATIENCE, self.received.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the receive loop ended: {:?}", self.task.is_finished()),
            Err(_elapsed) => panic!("no message delivered; requests: {:?}", self.methods()),
        }
    }

    fn methods(&self) -> Vec<String> {
        self.fake.requests().into_iter().map(|request| request.method).collect()
    }

    /// Cancels the loop and returns its result.
    async fn stop(self) -> Result<(), ChannelError> {
        self.shutdown.cancel();
        tokio::time::timeout(PATIENCE, self.task).await.expect("the loop stops promptly").unwrap()
    }
}
