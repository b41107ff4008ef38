//! Integration tests of the scripted LLM over real HTTP, one module per concern.

// The whole crate is test code; clippy's test allowance only reaches `#[test]` functions, not shared helpers.
#![allow(clippy::expect_used)]

mod anthropic_wire;
mod benchmark_binary;
mod embeddings;
mod failures;
mod openai_wire;
mod support;
mod violations;
