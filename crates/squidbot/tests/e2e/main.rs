//! End-to-end tests: the real `squidbot` binary against the scripted LLM server,
//! with a real home directory, real session files and real tools.

mod bad_input;
mod chat;
mod harness;
mod repl;
