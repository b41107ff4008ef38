//! Replies going out: `chat.postMessage`, `chat.update`, `reactions.add`, and messages
//! with files through the external upload.

use serde_json::json;
use squidbot_channels::{ChannelError, InboundMessage, OutboundMessage, SentMessage};

use crate::attachments::upload_all;
use crate::web_api::{WebApi, string_field};

/// The reaction that marks an inbound message as being worked on.
const ACKNOWLEDGE_REACTION: &str = "eyes";

/// Sends `message` into its conversation, in its thread when it has one. Slack shows
/// no reply references, so `reply_to` only matters through the thread.
pub(crate) async fn send(api: &WebApi, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
    let channel = message.conversation.id.as_str();
    let thread = message.conversation.thread.as_deref();
    let ts = if message.attachments.is_empty() {
        if message.text.trim().is_empty() {
            return Err(ChannelError::rejected("can't send an empty message to Slack"));
        }
        let mut request = json!({
            "channel": channel,
            "text": message.text,
            "mrkdwn": true,
            "unfurl_links": false,
        });
        if let Some(thread) = thread {
            request["thread_ts"] = json!(thread);
        }
        let answer = api.call_json("chat.postMessage", &request).await?;
        string_field(&answer, "ts").ok_or_else(|| {
            ChannelError::transient("can't send a Slack message: chat.postMessage answered without ts")
        })?
    } else {
        // One call shares the files and the text together, so a retry can't post the
        // text twice.
        upload_all(api, &message.attachments, channel, thread, &message.text).await?
    };
    Ok(SentMessage { conversation: message.conversation.clone(), platform_message_id: format!("{channel}:{ts}") })
}

/// Replaces the text of a message the bot sent.
pub(crate) async fn edit(api: &WebApi, sent: &SentMessage, text: &str) -> Result<(), ChannelError> {
    let ts = message_ts(&sent.platform_message_id);
    if !looks_like_ts(ts) {
        return Err(ChannelError::rejected(format!(
            "can't edit Slack message {}: it was a file upload whose message Slack didn't name",
            sent.platform_message_id
        )));
    }
    let request = json!({"channel": sent.conversation.id, "ts": ts, "text": text});
    api.call_json("chat.update", &request).await.map(drop)
}

/// Puts the 👀 reaction on an inbound message.
pub(crate) async fn acknowledge(api: &WebApi, message: &InboundMessage) -> Result<(), ChannelError> {
    let request = json!({
        "channel": message.conversation.id,
        "timestamp": message_ts(&message.platform_message_id),
        "name": ACKNOWLEDGE_REACTION,
    });
    // A redelivered message may already carry the reaction.
    api.call_json_tolerating("reactions.add", &request, &["already_reacted"]).await.map(drop)
}

/// The Slack `ts` inside a `<channel>:<ts>` message id (a bare `ts` passes as is).
fn message_ts(platform_message_id: &str) -> &str {
    platform_message_id.rsplit_once(':').map_or(platform_message_id, |(_channel, ts)| ts)
}

/// Whether `value` is a Slack message timestamp (`1700000000.000100`), not a file id.
fn looks_like_ts(value: &str) -> bool {
    !value.is_empty() && value.chars().all(|character| character.is_ascii_digit() || character == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ts_is_read_out_of_a_message_id() {
        assert_eq!(message_ts("C1:1700000000.000100"), "1700000000.000100");
        assert_eq!(message_ts("1700000000.000100"), "1700000000.000100");
        assert!(looks_like_ts("1700000000.000100"));
        assert!(!looks_like_ts("F0123ABC"));
    }
}
