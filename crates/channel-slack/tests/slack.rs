//! Integration tests of the Slack adapter against the fake Slack (real HTTP and
//! WebSocket on 127.0.0.1).

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] fail loudly")]

// An inline module, so its files live under `tests/slack/`.
mod slack {
    mod connection;
    mod receiving;
    mod sending;
    mod support;
}
