//! Integration tests of the Discord adapter against the fake Discord of the testkit,
//! over real WebSocket and HTTP connections on 127.0.0.1, one module per concern.

// The whole crate is test code; clippy's test allowance only reaches `#[test]` functions, not shared helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gateway;
mod inbound;
mod outbound;
mod support;
