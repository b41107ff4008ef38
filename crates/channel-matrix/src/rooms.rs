//! What the receive loop remembers about joined rooms between syncs: how many members
//! are joined (direct or group), whether the room is encrypted, members' display names,
//! and which rooms the bot's `m.direct` account data flags as direct.
//!
//! Direct or group: a room with exactly two joined members (the bot and one person) is
//! a direct conversation; more is a group. A room flagged direct (the bot's `m.direct`
//! account data, or the `is_direct` flag of the invitation it accepted) counts as direct
//! while no third person is joined, and when the member count can't be learned. The
//! count decides rather than the flag because "direct" rooms can gain members, and a
//! group treated as direct would be answered on every message.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use squidbot_channels::ConversationKind;

/// One joined room.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Room {
    /// Joined members, from the sync summary or `/joined_members`; `None` once a
    /// membership change made the last count stale.
    pub joined_members: Option<u64>,
    /// Whether the room has `m.room.encryption` state.
    pub encrypted: bool,
    /// Display names of members seen in state or timeline events.
    pub display_names: HashMap<String, String>,
}

/// The rooms known to the receive loop.
#[derive(Debug, Default)]
pub(crate) struct Rooms {
    rooms: HashMap<String, Room>,
    flagged_direct: HashSet<String>,
}

impl Rooms {
    /// The room `room_id`, created empty when first seen.
    pub(crate) fn room(&mut self, room_id: &str) -> &mut Room {
        self.rooms.entry(room_id.to_owned()).or_default()
    }

    /// Forgets a room the bot left.
    pub(crate) fn forget(&mut self, room_id: &str) {
        self.rooms.remove(room_id);
    }

    /// Flags a room as direct (an accepted `is_direct` invitation).
    pub(crate) fn flag_direct(&mut self, room_id: &str) {
        self.flagged_direct.insert(room_id.to_owned());
    }

    /// Takes the bot's `m.direct` account data (user id → direct room ids).
    pub(crate) fn apply_direct_account_data(&mut self, content: &Value) {
        let Some(by_user) = content.as_object() else {
            return;
        };
        self.flagged_direct = by_user
            .values()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .chain(self.flagged_direct.drain())
            .collect();
    }

    /// Updates a room from the state and timeline events of a sync: encryption,
    /// display names, and whether the member count went stale.
    pub(crate) fn apply_events<'a>(&mut self, room_id: &str, events: impl Iterator<Item = &'a Value>) {
        let room = self.room(room_id);
        for event in events {
            match event.get("type").and_then(Value::as_str) {
                Some("m.room.encryption") if event.get("state_key").is_some() => room.encrypted = true,
                Some("m.room.member") => {
                    let user_id = event.get("state_key").and_then(Value::as_str);
                    let content = event.get("content");
                    let membership = content.and_then(|content| content.get("membership")).and_then(Value::as_str);
                    let name = content.and_then(|content| content.get("displayname")).and_then(Value::as_str);
                    if let (Some(user_id), Some(name)) = (user_id, name) {
                        room.display_names.insert(user_id.to_owned(), name.to_owned());
                    }
                    // Lazy-loaded member state of unchanged members arrives too; only a
                    // timeline change of membership can change the count, but telling
                    // them apart isn't worth a stale count: re-count when unsure.
                    let previous = event
                        .get("unsigned")
                        .and_then(|unsigned| unsigned.get("prev_content"))
                        .and_then(|previous| previous.get("membership"))
                        .and_then(Value::as_str);
                    if membership != previous {
                        room.joined_members = None;
                    }
                }
                Some(_) | None => {}
            }
        }
    }

    /// Whether `room_id` is a direct conversation or a group (see the module docs).
    pub(crate) fn kind(&self, room_id: &str) -> ConversationKind {
        let joined = self.rooms.get(room_id).and_then(|room| room.joined_members);
        conversation_kind(joined, self.flagged_direct.contains(room_id))
    }
}

/// Direct with exactly two joined members, or when flagged direct and no more than
/// two are (or the count is unknown); otherwise a group.
pub(crate) fn conversation_kind(joined_members: Option<u64>, flagged_direct: bool) -> ConversationKind {
    match joined_members {
        Some(2) => ConversationKind::Direct,
        Some(0 | 1) | None if flagged_direct => ConversationKind::Direct,
        Some(_) | None => ConversationKind::Group,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn two_members_make_a_direct_conversation() {
        assert_eq!(conversation_kind(Some(2), false), ConversationKind::Direct);
        assert_eq!(conversation_kind(Some(3), false), ConversationKind::Group);
        assert_eq!(conversation_kind(Some(3), true), ConversationKind::Group);
        assert_eq!(conversation_kind(None, true), ConversationKind::Direct);
        assert_eq!(conversation_kind(None, false), ConversationKind::Group);
        assert_eq!(conversation_kind(Some(1), false), ConversationKind::Group);
    }

    #[test]
    fn direct_account_data_flags_rooms() {
        let mut rooms = Rooms::default();
        rooms.flag_direct("!invited:localhost");
        rooms.apply_direct_account_data(&json!({"@alice:localhost": ["!dm:localhost"], "@bob:localhost": 7}));
        assert_eq!(rooms.kind("!dm:localhost"), ConversationKind::Direct);
        assert_eq!(rooms.kind("!invited:localhost"), ConversationKind::Direct);
        assert_eq!(rooms.kind("!other:localhost"), ConversationKind::Group);
    }

    #[test]
    fn state_events_update_the_room() {
        let mut rooms = Rooms::default();
        rooms.room("!r:localhost").joined_members = Some(2);
        let events = [
            json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}),
            json!({"type": "m.room.member", "state_key": "@alice:localhost",
                   "content": {"membership": "join", "displayname": "Alice"},
                   "unsigned": {"prev_content": {"membership": "join", "displayname": "Al"}}}),
        ];
        rooms.apply_events("!r:localhost", events.iter());
        let room = rooms.room("!r:localhost").clone();
        assert!(room.encrypted);
        assert_eq!(room.display_names.get("@alice:localhost").map(String::as_str), Some("Alice"));
        assert_eq!(room.joined_members, Some(2), "a rename doesn't change the count");

        let joined =
            json!({"type": "m.room.member", "state_key": "@carol:localhost", "content": {"membership": "join"}});
        rooms.apply_events("!r:localhost", std::iter::once(&joined));
        assert_eq!(rooms.room("!r:localhost").joined_members, None, "a join makes the count stale");
        rooms.forget("!r:localhost");
        assert!(!rooms.room("!r:localhost").encrypted);
    }
}
