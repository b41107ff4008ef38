//! The `/sync` response as the receive loop reads it, the filter it syncs with, and the
//! pure decisions on a batch: who sent an invitation, where a newly joined room's live
//! timeline starts, how long to back off.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// The sync filter, inline: a room timeline of at most 50 events per sync, members
/// lazy-loaded (only those who speak), no presence, ephemeral events or room account
/// data, and of the global account data only `m.direct`.
pub(crate) const FILTER: &str = r#"{"presence":{"types":[]},"account_data":{"types":["m.direct"]},"room":{"timeline":{"limit":50},"state":{"lazy_load_members":true},"ephemeral":{"types":[]},"account_data":{"types":[]}}}"#;

/// A `/sync` response, the parts the adapter reads.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SyncResponse {
    /// The token to sync from next.
    pub next_batch: String,
    /// Rooms with news.
    #[serde(default)]
    pub rooms: SyncRooms,
    /// Global account data (`m.direct`).
    #[serde(default)]
    pub account_data: EventList,
}

/// Rooms by membership.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SyncRooms {
    /// Joined rooms by id.
    #[serde(default)]
    pub join: BTreeMap<String, JoinedRoom>,
    /// Rooms the bot is invited to, by id.
    #[serde(default)]
    pub invite: BTreeMap<String, InvitedRoom>,
    /// Rooms the bot left or was removed from, by id.
    #[serde(default)]
    pub leave: BTreeMap<String, serde::de::IgnoredAny>,
}

/// A joined room's news.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct JoinedRoom {
    /// Member counts, sent when they change.
    #[serde(default)]
    pub summary: Summary,
    /// State up to the timeline's start.
    #[serde(default)]
    pub state: EventList,
    /// New events.
    #[serde(default)]
    pub timeline: Timeline,
}

/// A room summary.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Summary {
    /// Joined members, when it changed.
    #[serde(default, rename = "m.joined_member_count")]
    pub joined_member_count: Option<u64>,
}

/// A room's new events.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Timeline {
    /// The events, oldest first.
    #[serde(default)]
    pub events: Vec<Value>,
    /// Whether events were left out between the last sync and these.
    #[serde(default)]
    pub limited: bool,
}

/// A list of events.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct EventList {
    /// The events.
    #[serde(default)]
    pub events: Vec<Value>,
}

/// A room invitation's stripped state.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InvitedRoom {
    /// Stripped state events, among them the bot's `m.room.member` invite.
    #[serde(default)]
    pub invite_state: EventList,
}

/// Who invited the bot, and whether as a direct chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invitation {
    /// The inviter's user id (the invite event's sender).
    pub inviter: String,
    /// The invite's `is_direct` flag.
    pub is_direct: bool,
}

/// The invitation of `user_id` in an invited room's stripped state.
pub(crate) fn invitation(room: &InvitedRoom, user_id: &str) -> Option<Invitation> {
    room.invite_state.events.iter().rev().find_map(|event| {
        let is_own_invite = event.get("type").and_then(Value::as_str) == Some("m.room.member")
            && event.get("state_key").and_then(Value::as_str) == Some(user_id)
            && event.pointer("/content/membership").and_then(Value::as_str) == Some("invite");
        if !is_own_invite {
            return None;
        }
        let inviter = event.get("sender").and_then(Value::as_str)?.to_owned();
        let is_direct = event.pointer("/content/is_direct").and_then(Value::as_bool).unwrap_or(false);
        Some(Invitation { inviter, is_direct })
    })
}

/// Where the live part of a timeline starts: after the bot's own join when the room
/// was joined in this batch (a newly joined room's timeline holds history from before
/// the join, which isn't answered), else at the start.
pub(crate) fn live_start(timeline: &[Value], user_id: &str) -> usize {
    timeline
        .iter()
        .rposition(|event| {
            event.get("type").and_then(Value::as_str) == Some("m.room.member")
                && event.get("state_key").and_then(Value::as_str) == Some(user_id)
                && event.pointer("/content/membership").and_then(Value::as_str) == Some("join")
                && event.pointer("/unsigned/prev_content/membership").and_then(Value::as_str) != Some("join")
        })
        .map_or(0, |join| join + 1)
}

