//! The receive loop: `getMe` once, then `getUpdates` long polls, each update read,
//! completed with its files and handed to the manager; faults waited out.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use squidbot_channels::{Backoff, ChannelError, ChannelErrorKind, InboundSink};
use tokio_util::sync::CancellationToken;

use crate::TelegramChannel;
use crate::api::{CALL_TIMEOUT, Failure};
use crate::fetch;
use crate::inbound::{BotIdentity, interpret};
use crate::wire::{Message, User};

/// The update types asked for. Edited messages are left out on purpose: an edit of a
/// message that was already answered would start a second turn (and has the same
/// message id, so the manager would drop it anyway).
const ALLOWED_UPDATES: [&str; 1] = ["message"];

/// Most updates fetched per poll (Telegram's maximum).
const UPDATES_PER_POLL: u32 = 100;

/// How much longer than the long poll itself a `getUpdates` request may take.
const POLL_GRACE: Duration = Duration::from_secs(10);

/// How long the last confirmation at shutdown may take.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

/// First wait after a transient failure; it doubles up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);

/// Longest wait between retries.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Transient failures in a row after which the loop gives up and the manager restarts it.
pub(crate) const MAX_CONSECUTIVE_FAILURES: u32 = 10;

/// Waits between retries of transient failures: 1 s doubling to 30 s, and the end after
/// [`MAX_CONSECUTIVE_FAILURES`] in a row.
#[derive(Debug, Default)]
pub(crate) struct FailureBackoff {
    consecutive: u32,
}

impl FailureBackoff {
    /// Counts a failure: the wait before the next try, or `None` to give up.
    pub(crate) fn record_failure(&mut self) -> Option<Duration> {
        self.consecutive += 1;
        if self.consecutive >= MAX_CONSECUTIVE_FAILURES {
            return None;
        }
        Some(Backoff::doubling(FIRST_RETRY_DELAY, MAX_RETRY_DELAY).nominal(self.consecutive))
    }

    /// A call succeeded.
    pub(crate) fn reset(&mut self) {
        self.consecutive = 0;
    }
}

/// Whether to go on after a failure was waited out.
enum Next {
    Retry,
    ShutDown,
}

/// The receive loop of [`TelegramChannel`]; see [`squidbot_channels::Channel::run`].
pub(crate) async fn run(
    channel: &TelegramChannel,
    inbound: InboundSink,
    shutdown: CancellationToken,
) -> Result<(), ChannelError> {
    let name = channel.settings.name.as_str();
    let mut backoff = FailureBackoff::default();
    let Some(bot) = identify(channel, &mut backoff, &shutdown).await? else { return Ok(()) };
    tracing::info!(channel = name, bot = %bot.username, "receiving Telegram updates by long polling");
    let mut webhook_deleted = false;
    // The offset Telegram last saw: updates below it are confirmed and never sent again.
    let mut confirmed = channel.offset.load(Ordering::SeqCst);
    loop {
        let offset = channel.offset.load(Ordering::SeqCst);
        let polled = tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                confirm(channel, confirmed).await;
                return Ok(());
            }
            polled = poll(channel, offset) => polled,
        };
        let failure = match polled {
            Ok(updates) => {
                confirmed = offset;
                backoff.reset();
                for update in updates {
                    tokio::select! {
                        biased;
                        () = shutdown.cancelled() => {
                            confirm(channel, confirmed).await;
                            return Ok(());
                        }
                        handled = handle(channel, &bot, update, &inbound) => handled?,
                    }
                }
                continue;
            }
            Err(failure) => failure,
        };
        if failure.status() == Some(409) && !webhook_deleted {
            // A webhook is set, and Telegram refuses getUpdates while it is.
            tracing::warn!(channel = name, "a webhook is set for this bot; deleting it to receive updates by polling");
            webhook_deleted = true;
            match channel.api.call::<Value>("deleteWebhook", &json!({}), CALL_TIMEOUT).await {
                Ok(_) => continue,
                Err(failure) => tracing::warn!(channel = name, "{}", failure.into_channel_error("delete the webhook")),
            }
        }
        let error = failure.into_channel_error("poll Telegram for updates");
        match wait_out(error, &mut backoff, &shutdown, name).await? {
            Next::Retry => {}
            Next::ShutDown => {
                confirm(channel, confirmed).await;
                return Ok(());
            }
        }
    }
}

/// Learns the bot's id and username with `getMe`; `None` when shut down meanwhile.
async fn identify(
    channel: &TelegramChannel,
    backoff: &mut FailureBackoff,
    shutdown: &CancellationToken,
) -> Result<Option<BotIdentity>, ChannelError> {
    let no_parameters = json!({});
    loop {
        let answer = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(None),
            answer = channel.api.call::<User>("getMe", &no_parameters, CALL_TIMEOUT) => answer,
        };
        match answer {
            Ok(user) => {
                backoff.reset();
                return Ok(Some(BotIdentity { id: user.id, username: user.username.unwrap_or_default() }));
            }
            Err(failure) => {
                let error = failure.into_channel_error("check the bot token with getMe");
                match wait_out(error, backoff, shutdown, &channel.settings.name).await? {
                    Next::Retry => {}
                    Next::ShutDown => return Ok(None),
                }
            }
        }
    }
}

