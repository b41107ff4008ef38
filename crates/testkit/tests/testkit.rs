//! Integration tests of the scripted LLM over real HTTP, one module per concern.

mod anthropic_wire;
mod benchmark_binary;
mod failures;
mod openai_wire;
mod support;
mod violations;
