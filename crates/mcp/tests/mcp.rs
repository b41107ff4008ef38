//! Acceptance tests of the MCP client against real servers: the npm packages
//! `@modelcontextprotocol/server-filesystem` and `@modelcontextprotocol/server-everything`
//! (stdio and streamable HTTP), installed by scripts/test under `SQUIDBOT_TEST_MCP_DIR`,
//! plus small misbehaving servers written here (crash, hang, huge results, lying schemas).

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests fail loudly")]

mod fake_server;
mod harness;
mod http_secrets;
mod misbehaving;
mod real_servers;