/// Waits as a failed call asks (its `retry_after`, or the backoff), or ends the loop
/// with the error when retrying can't help.
async fn wait_out(
    error: ChannelError,
    backoff: &mut FailureBackoff,
    shutdown: &CancellationToken,
    name: &str,
) -> Result<Next, ChannelError> {
    let delay = match error.kind {
        ChannelErrorKind::RateLimited { retry_after } => {
            tracing::warn!(channel = name, "{error}; waiting {retry_after:?} as Telegram asks");
            retry_after
        }
        ChannelErrorKind::Transient => match backoff.record_failure() {
            Some(delay) => {
                tracing::warn!(channel = name, "{error}; retrying in {delay:?}");
                delay
            }
            None => {
                return Err(ChannelError::transient(format!("{error} ({MAX_CONSECUTIVE_FAILURES} failures in a row)")));
            }
        },
        ChannelErrorKind::Rejected | ChannelErrorKind::Fatal => return Err(error),
    };
    tokio::select! {
        biased;
        () = shutdown.cancelled() => Ok(Next::ShutDown),
        () = tokio::time::sleep(delay) => Ok(Next::Retry),
    }
}

/// One long poll for the updates from `offset` on.
async fn poll(channel: &TelegramChannel, offset: i64) -> Result<Vec<Value>, Failure> {
    let parameters = json!({
        "offset": offset,
        "limit": UPDATES_PER_POLL,
        "timeout": channel.settings.poll_timeout.as_secs(),
        "allowed_updates": ALLOWED_UPDATES,
    });
    channel.api.call("getUpdates", &parameters, channel.settings.poll_timeout + POLL_GRACE).await
}

/// Tells Telegram, before stopping, that the updates handled since the last poll are
/// done: they are confirmed only by a poll with a higher offset, and would otherwise
/// come again (and be answered again) after a restart.
async fn confirm(channel: &TelegramChannel, confirmed: i64) {
    let offset = channel.offset.load(Ordering::SeqCst);
    if offset <= confirmed {
        return;
    }
    let parameters = json!({ "offset": offset, "limit": 1, "timeout": 0, "allowed_updates": ALLOWED_UPDATES });
    if let Err(failure) = channel.api.call::<Value>("getUpdates", &parameters, CONFIRM_TIMEOUT).await {
        let error = failure.into_channel_error("confirm the last updates");
        tracing::debug!(channel = %channel.settings.name, "{error}");
    }
}

/// Reads one update and hands its message on; whatever can't be read is skipped with a
/// log line. The offset moves past the update either way, so it isn't fetched again.
async fn handle(
    channel: &TelegramChannel,
    bot: &BotIdentity,
    update: Value,
    inbound: &InboundSink,
) -> Result<(), ChannelError> {
    let name = channel.settings.name.as_str();
    let Some(update_id) = update.get("update_id").and_then(Value::as_i64) else {
        tracing::warn!(channel = name, "skipping a Telegram update without an update_id");
        return Ok(());
    };
    deliver(channel, bot, update_id, update, inbound).await?;
    channel.offset.fetch_max(update_id.saturating_add(1), Ordering::SeqCst);
    Ok(())
}

async fn deliver(
    channel: &TelegramChannel,
    bot: &BotIdentity,
    update_id: i64,
    mut update: Value,
    inbound: &InboundSink,
) -> Result<(), ChannelError> {
    let name = channel.settings.name.as_str();
    let Some(raw_message) = update.get_mut("message").map(Value::take) else {
        let kinds: Vec<&str> =
            update.as_object().map(|fields| fields.keys().map(String::as_str).collect()).unwrap_or_default();
        tracing::debug!(channel = name, update_id, ?kinds, "ignoring a Telegram update of a type not handled");
        return Ok(());
    };
    let message = match serde_json::from_value::<Message>(raw_message) {
        Ok(message) => message,
        Err(error) => {
            tracing::warn!(channel = name, update_id, "skipping a malformed Telegram message: {error}");
            return Ok(());
        }
    };
    let draft = match interpret(&message, bot) {
        Ok(draft) => draft,
        Err(skip) => {
            tracing::debug!(channel = name, update_id, "not delivering a Telegram message: {}", skip.reason());
            return Ok(());
        }
    };
    let message = fetch::complete(&channel.api, draft, channel.settings.max_attachment_bytes, name).await;
    inbound.deliver(message).await.map_err(|closed| ChannelError::transient(closed.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_one_second_doubling_to_thirty_then_give_up() {
        let mut backoff = FailureBackoff::default();
        let delays: Vec<Option<u64>> = (0..10).map(|_| backoff.record_failure().map(|delay| delay.as_secs())).collect();
        let expected = [1, 2, 4, 8, 16, 30, 30, 30, 30].map(Some).into_iter().chain([None]).collect::<Vec<_>>();
        assert_eq!(delays, expected);
        backoff.reset();
        assert_eq!(backoff.record_failure(), Some(Duration::from_secs(1)));
    }
}