/// The wait between failed syncs: 1 s, doubling to at most 30 s; reset by a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backoff {
    failures: u32,
}

impl Backoff {
    const POLICY: squidbot_channels::Backoff =
        squidbot_channels::Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30));

    /// A backoff at its first step.
    pub(crate) fn new() -> Self {
        Self { failures: 0 }
    }

    /// The wait after another failure.
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        Self::POLICY.nominal(self.failures)
    }

    /// Back to the first step after a success.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_filter_is_json() {
        let filter: Value = serde_json::from_str(FILTER).unwrap();
        assert_eq!(filter["room"]["timeline"]["limit"], 50);
        assert_eq!(filter["room"]["state"]["lazy_load_members"], true);
    }

    #[test]
    fn a_sync_response_is_read_with_missing_parts() {
        let response: SyncResponse = serde_json::from_value(json!({
            "next_batch": "s2",
            "rooms": {
                "join": {"!r:localhost": {"summary": {"m.joined_member_count": 3},
                                          "timeline": {"events": [{"type": "m.room.message"}], "limited": true}}},
                "leave": {"!old:localhost": {"timeline": {"events": []}}},
            },
        }))
        .unwrap();
        assert_eq!(response.next_batch, "s2");
        let room = &response.rooms.join["!r:localhost"];
        assert_eq!(room.summary.joined_member_count, Some(3));
        assert!(room.timeline.limited);
        assert_eq!(room.timeline.events.len(), 1);
        assert!(room.state.events.is_empty());
        assert!(response.rooms.leave.contains_key("!old:localhost"));
        assert!(serde_json::from_value::<SyncResponse>(json!({"rooms": {}})).is_err(), "next_batch is required");
    }

    #[test]
    fn the_inviter_is_the_invite_events_sender() {
        let room: InvitedRoom = serde_json::from_value(json!({"invite_state": {"events": [
            {"type": "m.room.name", "state_key": "", "sender": "@alice:localhost", "content": {"name": "x"}},
            {"type": "m.room.member", "state_key": "@alice:localhost", "sender": "@alice:localhost",
             "content": {"membership": "join"}},
            {"type": "m.room.member", "state_key": "@bot:localhost", "sender": "@alice:localhost",
             "content": {"membership": "invite", "is_direct": true}},
        ]}}))
        .unwrap();
        let invitation = invitation(&room, "@bot:localhost").unwrap();
        assert_eq!(invitation, Invitation { inviter: "@alice:localhost".to_owned(), is_direct: true });
        assert_eq!(super::invitation(&room, "@other:localhost"), None);
    }

    #[test]
    fn history_before_the_bots_join_is_not_live() {
        let member = |user: &str, membership: &str, previous: Option<&str>| {
            let mut event = json!({"type": "m.room.member", "state_key": user, "content": {"membership": membership}});
            if let Some(previous) = previous {
                event["unsigned"] = json!({"prev_content": {"membership": previous}});
            }
            event
        };
        let message = json!({"type": "m.room.message"});
        let timeline = vec![
            message.clone(),
            member("@bot:localhost", "join", Some("invite")),
            message.clone(),
            member("@bot:localhost", "join", Some("join")),
            message.clone(),
        ];
        assert_eq!(live_start(&timeline, "@bot:localhost"), 2, "a profile change isn't a join");
        assert_eq!(live_start(&[message.clone(), member("@alice:localhost", "join", None)], "@bot:localhost"), 0);
    }

    #[test]
    fn backoff_doubles_to_thirty_seconds() {
        let mut backoff = Backoff::new();
        let delays: Vec<u64> = (0..7).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_secs(1));
    }
}
