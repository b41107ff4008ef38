//! Gateway frames: opcodes, the payloads the adapter sends, what READY carries, and what
//! each close code means for the next connection.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::inbound::User;

/// An event (`t` names it, `s` is its sequence number).
pub(crate) const DISPATCH: u8 = 0;
/// A heartbeat, either way: ours carries the last sequence; the server's asks for one.
pub(crate) const HEARTBEAT: u8 = 1;
/// Starts a new session.
const IDENTIFY: u8 = 2;
/// Continues a session, replaying the events missed.
const RESUME: u8 = 6;
/// The server wants us to reconnect and resume.
pub(crate) const RECONNECT: u8 = 7;
/// The session is gone (`d: false`) or may be resumed (`d: true`).
pub(crate) const INVALID_SESSION: u8 = 9;
/// The first frame on a connection, with the heartbeat interval.
pub(crate) const HELLO: u8 = 10;
/// The server got our heartbeat.
pub(crate) const HEARTBEAT_ACK: u8 = 11;

/// Any frame the gateway sends.
#[derive(Debug, Deserialize)]
pub(crate) struct Frame {
    /// The opcode.
    pub op: u8,
    /// The payload.
    #[serde(default)]
    pub d: Value,
    /// The sequence number (dispatches only).
    #[serde(default)]
    pub s: Option<u64>,
    /// The event name (dispatches only).
    #[serde(default)]
    pub t: Option<String>,
}

/// The `d` of HELLO.
#[derive(Debug, Deserialize)]
pub(crate) struct Hello {
    /// Milliseconds between heartbeats.
    pub heartbeat_interval: u64,
}

/// The `d` of the READY dispatch.
#[derive(Debug, Deserialize)]
pub(crate) struct Ready {
    /// The session to resume later.
    pub session_id: String,
    /// Where to connect to resume it.
    pub resume_gateway_url: String,
    /// The bot's own user.
    pub user: User,
}

/// IDENTIFY: starts a session with `intents`, compression off.
pub(crate) fn identify(token: &str, intents: u64) -> String {
    json!({
        "op": IDENTIFY,
        "d": {
            "token": token,
            "intents": intents,
            "compress": false,
            "properties": {"os": std::env::consts::OS, "browser": "squidbot", "device": "squidbot"},
        },
    })
    .to_string()
}

/// RESUME: continues `session_id` after the last handled `sequence`.
pub(crate) fn resume(token: &str, session_id: &str, sequence: Option<u64>) -> String {
    json!({"op": RESUME, "d": {"token": token, "session_id": session_id, "seq": sequence}}).to_string()
}

/// A heartbeat carrying the last handled sequence (`null` before the first dispatch).
pub(crate) fn heartbeat(sequence: Option<u64>) -> String {
    json!({"op": HEARTBEAT, "d": sequence}).to_string()
}

/// What to do after the gateway closed the connection with a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CloseMeaning {
    /// Reconnect and resume the session.
    Resume,
    /// Reconnect and identify anew (the session is gone).
    NewSession,
    /// Stop: the configuration must change first.
    Fatal(&'static str),
}

/// The meaning of Discord's close codes; unknown and normal codes resume.
pub(crate) fn close_meaning(code: u16) -> CloseMeaning {
    match code {
        4004 => CloseMeaning::Fatal("authentication failed: the bot token was refused"),
        4010 => CloseMeaning::Fatal("invalid shard"),
        4011 => CloseMeaning::Fatal("sharding required: the bot is in too many guilds for one connection"),
        4012 => CloseMeaning::Fatal("invalid API version"),
        4013 => CloseMeaning::Fatal("invalid intents"),
        4014 => CloseMeaning::Fatal(
            "disallowed intents: switch on the Message Content intent for the bot in the developer portal, or drop it from the intents",
        ),
        // Invalid sequence, session timed out.
        4007 | 4009 => CloseMeaning::NewSession,
        _ => CloseMeaning::Resume,
    }
}

/// The gateway URL with the API version and encoding in the query.
pub(crate) fn with_query(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}v=10&encoding=json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_frames_carry_what_the_gateway_needs() {
        let identify: Value = serde_json::from_str(&identify("secret", 37377)).unwrap();
        assert_eq!(identify["op"], 2);
        assert_eq!(identify["d"]["token"], "secret");
        assert_eq!(identify["d"]["intents"], 37377);
        assert_eq!(identify["d"]["properties"]["browser"], "squidbot");
        let resume: Value = serde_json::from_str(&resume("secret", "abc", Some(12))).unwrap();
        assert_eq!(resume, json!({"op": 6, "d": {"token": "secret", "session_id": "abc", "seq": 12}}));
        let beat = |sequence| serde_json::from_str::<Value>(&heartbeat(sequence)).unwrap();
        assert_eq!(beat(None), json!({"op": 1, "d": null}));
        assert_eq!(beat(Some(5)), json!({"op": 1, "d": 5}));
    }

    #[test]
    fn close_codes_decide_between_resuming_starting_over_and_stopping() {
        assert_eq!(close_meaning(4004), CloseMeaning::Fatal("authentication failed: the bot token was refused"));
        for code in 4010..=4014 {
            assert!(matches!(close_meaning(code), CloseMeaning::Fatal(_)), "{code}");
        }
        assert_eq!(close_meaning(4009), CloseMeaning::NewSession);
        assert_eq!(close_meaning(4000), CloseMeaning::Resume);
        assert_eq!(close_meaning(1001), CloseMeaning::Resume);
    }

    #[test]
    fn the_query_names_version_and_encoding() {
        assert_eq!(with_query("wss://gateway.discord.gg"), "wss://gateway.discord.gg?v=10&encoding=json");
        assert_eq!(with_query("ws://127.0.0.1:9/gateway?x=1"), "ws://127.0.0.1:9/gateway?x=1&v=10&encoding=json");
    }
}
