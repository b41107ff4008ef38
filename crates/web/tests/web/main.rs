//! Integration tests: both web tools driven through the `DynTool` interface with JSON
//! arguments against local fake servers (a website, SearXNG, Brave and DuckDuckGo).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test helpers fail loudly")]

mod boundary;
mod fetch;
mod search;
mod servers;
