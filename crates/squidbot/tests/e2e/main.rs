//! End-to-end tests: the real `squidbot` binary against the scripted LLM server,
//! with a real home directory, real session files and real tools.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "test helpers outside #[test] fail loudly")]

mod bad_input;
mod bus;
mod chat;
mod cron;
mod delegation;
mod discord;
mod email;
mod gateway;
mod gateway_password;
mod harness;
mod hooks;
mod keyring;
mod leak_corpus;
mod leaks;
mod matrix;
mod mcp;
mod memory;
mod openclaw;
mod people;
mod privacy;
mod protocol;
mod repl;
mod sandbox;
mod scheduler;
mod secrets;
mod sessions_tree;
mod skill_addons;
mod skills;
mod slack;
mod telegram;
mod tls;
#[cfg(feature = "tui")]
mod tui;
mod web;
mod web_ui;
mod web_ui_people;
mod webhook;
